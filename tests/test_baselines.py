"""Contract tests for the baselines (``pmwcm.engine.baselines``).

* :class:`CompositionBaseline` calibrates its noise so that exactly the ``k``
  declared oracle calls compose to ``(epsilon, delta)`` under its accountant (and
  a 1% smaller multiplier would not fit); it spends that budget over ``k``
  calls, refuses call ``k + 1`` before drawing any noise, and refuses a query
  its oracle cannot serve before spending anything.
* :class:`NonPrivateBaseline` answers with the exact minimiser (excess risk ~0),
  and :func:`excess_risk` is ``L_D(theta) - min L_D``, never negative.
"""

from __future__ import annotations

import itertools
import math

import dp_accounting
import numpy as np
import pytest

from conftest import TOY_DOMAIN, RecordingNoise
from pmwcm.engine.baselines import (
    CompositionBaseline,
    NonPrivateBaseline,
    exact_minimum,
    excess_risk,
)
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.solvers import minimize
from pmwcm.mechanisms.accounting import BudgetExceededError, PLDAccountant, ZCDPAccountant
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import (
    NoisyGradientDescent,
    ObjectivePerturbation,
    OracleInput,
    OutputPerturbation,
)
from pmwcm.mechanisms.private_data import PrivateData

QUERIES = [
    CMQuery(loss="logistic", target="y", features=pair)
    for pair in itertools.combinations(("a", "b", "c", "d", "e"), 2)
]


@pytest.mark.parametrize("accountant", ["pld", "zcdp"])
@pytest.mark.parametrize(("k", "epsilon"), [(1, 0.5), (7, 1.0), (300, 2.0)])
def test_composition_calibrates_k_calls_to_the_budget(
    toy_data: PrivateData, seed: int, accountant: str, k: int, epsilon: float
) -> None:
    baseline = CompositionBaseline(
        toy_data,
        epsilon=epsilon,
        delta=1e-6,
        queries=k,
        noise=NumpyNoise(seed=seed),
        accountant=accountant,
    )
    acc = PLDAccountant() if accountant == "pld" else ZCDPAccountant()
    assert isinstance(baseline.ledger.accountant, type(acc))

    def spent(m: float) -> float:
        event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(m), k)
        return acc.epsilon(event, delta=1e-6)

    assert epsilon - 1e-3 <= spent(baseline.noise_level) <= epsilon
    assert spent(0.99 * baseline.noise_level) > epsilon


