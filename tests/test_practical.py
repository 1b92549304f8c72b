"""Contract tests for practical mode (``pmwcm.engine.practical``).

Configuration, budget split, accuracy:

* :class:`PMWConfig` validates every field with a message naming it, and fills
  the prior-dependent defaults (``T``, ``k``).
* :func:`build_engine` splits the budget so that the prior (if any), the sparse
  vector and ``T`` oracle calls compose to the user's ``(epsilon, delta)``
  exactly (within the PLD grid and the calibration's relative precision) under
  the configured accountant, for both sparse vectors, both query kinds, and an
  existing ledger that already paid for something; the sparse vector's own
  split, the threshold rule and the learning rate follow the documented rules.
* On the bundled Adult data (binary schema), 1,000 random logistic queries at
  ``eps = 1``, ``delta = 1e-6`` (default configuration, ``after_halt =
  "synthetic"``) get a lower mean excess risk from PMW than from the
  composition baseline at the same budget (``test_pmw_beats_composition_on_adult``,
  marked slow: ~9 s on a quiet 2-core machine, ~60 s wall at load 8). The query
  stream is drawn with seed ``[1, seed]``, never the seed-0 stream the
  defaults were chosen on. Measured (seeds 0-3 and 42): PMW mean 3.9e-5 to
  4.7e-5 (max <= 6.7e-4, 0-1 updates) against composition 5.0e-3 to 5.1e-3
  (max ~0.012), a 100x margin, so the plain comparison of two means is stable.
  That margin is the marginal prior's: with ``prior="uniform"`` (the paper's
  start, T = 50) PMW's mean was 0.0042-0.0081 (max 0.07-0.12) against the same
  composition 0.0050, worse on 4 of seeds 0-5 -- the sparse vector's threshold
  (~0.085 in excess risk at this n) lets large hypothesis errors through, as
  docs/design.md section 6 found. This test therefore checks the default product,
  not the paper's uniform start.
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
import pytest

from conftest import TOY_DOMAIN, RecordingNoise
from pmwcm.data.bundled import load_adult
from pmwcm.engine.baselines import CompositionBaseline, exact_minimum
from pmwcm.engine.practical import (
    AccountantName,
    PMWConfig,
    PriorName,
    SparseVectorName,
    build_engine,
    default_threshold,
    dwork_roth_epsilon_per_run,
    make_accountant,
)
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.accounting import (
    EpsilonDeltaDpEvent,
    PLDAccountant,
    PrivacyLedger,
    ZCDPAccountant,
    calibrate_noise_level,
)
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import OutputPerturbation
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse


def total_epsilon(engine: Any, config: PMWConfig, *, kind: str = "cm") -> float:
    """What the ledger would report once the sparse vector and all ``T`` oracle calls are spent."""
    event_for = config.oracle.privacy_event if kind == "cm" else dp_accounting.LaplaceDpEvent
    events = [e.event for e in engine.ledger.entries]
    events += [
        engine.sparse_vector.privacy_event(),
        dp_accounting.SelfComposedDpEvent(event_for(engine.oracle_noise_level), config.max_updates),
    ]
    return engine.ledger.accountant.epsilon(
        dp_accounting.ComposedDpEvent(events), delta=config.delta
    )


# --- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("epsilon", 0.0),
        ("epsilon", -1.0),
        ("epsilon", math.inf),
        ("delta", 0.0),
        ("delta", 1.0),
        ("max_updates", -1),
        ("max_updates", 2.5),
        ("sparse_vector", "dwork"),
        ("sv_fraction", 0.0),
        ("sv_fraction", 1.0),
        ("expected_queries", -3),
        ("sensitivity_factor", 1.0),
        ("after_halt", "answer"),
        ("accountant", "rdp"),
        ("prior", "census"),
        ("prior_fraction", 0.8),  # must stay below 1 - sv_fraction = 0.7
        ("prior_fraction", 0.0),
    ],
)
def test_config_validation_names_the_field(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-6}
    kwargs[field] = value
    with pytest.raises(ValueError, match=field):
        PMWConfig(**kwargs)


def test_config_defaults_follow_the_prior() -> None:
    marginal = PMWConfig(epsilon=1.0, delta=1e-6)
    assert (marginal.prior, marginal.max_updates, marginal.expected_queries) == (
        "marginals",
        10,
        10_000,
    )
    uniform = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform")
    assert (uniform.max_updates, uniform.expected_queries) == (50, 1000)
    assert PMWConfig(epsilon=1.0, delta=1e-6, max_updates=7).max_updates == 7
    # The uniform prior ignores prior_fraction (nothing is measured).
    PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", prior_fraction=0.9)


@pytest.mark.parametrize(("announced", "expected"), [(3, 1000), (1000, 1000), (2500, 2500)])
def test_an_announced_stream_sets_the_threshold_rules_k(announced: int, expected: int) -> None:
    """k in ``b ln(max(e, k / T))`` is the announced stream's length (at least 1,000: a
    short file keeps rare noise updates), so a 1,000-query stream gets a threshold
    ln(100) / ln(1000) = 2/3 of the unannounced one; an explicit k is kept."""
    from pmwcm.engine.practical import default_threshold

    told = PMWConfig(epsilon=1.0, delta=1e-6, announced_queries=announced)
    assert told.expected_queries == expected
    unannounced = PMWConfig(epsilon=1.0, delta=1e-6)
    ratio = default_threshold(1.0, told) / default_threshold(1.0, unannounced)
    assert ratio == pytest.approx(math.log(expected / 10) / math.log(10_000 / 10))
    kept = PMWConfig(epsilon=1.0, delta=1e-6, announced_queries=announced, expected_queries=7)
    assert kept.expected_queries == 7


# --- the budget split ------------------------------------------------------------------------


# zCDP converts the pure-DP sparse vector lossily (eps >= eps_sv sqrt(2 log(1/delta))):
# it fits only with a small sv_fraction and a large budget.
SPLITS = [
    ("lyu_su_li", "pld", 0.3, 0.5),
    ("lyu_su_li", "pld", 0.3, 4.0),
    ("dwork_roth", "pld", 0.3, 0.5),
    ("dwork_roth", "pld", 0.3, 4.0),
    ("lyu_su_li", "zcdp", 0.1, 4.0),
]


@pytest.mark.parametrize("prior", ["uniform", "marginals"])
@pytest.mark.parametrize(("sparse_vector", "accountant", "sv_fraction", "epsilon"), SPLITS)
def test_build_engine_splits_exactly_the_budget(
    toy_data: PrivateData,
    seed: int,
    prior: PriorName,
    sparse_vector: SparseVectorName,
    accountant: AccountantName,
    sv_fraction: float,
    epsilon: float,
) -> None:
    config = PMWConfig(
        epsilon=epsilon,
        delta=1e-6,
        max_updates=6,
        prior=prior,
        prior_fraction=0.2,
        sparse_vector=sparse_vector,
        accountant=accountant,
        sv_fraction=sv_fraction,
    )
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    assert [e.label for e in engine.ledger.entries] == (
        ["prior: noisy 2-way marginals"] if prior == "marginals" else []
    )
    total = total_epsilon(engine, config)
    assert epsilon - 1e-3 <= total <= epsilon
    # A 1% smaller noise level would not fit: the calibration is tight.
    tighter = dp_accounting.ComposedDpEvent(
        [
            *(e.event for e in engine.ledger.entries),
            engine.sparse_vector.privacy_event(),
            dp_accounting.SelfComposedDpEvent(
                config.oracle.privacy_event(0.99 * engine.oracle_noise_level), 6
            ),
        ]
    )
    assert engine.ledger.accountant.epsilon(tighter, delta=1e-6) > epsilon


def test_lyu_su_li_split(toy_data: PrivateData, seed: int) -> None:
    config = PMWConfig(epsilon=2.0, delta=1e-6, max_updates=8, prior="uniform")
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    sv = engine.sparse_vector
    assert isinstance(sv, LyuSuLiSparse)
    assert sv.epsilon_threshold + sv.epsilon_queries <= 0.3 * 2.0
    assert sv.epsilon_threshold + sv.epsilon_queries == pytest.approx(0.6, rel=1e-12)
    assert sv.epsilon_queries / sv.epsilon_threshold == pytest.approx(16 ** (2 / 3))
    b = 2 * 8 / sv.epsilon_queries  # query-noise scale in sensitivities
    assert engine.settings.threshold == pytest.approx(b * math.log(1000 / 8))
    assert engine.settings.threshold == pytest.approx(default_threshold(b, config))


def test_dwork_roth_split(toy_data: PrivateData, seed: int) -> None:
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, max_updates=5, prior="uniform", sparse_vector="dwork_roth"
    )
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    sv = engine.sparse_vector
    assert isinstance(sv, DworkRothSparse)
    acc = PLDAccountant()

    def sv_epsilon(per_run: float) -> float:
        event = dp_accounting.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=per_run), 5)
        return acc.epsilon(event, delta=0.3e-6)

    assert sv_epsilon(sv.epsilon_per_run) <= 0.3
    assert sv_epsilon(sv.epsilon_per_run * 1.001) > 0.3
    assert sv.epsilon_per_run == dwork_roth_epsilon_per_run(0.3, 5, delta=0.3e-6, accountant=acc)
    assert engine.settings.threshold == pytest.approx(4 / sv.epsilon_per_run * math.log(200))


def test_threshold_rule_floors_the_log_at_one(toy_data: PrivateData, seed: int) -> None:
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, max_updates=10, expected_queries=20, prior="uniform"
    )
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    sv = engine.sparse_vector
    assert isinstance(sv, LyuSuLiSparse)
    assert engine.settings.threshold == pytest.approx(2 * 10 / sv.epsilon_queries)  # ln e = 1


def test_explicit_settings_pass_through(toy_data: PrivateData, seed: int) -> None:
    config = PMWConfig(
        epsilon=1.0,
        delta=1e-6,
        max_updates=9,
        prior="uniform",
        learning_rate=None,
        threshold=12.5,
        sensitivity_factor=3.0,
        solver_tol=1e-7,
        sweeps=0,
        after_halt="synthetic",
    )
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    s = engine.settings
    assert s.learning_rate == pytest.approx(math.sqrt(TOY_DOMAIN.log_size / 9))
    assert (s.max_updates, s.threshold, s.sensitivity_factor, s.solver_tol) == (9, 12.5, 3.0, 1e-7)
    assert (s.sweeps, s.after_halt) == (0, "synthetic")
    assert engine.sparse_vector.cutoff == 9


def test_linear_kind_calibrates_laplace_answers(toy_data: PrivateData, seed: int) -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, max_updates=7, prior="uniform")
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed), kind="linear")
    assert 1.0 - 1e-3 <= total_epsilon(engine, config, kind="linear") <= 1.0
    with pytest.raises(ValueError, match="kind"):
        build_engine(toy_data, config, noise=NumpyNoise(seed=seed), kind="quantum")


def test_existing_ledger_is_counted(toy_data: PrivateData, seed: int) -> None:
    """A prior paid from the same ledger shrinks what the oracles get, to the same total."""
    config = PMWConfig(epsilon=1.0, delta=1e-6, max_updates=5, prior="uniform")
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-6, accountant=make_accountant("pld"))
    ledger.spend(dp_accounting.GaussianDpEvent(12.0), label="someone's prior")
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed), ledger=ledger)
    fresh = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    assert engine.ledger is ledger
    assert engine.oracle_noise_level > fresh.oracle_noise_level
    assert 1.0 - 1e-3 <= total_epsilon(engine, config) <= 1.0


def test_mismatched_ledger_is_rejected(toy_data: PrivateData, seed: int) -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform")
    for eps, delta, accountant in [
        (0.5, 1e-6, PLDAccountant()),
        (1.0, 1e-5, PLDAccountant()),
        (1.0, 1e-6, ZCDPAccountant()),
    ]:
        ledger = PrivacyLedger(epsilon=eps, delta=delta, accountant=accountant)
        with pytest.raises(ValueError, match="ledger"):
            build_engine(toy_data, config, noise=NumpyNoise(seed=seed), ledger=ledger)


def test_marginal_prior_is_paid_before_it_is_measured(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-6, accountant=PLDAccountant())
    recording_noise.probe = lambda: len(ledger.entries)
    config = PMWConfig(epsilon=1.0, delta=1e-6, max_updates=4, budget_rule="fixed")
    engine = build_engine(toy_data, config, noise=recording_noise, ledger=ledger)
    assert recording_noise.calls, "the prior draws its noise at build time"
    assert all(d.probe == 1 for d in recording_noise.calls)
    # Calibrated on its own at prior_fraction * (epsilon, delta) (the fixed 40% here;
    # tests/test_budget_rule.py checks the budget rule's shares).
    prior_eps = ledger.accountant.epsilon(ledger.spent_event(), delta=0.4e-6)
    assert 0.4 - 1e-3 <= prior_eps <= 0.4
    values = engine.hypothesis.to_array()
    assert values.sum() == pytest.approx(1.0) and np.all(values >= 0)


def test_calibrate_noise_level_refuses_an_exhausted_budget() -> None:
    spent = dp_accounting.LaplaceDpEvent(0.5)  # pure 2-DP
    with pytest.raises(ValueError, match="exhaust"):
        calibrate_noise_level(
            dp_accounting.LaplaceDpEvent,
            count=3,
            fixed=spent,
            epsilon=1.0,
            delta=1e-6,
            accountant=PLDAccountant(),
        )


def test_output_perturbation_engine_calibrates_its_gaussian(
    toy_data: PrivateData, seed: int
) -> None:
    config = PMWConfig(
        epsilon=2.0, delta=1e-6, max_updates=4, prior="uniform", oracle=OutputPerturbation()
    )
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    assert 2.0 - 1e-3 <= total_epsilon(engine, config) <= 2.0


# --- accuracy on Adult --------------------------------------------------------------------------


@pytest.mark.slow
def test_pmw_beats_composition_on_adult(seed: int) -> None:
    adult = load_adult()
    data = PrivateData.from_records(adult.domain, adult.records)
    k, epsilon, delta = 1000, 1.0, 1e-6
    # Stream seed [1, seed]: never the seed-0 stream that chose the defaults.
    queries = random_queries(
        adult.domain, k, rng=np.random.default_rng([1, seed]), losses=("logistic",)
    )
    engine = build_engine(
        data,
        PMWConfig(epsilon=epsilon, delta=delta, after_halt="synthetic"),
        noise=NumpyNoise(seed=seed),
    )
    composition = CompositionBaseline(
        data, epsilon=epsilon, delta=delta, queries=k, noise=NumpyNoise(seed=seed + 10_000)
    )
    pmw, comp = np.empty(k), np.empty(k)
    for i, query in enumerate(queries):
        problem = query.compile(adult.domain)
        weights = data.marginal(problem.clique).ravel()
        best = exact_minimum(problem, weights)
        pmw[i] = problem.objective(engine.answer(query).value, weights) - best
        comp[i] = problem.objective(composition.answer(query), weights) - best
    assert engine.ledger.spent_epsilon() <= epsilon
    assert epsilon - 1e-3 <= composition.ledger.spent_epsilon() <= epsilon
    assert pmw.min() >= 0 and comp.min() >= 0
    print(
        f"\nAdult k={k} eps={epsilon} seed={seed}: PMW mean {pmw.mean():.5f} max {pmw.max():.4f}"
        f" (updates {len(engine.updates)}); composition mean {comp.mean():.5f} max {comp.max():.4f}"
    )
    assert pmw.mean() < comp.mean()


def test_adult_query_stream_is_not_the_tuning_stream(seed: int) -> None:
    adult = load_adult()
    ours = random_queries(
        adult.domain, 5, rng=np.random.default_rng([1, seed]), losses=("logistic",)
    )
    tuning = random_queries(adult.domain, 5, rng=np.random.default_rng(0), losses=("logistic",))
    assert ours != tuning
    assert all(isinstance(q, CMQuery) and q.loss == "logistic" for q in ours)
