"""The paid marginal prior on a weighted support: today's default prior without a tensor over ``X``.

:mod:`pmwcm.mechanisms.priors.marginals` releases every 2-way marginal once
with the Gaussian mechanism and fits a *dense* histogram to the release. On a
universe too large to enumerate, the same release is fitted on a
:class:`~pmwcm.kernels.support.SupportHistogram` of ``M`` records instead, in
two post-processing steps that read **only the released tables**:

1. **Proposal** (:func:`~pmwcm.mechanisms.priors.support_proposal.tree_proposal`).
   ``M`` records drawn from a Chow-Liu tree model of the released pair tables,
   every value of every attribute kept reachable
   (:mod:`pmwcm.mechanisms.priors.support_proposal`).
2. **Fit** (:func:`fit_support`). The support's log-weights are fitted to all
   the released tables by the same entropic mirror descent as the dense fit
   (:func:`~pmwcm.mechanisms.priors.marginals.entropic_descent`), now on the
   records: ``w_i <- w_i - s sum_k r_k(x_{i, C_k})``. With the support equal to
   every cell of ``X`` this is the dense fit exactly (tested to ``1e-10``).

**Guarantee.** The release is :func:`~pmwcm.mechanisms.priors.marginals.measure_marginals`
unchanged: ``GaussianDpEvent(m)`` under replace-one, ``(1/m)``-GDP (Dwork, Roth
2014, App. A; Dong, Roth, Su 2022, Thm. 2.7), charged by the caller before the
data is read. Both steps are post-processing (Dwork, Roth 2014, Prop. 2.1): the
proposal's randomness comes from a generator seeded by the engine's noise
source, never from the data. The support is **never** built from the private
records (PMW^Pub, Liu et al. 2021, uses *public* records): a support of the
private records would publish which cells hold a record, and
``tests/test_audit_support_prior.py`` audits exactly that broken variant.

**Cost.** The proposal is ``O(M m)`` for ``m`` attributes; each fit iteration
``O(K M)`` in two streaming passes over the column-major codes
(:mod:`pmwcm.kernels.support_passes`), with the number
of iterations from a public work budget and the release's noise
(:func:`support_iterations`: a more precise release earns a longer fit). On a
support held on an array device (``--device cuda``,
:mod:`pmwcm.kernels.array_device`) each iteration is the same step in the array
API standard (:func:`pmwcm.kernels.support_array.descend`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels import support_array
from pmwcm.kernels.array_device import ArrayDevice
from pmwcm.kernels.backend import BackendChoice
from pmwcm.kernels.clique_table import FloatArray
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import Histogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.kernels.support_passes import (
    CliqueLayout,
    clique_marginals,
    columns_of,
    descent_step,
)
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import (
    CONTINUATION,
    Measurement,
    PriorRelease,
    entropic_descent,
    measure_marginals,
    pairwise_cliques,
    public_prior,
)
from pmwcm.mechanisms.priors.support_proposal import tree_proposal
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "fit_support",
    "post_processing_rng",
    "public_start",
    "public_support_prior",
    "support_fit_budget",
    "support_iterations",
    "support_marginal_prior",
]

#: The fit's work budget: ``iterations * K * M`` record-clique visits. At 2e9 the
#: full-resolution Adult fit stopped after 83 iterations, unconverged: 2e10 (300,
#: where the relative-improvement rule stops it) halved the mean excess risk of
#: 500 random logistic queries (4.5e-4 to 2.1e-4, eps = 1, seed 0), 8 s to 17 s.
FIT_WORK = 2e10


def post_processing_rng(noise: NoiseSource) -> np.random.Generator:
    """A NumPy generator for post-processing, seeded from ``noise`` (never from data).

    Sampling a proposal needs no secure randomness (it only post-processes a
    release), but taking the seed from the engine's noise source keeps a run
    with seeded noise (``--insecure-seeded-noise``) reproducible.
    """
    seed = (noise.uniform(4) * 2.0**32).astype(np.uint64)
    return np.random.default_rng([int(s) for s in seed])


class _Fitted:
    """A fit's state: normalised log-weights, their maximum and (once computed) their
    flat clique tables."""

    __slots__ = ("log_w", "tables", "top")

    def __init__(self, log_w: FloatArray, tables: FloatArray | None, top: float) -> None:
        self.log_w = log_w
        self.tables = tables
        self.top = top


#: How far (in log space) below its bound the trial's maximum may fall before the
#: one-pass step's tables are recomputed about the maximum itself (``exp(-650)`` is
#: still a normal float: the tables keep their precision above it).
_SHIFT_SLACK = 650.0


class _UniformStart:
    """Records with equal weights: what :func:`fit_support` reads of its start, without a
    :class:`SupportHistogram`'s probabilities (``8 M`` bytes the fit does not need)."""

    def __init__(
        self, domain: Domain, records: NDArray[np.integer], device: ArrayDevice | None = None
    ) -> None:
        self.domain = domain
        self.records = records
        self.size = int(records.shape[0])
        self.device = device

    @property
    def log_weights(self) -> FloatArray:
        return np.full(self.size, -math.log(self.size))


