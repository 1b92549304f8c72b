"""Theory mode (``pmwcm.engine.theory``).

The paper's constants and accuracy theorem on a tiny universe.

* :class:`TheoryParameters` against hand-computed values of the figure's
  ``T, eta, eps0, delta0, alpha0, beta0`` and Theorem "putittogetheronline"'s
  ``n``, on an example with round numbers and on the Adult example of
  docs/design.md section 6 (``T ~ 10^6``, ``n ~ 9.5 x 10^8``).
* :func:`build_theory_engine` wires them in (Dwork-Roth sparse vector with ``T``
  runs, threshold ``3 alpha / 4`` in excess-risk units, sensitivity ``3 S / n``,
  classical-Gaussian oracle calls) and refuses ``n`` below the theorem's.
* **The theorem itself**: on ``|X| = 8`` (three binary attributes) with a true
  histogram ``D`` at ``n = required_n`` (:class:`PrivateData` from a histogram),
  the engine answers ``k = 24`` logistic / squared / Huber queries with max
  excess risk ``<= alpha`` in each of ``RUNS`` independent runs (fresh ``D``,
  noise and query order). The theorem promises failure probability ``<= beta =
  0.1`` per run; the test fails if more than ``MAX_FAILURES`` of ``RUNS`` runs
  fail, which under the theorem has probability ``P(Bin(RUNS, 0.1) >
  MAX_FAILURES) < 1e-3``. (Measured: 0 failures; the paper's constants are
  conservative.)
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from pmwcm.engine.baselines import excess_risk
from pmwcm.engine.online import EngineHalted, OnlinePMW
from pmwcm.engine.theory import TheoryParameters, build_theory_engine, theory_oracle_event
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent, PLDAccountant
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import DworkRothSparse

TINY = Domain.from_sizes({"a": 2, "b": 2, "c": 2})
RUNS, MAX_FAILURES, BETA = 16, 6, 0.1


def tiny_family() -> list[CMQuery]:
    """24 distinct queries with scale S <= 2 (R B G: logistic 1*1*1, squared 0.5*1*1.5)."""
    family = []
    for target in "abc":
        others = tuple(x for x in "abc" if x != target)
        family += [
            CMQuery(loss="logistic", target=target, features=others),
            CMQuery(loss="logistic", target=target, features=others[:1]),
            CMQuery(loss="logistic", target=target, features=others[1:]),
            CMQuery(loss="logistic", target=target, features=others, l2=0.1),
            CMQuery(loss="logistic", target=target, features=others, intercept=False),
            CMQuery(loss="squared", target=target, features=others, radius=0.5),
            CMQuery(loss="squared", target=target, features=others[:1], radius=0.5),
            CMQuery(loss="huber", target=target, features=others, loss_param=0.5),
        ]
    return family


# --- the constants ------------------------------------------------------------------------


def test_parameters_round_numbers() -> None:
    """``S = 1, log|X| = 1, alpha = 1``; ``delta = 4/e^2`` so ``log(4/delta) = 2``;
    ``beta = 8/e^3`` with ``k = 1`` so ``log(8k/beta) = 3``."""
    delta, beta = 4 * math.exp(-2), 8 * math.exp(-3)
    p = TheoryParameters(
        epsilon=1.0, delta=delta, alpha=1.0, beta=beta, k=1, scale=1.0, log_size=1.0
    )
    assert p.max_updates == 64  # 64 S^2 log|X| / alpha^2
    assert p.learning_rate == pytest.approx(1 / 8)  # eta S = sqrt(log|X| / T)
    assert p.oracle_epsilon == pytest.approx(1 / 32)  # eps / sqrt(8 * 64 * 2)
    assert p.oracle_delta == pytest.approx(delta / 256)  # delta / 4T
    assert p.oracle_alpha == 0.25
    assert p.oracle_beta == pytest.approx(beta / 128)  # beta / 2T
    assert p.required_n() == pytest.approx(4096 * math.sqrt(2) * 3)  # 17,377.6
    # Dwork-Roth Thm 3.28 at (eps/2, delta/2): (1/2) / sqrt(8 * 64 * log(2/delta)), log = 2 - ln 2.
    assert p.sparse_vector_epsilon_per_run == pytest.approx(
        0.5 / math.sqrt(512 * (2 - math.log(2)))
    )
    # Classical Gaussian mechanism at (eps0, delta0): sqrt(2 log(1.25/delta0)) / eps0.
    assert p.oracle_noise_multiplier == pytest.approx(
        32 * math.sqrt(2 * math.log(1.25 * 256 / delta))
    )
    event = theory_oracle_event(p)
    assert isinstance(event, EpsilonDeltaDpEvent)
    assert (event.epsilon, event.delta) == (p.oracle_epsilon, p.oracle_delta)


def test_parameters_adult_example_of_the_design() -> None:
    """docs/design.md section 6: alpha = 0.05, k = 1,000 on Adult needs n ~ 9.5e8 (T ~ 10^6)."""
    log_size = 14 * math.log(2)  # 9.70406...
    p = TheoryParameters(
        epsilon=1.0, delta=1e-6, alpha=0.05, beta=0.05, k=1000, scale=2.0, log_size=log_size
    )
    assert p.max_updates == 993_696  # ceil(64 * 4 * 9.70406 / 0.0025) = ceil(993,695.8)
    assert p.learning_rate == pytest.approx(math.sqrt(log_size / 993_696))
    assert p.oracle_epsilon == pytest.approx(1 / math.sqrt(8 * 993_696 * math.log(4e6)))
    assert p.oracle_delta == pytest.approx(1e-6 / (4 * 993_696))
    assert p.oracle_alpha == pytest.approx(0.0125)
    assert p.oracle_beta == pytest.approx(0.05 / (2 * 993_696))
    assert p.required_n() == pytest.approx(953_821_804, rel=1e-8)
    # The Theorem's n is the accuracy Claim's 512 sqrt(T log(4/delta)) log(8k/beta) / (eps alpha)
    # (T unrounded) times S: the Claim's expression leaves out the S of the sensitivity 3S/n.
    t = 64 * 4 * log_size / 0.05**2
    claim = 512 * math.sqrt(t * math.log(4e6)) * math.log(8000 / 0.05) / 0.05
    assert p.required_n() == pytest.approx(2.0 * claim)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("epsilon", 0.0),
        ("alpha", -1.0),
        ("scale", math.inf),
        ("log_size", 0.0),
        ("delta", 1.0),
        ("beta", 0.0),
        ("k", 0),
    ],
)
def test_parameter_validation_names_the_field(field: str, value: float) -> None:
    kwargs = {
        "epsilon": 1.0,
        "delta": 1e-6,
        "alpha": 0.1,
        "beta": 0.1,
        "k": 10,
        "scale": 2.0,
        "log_size": 1.0,
    }
    kwargs[field] = value
    with pytest.raises(ValueError, match=field):
        TheoryParameters(**kwargs)  # type: ignore[arg-type]


# --- the engine ---------------------------------------------------------------------------


def params(alpha: float = 0.2, k: int = 24, epsilon: float = 1.0) -> TheoryParameters:
    return TheoryParameters(
        epsilon=epsilon,
        delta=1e-6,
        alpha=alpha,
        beta=BETA,
        k=k,
        scale=2.0,
        log_size=TINY.log_size,
    )


def true_data(rng: np.random.Generator, n: int) -> PrivateData:
    hist = DenseHistogram(TINY, rng.dirichlet(np.full(TINY.size, 0.7)).reshape(TINY.shape))
    return PrivateData(domain=TINY, n=n, histogram=hist)


def test_engine_uses_the_papers_constants(seed: int) -> None:
    p = params()
    data = true_data(np.random.default_rng(seed), math.ceil(p.required_n()))
    engine = build_theory_engine(data, p, noise=NumpyNoise(seed=seed))
    s = engine.settings
    assert s.max_updates == p.max_updates == 13_309
    assert s.learning_rate == p.learning_rate
    assert s.absolute_threshold == pytest.approx(0.75 * p.alpha)
    assert s.sensitivity_factor == 3.0 and s.after_halt == "refuse"
    sv = engine.sparse_vector
    assert isinstance(sv, DworkRothSparse)
    assert sv.cutoff == p.max_updates and sv.epsilon_per_run == p.sparse_vector_epsilon_per_run
    assert engine.oracle_noise_level == p.oracle_noise_multiplier
    assert (engine.ledger.epsilon, engine.ledger.delta) == (1.0, 1e-6)
    assert isinstance(engine.ledger.accountant, PLDAccountant)


def test_engine_refuses_too_little_data(seed: int) -> None:
    p = params()
    needed = math.ceil(p.required_n())
    rng = np.random.default_rng(seed)
    with pytest.raises(ValueError, match="Theory mode needs n >="):
        build_theory_engine(true_data(rng, needed - 1), p, noise=NumpyNoise(seed=seed))
    build_theory_engine(true_data(rng, needed), p, noise=NumpyNoise(seed=seed))
    build_theory_engine(true_data(rng, 100), p, noise=NumpyNoise(seed=seed), enforce_n=False)


def test_engine_refuses_mismatched_or_infeasible_parameters(seed: int) -> None:
    rng = np.random.default_rng(seed)
    wrong = TheoryParameters(
        epsilon=1.0, delta=1e-6, alpha=0.2, beta=0.1, k=24, scale=2.0, log_size=4 * math.log(2)
    )
    with pytest.raises(ValueError, match="log_size"):
        build_theory_engine(true_data(rng, 10**9), wrong, noise=NumpyNoise(seed=seed))
    loose = params(alpha=10.0, epsilon=30.0)  # T = 6, eps0 = 30 / sqrt(48 log 4e6) > 1
    assert loose.oracle_epsilon >= 1
    with pytest.raises(ValueError, match="eps0 < 1"):
        build_theory_engine(true_data(rng, 10**9), loose, noise=NumpyNoise(seed=seed))


def run_once(rng: np.random.Generator, p: TheoryParameters, noise_seed: int) -> tuple[float, int]:
    """One run of the paper's algorithm on a fresh ``D``: max excess risk and updates made."""
    data = true_data(rng, math.ceil(p.required_n()))
    engine = build_theory_engine(data, p, noise=NumpyNoise(seed=noise_seed))
    family = tiny_family()
    worst = 0.0
    for j in rng.permutation(len(family)):
        query = family[j]
        answer = engine.answer(query)
        problem = query.compile(TINY)
        risk = excess_risk(problem, data.marginal(problem.clique).ravel(), answer.value)
        worst = max(worst, risk)
    assert engine.ledger.spent_epsilon() <= p.epsilon
    return worst, len(engine.updates)


