"""Auditing the shipped default pipeline end to end, refusals included.

**What is audited.** The real :func:`pmwcm.engine.practical.build_engine` with
:class:`~pmwcm.engine.practical.PMWConfig` defaults -- the paid noisy 2-way-marginal
prior, the Lyu-Su-Li sparse vector and ``T`` noisy-gradient-descent oracle calls
(their shares and ``T`` by the budget rule, :mod:`pmwcm.engine.budget_rule`: at
the pair's ``n = 4,000`` and ``d = 4`` about 75% / 12% / 12% and ``T = 2``; the
oracle's level calibrated by the PLD accountant), learning rate 4, two
post-processing sweeps, ``after_halt = "refuse"`` -- built afresh for every
trial with ``NumpyNoise`` drawing from the audit's generator, then asked a
fixed stream of CM queries. Nothing is
modelled: every trial is one run of the library's code. The claim is the
config's ``(epsilon, delta)``, the guarantee :func:`build_engine` states for the
whole interaction.

**Output.** The whole transcript, one row per trial: a code for the build
(``0``, or ``4`` if :func:`build_engine` raised), then per query the source of
its answer (``0`` hypothesis, ``1`` oracle, ``2`` synthetic), ``3`` if the
engine refused it because it halted, ``4`` if it raised anything else; then
every released ``theta`` (``nan`` where none was released). **A refusal is an
output**: an exception is observable, so it is coded and compared across the
neighbours like any answer, never dropped.

**Events** (:func:`pipeline_family`): "the build or some query raised", the
Neyman-Pearson sets of the code sequence (sources and refusals), and
thresholds on ``<theta, v>``, the released
values (``nan`` as 0) projected on the difference ``v`` of the two noiseless
transcripts (every noise draw replaced by 0, :func:`noiseless`): a discretised
statistic of the released values along the direction the neighbours move them.

**Neighbours** (:func:`parity_pair`). Four binary attributes, ``x2 = x0 XOR
x1``: every 2-way marginal is uniform, so the prior cannot see the parity and a
parity query's error crosses the sparse vector's threshold, which spends an
oracle call and an update with its sweeps. ``D1`` replaces one record by its
complement, which moves every 2-way marginal (the prior's worst case: the L2
distance ``sqrt(2K) / n`` is attained, :func:`~pmwcm.audit.prior.complement_pair`)
and breaks the parity of one record.

**Speed.** A trial costs ~40 ms on one core; the PLD calibration of the
budget split would add ~200 ms to each, though its inputs are the config
alone, identical in every trial. :func:`memoised_pld` memoises
:meth:`PLDAccountant.epsilon` on ``(h, repr(event), delta)`` while the trials
run (a pure function of them), and
:func:`crosscheck_pipeline` confirms that memoised and plain runs release the
same transcripts on identical draws.

**Negative controls**: deliberately broken pipelines the audit must flag, in
:mod:`pmwcm.audit.pipeline_controls`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import (
    CategoricalFamily,
    EventFamily,
    FixedFamily,
    ThresholdFamily,
    combine,
    row_codes,
)
from pmwcm.audit.oracles import _Tape
from pmwcm.engine.online import EngineHalted, OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PLDAccountant
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "Build",
    "Opener",
    "PipelineMechanism",
    "crosscheck_pipeline",
    "default_stream",
    "hypothesis_mass",
    "memoised_pld",
    "noiseless",
    "parity_pair",
    "parity_records",
    "pipeline_case",
    "pipeline_family",
    "released_direction",
]

FloatArray = NDArray[np.float64]
SOURCES = {"hypothesis": 0, "oracle": 1, "synthetic": 2}
HALTED, RAISED = 3, 4

Build = Callable[[PrivateData, PMWConfig, NoiseSource], OnlinePMW]
"""``build(data, config, noise) -> OnlinePMW``: the pipeline under audit."""
Opener = Callable[[Any], PrivateData]
"""``opener(dataset) -> PrivateData``: how a trial opens the audit's dataset (a file's
path, a table's name, records), as a session opens its data."""


