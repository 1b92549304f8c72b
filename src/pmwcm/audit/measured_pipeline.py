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

**Negative control** (:data:`BROKEN_MEASURED`): the measurement released
without noise (the ``sigma`` it reports is still the calibrated one, so
everything downstream looks as usual); the audit must flag it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import Build, pipeline_case
from pmwcm.engine.measured_update import MeasuredUpdate
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.histogram import FloatArray
from pmwcm.mechanisms.marginal_measurement import clique_sigma
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData

__all__ = ["BROKEN_MEASURED", "measured", "measured_pipeline_case"]


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


#: Deliberately broken measured pipelines the audit must flag.
BROKEN_MEASURED: dict[str, Build] = {"noiseless measurement": _noiseless_measurement}


def measured_pipeline_case(
    *, epsilon: float = 1.0, delta: float = 1e-6, n: int = 4000, build: Build = measured
) -> AuditCase:
    """:func:`~pmwcm.audit.pipeline.pipeline_case` with a measured ``build``."""
    label = "measured update" if build is measured else "broken measured update"
    return pipeline_case(epsilon=epsilon, delta=delta, n=n, build=build, label=label)
