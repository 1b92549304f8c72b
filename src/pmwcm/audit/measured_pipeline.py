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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import Build, parity_records, pipeline_case
from pmwcm.engine.measured_update import MeasuredUpdate
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.marginal_measurement import clique_sigma
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "BROKEN_MEASURED",
    "AuditedBackend",
    "OnSupport",
    "Unflagged",
    "measured",
    "measured_parts_case",
    "measured_pipeline_case",
    "parts_pair",
    "parts_stream",
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
