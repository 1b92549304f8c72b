"""A workload-aware start: the prior measures the marginals the announced queries need.

``pmwcm run`` reads the whole query file before answering, so the cliques its
queries read (target and features of each query) are public, as ``k`` is. A
CM query depends on the data only through its clique's marginal, so after the
all-pairs prior (:func:`~pmwcm.mechanisms.priors.marginals.marginal_prior`)
the start spends part of the prior's budget measuring the announced cliques
the pairs describe worst, chosen as AIM chooses (McKenna, Mullins, Sheldon,
Miklau 2022, Algorithm 2), for ``R`` rounds (:func:`workload_plan`):

1. **Select** (reads the data): the exponential mechanism (McSherry, Talwar
   2007) over the candidate cliques not yet measured, with AIM's quality

       q(C) = ||D_C - Dhat_C||_1 - sqrt(2/pi) sigma |C|

   (the hypothesis's L1 error on ``C`` less the expected L1 error of measuring
   it, ``|C|`` its cells). Under replace-one one record moves ``1/n`` between
   two cells of ``D_C``, so ``q`` has sensitivity ``Delta = 2/n`` (``Dhat`` and
   the bias are public) and picking ``C`` with probability
   ``exp(eps_0 q(C) / (2 Delta))`` is ``eps_0``-DP and ``eps_0^2/8``-zCDP
   (Cesar, Rogers 2021, Lemma 3.2 and Theorem 5: the exponential mechanism is
   ``eps_0``-bounded-range). Drawn as a Gumbel-max from the noise source.
2. **Measure** (reads the data): ``y = D_C + N(0, sigma^2 I)``,
   ``sigma = m sqrt(2) / n``: the Gaussian mechanism, ``GaussianDpEvent(m)``
   (:func:`~pmwcm.mechanisms.marginal_measurement.measure_clique`).
3. **Refit** (post-processing): the prior's entropic fit on the prior's backend
   (:func:`~pmwcm.mechanisms.priors.refit.refit_to_measurements`: the dense
   histogram's, or the weighted support's) from the current hypothesis onto every
   measurement so far, pairs included (a short one, :data:`ROUND_ITERATIONS` steps,
   between rounds; the whole fit, :func:`~pmwcm.mechanisms.priors.refit.whole_fit`,
   after the last).

**Guarantee.** The rounds are an adaptive composition of ``R`` pairs
``(EpsilonDeltaDpEvent(eps_0), GaussianDpEvent(m))``; with the pairs' event
the prior is charged exactly these events before the first draw, and the plan
(:func:`pmwcm.engine.plan.plan_budget`) calibrates them with the rest of the
budget under the engine's accountant (PLD: the selection as pure
``eps_0``-DP, composed exactly, Kairouz, Oh, Viswanath 2015; zCDP:
``rho = sum eps_0^2/2 + 1/(2 m^2)``, Bun, Steinke 2016, Prop. 1.4 and 1.6). AIM
itself charges the selection ``eps_0^2/8`` (bounded range); the pure-DP charge
is larger, so the stated guarantee holds a fortiori.

**How much** (public: ``epsilon``, ``n``, the schema, the announced cliques, the
prior's budget): where ``epsilon n >= 40,000`` (:func:`uses_workload`) and the
prior measures pairs (where a dense prior's triples qualify, the plan measures them
instead of running the rounds: ``pmwcm.engine.plan._triples_instead``),
:data:`WORKLOAD_SHARE` of the prior's zCDP budget ``rho_p`` goes to the rounds,
``R = min(candidates, 4 d)`` of them (:data:`ROUNDS_PER_ATTRIBUTE`), each
``rho_p WORKLOAD_SHARE / R`` split as AIM does (:data:`SELECTION_SHARE` to the
selection, the rest to the measurement). Candidates are the announced cliques of three or more
attributes (pairs and single attributes are measured already) whose table
has at most :data:`MAX_CANDIDATE_CELLS` cells.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fused_marginals import FUSED_MAX_CELLS, fused_marginals
from pmwcm.kernels.histogram import DenseHistogram, FloatArray, Histogram
from pmwcm.mechanisms.accounting.events import EpsilonDeltaDpEvent
from pmwcm.mechanisms.marginal_measurement import clique_sigma, measure_clique
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import PriorRelease, measurement_event
from pmwcm.mechanisms.priors.refit import refit_to_measurements, whole_fit
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "MAX_CANDIDATE_CELLS",
    "SELECTION_SHARE",
    "WORKLOAD_SHARE",
    "CandidateQualities",
    "WorkloadPlan",
    "exponential_mechanism",
    "select_clique",
    "selection_quality",
    "uses_workload",
    "workload_candidates",
    "workload_plan",
    "workload_prior",
]

#: The share of the prior's zCDP budget the workload rounds get (public).
WORKLOAD_SHARE = 0.25
#: The least ``epsilon n`` at which the rounds run (:func:`uses_workload`).
WORKLOAD_MIN_SIGNAL = 40_000.0
#: The share of each round's zCDP budget its selection gets (AIM's 0.1).
SELECTION_SHARE = 0.1
#: The largest candidate clique table (cells): the fit holds each measured table.
MAX_CANDIDATE_CELLS = 2**12
#: Rounds per attribute, ``R = min(candidates, ROUNDS_PER_ATTRIBUTE d)``: more, weaker
#: measurements beat fewer, stronger ones on full Adult at ``epsilon = 4`` (mean excess
#: risk 4.0e-6 at ``d / 2`` rounds, 3.1e-6 at ``d``, 2.6e-6 at ``3 d`` and ``4 d``;
#: ``benchmarks/accuracy/online_updates.py``'s streams, seeds 0-2). AIM itself
#: allows ``16 d``.
ROUNDS_PER_ATTRIBUTE = 4
#: Steps of the warm-started fit after each round (the last round gets the whole fit).
ROUND_ITERATIONS = 30


@dataclass(frozen=True, kw_only=True)
class WorkloadPlan:
    """The workload rounds' public parameters.

    Attributes:
        candidates: the announced cliques the rounds choose from (domain order).
        rounds: ``R``, the cliques measured.
        selection_epsilon: ``eps_0`` of each exponential mechanism.
        noise_multiplier: ``m`` of each measurement (``sigma = m sqrt(2) / n``).
    """

    candidates: tuple[tuple[str, ...], ...]
    rounds: int
    selection_epsilon: float
    noise_multiplier: float

    def __post_init__(self) -> None:
        if not 1 <= self.rounds <= len(self.candidates):
            raise ValueError(
                f"rounds must lie in [1, {len(self.candidates)}], got rounds={self.rounds}."
            )
        if not (math.isfinite(self.selection_epsilon) and self.selection_epsilon > 0):
            raise ValueError(f"selection_epsilon must be positive, got {self.selection_epsilon!r}.")
        measurement_event(self.noise_multiplier)  # validates it

    def events(self) -> list[dp_accounting.DpEvent]:
        """Each round's selection and measurement, in order (what the ledger is charged)."""
        one = [
            EpsilonDeltaDpEvent(self.selection_epsilon),
            measurement_event(self.noise_multiplier),
        ]
        return one * self.rounds

    def event(self) -> dp_accounting.DpEvent:
        """:meth:`events` composed: one ledger entry and one composition check for all the
        rounds (charged one by one, each check composed the whole ledger again: 112 PLD
        compositions, 0.8 s of a 10,000-query ``pmwcm run``'s 5.9 s CPU on binary Adult).
        The same events, so the same epsilon."""
        return dp_accounting.ComposedDpEvent(self.events())

    def to_dict(self) -> dict[str, object]:
        """JSON-ready numbers (``pmwcm run --dry-run``)."""
        return {
            "candidates": len(self.candidates),
            "rounds": self.rounds,
            "selection_epsilon": self.selection_epsilon,
            "noise_multiplier": self.noise_multiplier,
        }


