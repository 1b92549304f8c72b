"""The budget split as an object, the one calibration routine, frozen settings and
named solver budgets (issue 12, item 5)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import dp_accounting
import pytest

from pmwcm.engine.practical import PMWConfig, build_engine, dwork_roth_epsilon_per_run
from pmwcm.engine.settings import (
    DATA_SOLVE_MAX_ITERATIONS,
    HYPOTHESIS_SOLVE,
    NONSMOOTH_HYPOTHESIS_SOLVE,
    PRACTICAL_HYPOTHESIS_SOLVE,
    EngineSettings,
)
from pmwcm.kernels.solvers import DEFAULT_SOLVE, EXACT_BASELINE_SOLVE, SolverBudget
from pmwcm.mechanisms.accounting import (
    BudgetSplit,
    EpsilonDeltaDpEvent,
    PLDAccountant,
    ZCDPAccountant,
    calibrate_gaussian_multiplier,
    calibrate_noise_level,
    calibrate_parameter,
)
from pmwcm.mechanisms.accounting.events import check_budget
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

# --- BudgetSplit ----------------------------------------------------------------------------


def test_split_sums_to_one_and_slices_the_budget() -> None:
    split = BudgetSplit.from_shares(prior=0.4, sparse_vector=0.3)
    assert split.oracle == pytest.approx(0.3)
    assert split.prior_budget(2.0, 1e-6) == (0.8, 0.4e-6)
    assert split.sparse_vector_budget(2.0, 1e-6) == (0.6, 0.3e-6)
    assert sum(split.epsilons(2.0)) == pytest.approx(2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        split.prior = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("shares", "match"),
    [
        ({"prior": 0.5, "sparse_vector": 0.3, "oracle": 0.3}, "sum to one"),
        ({"prior": -0.1, "sparse_vector": 0.6, "oracle": 0.5}, "prior"),
        ({"prior": 0.0, "sparse_vector": 0.0, "oracle": 1.0}, "positive share"),
        ({"prior": 0.5, "sparse_vector": 0.5, "oracle": 0.0}, "positive share"),
        ({"prior": 0.0, "sparse_vector": math.nan, "oracle": 0.5}, "sparse_vector"),
    ],
)
def test_split_validation(shares: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BudgetSplit(**shares)


def test_config_split_follows_the_prior() -> None:
    paid = PMWConfig(epsilon=1.0, delta=1e-6)
    assert (paid.split.prior, paid.split.sparse_vector) == (0.4, 0.3)
    assert paid.split.oracle == pytest.approx(0.3)
    for free in ("uniform", "public"):
        split = PMWConfig(epsilon=1.0, delta=1e-6, prior=free).split
        assert (split.prior, split.sparse_vector) == (0.0, 0.3)
        assert split.oracle == pytest.approx(0.7)


# --- spend never exceeds the budget ---------------------------------------------------------


def _full_spend(engine: Any, config: PMWConfig) -> float:
    """The ledger's epsilon once the sparse vector and all ``T`` oracle calls are spent."""
    events = [e.event for e in engine.ledger.entries]
    events += [
        engine.sparse_vector.privacy_event(),
        dp_accounting.SelfComposedDpEvent(
            config.oracle.privacy_event(engine.oracle_noise_level), config.max_updates
        ),
    ]
    return engine.ledger.accountant.epsilon(
        dp_accounting.ComposedDpEvent(events), delta=config.delta
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"prior": "uniform"},
        {"sparse_vector": "dwork_roth"},
        {"prior": "uniform", "accountant": "zcdp", "sv_fraction": 0.05},
        {"epsilon": 0.3, "sv_fraction": 0.2, "prior_fraction": 0.5},
    ],
    ids=["default", "uniform", "dwork_roth", "zcdp", "small"],
)
def test_spend_never_exceeds_the_budget(
    toy_data: PrivateData, seed: int, overrides: dict[str, Any]
) -> None:
    kwargs: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-6, "max_updates": 5, **overrides}
    # The split build_engine uses: the budget rule's for the default marginal prior.
    config = PMWConfig(**kwargs).resolved_for(toy_data.n, len(toy_data.domain))
    engine = build_engine(toy_data, config, noise=NumpyNoise(seed=seed))
    spent = _full_spend(engine, config)
    assert spent <= config.epsilon
    assert spent >= config.epsilon - 1e-2  # and the calibration is tight
    # The paid prior got exactly its share, charged from the split.
    if config.split.prior > 0:
        (prior_entry,) = engine.ledger.entries
        prior_eps, prior_delta = config.split.prior_budget(config.epsilon, config.delta)
        acc = engine.ledger.accountant
        assert acc.epsilon(prior_entry.event, delta=prior_delta) <= prior_eps


# --- the one calibration routine ------------------------------------------------------------


