"""A private starting hypothesis: noisy low-order marginals fitted into a histogram.

The paper starts from the uniform histogram. Every query on real data shares
its low-order structure (each attribute's frequency, each pair's correlation),
and the online algorithm's ``T`` updates are a poor way to learn it one query
at a time. So, as MST/AIM do (McKenna et al. 2021, 2022), we *measure* the
1- and 2-way marginals once with the Gaussian mechanism and fit a histogram to
them; the online engine then starts from that histogram and spends its updates
on what the marginals miss (docs/design.md section 6, "a promising practical design").

**Measurement and its guarantee.** For cliques ``C_1..C_K`` we release
``y_k = D_{C_k} + N(0, sigma^2 I)``. Under replace-one, one record moves mass
``1/n`` from one cell of each marginal to another, so the concatenated vector
of all ``K`` marginals has L2 sensitivity ``sqrt(2K) / n``. With ``sigma = m
sqrt(2K) / n`` the release is one Gaussian mechanism with noise multiplier
``m`` (``(1/m)``-GDP): its event is ``GaussianDpEvent(m)``, charged to the
engine's ledger before any noise is drawn.

**Fitting (post-processing, free).** Entropic mirror descent on the simplex
minimising ``sum_k ||Dhat_{C_k} - y_k||^2 / 2`` (the multiplicative-weights fit
of MWEM; Hardt, Ligett, McSherry 2012), which keeps the histogram in the
maximum-entropy family of the measured cliques. It touches only the released
``y_k``. (L-BFGS on the clique potentials was tried and converged slower.)

**Stopping** (:func:`entropic_descent`). A one-step ``rtol`` test ended fits
too early: at eps = 4 on full-resolution Adult, where the fit is inside the
noise bound within a step or two, it stopped after 60 of 300 iterations, 7%
above the noise with the loss still falling 0.1% a step, and those priors
answered 4-5x worse (``benchmarks/accuracy/prior_support.py``); hence the
window of :data:`STALL_WINDOW` steps. With a large ``n`` the noise is small and
a fit of a few hundred iterations stops far above it: on Adult resampled to
10^6 records at eps = 1 the 300-iteration fit ends 100x above the bound, and
going on to within it (2,600-2,900 iterations) cut a 300-query panel's mean
excess risk 33-40x. At 10^7 it takes about 17,000 iterations (13 s on 2^14
cells), and the panel falls 30x more than where a 10x cap and ``rtol`` had
stopped it. At eps = 4 on the 39,073-row split (2.5-2.9x above the bound) it
cut the panel 20-34%. On that split at eps <= 1, and on the full-resolution
support priors, the fit already ends within the bound
(``benchmarks/accuracy/updates.py``, docs/design.md section 6).

A fit whose targets no distribution comes near (four records at eps = 1: every
released cell is noise of sd 2.7) drives ``Dhat`` onto one cell and stays there:
the loss stops changing at all while the bound is still far, so neither rule
ended it, the step grew 10% a step and overflowed after some 7,400 of the
30,000 continued iterations. Ten accepted steps that leave the loss exactly
where it was are a fixed point, and end the fit.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import dp_accounting
import numpy as np

from pmwcm.kernels.clique_scale import broadcast_factor
from pmwcm.kernels.dense_marginal import dense_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fused_marginals import FUSED_MAX_CELLS, fused_marginals
from pmwcm.kernels.histogram import DenseHistogram, FloatArray, Histogram
from pmwcm.mechanisms.noise import NoiseSource, add_gaussian
from pmwcm.mechanisms.priors.pairwise_fit import PairwiseFit, PairwiseIterate
from pmwcm.mechanisms.private_data import PrivateData

State = TypeVar("State")
Residuals = TypeVar("Residuals")
#: The backend a :class:`PriorRelease` was fitted on.
Fitted = TypeVar("Fitted", bound=Histogram, covariant=True)

#: A fit whose loss is above this multiple of :func:`noise_energy` after its
#: iteration budget goes on (:func:`entropic_descent`): Morozov's ``tau``, which
#: must exceed 1 (the data's own marginals sit at 1 in expectation).
DISCREPANCY = 2.0
#: ... for up to this many times its budget in all (a precise prior at n = 10^7
#: needs about 60x on Adult's 2^14 cells).
CONTINUATION = 100


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """A released noisy marginal: ``values = D_C + N(0, sigma^2)`` on ``clique``."""

    clique: tuple[str, ...]
    values: FloatArray
    sigma: float


@dataclass(frozen=True)
class PriorRelease(Generic[Fitted]):
    """A paid prior: the fitted starting hypothesis and the released marginals behind it.

    The measurements are public once released; the engine keeps them to pull
    its hypothesis back onto them after each update (:mod:`pmwcm.mechanisms.priors.refit`).
    """

    hypothesis: Fitted
    measurements: tuple[Measurement, ...]


def pairwise_cliques(domain: Domain, *, order: int = 2) -> list[tuple[str, ...]]:
    """All cliques of ``order`` attributes (and, below them, nothing else: lower
    orders are implied by the higher ones' marginals)."""
    if not 1 <= order <= len(domain):
        raise ValueError(f"order must lie in [1, {len(domain)}], got order={order}.")
    return [tuple(c) for c in itertools.combinations(domain.names, order)]


#: The noise on a mean cell of a 3-way marginal, relative to that cell's mass, below
#: which the paid prior measures every triple instead of every pair (:func:`prior_order`).
TRIPLE_NOISE_CUT = 0.02
#: The most ``K |X|`` (triples times cells) a dense fit of all triples may cost a step:
#: 364 triples on binary Adult's 2^14 cells is 6.0e6.
TRIPLE_MAX_WORK = 2**24
#: Fit steps for the triples (at most: the discrepancy rule may stop it sooner). At the
#: pairs' 300 the fit was far from converged: on binary Adult at eps = 4 (noise seeds
#: 0-2) the start alone answered 2,000 random queries at a mean excess risk of 2.55e-6,
#: 6.56e-7 at 1,000 steps and 5.68e-7 at 3,000, and the whole stream's largest error
#: fell from 2.8e-5 to 9.0e-6 (1,000 and 3,000 alike). 0.8 s on binary Adult's 364
#: triples (the fused passes, :mod:`pmwcm.kernels.fused_marginals`).
TRIPLE_ITERATIONS = 1000


def prior_order(domain: Domain, *, n: int, noise_multiplier: float) -> int:
    """Whether the paid dense prior measures all 2-way or all 3-way marginals (public).

    Measuring every triple (``K = C(d, 3)`` cliques) with the same Gaussian event
    puts noise ``sigma = m sqrt(2K) / n`` on each cell (:func:`measure_marginals`),
    against a mean triple cell of mass ``1 / C`` (``C`` the mean cells of a triple),
    so the triples are read at a relative noise of ``m sqrt(2K) C / n``. Where that is
    at most :data:`TRIPLE_NOISE_CUT` the prior measures the triples, else the pairs.

    Measured (docs/design.md section 11; binary Adult, no workload rounds, fits of
    :data:`TRIPLE_ITERATIONS`): the triples lowered the mean excess risk at every
    signal tried (-15% to -41%), but the largest errors only where that relative
    noise was 0.014 or less (-51% to -71% on the mean of the streams' maxima); at
    0.027 to 0.053 the stepwise analyst's rose (+21% to +87%, a rare triple cell's
    noise fitted), and at 8,000 rows (0.12, 0.23) 11.5% of a random stream went
    unchecked. Reading the noise per mean cell carries the cut to other schemas: a
    schema of ten-valued attributes (``C`` = 1,000) needs a hundred times the
    records of a binary one. Every input is public: the schema, ``n`` and the
    plan's multiplier. ``TRIPLE_MAX_WORK`` bounds the fit on large dense domains.

    >>> from pmwcm.kernels.domain import Domain
    >>> adult = Domain.from_sizes({f"a{i}": 2 for i in range(14)})
    >>> prior_order(adult, n=48_842, noise_multiplier=1.67)  # eps = 4
    3
    >>> prior_order(adult, n=48_842, noise_multiplier=5.99)  # eps = 1
    2
    """
    if len(domain) < 3:
        return 2
    triples = pairwise_cliques(domain, order=3)
    if len(triples) * domain.size > TRIPLE_MAX_WORK:
        return 2
    cells = sum(math.prod(domain.sizes_of(clique)) for clique in triples) / len(triples)
    noise = noise_multiplier * math.sqrt(2 * len(triples)) * cells / n
    return 3 if noise <= TRIPLE_NOISE_CUT else 2


#: The noise on a mean cell of a measured pair, relative to that cell's mass, above which
#: the paid prior leaves the pair out (:func:`noise_limited_pairs`).
PAIR_NOISE_CUT = 20.0


def noise_limited_pairs(
    domain: Domain, *, n: int, noise_multiplier: float
) -> list[tuple[str, ...]]:
    """The pairs the paid prior measures: all but those its noise would swamp (public).

    Measuring ``K`` cliques with one Gaussian event puts noise ``sigma(K) = m sqrt(2K) / n``
    on each cell (:func:`measure_marginals`), against a mean cell of mass ``1 / |C|`` on a
    clique of ``|C|`` cells: its relative noise is ``sigma(K) |C|``. On a full-resolution
    table at a small ``epsilon n`` the largest pairs are read at a hundred times their
    mass (full Adult, 8,000 rows, ``epsilon = 0.5``: 143 on ``fnlwgt x capital-gain``'s
    10,201 cells), so their measurements are noise that the fit spreads over every
    record, and their share of ``K`` raises the noise on all the others. So the pairs
    are kept smallest first, as many as keep the largest kept pair's relative noise at
    most :data:`PAIR_NOISE_CUT` (``sigma`` read at the ``K`` they make); an attribute
    that no kept pair holds is measured by its 1-way marginal, so that every attribute
    is described. Where no pair is that noisy (binary Adult at any ``epsilon``, full
    Adult's 48,842 rows from ``epsilon = 1``) this is every pair.

    Measured (``benchmarks/accuracy/online_updates.py``'s measured engine, stepwise
    analyst, noise seeds 7-12, full Adult's 8,000 rows, ``epsilon = 0.5``): all 91 pairs
    gave a mean excess risk of 1.70e-3 and a mean of the streams' maxima of 7.7e-3;
    keeping the pairs read at most 20, 5 and 2 times their mass (72, 45 and 40 pairs)
    gave 1.19e-3 / 4.95e-3, 1.19e-3 / 4.84e-3 and 1.18e-3 / 4.89e-3 (docs/design.md
    section 11). AIM at that budget measures seven small pairs and the 1-ways. The cut
    is 20, not 10: at 10 loans' stepwise analyst (eps = 0.5, 53 of its 1,431 pairs left
    out, for 1.9% less ``sigma``) lost 1.14x on the mean and 1.42x on the maxima, where
    a skewed pair's few heavy cells were read far better than its mean cell.

    >>> from pmwcm.kernels.domain import Domain
    >>> d = Domain.from_sizes({"a": 2, "b": 2, "c": 100, "d": 100})
    >>> len(noise_limited_pairs(d, n=48_842, noise_multiplier=6.0))  # every pair
    6
    >>> noise_limited_pairs(d, n=2_000, noise_multiplier=6.0)  # not c x d
    [('a', 'b'), ('a', 'c'), ('a', 'd'), ('b', 'c'), ('b', 'd')]
    >>> noise_limited_pairs(d, n=100, noise_multiplier=6.0)  # c and d by their 1-ways
    [('a', 'b'), ('c',), ('d',)]
    >>> noise_limited_pairs(d, n=50, noise_multiplier=6.0)  # nothing fits: the 1-ways
    [('a',), ('b',), ('c',), ('d',)]
    """
    every = pairwise_cliques(domain)
    sizes = dict(zip(domain.names, domain.sizes, strict=True))
    cells = {pair: math.prod(sizes[a] for a in pair) for pair in every}
    by_size = sorted(every, key=cells.__getitem__)  # stable: ties keep their order
    # Leaving the pairs out largest first, one at a time: how many kept pairs hold each
    # attribute, and the attributes none holds (measured by their 1-ways), kept as they go,
    # so that the search is linear in the pairs (a schema of 150 attributes has 11,175).
    holders = Counter(a for pair in every for a in pair)
    singles, largest_single = 0, 0
    for kept in range(len(by_size), -1, -1):
        if kept < len(by_size):
            for a in by_size[kept]:
                holders[a] -= 1
                if holders[a] == 0:
                    singles, largest_single = singles + 1, max(largest_single, sizes[a])
        sigma = noise_multiplier * math.sqrt(2 * (kept + singles)) / n
        largest = max(cells[by_size[kept - 1]] if kept else 0, largest_single)
        if sigma * largest <= PAIR_NOISE_CUT:
            break
    chosen = set(by_size[:kept])
    return [pair for pair in every if pair in chosen] + [
        (a,) for a in domain.names if holders[a] == 0
    ]


def measurement_event(noise_multiplier: float) -> dp_accounting.DpEvent:
    """The privacy event of one :func:`measure_marginals` call."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ValueError(f"noise_multiplier must be positive, got {noise_multiplier}.")
    return dp_accounting.GaussianDpEvent(noise_multiplier)


def measure_marginals(
    data: PrivateData,
    cliques: Sequence[tuple[str, ...]],
    *,
    noise_multiplier: float,
    noise: NoiseSource,
) -> list[Measurement]:
    """Releases every clique's marginal with Gaussian noise (see the module docstring).

    The caller must have charged :func:`measurement_event` to its ledger first.
    """
    measurement_event(noise_multiplier)
    if not cliques:
        raise ValueError("measure_marginals needs at least one clique.")
    sigma = noise_multiplier * math.sqrt(2 * len(cliques)) / data.n
    tables = [data.marginal(c) for c in cliques]
    # add_gaussian, not table + noise.gaussian(...): the float sum leaks (Mironov 2012).
    noisy = add_gaussian(np.concatenate([t.ravel() for t in tables]), sigma, noise=noise)
    out, offset = [], 0
    for clique, table in zip(cliques, tables, strict=True):
        values = noisy[offset : offset + table.size].reshape(table.shape)
        offset += table.size
        out.append(Measurement(clique=tuple(clique), values=values, sigma=sigma))
    return out


def entropic_descent(
    start: State,
    measurements: Sequence[Measurement],
    *,
    marginals: Callable[[State], list[FloatArray]],
    moved: Callable[[State, list[FloatArray], float], State],
    iterations: int,
    step: float = 1.0,
    rtol: float = 1e-5,
    continuation: int | None = None,
    lead: int | None = None,
) -> State:
    """Entropic mirror descent onto ``measurements``, for any representation of ``Dhat``.

    Minimises ``L(Dhat) = sum_k w_k ||Dhat_{C_k} - y_k||^2 / 2`` over the simplex with
    ``Dhat <- Dhat exp(-s g) / Z``, ``g(x) = sum_k w_k (Dhat_{C_k} - y_k)(x_{C_k})``
    (the gradient of ``L``). The weights ``w_k = (sigma_min / sigma_k)^2``
    (:func:`precision_weights`) make ``L`` the measurements' Gaussian negative
    log-likelihood, up to the factor ``sigma_min^2``, as Private-PGM's estimation
    weighs them (McKenna, Sheldon, Miklau 2019): a noisy measurement (an online
    update's, a workload round's) then pulls the fit less than a precise one (the
    prior's pairs), where equal weights let it drag the precise ones off. Equal
    sigmas (the all-pairs prior alone) give the unweighted loss exactly. The
    step ``s`` grows by 10% after an accepted step and
    halving it (and undoing the step) when ``L`` increases. Stops after
    ``iterations`` or when ``L`` stalls (``rtol``, read over a window: below).

    **Unless the fit is visibly short of its measurements** (Morozov's
    discrepancy principle). The data's own marginals would leave the residual
    ``E L(D) = sum_k |C_k| sigma_k^2 / 2`` (:func:`noise_energy`), the noise's
    expected energy. A fit still above :data:`DISCREPANCY` times that goes on,
    up to ``continuation`` (default :data:`CONTINUATION`) times ``iterations``,
    until within that bound, and ``rtol`` no longer stops it. ``rtol`` is read
    over the last :data:`STALL_WINDOW` accepted steps, never one; as many accepted
    steps that leave ``L`` exactly unchanged end the fit anywhere (a fixed point).
    Only public values decide (the released ``y_k``, their ``sigma``); why each
    rule, with the measurements behind it: the module docstring ("Stopping").

    ``lead``: the index of a measurement the descent first steps toward alone
    (:func:`lead_direction`: a refit after a new measurement, the newest); its
    trials count among the ``iterations``.

    ``marginals(state)`` gives ``Dhat_{C_k}`` for every measurement and
    ``moved(state, residuals, s)`` the state after one step (a new object): the
    dense fit (:func:`fit_histogram`) and the support fit
    (:func:`pmwcm.mechanisms.priors.support.fit_support`) are this loop with two
    representations, and agree when the support is all of ``X``.
    """
    _check_fit(measurements, iterations=iterations)
    weights = precision_weights(measurements)

    def residuals(state: State) -> tuple[float, list[FloatArray]]:
        """``L`` and the weighted residuals ``w_k (Dhat_{C_k} - y_k)`` (the gradient's terms)."""
        tables = marginals(state)
        res = [t - m.values for t, m in zip(tables, measurements, strict=True)]
        loss = 0.5 * sum(w * float((r * r).sum()) for w, r in zip(weights, res, strict=True))
        return loss, [r if w == 1.0 else w * r for w, r in zip(weights, res, strict=True)]

    towards: Callable[[list[FloatArray]], list[FloatArray]] | None = None
    if lead is not None:
        k = range(len(measurements))[lead]
        m, w = measurements[k], weights[k]

        def towards(res: list[FloatArray]) -> list[FloatArray]:
            d = lead_direction(res[k], m.values, weight=w, sigma=m.sigma)
            return [d if i == k else np.zeros_like(r) for i, r in enumerate(res)]

    return _descend(
        start, residuals, moved, bound=DISCREPANCY * noise_energy(measurements),
        iterations=iterations, continuation=continuation, step=step, rtol=rtol,
        lead=towards,
    )  # fmt: skip


#: The lead step's trials (:func:`lead_direction`): scales 1, 1/2, 1/4, 1/8; the first
#: that lowers the loss is taken.
LEAD_TRIALS = 4


def lead_direction(
    weighted: FloatArray, values: FloatArray, *, weight: float, sigma: float
) -> FloatArray:
    """The lead step's direction on one measurement's clique:
    ``w (Dhat_C - y) / max(Dhat_C, sigma)``, from its weighted residual
    ``w (Dhat_C - y)`` (``Dhat_C`` recovered as ``residual / w + y``).

    **Why.** The entropic step moves a cell's log-mass by ``s`` times its residual,
    and ``s`` is held down by the precise measurements every record shares (the
    prior's pairs); a new measurement's rare cells then move little per step, and a
    30-step refit left most of a precise update unabsorbed (TV16, eps = 4: the
    clique's squared distance to the data's table 8.6e-6 before, 6.2e-6 after 30
    steps, 4.6e-6 after 100). Dividing by the cell's mass is the natural-gradient
    (conditional-mean) step of that clique alone: at scale 1 and ``w = 1`` it is
    the first-order form of iterative proportional fitting's ``log(y / Dhat_C)``,
    which moves every cell of the clique by the same *relative* amount. Applied to
    every clique at once it is held down by their overlaps (measured: no better per
    pass than the plain step); to the newest clique alone, once, with the scale
    backtracked on the whole loss (:data:`LEAD_TRIALS`), it took that distance to
    3.4e-6 within the same 30 evaluations (docs/design.md section 11). ``sigma``
    floors the mass: a cell the measurement cannot tell from empty moves by its
    residual's z-score at most (a noise-free measurement, ``sigma = 0``, by the
    smallest normal float). Reads released values only (post-processing).
    """
    mass = weighted / weight + values
    return weighted / np.maximum(mass, max(sigma, np.finfo(np.float64).tiny))


def _check_fit(measurements: Sequence[Measurement], *, iterations: int) -> None:
    if iterations < 0:
        raise ValueError(f"iterations must be non-negative, got iterations={iterations}.")
    if not measurements:
        raise ValueError("the fit needs at least one measurement.")


def _descend(
    state: State,
    residuals: Callable[[State], tuple[float, Residuals]],
    moved: Callable[[State, Residuals, float], State],
    *,
    bound: float,
    iterations: int,
    continuation: int | None,
    step: float,
    rtol: float,
    lead: Callable[[Residuals], Residuals] | None,
) -> State:
    """:func:`entropic_descent`'s loop: its step rule and stopping rules, for any form of
    the residuals (per clique, or concatenated: :func:`fit_histogram`'s fused form);
    first, where ``lead`` gives a direction, the lead step (:func:`lead_direction`)."""
    limit = (CONTINUATION if continuation is None else continuation) * iterations
    current, res = residuals(state)
    done = 0
    if lead is not None and iterations > 0:
        direction, scale = lead(res), 1.0
        for _ in range(min(LEAD_TRIALS, iterations)):
            trial = moved(state, direction, scale)
            value, trial_res = residuals(trial)
            done += 1
            if value < current:
                state, current, res = trial, value, trial_res
                break
            scale *= 0.5
    accepted = deque([current], maxlen=STALL_WINDOW + 1)
    while done < limit:
        trial = moved(state, res, step)
        value, trial_res = residuals(trial)
        done += 1
        if value <= current:
            state, current, res = trial, value, trial_res
            accepted.append(current)
            step *= 1.1
            # rtol ends the budget early only for a fit within the bound; past the
            # budget only the bound stops the fit (a slow but steady descent there
            # is still short of what the measurements say).
            stalled = (
                len(accepted) > STALL_WINDOW
                and accepted[0] - current <= STALL_WINDOW * rtol * current
            )
            if stalled and done <= iterations and current <= bound:
                break
            if stalled and accepted[0] == current:
                # a fixed point: the steps no longer move Dhat at all (it sits on the
                # cells a far-off target pulls it to), and the growing step would
                # only overflow; no later step can bring it nearer the bound
                break
        else:
            step *= 0.5
            if step < 1e-10:
                break
        if done >= iterations and current <= bound:
            break  # the budget is spent and the fit is within the noise
    return state


#: Accepted steps over which :func:`entropic_descent` reads ``rtol``.
STALL_WINDOW = 10


def precision_weights(measurements: Sequence[Measurement]) -> list[float]:
    """``w_k = (sigma_min / sigma_k)^2``, each measurement's precision relative to the most
    precise one's (public: the released sigmas); all 1 where the sigmas are equal, or
    where one is 0 (a noise-free, public measurement: no likelihood to weigh by).

    >>> y = np.zeros(2)
    >>> one = Measurement(clique=("a",), values=y, sigma=1.0)
    >>> two = Measurement(clique=("b",), values=y, sigma=2.0)
    >>> precision_weights([one, two])
    [1.0, 0.25]
    """
    sigmas = [float(m.sigma) for m in measurements]
    smallest = min(sigmas)
    if smallest <= 0.0:
        return [1.0] * len(sigmas)
    return [1.0 if sigma == smallest else (smallest / sigma) ** 2 for sigma in sigmas]


def noise_energy(measurements: Sequence[Measurement]) -> float:
    """``sum_k w_k |C_k| sigma_k^2 / 2``: the fit's loss ``L`` at the data's own marginals,
    in expectation over the measurement noise (the discrepancy principle's scale)."""
    weights = precision_weights(measurements)
    return 0.5 * sum(
        w * m.values.size * m.sigma**2 for w, m in zip(weights, measurements, strict=True)
    )


#: From this many cells on, a fit on 1- and 2-way cliques that the fused form does
#: not take (above :data:`~pmwcm.kernels.fused_marginals.FUSED_MAX_CELLS`) runs in
#: :class:`PairwiseFit`'s matrix form (two passes per marginal sweep, one per step,
#: whatever the clique count). On binary Adult (2^14 cells) its 300-step all-pairs
#: fit took 0.75 s of CPU, the fused form's 0.26 s (0.90 s by plain passes); at 2^18
#: the matrix form's step is twice as fast as the fused one, at 2^20 six times.
PAIRWISE_MIN_CELLS = 2**12
#: Up to this many cells a fit with a clique of three or more attributes runs in
#: :func:`_fused_fit`'s form also above ``FUSED_MAX_CELLS`` (where a pairs-only fit is
#: :class:`PairwiseFit`'s): a step with 3- to 5-way cliques took 8.8 ms fused against
#: 112 by plain passes at 2^18 binary cells, 68 against 473 at 2^20, 12 against 92 on
#: 604,800 mixed cells. Its work buffer holds a few histograms' cells per call.
FUSED_HIGHER_ORDER_MAX_CELLS = 2**21


def fit_histogram(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    iterations: int = 300,
    step: float = 1.0,
    rtol: float = 1e-5,
    start: DenseHistogram | None = None,
    continuation: int | None = None,
    lead: int | None = None,
) -> DenseHistogram:
    """:func:`entropic_descent` on a dense histogram (post-processing only; ``lead`` as
    there), in one of three forms with the same iterates up to floating-point summation
    order:

    * up to :data:`~pmwcm.kernels.fused_marginals.FUSED_MAX_CELLS` cells, and up to
      :data:`FUSED_HIGHER_ORDER_MAX_CELLS` with a clique of three or more attributes:
      each step's ``K`` marginals in one compiled call and its gradient in another
      (:func:`_fused_fit`; on binary Adult with 147 cliques a step takes 0.53 ms
      against 7.4 by plain passes, at 2^18 and 2^20 binary cells 7 to 13 times less);
    * otherwise, on 1- and 2-way cliques from :data:`PAIRWISE_MIN_CELLS` on, unless
      the matrix form's one-hot factors would outgrow the histogram (an attribute of
      very many values: :meth:`PairwiseFit.factor_cells`): :class:`PairwiseFit`
      computes all ``K`` marginals of a trial step in one blocked pass and writes an
      accepted step in another, in one histogram-sized buffer;
    * otherwise ``2K`` streaming passes over the histogram per iteration.
    """
    axes = [domain.axes(m.clique) for m in measurements]
    if start is not None:
        p = start.to_array()
    else:  # DenseHistogram.uniform's values, bit for bit, without its second array
        p = np.full(domain.shape, 1.0 / domain.size)
        p /= p.sum()
    if domain.size <= FUSED_MAX_CELLS or (
        domain.size <= FUSED_HIGHER_ORDER_MAX_CELLS and any(len(a) >= 3 for a in axes)
    ):
        fitted = _fused_fit(
            p, measurements, axes, iterations=iterations, step=step, rtol=rtol,
            continuation=continuation, lead=lead,
        )  # fmt: skip
        return DenseHistogram(domain, fitted)
    if (
        domain.size >= PAIRWISE_MIN_CELLS
        and len(domain) >= 2
        and all(len(a) <= 2 for a in axes)
        and PairwiseFit.factor_cells(domain) <= domain.size
    ):
        pairwise = PairwiseFit(domain, axes, p)
        last = entropic_descent(
            PairwiseIterate(),
            measurements,
            marginals=pairwise.marginals,
            moved=pairwise.moved,
            iterations=iterations,
            step=step,
            rtol=rtol,
            continuation=continuation,
            lead=lead,
        )
        return DenseHistogram.from_normalized(domain, pairwise.result(last), copy=False)

    def marginals(q: FloatArray) -> list[FloatArray]:
        return [dense_marginal(q, ax) for ax in axes]

    def moved(q: FloatArray, res: list[FloatArray], s: float) -> FloatArray:
        g = np.zeros(domain.shape)
        for ax, r in zip(axes, res, strict=True):
            g += broadcast_factor(domain.shape, ax, r)
        return tilted(q, -s * g)

    fitted = entropic_descent(
        p,
        measurements,
        marginals=marginals,
        moved=moved,
        iterations=iterations,
        step=step,
        rtol=rtol,
        continuation=continuation,
        lead=lead,
    )
    return DenseHistogram(domain, fitted)


def tilted(q: FloatArray, z: FloatArray) -> FloatArray:
    """``q exp(z)``, normalised: a dense fit's entropic step.

    Shifted by ``max z`` before the exponential, as usual. A fit can drive ``q`` onto a
    few cells (very noisy measurements, where the mass underflows elsewhere), and a step
    that pushes away from those cells then makes every product ``q exp(z - max z)`` zero;
    there the shift is ``z``'s largest value on ``q``'s support instead, whose cell keeps
    its own mass, so the step is a distribution (never ``0 / 0``). Where the first sum is
    a normal float, as in every fit but those, the step is that one, bit for bit.
    """
    out = q * np.exp(z - z.max())
    total = out.sum()
    if not total >= np.finfo(np.float64).tiny:
        # on q's support z - top <= 0; elsewhere q is 0 and the cap keeps exp finite
        out = q * np.exp(np.minimum(z - z[q > 0].max(), 0.0))
        total = out.sum()
    return out / total


def _fused_fit(
    start: FloatArray,
    measurements: Sequence[Measurement],
    axes: Sequence[tuple[int, ...]],
    *,
    iterations: int,
    step: float,
    rtol: float,
    continuation: int | None,
    lead: int | None,
) -> FloatArray:
    """:func:`entropic_descent` with every clique's table in one vector: a step's marginals
    are one :meth:`~pmwcm.kernels.fused_marginals.FusedMarginals.marginals` call, its
    gradient ``g = sum_k w_k B_k r_k`` one ``spread`` (the same loss, residuals and iterates as the
    per-clique loop up to floating-point summation order)."""
    _check_fit(measurements, iterations=iterations)
    shape = start.shape
    plan = fused_marginals(shape, tuple(axes))
    cells = np.diff(plan.offsets)
    targets = np.concatenate(
        [
            np.broadcast_to(m.values, tuple(shape[a] for a in ax)).ravel()
            for m, ax in zip(measurements, axes, strict=True)
        ]
    )
    weights = precision_weights(measurements)
    weight = None if all(w == 1.0 for w in weights) else np.repeat(weights, cells)

    def residuals(q: FloatArray) -> tuple[float, FloatArray]:
        r = plan.marginals(q) - targets
        weighted = r if weight is None else weight * r
        return 0.5 * float(np.dot(weighted, r)), weighted

    def moved(q: FloatArray, weighted: FloatArray, s: float) -> FloatArray:
        return tilted(q, -s * plan.spread(weighted))

    towards: Callable[[FloatArray], FloatArray] | None = None
    if lead is not None:
        k = range(len(measurements))[lead]
        cut = slice(int(plan.offsets[k]), int(plan.offsets[k + 1]))
        w, sigma = weights[k], measurements[k].sigma

        def towards(weighted: FloatArray) -> FloatArray:
            d = np.zeros_like(weighted)
            d[cut] = lead_direction(weighted[cut], targets[cut], weight=w, sigma=sigma)
            return d

    return _descend(
        start, residuals, moved, bound=DISCREPANCY * noise_energy(measurements),
        iterations=iterations, continuation=continuation, step=step, rtol=rtol,
        lead=towards,
    )  # fmt: skip


def default_iterations(domain: Domain, cliques: int) -> int:
    """A public work budget for the fit: ``1e9`` cell operations, 30 to 300 iterations.

    Each iteration costs ``2K |X|`` cell operations, so large domains get fewer
    (on Adult's 2^14-cell binary domain: 300; on its 1.2M-cell categorical one: 30).
    """
    return int(min(300, max(30, 1e9 // (2 * cliques * domain.size))))


def marginal_prior(
    data: PrivateData,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
    cliques: Sequence[tuple[str, ...]] | None = None,
    iterations: int | None = None,
) -> PriorRelease[DenseHistogram]:
    """Measure (default: all 2-way) marginals and fit a starting hypothesis.

    The caller charges ``measurement_event(noise_multiplier)`` first;
    ``iterations`` defaults to :func:`default_iterations`.
    """
    chosen = list(cliques) if cliques is not None else pairwise_cliques(data.domain)
    measured = measure_marginals(data, chosen, noise_multiplier=noise_multiplier, noise=noise)
    if iterations is None:
        iterations = default_iterations(data.domain, len(chosen))
    fitted = fit_histogram(data.domain, measured, iterations=iterations)
    return PriorRelease(fitted, tuple(measured))


def public_prior(
    domain: Domain, records: np.ndarray, *, uniform_weight: float = 0.01
) -> DenseHistogram:
    """A starting hypothesis from *public* records (no privacy cost).

    The empirical histogram of ``records``, mixed with ``uniform_weight`` of
    the uniform one: multiplicative-weights updates only rescale cells, so a
    cell the public sample never saw would stay at zero forever; the mixture
    keeps every cell reachable (and costs at most ``ln(1 / (1 - w))`` in KL to
    the empirical one, 0.01 at the default). Public means not derived from the
    private data; a prior computed from it must instead be paid for.
    """
    if not 0 < uniform_weight <= 1:
        raise ValueError(f"uniform_weight must lie in (0, 1], got {uniform_weight}.")
    empirical = DenseHistogram.from_records(domain, records).to_array()
    return DenseHistogram(domain, (1 - uniform_weight) * empirical + uniform_weight / domain.size)