def workload_candidates(
    domain: Domain, cliques: Iterable[Sequence[str]]
) -> tuple[tuple[str, ...], ...]:
    """The announced cliques worth a round: three or more attributes, at most
    :data:`MAX_CANDIDATE_CELLS` cells, each once, in the domain's attribute order
    (a public function of the schema and the query file).

    Raises:
        ValueError: a clique names an attribute the schema lacks.
    """
    order = {name: i for i, name in enumerate(domain.names)}
    seen: dict[tuple[str, ...], None] = {}
    for clique in cliques:
        unknown = sorted(set(clique) - set(order))
        if unknown:
            raise ValueError(f"workload names attributes the schema lacks: {unknown}.")
        canonical = tuple(sorted(set(clique), key=order.__getitem__))
        cells = math.prod(domain.size_of(name) for name in canonical)
        if len(canonical) >= 3 and cells <= MAX_CANDIDATE_CELLS:
            seen.setdefault(canonical, None)
    return tuple(seen)


def uses_workload(epsilon: float, n: int) -> bool:
    """Whether the rounds run: ``epsilon n >= WORKLOAD_MIN_SIGNAL`` (public).

    Below it the pairs need the whole prior budget. Chosen on streams no
    benchmark row uses (1,000 random logistic queries, stream seed 2007, noise
    seed 7; Adult binary): mean excess risk with a quarter of the prior's budget
    on the rounds against none: full Adult (n = 48,842) eps = 4: 2.34e-6 against
    4.18e-6 (max 2.9e-5 against 9.4e-5); eps = 1: 2.47e-5 against 2.66e-5; an
    8,000-row subsample at eps = 4: 7.63e-5 against 6.17e-5. Half the budget
    was worse than none at eps = 1 on full Adult (3.30e-5).

    >>> uses_workload(1.0, 48_842), uses_workload(4.0, 8_000)
    (True, False)
    """
    return epsilon * n >= WORKLOAD_MIN_SIGNAL


