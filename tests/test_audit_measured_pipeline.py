"""End-to-end privacy audit of the pipeline with the measured update (issue 35).

``build_engine(PMWConfig(1, 1e-6, prior="uniform", update="measure"))`` on the parity pair of
:mod:`pmwcm.audit.pipeline` (n = 4,000, d = 4), every trial a fresh run of the
library's code, the whole transcript (sources, refusals, released values) the
output. Audits use ``alpha = 1e-6`` (a correct pipeline is flagged with
probability at most 1e-6) and 100 final trials per input (+ 25 for the event
search), as the default pipeline's audit does.

The same audit runs on the weighted-support backend (``support_size=1000``, the
least the engine takes; ~15-20 s a case against the dense ~10 s). Its planted bug
is caught by fewer than all trials there -- the support's public draw moves the
refitted hypothesis, so 91-99 of 100 trials fall on the broken side (seeds 0-5; 0 on
the other), lower bounds 1.65-1.83 against the claimed 1 -- so it keeps the dense
audit's 100 trials: 60 would bound epsilon by about 1.0-1.3 only.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.audit import suite
from pmwcm.audit.auditor import AuditResult
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.measured_pipeline import (
    BROKEN_MEASURED,
    BROKEN_PAST_THE_SLOTS,
    OnSupport,
    PastTheSlots,
    Unflagged,
    measured,
    measured_parts_case,
    measured_pipeline_case,
    past_the_slots_case,
)
from pmwcm.audit.pipeline import PipelineMechanism, crosscheck_pipeline
from pmwcm.engine.online import OnlinePMW
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
from pmwcm.kernels.clique_table import is_dense
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NumpyNoise

ALPHA = 1e-6
TRIALS = 100
NOISELESS = "noiseless measurement"
DATA_ANSWER = "data answer past the slots"


def audited(case: AuditCase, seed: int) -> AuditResult:
    """``case`` audited at :data:`TRIALS` trials per input and :data:`ALPHA`."""
    return case.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)


def backend_kind(engine: OnlinePMW) -> str:
    backend = engine.parts.backend
    assert backend is not None
    return backend.kind


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": measured_pipeline_case(),
        "noiseless": measured_pipeline_case(build=BROKEN_MEASURED[NOISELESS]),
        "support": measured_pipeline_case(backend="support"),
        "support noiseless": measured_pipeline_case(
            build=BROKEN_MEASURED[NOISELESS], backend="support"
        ),
        "parts": measured_parts_case(),
        "parts noiseless": measured_parts_case(build=BROKEN_MEASURED[NOISELESS]),
        "past": past_the_slots_case(),
        "past flagging": past_the_slots_case(flagging=True),
        "past data answer": past_the_slots_case(broken=DATA_ANSWER, flagging=True),
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


def test_a_support_trial_measures_and_refits_on_the_support(cases: dict[str, AuditCase]) -> None:
    case = cases["support"]
    m = case.mechanism
    assert isinstance(m, PipelineMechanism) and m.build == OnSupport(measured, MIN_SUPPORT_SIZE)
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    assert backend_kind(engine) == "support"
    start = engine.hypothesis
    assert isinstance(start, SupportHistogram) and start.size == MIN_SUPPORT_SIZE == 1000
    for query in m.queries:
        engine.answer(query)
    labels = [entry.label for entry in engine.ledger.entries]
    assert labels == ["sparse vector"] + [f"clique measurement {t}" for t in range(1, 7)]
    assert len(engine.updates) == len(m.queries)
    # Every update released its clique's noisy marginal and refitted the support onto it,
    # the parity queries' three-way clique through the Horner passes.
    cliques = [mm.clique for mm in engine.prior_measurements]
    assert len(cliques) == len(m.queries) and ("x0", "x1", "x2") in cliques
    assert not any(
        np.array_equal(mm.values, case.dataset0.marginal(mm.clique))
        for mm in engine.prior_measurements
    )
    end = engine.hypothesis
    assert isinstance(end, SupportHistogram) and end is not start
    assert not np.allclose(end.log_weights, start.log_weights)


def test_the_support_control_releases_the_data_marginals(cases: dict[str, AuditCase]) -> None:
    case = cases["support noiseless"]
    m = case.mechanism
    assert isinstance(m, PipelineMechanism)
    assert m.build == OnSupport(BROKEN_MEASURED[NOISELESS], MIN_SUPPORT_SIZE)
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    assert backend_kind(engine) == "support"
    for query in m.queries:
        engine.answer(query)
    assert len(engine.prior_measurements) == len(m.queries)
    for mm in engine.prior_measurements:
        assert np.array_equal(mm.values, case.dataset0.marginal(mm.clique)) and mm.sigma > 0


def test_the_suite_audits_both_backends_and_the_parts_and_must_catch_every_control() -> None:
    names = [c.name for c in suite.pipeline_cases()]
    assert sum(name.startswith("measured update:") for name in names) == 1
    assert sum(name.startswith("measured update on the support") for name in names) == 1
    assert sum(name.startswith("measured parts:") for name in names) == 1
    controls = {c.name: must for c, must in suite.negative_controls()}
    broken = {name: must for name, must in controls.items() if "broken measured" in name}
    assert len(broken) == 3 and all(broken.values())
    assert sum(name.startswith("past the last update:") for name in names) == 1
    past = {name: must for name, must in controls.items() if "broken past the last" in name}
    assert len(past) == len(BROKEN_PAST_THE_SLOTS) == 1 and all(past.values())
    assert sum("on the support" in name for name in broken) == 1
    assert sum(name.startswith("broken measured parts:") for name in broken) == 1


def test_every_update_of_the_parts_stream_measures_a_part_of_its_query(
    cases: dict[str, AuditCase],
) -> None:
    case = cases["parts"]
    m = case.mechanism
    assert isinstance(m, PipelineMechanism) and m.build == Unflagged(measured)
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    for query in m.queries:
        assert engine.answer(query).source == "hypothesis"
    labels = [entry.label for entry in engine.ledger.entries]
    assert labels == ["clique measurement 1", "sparse vector"] + [
        f"clique measurement {t}" for t in range(2, len(m.queries) + 1)
    ]
    domain = case.dataset0.domain
    for query, update in zip(m.queries, engine.updates, strict=True):
        asked = set(engine.cm_round(query).clique)
        assert not is_dense(domain.sizes_of(tuple(asked)))  # too large to measure
        assert set(update.round.clique) < asked and is_dense(domain.sizes_of(update.round.clique))
    assert [mm.clique for mm in engine.prior_measurements] == [
        u.round.clique for u in engine.updates
    ]
    assert engine.ledger.spent_epsilon() <= 1.0


def test_a_trial_past_the_slots_starts_with_every_slot_spent_and_tests_on(
    cases: dict[str, AuditCase],
) -> None:
    """Every query of the audited stream comes after the last update: nothing is spent (the
    sparse vector was charged whole at the first round), the first flag halts the engine,
    and over a few noise seeds some answers are checked hypothesis answers and some
    halts happen."""
    case = cases["past"]
    m = case.mechanism
    assert isinstance(m, PipelineMechanism) and m.build == PastTheSlots()
    sources: set[str] = set()
    for seed in range(8):
        engine = m.build(case.dataset0, m.config, NumpyNoise(seed=seed))
        assert len(engine.updates) == engine.settings.max_updates and not engine.halted
        before = list(engine.ledger.entries)
        answers = [engine.answer(query).source for query in m.queries]
        assert list(engine.ledger.entries) == before  # the sparse vector was charged whole
        assert [entry.label for entry in before].count("sparse vector") == 1
        assert "oracle" not in answers and len(engine.updates) == engine.settings.max_updates
        if "synthetic" in answers:  # the first flag halted it, for good
            first = answers.index("synthetic")
            assert set(answers[first:]) == {"synthetic"} and engine.halted
        sources |= set(answers)
    assert sources == {"hypothesis", "synthetic"}


@pytest.mark.parametrize("name", ["correct", "support", "parts", "past", "past flagging"])
def test_the_audited_pipeline_is_not_flagged(
    cases: dict[str, AuditCase], name: str, seed: int
) -> None:
    r = audited(cases[name], seed)
    assert r.verdict == "consistent", r


#: Each control's least lower bound at 100 trials per input, and why it is caught so.
CAUGHT = {
    # Deterministic released values: every trial on each side falls on its side of a
    # threshold on <theta, v>; the lower bound is 1.86 (the most 100 trials can show).
    "noiseless": 1.5,
    # The released values depend on the data and the support's public draw: 91-99 of 100
    # trials on the broken side, 0 on the other (seeds 0-5), lower bounds 1.65-1.83.
    "support noiseless": 1.3,
    # No flags, so no oracle noise: every answer is a function of the data (100 vs 0 hits).
    "parts noiseless": 1.5,
    # Every test flags, so every trial releases the data's answer to the first query: 100
    # vs 0 hits on its projection (1.86).
    "past data answer": 1.5,
}


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_a_planted_bug_is_caught(cases: dict[str, AuditCase], name: str, seed: int) -> None:
    r = audited(cases[name], seed)
    assert r.violated and r.epsilon_lower_bound > CAUGHT[name], r
