"""Auditing the pipeline with the measured update end to end (issue 35).

The same audit as :mod:`pmwcm.audit.pipeline` (the real
:func:`~pmwcm.engine.practical.build_engine` at ``PMWConfig(epsilon, delta)``
defaults, built afresh for every trial, the whole transcript as the output,
refusals included, on :func:`~pmwcm.audit.pipeline.parity_pair`), with
``update="measure"``: a query the sparse vector flags gets its clique's
marginal measured with the Gaussian mechanism
(:mod:`pmwcm.mechanisms.marginal_measurement`) instead of an oracle call, and
the released answer is the refitted hypothesis's. The engine expects the
audit's six queries (``expected_queries``, public), so its paced updates fall
due at them and every trial exercises the charge, the measurement and the
refit. It starts from the paper's uniform hypothesis (``prior="uniform"``):
the paid prior has its own audits (:mod:`pmwcm.audit.prior`, and the default
pipeline's), and its noise would otherwise blur what the measurements release
(with the paid prior a noise-free measurement moved the released values by
``O(1/n)`` against the prior's noise, and 100 trials did not see it). The
claim is the config's ``(epsilon, delta)``: the sparse vector and the ``T``
measurements compose to it under PLD
(:func:`~pmwcm.engine.measured_update.calibrate_update_noise`).

**Backends.** ``backend="dense"`` (the pair's 16 cells as a tensor) or
``backend="support"`` (:class:`OnSupport`: the same build with
``PMWConfig(backend="support", support_size=1000)``, the least support the engine
takes, so a trial stays cheap). The code that reads the data -- the sparse
vector, the Gaussian clique measurement -- is the same on both; the support
trial's hypothesis is a weighted support of 1,000 records drawn uniformly from
``X`` (public randomness, from the trial's noise source), and every measured
update refits it with :func:`~pmwcm.mechanisms.priors.support.fit_support`,
through the Horner passes (:mod:`pmwcm.kernels.support_passes`) on the parity
queries' three-way clique. A trial costs ~40 ms on one core on the dense backend,
~60 ms on the support (with :func:`~pmwcm.audit.pipeline.memoised_pld`).

**Negative control** (:data:`BROKEN_MEASURED`, on either backend): the
measurement released without noise (the ``sigma`` it reports is still the
calibrated one, so everything downstream looks as usual); the audit must flag
it. Its released values are then a function of the data and of the public
support draw alone: on the dense backend every trial falls on its side of a
threshold on ``<theta, v>`` (100 vs 0 hits from 100 trials per input, the
lower bound 1.86 at ``alpha = 1e-6`` against the claimed 1). On the support the
public draw moves the refit, so a few trials cross: 91-99 vs 0 hits from 100
trials (seeds 0-5), lower bounds 1.65-1.83 (``tests/test_audit_measured_pipeline.py``).

**Parts** (:func:`measured_parts_case`). The same measured build, dense, on
:func:`parts_pair` (the parity pair with a 600-valued fifth attribute), asked
:func:`parts_stream`: six queries whose cliques are too large to measure, so every
paced update measures a part of its query's clique
(:meth:`~pmwcm.engine.steps.EngineSteps.measure_part`) before the round's own
sparse-vector test. The sparse vector's threshold is one no error reaches
(:class:`Unflagged`, a public setting), so no oracle call adds its noise, and the
same negative control is caught as sharply: 100 vs 0 hits, lower bound 1.857. A
trial costs ~170 ms (the refits on the 9,600-cell hypothesis).

**Past the last update** (:func:`past_the_slots_case`). A measured engine's paced
updates take its ``T`` slots with no positive, so it tests on past them and halts
at the first flag with no slot left
(:meth:`~pmwcm.engine.steps.EngineSteps.halt_on_flag`). :class:`PastTheSlots`
builds the measured engine (``T = 56`` here, after the halt ``"synthetic"``) and
resumes it from a state whose ``T`` slots a run on public records spent
(:func:`spent_state`: measurements of one pair, never of the parity), so a trial
is the part past the slots alone: the sparse vector's tests on the data, a
hypothesis answer below the threshold, the halt on a parity query's flag. The
transcript's values are then public functions of that state; only the tests'
outcomes depend on the data, and they are the sparse vector's. **Negative
control** (:data:`BROKEN_PAST_THE_SLOTS`): the flag past the last slot answered
from the data's table instead of the hypothesis's (unpaid, noiseless), the slip
the halt's one argument invites; the audit must flag it. A trial costs ~20 ms.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import Build, default_stream, parity_records, pipeline_case, shipped
from pmwcm.engine.measured_update import MeasuredUpdate
from pmwcm.engine.modes import RoundSteps, SparseVectorMode
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.rounds import QueryRound
from pmwcm.engine.snapshot import EngineSnapshot, restore, snapshot
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.marginal_measurement import clique_sigma
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "BROKEN_MEASURED",
    "BROKEN_PAST_THE_SLOTS",
    "AuditedBackend",
    "OnSupport",
    "PastTheSlots",
    "Unflagged",
    "data_answer_past_the_slots",
    "measured",
    "measured_parts_case",
    "measured_pipeline_case",
    "parts_pair",
    "parts_stream",
    "past_the_slots_case",
    "spent_state",
]

AuditedBackend = Literal["dense", "support"]


#: The stream length the audited engine expects: the audit's own stream
#: (:func:`~pmwcm.audit.pipeline.default_stream`), so the pacing falls due at its queries.
EXPECTED_QUERIES = 6


def measured(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """The shipped builder with the measured update (``PMWConfig(update="measure")``),
    from the uniform start, expecting the audit's six queries (public settings):
    its paced updates then fall due at them, so every trial measures cliques."""
    paced = dataclasses.replace(
        config, expected_queries=EXPECTED_QUERIES, prior="uniform", update="measure"
    )
    return build_engine(data, paced, noise=noise)


class _NoiselessMeasurement(MeasuredUpdate):
    """Broken (a negative control): the clique's marginal released as it is."""

    def measure(
        self, table: FloatArray, clique: tuple[str, ...], *, n: int, noise: NoiseSource
    ) -> Measurement:
        sigma = clique_sigma(self.noise_multiplier, n)
        return Measurement(clique=tuple(clique), values=np.array(table, dtype=float), sigma=sigma)