def workload_plan(
    candidates: Sequence[tuple[str, ...]], *, attributes: int, rho: float
) -> WorkloadPlan | None:
    """The rounds for ``rho``, the zCDP budget they get (module docstring), or ``None``
    without candidates.

    >>> plan = workload_plan([("a", "b", "c")], attributes=3, rho=0.02)
    >>> plan.rounds, round(plan.selection_epsilon, 4), round(plan.noise_multiplier, 4)
    (1, 0.1265, 5.2705)
    """
    if not candidates:
        return None
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be positive, got rho={rho!r}.")
    rounds = min(len(candidates), max(1, ROUNDS_PER_ATTRIBUTE * attributes))
    per_round = rho / rounds
    return WorkloadPlan(
        candidates=tuple(candidates),
        rounds=rounds,
        # eps_0^2 / 8 = SELECTION_SHARE rho_r (bounded range); 1 / (2 m^2) = the rest
        selection_epsilon=math.sqrt(8.0 * SELECTION_SHARE * per_round),
        noise_multiplier=1.0 / math.sqrt(2.0 * (1.0 - SELECTION_SHARE) * per_round),
    )


def selection_quality(
    data_marginal: np.ndarray, hypothesis_marginal: np.ndarray, *, sigma: float
) -> float:
    """AIM's quality ``||D_C - Dhat_C||_1 - sqrt(2/pi) sigma |C|`` (sensitivity ``2/n``)."""
    gap = float(np.abs(data_marginal - hypothesis_marginal).sum())
    return gap - float(_noise_bias(sigma, data_marginal.size))