def fit_support(
    start: SupportHistogram | _UniformStart,
    measurements: Sequence[Measurement],
    *,
    iterations: int,
    step: float = 1.0,
    rtol: float = 1e-5,
    continuation: int | None = None,
    lead: int | None = None,
) -> SupportHistogram:
    """:func:`~pmwcm.mechanisms.priors.marginals.entropic_descent` on a support's log-weights
    (``continuation`` and ``lead`` as there: at most ``continuation * iterations``
    iterations in all).

    The records stay; only their weights move. Each iteration is one streaming
    pass over the column-major codes (:mod:`pmwcm.kernels.support_passes`): per
    record, ``w'_i = w_i - s g_i`` with ``g_i = sum_k r_k(x_{i, C_k})``, and
    ``exp(w'_i - shift)`` added to every clique's table, where ``shift`` is an
    upper bound on ``w'`` known before the pass (``max w - s sum_k min r_k``);
    the tables and ``w'`` are then normalised by their total. Should the bound be
    loose by more than :data:`_SHIFT_SLACK`, the tables are summed again about
    the maximum. Memory: the code columns and two weight vectors (``w`` and the
    trial ``w'``), whatever ``K``.

    A start on an array device is fitted there (:func:`_fit_on_device`), to the
    same weights up to rounding.
    """
    if start.device is not None:
        return _fit_on_device(
            start, measurements, start.device,
            iterations=iterations, step=step, rtol=rtol, continuation=continuation,
            lead=lead,
        )  # fmt: skip
    domain = start.domain
    columns = columns_of(start.records)
    layout = CliqueLayout(domain, [m.clique for m in measurements])

    def marginals(state: _Fitted) -> list[FloatArray]:
        if state.tables is None:
            state.tables = clique_marginals(columns, state.log_w, layout)[0]
        return layout.split(state.tables)

    def moved(state: _Fitted, res: list[FloatArray], s: float) -> _Fitted:
        # g_i >= sum_k min r_k, so w'_i <= max w - s sum_k min r_k: a shift no exp passes.
        shift = state.top - s * sum(float(r.min()) for r in res)
        trial, top, flat, total = descent_step(
            columns, state.log_w, layout.join(res), layout, s, shift=shift
        )
        if top < shift - _SHIFT_SLACK:  # the bound was loose: sum again about the maximum
            shift = top
            flat, total = clique_marginals(columns, trial, layout, shift=shift)
        trial -= shift + math.log(total)  # in place: the trial is this pass's own array
        flat /= total
        return _Fitted(trial, flat, top - shift - math.log(total))

    log_w = start.log_weights
    fitted = entropic_descent(
        _Fitted(log_w, None, float(log_w.max())),
        measurements,
        marginals=marginals,
        moved=moved,
        iterations=iterations,
        step=step,
        rtol=rtol,
        continuation=continuation,
        lead=lead,
    )
    return SupportHistogram(domain, start.records, fitted.log_w)


class _DeviceFit:
    """A fit's state on an array device: log-weights, probabilities and (once computed)
    every clique's marginal (host tables)."""

    __slots__ = ("log_w", "probabilities", "tables")

    def __init__(self, log_w: Any, probabilities: Any, tables: list[FloatArray] | None) -> None:
        self.log_w = log_w
        self.probabilities = probabilities
        self.tables = tables


