"""Auditing the pipeline with the workload-aware start end to end (issue 35 item 4).

**What is audited.** The real :func:`~pmwcm.engine.practical.build_engine` at
``PMWConfig(epsilon, delta, prior_cliques="pairs")``, given the announced stream's cliques
(``workload=``, public: ``pmwcm run`` reads its file first), built afresh for
every trial with ``NumpyNoise`` on the audit's generator and asked that stream.
Its paid prior measures the six 2-way marginals, then runs ``R`` rounds
(:func:`~pmwcm.mechanisms.priors.workload.workload_prior`): the exponential
mechanism picks an announced clique not yet measured (pure ``eps_0``-DP,
McSherry, Talwar 2007; ``eps_0^2/8``-zCDP, Cesar, Rogers 2021, Thm. 5), the
Gaussian mechanism measures its marginal (``sigma = m sqrt(2) / n``:
``(1/m)``-GDP, Dong, Roth, Su 2022, Thm. 2.7), and the prior is refitted to
every measurement (post-processing); then the Lyu-Su-Li sparse vector and
noisy-gradient-descent oracle calls answer the stream. The claim is the
config's ``(epsilon, delta)``: the plan (:func:`~pmwcm.engine.prior_plan.workload_levels`)
calibrates the pairs, the ``R`` selections (charged as pure
``EpsilonDeltaDpEvent(eps_0)``) and the ``R`` measurements with the sparse
vector and the oracle so that they compose to it under the engine's PLD
accountant (adaptive composition; Kairouz, Oh, Viswanath 2015 for the pure
events), all charged before the first selection reads the data.

**When the start runs** is a public rule, ``epsilon n >= 40,000``
(:func:`~pmwcm.mechanisms.priors.workload.uses_workload`) on a pairs prior, with no
setting that forces it: the case takes the least ``n`` at which it fires (40,000 at
``epsilon = 1``) and refuses to build if the plan has no rounds, so it cannot
silently audit a pipeline without them. On these four binary attributes the default
(``prior_cliques="auto"``) would measure every triple instead of running the rounds
(their noise is small there: ``pmwcm.engine.plan``'s ``_triples_instead``), a prior
that :mod:`pmwcm.audit.pipeline_controls` audits; ``"pairs"`` keeps the rounds, as
the default does on any schema whose triples are too noisy to measure whole.

**Neighbours** (:func:`~pmwcm.audit.pipeline.parity_pair` at that ``n``): four
binary attributes, ``x2 = x0 XOR x1``; ``D1`` replaces record ``0000`` by
``1111``. Every clique's marginal moves by the full L2 distance ``sqrt(2)/n``
(the worst case of each Gaussian measurement, pairs and rounds alike) and
every quality ``q(C) = ||D_C - Dhat_C||_1 - bias`` by up to its sensitivity
``2/n``: on the two cliques that carry the parity (``{x0, x1, x2}`` and the
four-way one), which no pair sees, both moved cells lie on the side that
lowers the gap (the data's mass above the fit at ``0000``, below it at
``1111``), so their qualities fall by the whole ``2/n``.

**Stream** (:func:`workload_stream`): six CM queries whose cliques announce five
candidates (``{x0, x1, x2}``, the four-way clique and three other triples), so
``R = min(5, 4 d) = 5`` rounds measure them all: the selection decides their
order, which the release shows. The two cliques that carry the parity take the
first two rounds in practically every trial, in either order, and the other
triples, which the pairs already describe, follow in a drawn order. Knowing the parity, the
hypothesis answers every query (where the plain pipeline needs the oracle); the
sparse vector's noisy tests still run, and their outcomes are in the transcript.

**Output.** The transcript of :class:`~pmwcm.audit.pipeline.PipelineMechanism`
(codes of the build and each query, refusals included, every released
``theta``), then the prior's release as the engine holds it in its state and
snapshots (:attr:`~pmwcm.engine.online.OnlinePMW.prior_measurements`, public):
per candidate the round that measured it (``0`` none), per candidate its
released values (``nan`` where unmeasured), then the pairs' values. The
guarantee covers them (the answers are post-processing of them and of the
later releases), and they make the audit stronger than the answers alone: a
noise-free round shifts the fitted hypothesis by ``O(1/n)`` inside the pairs'
noise (in a trial run the fitted parity interaction spread by ``1.2e-4`` against
the neighbours' ``5e-5``), which no few hundred trials can see.

**Backends.** ``backend="dense"`` (the pair's 16 cells as a tensor) or
``backend="support"``: ``PMWConfig(backend="support", support_size=1000)``, the least
support the engine takes. The code that reads the data -- the pairs' and the
rounds' Gaussian measurements, the exponential mechanism, the sparse vector, the
oracle -- is the same on both; on the support the prior is the support prior
(:func:`~pmwcm.mechanisms.priors.support.support_marginal_prior`) and every round's
refit and the whole fit after the last run on it
(:func:`~pmwcm.mechanisms.priors.support.fit_support`, through the Horner passes of
:mod:`pmwcm.kernels.support_passes` on the three- and four-way candidates).

**Speed.** About 65 ms a trial on one core on the dense backend (the fits onto the
four-way clique dominate), 150-190 ms on the support (its fits: some 500 descent
steps a trial), with :func:`~pmwcm.audit.pipeline.memoised_pld` as in the default
pipeline's audit.

**Events**: those of :func:`~pmwcm.audit.pipeline.pipeline_family`; the
Neyman-Pearson sets of the picks; thresholds on each candidate's released
values projected on its marginal's difference between the neighbours, and on
the pairs' likewise.

**Negative control** (:data:`BROKEN_WORKLOAD`): the rounds' measurements
released without noise (the ``sigma`` they report is still the calibrated one,
so the selection, the fit and the ledger look as usual); the audit must flag
it, on either backend: the released values of the parity clique are then the data's
marginal whatever the support, 0 vs all hits (1.30 against the claim 1 from 60 trials
per input at ``alpha = 1e-6``, 1.86 from 100). A selection made by ``argmax`` is not a
control here: the noisy pairs move every quality by far more than ``2/n``, so its pick
barely depends on the neighbour (:mod:`pmwcm.audit.workload_selection` audits the selection alone).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import pmwcm.mechanisms.priors.workload as workload_module
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import (
    CategoricalFamily,
    EventFamily,
    ThresholdFamily,
    combine,
    row_codes,
)
from pmwcm.audit.pipeline import (
    PipelineMechanism,
    parity_pair,
    pipeline_family,
    released_direction,
)
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
from pmwcm.kernels.histogram import FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.marginal_measurement import clique_sigma
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import Measurement, pairwise_cliques
from pmwcm.mechanisms.priors.workload import WORKLOAD_MIN_SIGNAL, WorkloadPlan
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "BROKEN_WORKLOAD",
    "NoiselessRounds",
    "WorkloadBuild",
    "WorkloadPipelineMechanism",
    "least_n",
    "workload_pipeline_case",
    "workload_plan_of",
    "workload_stream",
]

Clique = tuple[str, ...]
AuditedBackend = Literal["dense", "support"]


def workload_stream() -> tuple[CMQuery, ...]:
    """Six queries announcing five candidate cliques (module docstring)."""
    parity = {"features": ("x0", "x1"), "interactions": (("x0", "x1"),), "radius": 2.0}
    return (
        CMQuery(loss="hinge", target="x2", **parity),  # type: ignore[arg-type]
        CMQuery(loss="logistic", target="x3", features=("x0", "x1", "x2")),
        CMQuery(loss="squared", target="x1", features=("x2", "x3")),
        CMQuery(loss="huber", target="x3", features=("x0", "x2"), loss_param=0.5, radius=2.0),
        CMQuery(loss="logistic", target="x0", features=("x1", "x3"), radius=0.5, intercept=False),
        CMQuery(loss="smoothed_hinge", target="x2", **parity),  # type: ignore[arg-type]
    )


def least_n(epsilon: float) -> int:
    """The least ``n`` (a multiple of 8, so the pair's 2-way marginals stay uniform) at
    which the workload rounds run at ``epsilon``: ``epsilon n >= 40,000``.

    >>> least_n(1.0), least_n(0.3)
    (40000, 133336)
    """
    return 8 * math.ceil(WORKLOAD_MIN_SIGNAL / epsilon / 8)


@dataclass(frozen=True)
class WorkloadBuild:
    """``build(data, config, noise)``: :func:`build_engine` as ``pmwcm run`` calls it, with
    the announced queries' cliques as the ``workload``."""

    workload: tuple[Clique, ...]

    def __call__(self, data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
        """The engine, its prior paid (the workload rounds included when the rule fires)."""
        return build_engine(data, config, noise=noise, workload=self.workload)


def _noiseless_clique(
    data: PrivateData, clique: tuple[str, ...], *, noise_multiplier: float, noise: NoiseSource
) -> Measurement:
    """Broken: the clique's marginal released as it is, with the calibrated ``sigma``."""
    sigma = clique_sigma(noise_multiplier, data.n)
    return Measurement(
        clique=tuple(clique), values=np.array(data.marginal(clique), dtype=float), sigma=sigma
    )


@contextlib.contextmanager
def _noiseless_rounds() -> Iterator[None]:
    """Meanwhile the workload rounds measure with :func:`_noiseless_clique` (the pairs and
    the measured update keep their own noisy measurement)."""
    real = workload_module.measure_clique
    workload_module.measure_clique = _noiseless_clique
    try:
        yield
    finally:
        workload_module.measure_clique = real


@dataclass(frozen=True)
class NoiselessRounds(WorkloadBuild):
    """Broken (a negative control): :class:`WorkloadBuild` whose rounds' measurements carry
    no noise; everything else, the selections and the ledger's charges included, is real."""

    def __call__(self, data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
        """The engine with noise-free workload measurements."""
        with _noiseless_rounds():
            return super().__call__(data, config, noise)


#: Deliberately broken workload-aware pipelines the audit must flag, by the label of
#: their planted bug.
BROKEN_WORKLOAD: dict[str, type[WorkloadBuild]] = {
    "noiseless workload measurement": NoiselessRounds,
}


@dataclass(frozen=True, kw_only=True)
class WorkloadPipelineMechanism(PipelineMechanism):
    """:class:`PipelineMechanism` whose rows end with the prior's release.

    Attributes:
        candidates: the plan's candidate cliques (public), in its order.
        widths: each candidate's cells.
        pairs: the 2-way cliques the prior measures, in its order.
        pair_cells: their cells in all.
    """

    candidates: tuple[Clique, ...] = ()
    widths: tuple[int, ...] = ()
    pairs: tuple[Clique, ...] = ()
    pair_cells: int = 0

    @property
    def start(self) -> int:
        """The first column of the prior's release."""
        return self.codes + sum(self.dims) + len(self.cells)

    @property
    def width(self) -> int:
        """Columns of the prior's release: rounds, candidates' values, pairs' values."""
        return len(self.candidates) + sum(self.widths) + self.pair_cells

    def prior_release(self, engine: OnlinePMW) -> FloatArray:
        """The engine's released prior measurements laid out as the row's tail."""
        rounds = np.zeros(len(self.candidates))
        values: list[FloatArray] = [np.full(w, math.nan) for w in self.widths]
        pairs: dict[Clique, FloatArray] = {}
        picked = 0
        for m in engine.prior_measurements:
            if m.clique in self.pairs:
                pairs[m.clique] = np.ravel(m.values)
            else:
                picked += 1
                j = self.candidates.index(m.clique)
                rounds[j], values[j] = picked, np.ravel(m.values)
        return np.concatenate([rounds, *values, *(pairs[c] for c in self.pairs)])

    def transcripts(self, dataset: Any, noise: NoiseSource, trials: int) -> FloatArray:
        """:meth:`PipelineMechanism.transcripts`, each row followed by its build's release
        (``nan`` where the build raised)."""
        tails = np.full((trials, self.width), math.nan)
        built = 0

        def build(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
            nonlocal built
            built += 1  # one build per trial, in order
            engine = self.build(data, config, noise)
            tails[built - 1] = self.prior_release(engine)
            return engine

        capturing = dataclasses.replace(self, build=build)
        head = PipelineMechanism.transcripts(capturing, dataset, noise, trials)
        return np.hstack([head, tails])


def workload_plan_of(case: AuditCase) -> WorkloadPlan | None:
    """The workload rounds the case's builds run (from public inputs), or ``None``."""
    m = case.mechanism
    if not isinstance(m, WorkloadPipelineMechanism) or not isinstance(m.build, WorkloadBuild):
        return None
    data = case.dataset0
    plan = plan_budget(m.config, n=data.n, domain=data.domain, workload=m.build.workload)
    return plan.workload


def _unit(vector: FloatArray) -> FloatArray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else np.ones_like(vector)


def _release_family(
    mechanism: WorkloadPipelineMechanism, rounds: int, d0: PrivateData, d1: PrivateData
) -> EventFamily:
    """Picks (Neyman-Pearson sets) and thresholds on each candidate's and the pairs'
    released values projected on the neighbours' marginal difference (public)."""
    k = len(mechanism.candidates)
    start = mechanism.start

    def picks(out: Any) -> Any:
        codes = np.asarray(out)[:, start : start + k]
        codes = np.where(np.isnan(codes), rounds + 1, codes)  # the build raised
        return row_codes(codes.astype(np.int64), low=0, high=rounds + 1)

    def projection(first: int, direction: FloatArray) -> Any:
        end = first + direction.size
        return lambda out: np.asarray(np.asarray(out)[:, first:end] @ direction, dtype=float)

    def gap(cliques: tuple[Clique, ...]) -> FloatArray:
        return _unit(np.concatenate([np.ravel(d1.marginal(c) - d0.marginal(c)) for c in cliques]))

    families: list[EventFamily] = [
        CategoricalFamily(key=picks, name="workload round of each candidate (0 none)")
    ]
    first = start + k
    for clique in mechanism.candidates:
        direction = gap((clique,))
        name = f"<y_{''.join(clique)}, v>"
        families.append(ThresholdFamily(statistic=projection(first, direction), name=name))
        first += direction.size
    pairs = projection(first, gap(mechanism.pairs))
    families.append(ThresholdFamily(statistic=pairs, name="<y_pairs, v>"))
    return combine(*families)


def workload_pipeline_case(
    *,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    n: int | None = None,
    broken: str | None = None,
    backend: AuditedBackend = "dense",
) -> AuditCase:
    """The workload-aware pipeline at ``PMWConfig(epsilon, delta)`` on :func:`parity_pair`
    (``n`` default :func:`least_n`), or its planted bug ``broken`` (a key of
    :data:`BROKEN_WORKLOAD`), on ``backend`` (``"support"``: ``backend="support"``,
    ``support_size=``:data:`~pmwcm.kernels.backend.MIN_SUPPORT_SIZE`).

    Raises:
        ValueError: the public rule would not run the workload rounds at this ``n``, or
            an unknown ``backend``.
    """
    if backend not in ("dense", "support"):
        raise ValueError(f"backend must be 'dense' or 'support', got backend={backend!r}.")
    d0, d1 = parity_pair(least_n(epsilon) if n is None else n)
    queries = workload_stream()
    cliques = tuple(q.clique for q in queries)
    build = WorkloadBuild(cliques) if broken is None else BROKEN_WORKLOAD[broken](cliques)
    config = PMWConfig(epsilon=epsilon, delta=delta, prior_cliques="pairs")
    if backend == "support":
        config = dataclasses.replace(config, backend="support", support_size=MIN_SUPPORT_SIZE)
    plan = plan_budget(config, n=d0.n, domain=d0.domain, workload=cliques)
    if plan.workload is None:
        raise ValueError(
            f"the workload rounds do not run at epsilon n = {epsilon * d0.n:g} "
            f"(they need {WORKLOAD_MIN_SIGNAL:g}); raise n."
        )
    rounds = plan.workload
    pairs = tuple(pairwise_cliques(d0.domain))
    mechanism = WorkloadPipelineMechanism(
        config=config,
        queries=queries,
        dims=tuple(q.compile(d0.domain).dim for q in queries),
        build=build,
        candidates=rounds.candidates,
        widths=tuple(d0.marginal(c).size for c in rounds.candidates),
        pairs=pairs,
        pair_cells=sum(d0.marginal(c).size for c in pairs),
    )
    direction = released_direction(mechanism, d0, d1)
    label = "workload-aware start" if broken is None else f"BROKEN {broken}"
    if backend == "support":
        label += f" on the support (M={MIN_SUPPORT_SIZE})"
    resolved = plan.config
    return AuditCase(
        name=f"{label}: build_engine(PMWConfig({epsilon:g}, {delta:g}, prior_cliques='pairs'), "
        "workload), "
        f"{len(queries)} queries, n={d0.n}",
        guarantee=f"({epsilon:g}, {delta:g})-DP: 2-way marginals, {rounds.rounds} workload "
        f"rounds (exp. mech. eps_0={rounds.selection_epsilon:.3g}, Gaussian "
        f"m={rounds.noise_multiplier:.3g}), LSL sparse vector, T={resolved.max_updates} "
        f"noisy GD (PLD)",
        mechanism=mechanism,
        dataset0=d0,
        dataset1=d1,
        events=combine(
            pipeline_family(mechanism, direction),
            _release_family(mechanism, rounds.rounds, d0, d1),
        ),
        claimed_epsilon=epsilon,
        delta=delta,
    )