def _noise_bias(sigma: float, cells: int | NDArray[np.int64]) -> float | NDArray[np.floating]:
    """``sqrt(2/pi) sigma |C|``: the expected L1 norm of a measurement's noise on
    ``|C|`` cells, which AIM's quality subtracts from the gap."""
    return math.sqrt(2.0 / math.pi) * sigma * cells


def exponential_mechanism(
    qualities: Sequence[float] | FloatArray,
    *,
    epsilon: float,
    sensitivity: float,
    noise: NoiseSource,
) -> int:
    """An index drawn with probability ``exp(eps q_i / (2 Delta))`` (normalised).

    The Gumbel-max trick: ``argmax_i eps q_i / (2 Delta) + G_i`` with ``G_i`` standard
    Gumbel, ``-ln(-ln U_i)``, ``U_i`` uniform from ``noise``; it has exactly that
    law (Gumbel 1954; Durfee, Rogers 2019). ``eps_0``-DP and ``eps_0^2/8``-zCDP.
    """
    if len(qualities) == 0:
        raise ValueError("the exponential mechanism needs at least one candidate.")
    if not (math.isfinite(epsilon) and epsilon > 0 and sensitivity > 0):
        raise ValueError(f"epsilon and sensitivity must be positive, got {epsilon}, {sensitivity}.")
    uniform = np.clip(noise.uniform(len(qualities)), 1e-300, 1.0 - 1e-16)
    gumbel = -np.log(-np.log(uniform))
    scores = epsilon * np.asarray(qualities, dtype=np.float64) / (2.0 * sensitivity)
    return int(np.argmax(scores + gumbel))


class CandidateQualities:
    """AIM's quality (:func:`selection_quality`) of every candidate of a fixed list, for
    any hypothesis: the data's candidate marginals are read once, here, and each call
    takes the hypothesis's candidate marginals in one pass.

    On a dense hypothesis of at most :data:`~pmwcm.kernels.fused_marginals.FUSED_MAX_CELLS`
    cells that pass is :class:`~pmwcm.kernels.fused_marginals.FusedMarginals`: one
    compiled call for all candidates (binary Adult's 2,930 candidates of a
    10,000-query file: 2.4 ms a round, against 68 ms one
    :meth:`~pmwcm.kernels.histogram.Histogram.marginal` at a time); otherwise one
    marginal per candidate. The gaps ``||D_C - Dhat_C||_1`` are
    :func:`selection_quality`'s sums up to floating-point summation order, a
    function of the data of the same sensitivity ``2/n``, computed by the same
    steps whatever the data.
    """

    def __init__(
        self,
        data: PrivateData,
        candidates: Sequence[tuple[str, ...]],
        *,
        sigma: float,
        data_marginals: dict[tuple[str, ...], np.ndarray] | None = None,
    ) -> None:
        """``data_marginals`` keeps the data's candidate marginals across instances;
        without it, on a domain of at most ``FUSED_MAX_CELLS`` cells, they are one fused
        pass over the data's full table (``data.marginal`` of every attribute)."""
        self.candidates = tuple(tuple(c) for c in candidates)
        self._axes = tuple(data.domain.axes(c) for c in self.candidates)
        if data_marginals is None and self.candidates and data.domain.size <= FUSED_MAX_CELLS:
            plan = fused_marginals(data.domain.shape, self._axes)
            self._data = plan.marginals(data.marginal(data.domain.names))
            sizes = np.diff(plan.offsets)
        else:
            cache = {} if data_marginals is None else data_marginals
            for clique in self.candidates:
                if clique not in cache:
                    cache[clique] = data.marginal(clique)
            tables = [cache[c] for c in self.candidates]
            sizes = np.array([t.size for t in tables], dtype=np.int64)
            self._data = np.concatenate([t.ravel() for t in tables]) if tables else np.zeros(0)
        self._starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self._ends = self._starts + sizes
        self._bias = np.asarray(_noise_bias(sigma, sizes), dtype=np.float64)

    def _gap(self, i: int, hypothesis: Histogram) -> float:
        """``||D_C - Dhat_C||_1`` of candidate ``i``, its hypothesis marginal taken alone."""
        data = self._data[self._starts[i] : self._ends[i]]
        return float(np.abs(data - np.ravel(hypothesis.marginal(self.candidates[i]))).sum())

    def __call__(self, hypothesis: Histogram, among: Sequence[int] | None = None) -> FloatArray:
        """``q(C)`` of the candidates at the indices ``among`` (every one by default), in
        that order, under ``hypothesis``. The fused pass takes every candidate's marginal
        at once; otherwise only those asked for are taken (on a support each is a pass
        over its ``M`` records)."""
        chosen = np.arange(len(self.candidates)) if among is None else np.asarray(among, int)
        if chosen.size == 0:
            return np.zeros(0)
        if isinstance(hypothesis, DenseHistogram) and hypothesis.domain.size <= FUSED_MAX_CELLS:
            shape = hypothesis.domain.shape
            fitted = fused_marginals(shape, self._axes).marginals(hypothesis.to_array())
            gaps = np.add.reduceat(np.abs(self._data - fitted), self._starts)[chosen]
        else:
            gaps = np.array([self._gap(i, hypothesis) for i in chosen])
        return np.asarray(gaps - self._bias[chosen], dtype=np.float64)