def shipped(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """The shipped pipeline: :func:`~pmwcm.engine.practical.build_engine` as a user calls it."""
    return build_engine(data, config, noise=noise)


_PLD_MEMO: dict[tuple[float, str, float], float] = {}


@contextlib.contextmanager
def memoised_pld() -> Iterator[None]:
    """Memoises :meth:`PLDAccountant.epsilon` on ``(h, repr(event), delta)`` meanwhile.

    The method is a pure function of those (``repr`` of a ``dp_accounting``
    event spells out every field, floats exactly), so results are unchanged.
    """
    plain = PLDAccountant.epsilon

    def epsilon(self: PLDAccountant, event: dp_accounting.DpEvent, *, delta: float) -> float:
        key = (self.h, repr(event), float(delta))
        if key not in _PLD_MEMO:
            _PLD_MEMO[key] = plain(self, event, delta=delta)
        return _PLD_MEMO[key]

    PLDAccountant.epsilon = epsilon  # type: ignore[method-assign]
    try:
        yield
    finally:
        PLDAccountant.epsilon = plain  # type: ignore[method-assign]


@dataclass(frozen=True, kw_only=True)
class PipelineMechanism:
    """``mechanism(data, trials, rng)``: transcripts of ``trials`` fresh pipelines.

    Attributes:
        config: the pipeline's configuration (the claim is its ``(epsilon, delta)``).
        queries: the stream, asked in order.
        dims: ``theta``'s length per query.
        build: ``build(data, config, noise)`` (default: the shipped :func:`build_engine`).
        opener: ``opener(dataset)``, run once per call (default
            :meth:`PrivateData.of`: a :class:`PrivateData` as it is). A refusal to
            open is coded like a refusal to build; data opened here is closed after
            the call's trials.
        cells: flat cells of ``X`` whose mass in the final hypothesis ends each row
            (the hypothesis is public: ``pmwcm synth`` samples it), ``nan`` where
            none was built.
    """

    config: PMWConfig
    queries: tuple[CMQuery, ...]
    dims: tuple[int, ...]
    build: Build = shipped
    opener: Opener = PrivateData.of
    cells: tuple[int, ...] = ()

    @property
    def codes(self) -> int:
        """Columns of codes: the build, then one per query."""
        return 1 + len(self.queries)

    def transcript(self, dataset: Any, noise: NoiseSource) -> FloatArray:
        """One run: open the data, build the pipeline, ask every query, record everything
        released (and the final hypothesis's mass on :attr:`cells`)."""
        return np.asarray(self.transcripts(dataset, noise, 1)[0], dtype=np.float64)

    def transcripts(self, dataset: Any, noise: NoiseSource, trials: int) -> FloatArray:
        """``trials`` runs on ``dataset``, opened once for them all.

        Opening draws no noise and is deterministic (a source's counts are exact
        integers), so every run sees the tables a fresh open would give, and a
        refusal to open refuses every run alike.
        """
        rows = np.full((trials, self.codes + sum(self.dims) + len(self.cells)), math.nan)
        try:
            data = self.opener(dataset)
        except Exception:  # a refusal is an output, never dropped
            rows[:, : self.codes] = RAISED
            return rows
        try:
            for row in rows:
                self._run(data, noise, row)
        finally:
            if data is not dataset:
                data.close()
        return rows

    def _run(self, data: PrivateData, noise: NoiseSource, row: FloatArray) -> None:
        """Fills ``row`` (all ``nan``) with one interaction on ``data``."""
        try:
            engine = self.build(data, self.config, noise)
        except Exception:  # a refusal is an output, never dropped
            row[: self.codes] = RAISED
            return
        row[0] = 0
        offset = self.codes
        for j, (query, dim) in enumerate(zip(self.queries, self.dims, strict=True)):
            try:
                answer = engine.answer(query)
            except EngineHalted:
                row[1 + j] = HALTED
            except Exception:  # a refusal is an output, never dropped
                row[1 + j] = RAISED
            else:
                row[1 + j] = SOURCES[answer.source]
                row[offset : offset + dim] = np.asarray(answer.value, dtype=np.float64)
            offset += dim
        if self.cells:
            row[offset:] = hypothesis_mass(engine, self.cells)

    def __call__(self, dataset: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` independent interactions on ``dataset`` (rows)."""
        noise = NumpyNoise(generator=rng)
        with memoised_pld():
            return self.transcripts(dataset, noise, trials)


def hypothesis_mass(engine: OnlinePMW, cells: tuple[int, ...]) -> FloatArray:
    """The engine's hypothesis's mass on the flat ``cells`` of ``X`` (any backend)."""
    domain = engine.domain
    table = engine.hypothesis.clique_table(domain.names)
    flat = np.asarray(cells, dtype=np.int64)
    if table.codes is None:
        return np.asarray(table.mass[flat], dtype=np.float64)
    at = np.minimum(np.searchsorted(table.codes, flat), max(table.codes.size - 1, 0))
    held = (table.codes.size > 0) & (table.codes[at] == flat)
    return np.where(held, table.mass[at], 0.0)


def noiseless(mechanism: PipelineMechanism, dataset: Any) -> FloatArray:
    """The transcript with every noise draw replaced by 0 (a public function of ``dataset``)."""
    with memoised_pld():
        return mechanism.transcript(dataset, _Tape())


def released_direction(mechanism: PipelineMechanism, dataset0: Any, dataset1: Any) -> FloatArray:
    """``v``: the unit difference of the noiseless transcripts' released ``theta`` (public:
    the pipeline and the pair), or all ones where they agree."""
    k = mechanism.codes
    both = [noiseless(mechanism, d)[k : k + sum(mechanism.dims)] for d in (dataset0, dataset1)]
    gap = np.nan_to_num(both[1] - both[0])
    norm = float(np.linalg.norm(gap))
    return gap / norm if norm > 0 else np.ones_like(gap)


def crosscheck_pipeline(
    mechanism: PipelineMechanism, dataset: Any, *, trials: int, seed: int
) -> int:
    """Trials whose transcript differs between memoised and plain accounting, same draws."""
    memo = mechanism(dataset, trials, np.random.default_rng(seed))
    noise = NumpyNoise(generator=np.random.default_rng(seed))
    plain = np.array([mechanism.transcript(dataset, noise) for _ in range(trials)])
    return int(np.sum(~np.all((memo == plain) | (np.isnan(memo) & np.isnan(plain)), axis=1)))


def pipeline_family(mechanism: PipelineMechanism, direction: FloatArray) -> EventFamily:
    """ "Something raised", code sequences (Neyman-Pearson sets), thresholds on ``<theta, v>``;
    per cell of :attr:`~PipelineMechanism.cells`, "the hypothesis holds it" and thresholds
    on its mass. ``direction`` spans the released ``theta`` columns."""
    k, end = mechanism.codes, mechanism.codes + sum(mechanism.dims)

    def project(out: Any) -> FloatArray:
        return np.asarray(np.nan_to_num(np.asarray(out)[:, k:end]) @ direction, dtype=np.float64)

    def raised(out: Any) -> NDArray[np.bool_]:
        return np.asarray(np.any(np.asarray(out)[:, :k] == RAISED, axis=1))

    def holds(j: int) -> Callable[[Any], NDArray[np.bool_]]:
        return lambda out: np.asarray(np.asarray(out)[:, end + j] > 0)

    def mass(j: int) -> Callable[[Any], FloatArray]:
        return lambda out: np.asarray(np.asarray(out)[:, end + j], dtype=np.float64)

    cells = enumerate(mechanism.cells)
    held = tuple((f"hypothesis holds cell {c}", holds(j)) for j, c in enumerate(mechanism.cells))
    return combine(
        FixedFamily(events=(("something raised", raised), *held)),
        CategoricalFamily(
            key=lambda o: row_codes(np.asarray(o)[:, :k].astype(np.int64), low=0, high=RAISED),
            name="codes (build, sources; 3 halted, 4 raised)",
        ),
        ThresholdFamily(statistic=project, name="<theta, v>"),
        *(ThresholdFamily(statistic=mass(j), name=f"mass of cell {c}") for j, c in cells),
    )


def parity_pair(n: int = 4000) -> tuple[PrivateData, PrivateData]:
    """``(D0, D1)``: ``x0, x1, x3`` cycle through their values, ``x2 = x0 XOR x1``;
    ``D1`` replaces record 0 (all zeros) by its complement (all ones)."""
    domain = Domain.from_sizes({f"x{j}": 2 for j in range(4)})
    records = parity_records(n)
    flipped = records.copy()
    flipped[0] = 1 - flipped[0]
    return PrivateData.from_records(domain, records), PrivateData.from_records(domain, flipped)


def parity_records(n: int) -> NDArray[np.int64]:
    """:func:`parity_pair`'s ``D0`` as an ``(n, 4)`` array: record ``i`` has ``x0, x1,
    x3`` the bits 0, 1, 2 of ``i`` and ``x2 = x0 XOR x1`` (record 0 all zeros)."""
    if n < 8:
        raise ValueError(f"need n >= 8, got n={n}.")
    i = np.arange(n)
    x0, x1, x3 = i % 2, (i // 2) % 2, (i // 4) % 2
    return np.column_stack([x0, x1, x0 ^ x1, x3])


def default_stream() -> tuple[CMQuery, ...]:
    """Six queries: 2-way ones the prior answers, parity ones it cannot, smooth and not.

    The hinge parity query crosses the threshold in most trials (the prior's
    ``theta_hat`` is a noise-driven point of the sphere), which spends an oracle
    call and an update with its sweeps; the queries after it are answered from
    the updated hypothesis. Mostly smooth losses: the certified hypothesis solves
    of non-smooth ones are the cost of a trial.
    """
    parity = {"features": ("x0", "x1"), "interactions": (("x0", "x1"),), "radius": 2.0}
    return (
        CMQuery(loss="logistic", target="x3", features=("x0",)),
        CMQuery(loss="hinge", target="x2", **parity),  # type: ignore[arg-type]
        CMQuery(loss="smoothed_hinge", target="x2", **parity),  # type: ignore[arg-type]
        CMQuery(loss="huber", target="x3", features=("x0", "x1"), loss_param=0.5, radius=2.0),
        CMQuery(loss="squared", target="x1", features=("x2", "x3")),
        CMQuery(loss="logistic", target="x0", features=("x3",), radius=0.5, intercept=False),
    )


def pipeline_case(
    *,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    n: int = 4000,
    build: Build = shipped,
    label: str = "default pipeline",
    pair: Callable[[int], tuple[PrivateData, PrivateData]] = parity_pair,
    stream: Callable[[], tuple[CMQuery, ...]] = default_stream,
) -> AuditCase:
    """The pipeline ``build`` at ``PMWConfig(epsilon, delta)`` on ``pair(n)`` (by default
    :func:`parity_pair`), asked ``stream()`` (by default :func:`default_stream`)."""
    d0, d1 = pair(n)
    queries = stream()
    config = PMWConfig(epsilon=epsilon, delta=delta)
    dims = tuple(q.compile(d0.domain).dim for q in queries)
    mechanism = PipelineMechanism(config=config, queries=queries, dims=dims, build=build)
    direction = released_direction(mechanism, d0, d1)
    return AuditCase(
        name=f"{label}: build_engine(PMWConfig({epsilon:g}, {delta:g})), {len(queries)} queries",
        guarantee=f"({epsilon:g}, {delta:g})-DP: marginal prior, LSL sparse vector, "
        f"T={config.resolved_for(d0.n, len(d0.domain)).max_updates} noisy GD, "
        f"{config.sweeps} sweeps (PLD)",
        mechanism=mechanism,
        dataset0=d0,
        dataset1=d1,
        events=pipeline_family(mechanism, direction),
        claimed_epsilon=epsilon,
        delta=delta,
    )