def _fit_on_device(
    start: SupportHistogram | _UniformStart,
    measurements: Sequence[Measurement],
    device: ArrayDevice,
    *,
    iterations: int,
    step: float,
    rtol: float,
    continuation: int | None,
    lead: int | None,
) -> SupportHistogram:
    """:func:`fit_support`'s descent with the records and weights on ``device``: each step is
    :func:`pmwcm.kernels.support_array.descend` (one gather per clique for the gradient,
    one weighted bincount per clique for the marginals)."""
    domain = start.domain
    columns = device.asarray(columns_of(start.records))
    axes = [domain.axes(m.clique) for m in measurements]
    cliques = [(ax, tuple(domain.shape[a] for a in ax)) for ax in axes]

    def marginals(state: _DeviceFit) -> list[FloatArray]:
        if state.tables is None:
            state.tables = [
                support_array.marginal(device, columns, state.probabilities, ax, sizes)
                for ax, sizes in cliques
            ]
        return state.tables

    def moved(state: _DeviceFit, res: list[FloatArray], s: float) -> _DeviceFit:
        return _DeviceFit(*support_array.descend(device, columns, state.log_w, cliques, res, s))

    log_w = device.asarray(start.log_weights)
    fitted = entropic_descent(
        _DeviceFit(log_w, device.xp.exp(log_w), None),
        measurements,
        marginals=marginals,
        moved=moved,
        iterations=iterations,
        step=step,
        rtol=rtol,
        continuation=continuation,
        lead=lead,
    )
    return SupportHistogram(domain, start.records, fitted.log_w, device=device)


#: The most record-clique visits (``iterations * K * M``) a support fit may take in all,
#: its continuation past the budget (:func:`~pmwcm.mechanisms.priors.marginals.entropic_descent`)
#: included: what makes a build's time known before it starts (:mod:`pmwcm.engine.build_cost`).
FIT_WORK_CAP = 3 * FIT_WORK


#: The prior's noise per cell (``sigma = m sqrt(2K) / n``, public) from which a
#: support fit is given more than :func:`support_iterations`' base budget: the fit
#: then goes on for ``base (PRECISE_FIT_SIGMA / sigma)^2`` iterations (up to the work
#: budget). Tuned in round 3 (docs/design.md section 11, "the support prior's fit at
#: high signal"): past 300 iterations the fit kept moving toward the data's own
#: marginals at eps = 4 and 2 on TV16 and full-resolution Adult (sigma 4.3e-4 to
#: 8.7e-4) and away from them at eps = 1 (1.5e-3, 1.7e-3).
PRECISE_FIT_SIGMA = 1.5e-3


