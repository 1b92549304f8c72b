"""End-to-end privacy audit of the pipeline with the workload-aware start (issue 35 item 4).

``build_engine(PMWConfig(1, 1e-6, prior_cliques="pairs"), workload=cliques)`` on the parity pair of
:mod:`pmwcm.audit.pipeline` at ``n = 40,000`` (the least ``n`` at which the public
rule ``epsilon n >= 40,000`` runs the rounds; ``D1`` complements one record),
asked six queries announcing five candidate cliques, so four rounds of selection
and measurement run in every trial. The output is the whole transcript plus the
prior's released measurements (:mod:`pmwcm.audit.workload_pipeline`).

Audits use ``alpha = 1e-6`` (a correct pipeline is flagged with probability at
most 1e-6) and 100 final trials per input (+ 25 for the event search; ~17 s a
case). The planted bug (the rounds' measurements released without noise, still
reporting the calibrated ``sigma``) makes the parity clique's released values a
function of the data: every trial on each side falls on its side of a threshold,
100 vs 0 hits, lower bound 1.86 against the claim 1 for every seed.

The same audit runs on the weighted-support backend (``support_size=1000``, the least
the engine takes), where a trial costs 150-190 ms against the dense ~100 ms (the
support's fits). There the planted bug is as deterministic as on the dense backend
(the released rounds are the data's marginals whatever the support), so 60 trials per
input (+ 15 for the search; ~25 s a case) suffice: 60 vs 0 hits bound epsilon by 1.30
against the claim 1 at ``alpha = 1e-6``.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.audit import suite
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import RAISED, crosscheck_pipeline
from pmwcm.audit.workload_pipeline import (
    BROKEN_WORKLOAD,
    NoiselessRounds,
    WorkloadBuild,
    WorkloadPipelineMechanism,
    least_n,
    workload_pipeline_case,
    workload_plan_of,
)
from pmwcm.engine.online import OnlinePMW
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.workload import uses_workload

ALPHA = 1e-6
TRIALS = 100
SUPPORT_TRIALS = 60
PARITY = ("x0", "x1", "x2")
NOISELESS = "noiseless workload measurement"


def backend_kind(engine: OnlinePMW) -> str:
    backend = engine.parts.backend
    assert backend is not None
    return backend.kind


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": workload_pipeline_case(),
        "noiseless": workload_pipeline_case(broken=NOISELESS),
        "support": workload_pipeline_case(backend="support"),
        "support noiseless": workload_pipeline_case(broken=NOISELESS, backend="support"),
    }


def mechanism(case: AuditCase) -> WorkloadPipelineMechanism:
    assert isinstance(case.mechanism, WorkloadPipelineMechanism)
    return case.mechanism


def test_the_audited_build_runs_the_workload_rounds(cases: dict[str, AuditCase]) -> None:
    case = cases["correct"]
    m = mechanism(case)
    assert type(m.build) is WorkloadBuild and (case.claimed_epsilon, case.delta) == (1.0, 1e-6)
    assert case.dataset0.n == least_n(1.0) == 40_000 and uses_workload(1.0, case.dataset0.n)
    plan = workload_plan_of(case)
    assert plan is not None and plan.rounds == 5 and len(plan.candidates) == 5
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    labels = [entry.label for entry in engine.ledger.entries]
    # Every round's selection and measurement are charged, as one entry, before any
    # reads the data.
    assert labels == ["prior: noisy 2-way marginals", "prior: workload clique rounds"]
    assert engine.ledger.entries[1].event == plan.event()
    assert len(plan.events()) == 2 * plan.rounds
    measured = [mm.clique for mm in engine.prior_measurements if len(mm.clique) >= 3]
    assert len(measured) == plan.rounds and set(measured) == set(plan.candidates)


def test_every_trial_releases_the_rounds(cases: dict[str, AuditCase], seed: int) -> None:
    m = mechanism(cases["correct"])
    out = m(cases["correct"].dataset1, 4, np.random.default_rng(seed))
    assert not np.any(out[:, : m.codes] == RAISED)
    rounds = out[:, m.start : m.start + len(m.candidates)]
    assert np.all(np.sort(rounds, axis=1) == [1, 2, 3, 4, 5])  # every candidate, in drawn order
    parity = m.candidates.index(PARITY)
    assert np.all(rounds[:, parity] > 0)  # the clique no pair sees is measured
    first = m.start + len(m.candidates) + sum(m.widths[:parity])
    assert not np.any(np.isnan(out[:, first : first + m.widths[parity]]))


def test_the_case_refuses_where_the_rule_would_not_run_the_rounds() -> None:
    with pytest.raises(ValueError, match="workload rounds do not run"):
        workload_pipeline_case(n=4000)


def test_the_control_is_the_real_build_with_noise_free_rounds(cases: dict[str, AuditCase]) -> None:
    case = cases["noiseless"]
    m = mechanism(case)
    assert type(m.build) is NoiselessRounds and BROKEN_WORKLOAD[NOISELESS] is NoiselessRounds
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    rounds = [mm for mm in engine.prior_measurements if len(mm.clique) >= 3]
    assert len(rounds) == 5
    for mm in rounds:
        assert np.array_equal(mm.values, case.dataset0.marginal(mm.clique)) and mm.sigma > 0
    pairs = [mm for mm in engine.prior_measurements if len(mm.clique) == 2]
    assert not any(np.array_equal(mm.values, case.dataset0.marginal(mm.clique)) for mm in pairs)


def test_the_suite_audits_the_case_and_must_catch_its_control() -> None:
    names = [c.name for c in suite.pipeline_cases()]
    assert sum(name.startswith("workload-aware start:") for name in names) == 1
    assert sum(name.startswith("workload-aware start on the support") for name in names) == 1
    controls = {c.name: must for c, must in suite.negative_controls()}
    assert [must for name, must in controls.items() if NOISELESS in name] == [True, True]
    assert sum(NOISELESS in name and "on the support" in name for name in controls) == 1


def test_memoised_accounting_releases_the_same_transcripts(
    cases: dict[str, AuditCase], seed: int
) -> None:
    case = cases["correct"]
    assert crosscheck_pipeline(mechanism(case), case.dataset0, trials=1, seed=seed) == 0


def test_the_workload_pipeline_is_not_flagged(cases: dict[str, AuditCase], seed: int) -> None:
    r = cases["correct"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r


def test_workload_rounds_released_without_noise_are_caught(
    cases: dict[str, AuditCase], seed: int
) -> None:
    r = cases["noiseless"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated and r.epsilon_lower_bound > 1.8, r
    assert (r.count0, r.count1) in ((TRIALS, 0), (0, TRIALS)), r


def test_a_support_trial_runs_the_rounds_on_the_support(cases: dict[str, AuditCase]) -> None:
    case = cases["support"]
    m = mechanism(case)
    assert type(m.build) is WorkloadBuild
    assert (m.config.backend, m.config.support_size) == ("support", MIN_SUPPORT_SIZE)
    plan = workload_plan_of(case)
    assert plan is not None and plan.rounds == 5
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    assert backend_kind(engine) == "support"
    assert isinstance(engine.hypothesis, SupportHistogram)
    assert engine.hypothesis.size == MIN_SUPPORT_SIZE == 1000
    labels = [entry.label for entry in engine.ledger.entries]
    assert labels == ["prior: noisy 2-way marginals", "prior: workload clique rounds"]
    # Every candidate measured and fitted on the support, the four-way one included (the
    # Horner passes).
    measured = [mm.clique for mm in engine.prior_measurements if len(mm.clique) >= 3]
    assert set(measured) == set(plan.candidates) and ("x0", "x1", "x2", "x3") in measured
    table = np.asarray(engine.hypothesis.marginal(PARITY)).reshape(2, 2, 2)
    off_parity = sum(table[a, b, 1 - (a ^ b)] for a in (0, 1) for b in (0, 1))
    assert off_parity < 0.05  # the fit learnt x2 = x0 XOR x1, which no pair shows


def test_the_support_control_is_the_real_build_with_noise_free_rounds(
    cases: dict[str, AuditCase],
) -> None:
    case = cases["support noiseless"]
    m = mechanism(case)
    assert type(m.build) is NoiselessRounds and m.config.backend == "support"
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    assert backend_kind(engine) == "support"
    rounds = [mm for mm in engine.prior_measurements if len(mm.clique) >= 3]
    assert len(rounds) == 5
    for mm in rounds:
        assert np.array_equal(mm.values, case.dataset0.marginal(mm.clique)) and mm.sigma > 0


def test_the_support_workload_pipeline_is_not_flagged(
    cases: dict[str, AuditCase], seed: int
) -> None:
    r = cases["support"].run(trials=SUPPORT_TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r


def test_workload_rounds_released_without_noise_are_caught_on_the_support(
    cases: dict[str, AuditCase], seed: int
) -> None:
    r = cases["support noiseless"].run(
        trials=SUPPORT_TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA
    )
    assert r.violated and r.epsilon_lower_bound > 1.25, r
    assert (r.count0, r.count1) in ((SUPPORT_TRIALS, 0), (0, SUPPORT_TRIALS)), r