@pytest.mark.parametrize("acc", [PLDAccountant(), ZCDPAccountant()], ids=["pld", "zcdp"])
def test_gaussian_calibration_fits_and_is_tight(acc: Any) -> None:
    eps, delta, count = 1.0, 1e-6, 10
    m = calibrate_gaussian_multiplier(
        fixed=None, gaussian_count=count, epsilon=eps, delta=delta, accountant=acc
    )

    def total(level: float) -> float:
        event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(level), count)
        return acc.epsilon(event, delta=delta)

    assert total(m) <= eps
    # Within the old routine's relative tolerance (1e-4) of the boundary.
    assert total(m / (1 + 1e-4)) > eps


def test_laplace_calibration_fits_and_is_tight() -> None:
    acc = PLDAccountant()
    fixed = EpsilonDeltaDpEvent(epsilon=0.3)
    b = calibrate_noise_level(
        dp_accounting.LaplaceDpEvent, count=4, fixed=fixed, epsilon=1.0, delta=1e-6, accountant=acc
    )

    def total(level: float) -> float:
        event = dp_accounting.ComposedDpEvent(
            [fixed, dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(level), 4)]
        )
        return acc.epsilon(event, delta=1e-6)

    assert total(b) <= 1.0 < total(b / (1 + 1e-5))


def test_dwork_roth_per_run_fits_and_is_tight() -> None:
    acc = PLDAccountant()
    per_run = dwork_roth_epsilon_per_run(0.3, 10, delta=0.3e-6, accountant=acc)

    def total(eps: float) -> float:
        event = dp_accounting.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=eps), 10)
        return acc.epsilon(event, delta=0.3e-6)

    assert 0.03 <= per_run <= 0.3
    assert total(per_run) <= 0.3 < total(per_run * (1 + 1e-9))
    assert dwork_roth_epsilon_per_run(0.3, 1, delta=0.3e-6, accountant=acc) == 0.3


def test_calibrate_parameter_validates_its_bracket() -> None:
    with pytest.raises(ValueError, match="bracket"):
        calibrate_parameter(
            dp_accounting.LaplaceDpEvent,
            epsilon=1.0,
            delta=1e-6,
            accountant=PLDAccountant(),
            bracket=(2.0, 1.0),
            rtol=1e-6,
        )


# --- frozen settings and named solver budgets ------------------------------------------------


def test_engine_settings_are_frozen_and_built_by_the_config() -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, after_halt="synthetic", sweeps=1)
    settings = config.engine_settings(learning_rate=2.0, threshold=3.0)
    assert isinstance(settings, EngineSettings)
    assert (settings.max_updates, settings.learning_rate, settings.threshold) == (10, 2.0, 3.0)
    assert (settings.after_halt, settings.sweeps) == ("synthetic", 1)
    assert settings.solver_tol == config.solver_tol == PRACTICAL_HYPOTHESIS_SOLVE.tol
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.threshold = 0.0  # type: ignore[misc]
    changed = dataclasses.replace(settings, absolute_threshold=-1.0)
    assert changed.absolute_threshold == -1.0 and settings.absolute_threshold is None


def test_named_solver_budgets() -> None:
    defaults = EngineSettings(max_updates=1, learning_rate=1.0, threshold=0.0)
    assert defaults.solver_tol == HYPOTHESIS_SOLVE.tol
    assert defaults.nonsmooth_tol == NONSMOOTH_HYPOTHESIS_SOLVE.tol
    assert defaults.max_solver_iterations == DATA_SOLVE_MAX_ITERATIONS
    assert (DEFAULT_SOLVE.tol, DEFAULT_SOLVE.max_iter) == (1e-9, 500)
    assert (EXACT_BASELINE_SOLVE.tol, EXACT_BASELINE_SOLVE.max_iter) == (1e-10, 2000)
    with pytest.raises(ValueError, match="tol"):
        SolverBudget(tol=0.0, max_iter=10)
    with pytest.raises(ValueError, match="max_iter"):
        SolverBudget(tol=1e-6, max_iter=0)


@pytest.mark.parametrize(
    ("epsilon", "delta", "match"),
    [
        (0.0, 1e-6, "epsilon must be positive and finite, got epsilon=0.0"),
        (-1.0, 1e-6, "epsilon=-1.0"),
        (float("nan"), 1e-6, "epsilon=nan"),
        (float("inf"), 1e-6, "epsilon=inf"),
        (True, 1e-6, "epsilon must be a number"),
        (1.0, 0.0, r"delta must lie in \(0, 1\), got delta=0.0"),
        (1.0, 1.0, "delta=1.0"),
        (1.0, "0.1", "delta must be a number"),
    ],
)
def test_one_budget_check_names_the_bad_value(epsilon: Any, delta: Any, match: str) -> None:
    """``PMWConfig`` and the AIM/MST prior share :func:`check_budget`."""
    with pytest.raises(ValueError, match=match):
        check_budget(epsilon, delta)
    with pytest.raises(ValueError, match=match):
        PMWConfig(epsilon=epsilon, delta=delta)
