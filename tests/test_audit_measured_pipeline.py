"""End-to-end privacy audit of the pipeline with the measured update (issue 35).

``build_engine(PMWConfig(1, 1e-6, prior="uniform", update="measure"))`` on the parity pair of
:mod:`pmwcm.audit.pipeline` (n = 4,000, d = 4), every trial a fresh run of the
library's code, the whole transcript (sources, refusals, released values) the
output. Audits use ``alpha = 1e-6`` (a correct pipeline is flagged with
probability at most 1e-6) and 100 final trials per input (+ 25 for the event
search), as the default pipeline's audit does.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.measured_pipeline import BROKEN_MEASURED, measured, measured_pipeline_case
from pmwcm.audit.pipeline import PipelineMechanism, crosscheck_pipeline
from pmwcm.mechanisms.noise import NumpyNoise

ALPHA = 1e-6
TRIALS = 100


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": measured_pipeline_case(),
        "noiseless": measured_pipeline_case(build=BROKEN_MEASURED["noiseless measurement"]),
    }


def test_every_query_of_the_audited_stream_is_measured(cases: dict[str, AuditCase]) -> None:
    case = cases["correct"]
    m = case.mechanism
    assert isinstance(m, PipelineMechanism) and m.build is measured
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    for query in m.queries:
        engine.answer(query)
    labels = [entry.label for entry in engine.ledger.entries]
    assert labels[:1] == ["sparse vector"]
    assert labels[1:] == [f"clique measurement {t}" for t in range(1, len(m.queries) + 1)]
    assert engine.ledger.spent_epsilon() <= 1.0


def test_memoised_accounting_releases_the_same_transcripts(
    cases: dict[str, AuditCase], seed: int
) -> None:
    case = cases["correct"]
    assert isinstance(case.mechanism, PipelineMechanism)
    assert crosscheck_pipeline(case.mechanism, case.dataset1, trials=2, seed=seed) == 0


def test_the_measured_pipeline_is_not_flagged(cases: dict[str, AuditCase], seed: int) -> None:
    r = cases["correct"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r


def test_a_measurement_released_without_noise_is_caught(
    cases: dict[str, AuditCase], seed: int
) -> None:
    # Deterministic released values: every trial on each side falls on its side of a
    # threshold on <theta, v>; the lower bound is 1.86 (the most 100 trials can show).
    r = cases["noiseless"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated and r.epsilon_lower_bound > 1.5, r