def _noiseless_measurement(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    engine = measured(data, config, noise)
    update = engine.measured_update
    assert update is not None
    fields = {f.name: getattr(update, f.name) for f in dataclasses.fields(update)}
    parts = dataclasses.replace(engine.parts, measured_update=_NoiselessMeasurement(**fields))
    return type(engine).from_parts(parts, state=engine.state())


@dataclass(frozen=True)
class OnSupport:
    """``build`` on the weighted-support backend: the config it is given with
    ``backend="support"`` and ``support_size=size`` (public settings; by default the
    least support the engine takes, :data:`~pmwcm.kernels.backend.MIN_SUPPORT_SIZE`)."""

    build: Build
    size: int = MIN_SUPPORT_SIZE

    def __call__(self, data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
        """The engine ``build`` makes on the support."""
        on_support = dataclasses.replace(config, backend="support", support_size=self.size)
        return self.build(data, on_support, noise)


#: Deliberately broken measured pipelines the audit must flag.
BROKEN_MEASURED: dict[str, Build] = {"noiseless measurement": _noiseless_measurement}

#: The wide attribute of :func:`parts_pair`: a clique of a target, two parity bits
#: and it has 4,800 cells, past the 2^12 a measurement takes; one bit and it, 2,400.
WIDE_VALUES = 600


def parts_pair(n: int = 4000) -> tuple[PrivateData, PrivateData]:
    """:func:`~pmwcm.audit.pipeline.parity_pair` with a fifth attribute ``w`` of
    :data:`WIDE_VALUES` values cycling through the records; ``D1`` replaces record 0 (all
    zeros) by its complement (ones, ``w = 599``)."""
    names = {f"x{j}": 2 for j in range(4)}
    domain = Domain.from_sizes({**names, "w": WIDE_VALUES})
    records = np.column_stack([parity_records(n), np.arange(n) % WIDE_VALUES])
    flipped = records.copy()
    flipped[0] = [1, 1, 1, 1, WIDE_VALUES - 1]
    return PrivateData.from_records(domain, records), PrivateData.from_records(domain, flipped)


def parts_stream() -> tuple[CMQuery, ...]:
    """Six queries whose cliques hold ``w`` and are too large to measure: each update
    that falls due measures a part of one (:func:`~pmwcm.engine.measured_update.part_to_measure`:
    the parity clique ``x0, x1, x2`` first, then other bits, then a bit with ``w``), so
    every measurement of a trial is a part's."""
    wide = {"w": "ordinal"}
    return (
        CMQuery(loss="logistic", target="x2", features=("x0", "x1", "w"), encodings=wide),
        CMQuery(loss="huber", target="x3", features=("x1", "x2", "w"), loss_param=0.5,
                radius=2.0, encodings=wide),
        CMQuery(loss="squared", target="x1", features=("x0", "x2", "w"), encodings=wide),
        CMQuery(loss="logistic", target="x0", features=("x1", "x3", "w"), encodings=wide),
        CMQuery(loss="smoothed_hinge", target="x2", features=("x0", "x1", "w"),
                interactions=(("x0", "x1"),), radius=2.0, encodings=wide),
        CMQuery(loss="logistic", target="x3", features=("x0", "x1", "x2", "w"), encodings=wide),
    )  # fmt: skip


@dataclass(frozen=True)
class Unflagged:
    """``build`` with a sparse-vector threshold no error reaches (a public setting): the
    test still runs on every round, and every answer is the hypothesis's."""

    build: Build

    def __call__(self, data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
        """The engine ``build`` makes with ``threshold=10^9`` (in sensitivities)."""
        return self.build(data, dataclasses.replace(config, threshold=1e9), noise)


def measured_parts_case(
    *, epsilon: float = 1.0, delta: float = 1e-6, n: int = 4000, build: Build = measured
) -> AuditCase:
    """The measured pipeline (``build``, dense backend, :class:`Unflagged`) on
    :func:`parts_pair`, asked :func:`parts_stream`: every update is a paced one
    that measures a part of its query's clique
    (:meth:`~pmwcm.engine.steps.EngineSteps.measure_part`). Without flags no oracle call
    adds its noise to the transcript, so a part released without noise leaves every
    answer a function of the data: the negative control is caught as sharply as the
    measured update's (:func:`measured_pipeline_case`)."""
    label = "measured parts" if build is measured else "broken measured parts"
    return pipeline_case(
        epsilon=epsilon, delta=delta, n=n, build=Unflagged(build), label=label,
        pair=parts_pair, stream=parts_stream,
    )  # fmt: skip


def measured_pipeline_case(
    *,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    n: int = 4000,
    build: Build = measured,
    backend: AuditedBackend = "dense",
) -> AuditCase:
    """:func:`~pmwcm.audit.pipeline.pipeline_case` with a measured ``build`` on ``backend``
    (``"support"``: ``build`` wrapped in :class:`OnSupport`)."""
    if backend not in ("dense", "support"):
        raise ValueError(f"backend must be 'dense' or 'support', got backend={backend!r}.")
    label = "measured update" if build is measured else "broken measured update"
    if backend == "support":
        build = OnSupport(build)
        label += f" on the support (M={build.size})"
    return pipeline_case(epsilon=epsilon, delta=delta, n=n, build=build, label=label)


def spending_stream(count: int) -> tuple[CMQuery, ...]:
    """``count`` distinct queries on the pair ``x0, x3`` (ridge variants), which the
    parity never shows: their paced updates spend a :class:`PastTheSlots` engine's slots."""
    return tuple(
        CMQuery(loss="logistic", target="x3", features=("x0",), l2=0.01 * (j + 1))
        for j in range(count)
    )


def past_the_slots_config(config: PMWConfig) -> PMWConfig:
    """``config`` measured from the uniform start, expecting one query (so the pacing's
    end-of-stream rule spends every slot on the first fresh queries), synthetic after
    the halt; ``max_updates=2``, which the measured rule raises to its own ``T`` (56 at
    the audit's ``n = 4,000`` and ``epsilon = 1``)."""
    return dataclasses.replace(
        config, expected_queries=1, prior="uniform", update="measure", max_updates=2,
        after_halt="synthetic",
    )  # fmt: skip


@functools.cache
def spent_state(config: PMWConfig, sizes: tuple[tuple[str, int], ...], n: int) -> EngineSnapshot:
    """The state of a :func:`past_the_slots_config` engine on ``n`` public records (uniform
    over the schema ``sizes``, seed 0: no record of either neighbour) after
    :func:`spending_stream` of ``T`` queries, which its paced updates answer, one slot each."""
    domain = Domain.from_sizes(dict(sizes))
    rng = np.random.default_rng(0)
    records = np.stack([rng.integers(0, size, n) for _, size in sizes], axis=1)
    public = PrivateData.from_records(domain, records)
    engine = build_engine(public, config, noise=NumpyNoise(seed=0))
    for query in spending_stream(engine.settings.max_updates):
        engine.answer(query)
    if len(engine.updates) != engine.settings.max_updates or engine.halted:
        raise AssertionError("the spending stream must spend every slot and leave it testing")
    return snapshot(engine)


@dataclass(frozen=True)
class PastTheSlots:
    """``build`` at :func:`past_the_slots_config`, resumed from :func:`spent_state` (public):
    every query it is asked comes after its last update."""

    build: Build = shipped
    #: the sparse vector's threshold (in sensitivities; public), where not the rule's.
    threshold: float | None = None

    def __call__(self, data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
        """The engine past its ``T`` slots, on ``data``."""
        paced = past_the_slots_config(config)
        if self.threshold is not None:
            paced = dataclasses.replace(paced, threshold=self.threshold)
        sizes = tuple(zip(data.domain.names, data.domain.sizes, strict=True))
        state = spent_state(paced, sizes, data.n)
        return restore(self.build(data, paced, noise), state)


@dataclass(frozen=True)
class _DataAnswerPastTheSlots(SparseVectorMode):
    """Broken (a negative control): a flag past the last slot answered from the data's
    table, the hypothesis's answer's place in :meth:`RoundSteps.halt_on_flag`."""

    def run(
        self, steps: RoundSteps, query: CMQuery | LinearQuery, round_: QueryRound, key: str
    ) -> Any:
        if steps.updates_left():
            return super().run(steps, query, round_, key)
        finish = steps.begin_data_side(key, round_)
        hypothesis = steps.hypothesis_side(round_)
        data_table, error = finish(hypothesis[1])
        if not steps.sparse_vector_test(round_, error):
            return steps.release(key, hypothesis[1], "hypothesis")
        return steps.halt_on_flag(key, round_, round_.hypothesis_answer(data_table))


def data_answer_past_the_slots(
    data: PrivateData, config: PMWConfig, noise: NoiseSource, threshold: float | None = None
) -> OnlinePMW:
    """Broken (a negative control): :class:`PastTheSlots` with
    :class:`_DataAnswerPastTheSlots` as its mode."""
    engine = PastTheSlots(threshold=threshold)(data, config, noise)
    parts = dataclasses.replace(engine.parts, mode=_DataAnswerPastTheSlots())
    return type(engine).from_parts(parts, state=engine.state())


#: Deliberately broken engines past their last update the audit must flag.
BROKEN_PAST_THE_SLOTS: dict[str, Callable[..., OnlinePMW]] = {
    "data answer past the slots": data_answer_past_the_slots,
}

#: A public threshold every test clears (in sensitivities, against the sparse vector's
#: query noise of scale 389 at the audit's ``n`` and ``epsilon``): past its slots the
#: engine then halts on the first query in every trial, so the control's data answer
#: is released in every trial.
EVERY_TEST_FLAGS = -1e6


def past_the_slots_case(
    *, epsilon: float = 1.0, delta: float = 1e-6, n: int = 4000, broken: str | None = None,
    flagging: bool = False,
) -> AuditCase:  # fmt: skip
    """The measured engine past its last update (:class:`PastTheSlots`; ``broken``: the
    control of that name in :data:`BROKEN_PAST_THE_SLOTS`) on
    :func:`~pmwcm.audit.pipeline.parity_pair`, asked the default stream. At the rule's
    threshold the tests go either way (a query below it is a checked hypothesis answer,
    the first flag halts the engine); ``flagging``: at :data:`EVERY_TEST_FLAGS`, the
    engine halts on the first query."""
    threshold = EVERY_TEST_FLAGS if flagging else None
    build: Build = PastTheSlots(threshold=threshold)
    label = "past the last update"
    if broken is not None:
        build = functools.partial(BROKEN_PAST_THE_SLOTS[broken], threshold=threshold)
        label = f"broken past the last update ({broken})"
    if flagging:
        label += ", every test flagging"
    return pipeline_case(
        epsilon=epsilon, delta=delta, n=n, build=build, label=label, stream=default_stream
    )