def select_clique(
    data: PrivateData,
    hypothesis: Histogram,
    candidates: Sequence[tuple[str, ...]],
    *,
    epsilon: float,
    sigma: float,
    noise: NoiseSource,
    data_marginals: dict[tuple[str, ...], np.ndarray] | None = None,
) -> int:
    """One round's selection: the index of the candidate the exponential mechanism picks
    by :func:`selection_quality` (sensitivity ``2/n``): ``epsilon``-DP, the audited
    release (:mod:`pmwcm.audit.workload_selection`). Charge its event first.

    ``data_marginals`` keeps the data's candidate marginals between rounds (they do not
    change; only the hypothesis's do): the same qualities, each data marginal read once.
    """
    qualities = CandidateQualities(data, candidates, sigma=sigma, data_marginals=data_marginals)
    return exponential_mechanism(
        qualities(hypothesis), epsilon=epsilon, sensitivity=2.0 / data.n, noise=noise
    )


def workload_prior(
    data: PrivateData,
    start: PriorRelease[Histogram],
    plan: WorkloadPlan,
    *,
    noise: NoiseSource,
) -> PriorRelease[Histogram]:
    """``plan.rounds`` rounds of select, measure, refit from ``start`` (module docstring).

    The caller must have charged :meth:`WorkloadPlan.event` to its ledger first.
    """
    hypothesis, measurements = start.hypothesis, list(start.measurements)
    remaining = list(range(len(plan.candidates)))
    sigma = clique_sigma(plan.noise_multiplier, data.n)
    # The data's candidate marginals are read once (at most 2^12 cells a candidate); each
    # round scores every candidate and draws among those not yet measured, as
    # select_clique on the remaining ones would.
    qualities = CandidateQualities(data, plan.candidates, sigma=sigma)
    for _ in range(plan.rounds):
        pick = exponential_mechanism(
            qualities(hypothesis, remaining), epsilon=plan.selection_epsilon,
            sensitivity=2.0 / data.n, noise=noise,
        )  # fmt: skip
        clique = plan.candidates[remaining.pop(pick)]  # the selection is released: public
        measurements.append(
            measure_clique(data, clique, noise_multiplier=plan.noise_multiplier, noise=noise)
        )
        # A short warm-started fit is enough to steer the next selection...
        hypothesis = refit_to_measurements(
            hypothesis, measurements, iterations=ROUND_ITERATIONS, continuation=1
        )
    # ... and the start gets the prior's whole fit onto every measurement.
    return PriorRelease(whole_fit(hypothesis, measurements), tuple(measurements))