def test_theorem_alpha_beta_accuracy_on_a_tiny_universe(seed: int) -> None:
    p = params(alpha=0.2, k=len(tiny_family()))
    rng = np.random.default_rng([seed, 7])
    results = [run_once(rng, p, noise_seed=seed * 1000 + r) for r in range(RUNS)]
    failures = sum(worst > p.alpha for worst, _ in results)
    assert stats.binom.sf(MAX_FAILURES, RUNS, BETA) < 1e-3  # the false-failure probability
    assert failures <= MAX_FAILURES, results
    # Not vacuous: the uniform start is wrong for this family, so updates happen.
    assert sum(updates for _, updates in results) > 0
    assert max(worst for worst, _ in results) > 0


def test_theory_engine_refuses_after_t_updates(seed: int) -> None:
    """With ``enforce_n=False`` and a generous alpha, T is tiny and the halt is reached."""
    p = params(alpha=2.5)
    assert p.max_updates == 86  # ceil(64 * 4 * 3 ln 2 / 6.25)
    data = true_data(np.random.default_rng(seed), 10**9)
    engine = build_theory_engine(data, p, noise=NumpyNoise(seed=seed), enforce_n=False)
    # every query crosses: force the updates
    crossing = replace(engine.settings, absolute_threshold=-1e9)
    engine = OnlinePMW.from_parts(replace(engine.parts, settings=crossing), state=engine.state())
    queries = [
        CMQuery(loss="logistic", target="a", features=("b", "c"), radius=r)
        for r in np.linspace(0.1, 1.0, p.max_updates)
    ]
    for q in queries:
        assert engine.answer(q).source == "oracle"
    assert engine.halted
    with pytest.raises(EngineHalted):
        engine.answer(CMQuery(loss="logistic", target="b", features=("a",)))
    assert engine.ledger.spent_epsilon() <= p.epsilon