def support_fit_budget(size: int, cliques: int, *, sigma: float | None = None) -> tuple[int, int]:
    """The fit's ``(iterations, continuation)`` for ``size`` records, ``cliques``
    measured cliques and (when given) the measurements' noise per cell ``sigma``, all
    public: :func:`support_iterations`, and as many times that as keep the whole fit
    within :data:`FIT_WORK_CAP` visits (at least 1, at most
    :data:`~pmwcm.mechanisms.priors.marginals.CONTINUATION`).

    >>> support_fit_budget(2**18, 91), support_fit_budget(8_659_208, 91)
    ((300, 8), (30, 2))
    >>> support_fit_budget(2**16, 136, sigma=4.3e-4)
    (2243, 3)
    """
    iterations = support_iterations(size, cliques, sigma=sigma)
    fits = int(FIT_WORK_CAP // (iterations * cliques * size))
    return iterations, max(1, min(CONTINUATION, fits))


def support_iterations(size: int, cliques: int, *, sigma: float | None = None) -> int:
    """A public work budget for the support fit: :data:`FIT_WORK` record-clique
    visits, 30 to 300 iterations (Adult at full resolution, ``M = 2^18``, 91
    pairs: 300; the 54-attribute loans table, ``M = 10^6``, 1,431 pairs: 30).

    A precise measurement earns a longer fit: below :data:`PRECISE_FIT_SIGMA`
    the base budget ``b`` grows to ``b (PRECISE_FIT_SIGMA / sigma)^2``, within the
    same :data:`FIT_WORK` visits. The square is the descent's pace: its loss falls
    like ``1/t``, so resolving the tables to a noise ``sigma`` takes ``t ~ 1/sigma^2``
    steps (measured: the fit's distance to the data's own marginals bottomed out
    near 300 iterations at ``sigma = 1.5e-3``, near 1,000 at ``8e-4``, past 2,000 at
    ``4.3e-4``).

    >>> support_iterations(2**16, 136), support_iterations(2**16, 136, sigma=8e-4)
    (300, 1054)
    """
    visits = FIT_WORK // (cliques * size)
    base = int(min(300, max(30, visits)))
    if sigma is None or sigma >= PRECISE_FIT_SIGMA:
        return base
    wanted = base * (PRECISE_FIT_SIGMA / sigma) ** 2 if sigma > 0 else math.inf
    return int(max(base, min(visits, wanted)))


def support_marginal_prior(
    data: PrivateData,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
    size: int,
    cliques: Sequence[tuple[str, ...]] | None = None,
    iterations: int | None = None,
    device: ArrayDevice | None = None,
) -> PriorRelease[SupportHistogram]:
    """Measure (default: all 2-way) marginals, then propose and fit a support of ``size`` records.

    The caller charges
    :func:`~pmwcm.mechanisms.priors.marginals.measurement_event` ``(noise_multiplier)``
    first. Only :func:`~pmwcm.mechanisms.priors.marginals.measure_marginals`
    reads the data; everything after it reads the release. The fitted support
    lives on ``device`` (``None``: the host's NumPy path).
    """
    chosen = list(cliques) if cliques is not None else pairwise_cliques(data.domain)
    measured = measure_marginals(data, chosen, noise_multiplier=noise_multiplier, noise=noise)
    rng = post_processing_rng(noise)
    records = tree_proposal(data.domain, measured, size=size, rng=rng)
    budget, continuation = support_fit_budget(size, len(chosen), sigma=measured[0].sigma)
    fitted = fit_support(
        _UniformStart(data.domain, records, device),
        measured,
        iterations=budget if iterations is None else iterations,
        continuation=continuation,
    )
    return PriorRelease(fitted, tuple(measured))


def public_support_prior(
    domain: Domain, records: NDArray[np.integer], *, size: int, uniform_weight: float = 0.01
) -> SupportHistogram:
    """A free start from *public* records on ``size`` support records (no privacy cost).

    The dense :func:`~pmwcm.mechanisms.priors.marginals.public_prior` on a
    support: the distinct public records, weighted by their counts and sharing
    ``1 - uniform_weight``, and the rest of the ``size`` records drawn uniformly
    from ``X``, sharing ``uniform_weight`` (so no region is out of the updates'
    reach). With more than ``size / 2`` distinct public records, ``size / 2``
    are resampled from them first. Reads only the public records and a
    generator with a fixed seed: the same start every time.

    >>> d = Domain.from_sizes({"a": 2, "b": 3})
    >>> h = public_support_prior(d, np.array([[0, 0], [0, 0], [1, 2]]), size=1000)
    >>> h.size, round(float(h.marginal(["a"])[0]), 1)
    (1000, 0.7)

    Raises:
        ValueError: ``size < 2`` or ``uniform_weight`` outside ``(0, 1]``.
    """
    if size < 2:
        raise ValueError(f"size must be at least 2, got size={size}.")
    if not 0 < uniform_weight <= 1:
        raise ValueError(f"uniform_weight must lie in (0, 1], got {uniform_weight}.")
    rng = np.random.default_rng(0)
    rows = np.asarray(records, dtype=np.int64).reshape(-1, len(domain))
    if len(rows) == 0 or uniform_weight == 1:
        return SupportHistogram.uniform(domain, size, rng=rng)
    half = size // 2
    if len(np.unique(rows, axis=0)) > half:
        rows = rows[rng.integers(0, len(rows), half)]
    seen, counts = np.unique(rows, axis=0, return_counts=True)
    spare = size - len(seen)
    uniform = np.stack([rng.integers(0, s, spare) for s in domain.sizes], axis=1)
    weights = np.concatenate(
        [(1 - uniform_weight) * counts / counts.sum(), np.full(spare, uniform_weight / spare)]
    )
    return SupportHistogram(domain, np.concatenate([seen, uniform]), np.log(weights))


def public_start(domain: Domain, records: NDArray[np.integer], backend: BackendChoice) -> Histogram:
    """The free start from *public* records on the chosen backend: the dense
    :func:`~pmwcm.mechanisms.priors.marginals.public_prior`, or
    :func:`public_support_prior` on ``backend.support_size`` records."""
    if backend.kind == "support":
        return public_support_prior(domain, records, size=backend.support_size)
    return public_prior(domain, records)