def test_composition_spends_k_calls_then_refuses(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    k = 5
    baseline = CompositionBaseline(
        toy_data, epsilon=1.0, delta=1e-6, queries=k, noise=recording_noise
    )
    spends = []
    for query in QUERIES[:k]:
        theta = baseline.answer(query)
        assert np.linalg.norm(theta) <= query.radius * (1 + 1e-12)
        spends.append(baseline.ledger.spent_epsilon())
    assert spends == sorted(spends) and len(baseline.ledger.entries) == k
    assert 1.0 - 1e-3 <= baseline.ledger.spent_epsilon() <= 1.0
    draws = len(recording_noise.calls)
    assert draws == k  # one batched Gaussian draw per noisy-GD call
    with pytest.raises(BudgetExceededError):
        baseline.answer(QUERIES[k])
    assert len(recording_noise.calls) == draws and len(baseline.ledger.entries) == k
    # The same query again is a new call, not a free repeat: the baseline has no cache.
    with pytest.raises(BudgetExceededError):
        baseline.answer(QUERIES[0])


def test_composition_refuses_an_unservable_query_before_spending(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    baseline = CompositionBaseline(
        toy_data,
        epsilon=1.0,
        delta=1e-6,
        queries=3,
        noise=recording_noise,
        oracle=OutputPerturbation(),
    )
    with pytest.raises(ValueError, match="l2"):
        baseline.answer(QUERIES[0])
    assert baseline.ledger.entries == () and recording_noise.calls == []
    baseline.answer(CMQuery(loss="logistic", target="y", features=("a",), l2=0.1))
    assert len(baseline.ledger.entries) == 1


def test_composition_validation(toy_data: PrivateData, seed: int) -> None:
    noise = NumpyNoise(seed=seed)
    for bad in (0, -2, 2.5):
        with pytest.raises(ValueError, match="queries must be a positive integer"):
            CompositionBaseline(toy_data, epsilon=1.0, delta=1e-6, queries=bad, noise=noise)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Gaussian"):
        CompositionBaseline(
            toy_data,
            epsilon=1.0,
            delta=1e-6,
            queries=3,
            noise=noise,
            oracle=ObjectivePerturbation(),
        )


def test_composition_answer_is_the_oracle_at_the_calibrated_level(
    toy_data: PrivateData, seed: int
) -> None:
    """Each answer is one oracle call on the real marginal at the calibrated noise level.

    (Accuracy at a huge budget is the oracle's contract, tests/test_oracles.py; the PLD
    calibration itself gets slow above eps ~ 100, so it is not repeated here.)
    """
    oracle = NoisyGradientDescent(steps=50)
    baseline = CompositionBaseline(
        toy_data, epsilon=2.0, delta=1e-6, queries=3, noise=NumpyNoise(seed=seed), oracle=oracle
    )
    replay = NumpyNoise(seed=seed)
    for query in QUERIES[:3]:
        problem = query.compile(TOY_DOMAIN)
        data = OracleInput(
            problem=problem, weights=toy_data.marginal(problem.clique).ravel(), n=toy_data.n
        )
        expected = oracle.answer(data, noise_level=baseline.noise_level, noise=replay)
        np.testing.assert_array_equal(baseline.answer(query), expected)


CATALOGUE = [
    CMQuery(loss="logistic", target="y", features=("a", "c")),
    CMQuery(loss="logistic", target="y", features=("a", "b"), radius=3.0, l2=0.1),
    CMQuery(loss="squared", target="c", features=("a", "y")),
    CMQuery(loss="huber", target="c", features=("y",), loss_param=0.5),
    CMQuery(loss="smoothed_hinge", target="y", features=("a", "b", "c")),
    CMQuery(loss="hinge", target="y", features=("a", "b")),
    CMQuery(loss="quantile", target="c", features=("y", "a"), loss_param=0.8),
    CMQuery(loss="absolute", target="c", features=("y",), radius=0.5),
]


@pytest.mark.parametrize("query", CATALOGUE, ids=lambda q: q.loss)
def test_nonprivate_baseline_has_no_excess_risk(toy_data: PrivateData, query: CMQuery) -> None:
    baseline = NonPrivateBaseline(toy_data)
    theta = baseline.answer(query)
    problem = query.compile(TOY_DOMAIN)
    weights = toy_data.marginal(problem.clique).ravel()
    smooth = problem.smoothness is not None
    tol = 1e-10 if smooth else 1e-6  # what can be certified on the reference side
    reference = minimize(problem, weights, tol=tol, max_iter=2000)
    assert reference.converged
    assert problem.objective(theta, weights) - (reference.value - reference.gap) <= 1e-9 + tol
    if smooth:
        assert excess_risk(problem, weights, theta) <= 1e-9


def test_excess_risk_is_the_objective_gap(toy_data: PrivateData, seed: int) -> None:
    rng = np.random.default_rng(seed)
    problem = QUERIES[0].compile(TOY_DOMAIN)
    weights = toy_data.marginal(problem.clique).ravel()
    best = exact_minimum(problem, weights)
    for _ in range(5):
        theta = rng.normal(size=problem.dim)
        theta *= rng.random() / np.linalg.norm(theta)
        risk = excess_risk(problem, weights, theta)
        assert risk == pytest.approx(problem.objective(theta, weights) - best, abs=1e-12)
        assert risk >= 0
    # At the certified minimiser the risk is at most the certificate, and never negative.
    theta_star = minimize(problem, weights, tol=1e-12, max_iter=2000).theta
    assert 0 <= excess_risk(problem, weights, theta_star) <= 1e-10
    assert math.isfinite(best)
