"""Contract tests for the online PMW engine (``pmwcm.engine.online``) and its CM rounds.

What is pinned here (docs/design.md section 3, the issue's "what must be shown"):

* the **sign of the update**: one update lowers ``<u, Dhat>`` (the paper's
  literal ``exp(+eta u)`` raises it), and with the exact minimiser as the
  private answer the query's error on the new hypothesis drops;
* the paper's Claim "potential drop" on every update of a real (noisy) run:
  ``<u, Dhat_t> >= 0`` (first-order optimality) and ``<u, Dhat_t - D> >=
  L_D(theta_hat) - L_D(theta_priv)`` (convexity), up to the solver's ``tau``;
* **halting**: after ``T`` updates, refusal (``EngineHalted``) or ``"synthetic"``
  answers from the final hypothesis, with no ledger entry and no noise drawn;
* **repeats** are answered from the released value: same answer, ``repeated``,
  no ledger change, no noise (a recording noise double sees every draw);
* **bad queries** raise before any ledger entry or noise draw;
* **the ledger**: never over budget, exactly the budget after ``T`` updates
  (within the PLD grid), and every draw happens after its event was paid;
* the answers' ``source``/``updates``/``epsilon_spent`` fields agree with the
  ledger and the update history; the hypothesis stays on the simplex; the prior
  and the sparse vector's cutoff must match the engine.

Engines are built through :func:`pmwcm.engine.practical.build_engine` on the toy data
of ``conftest.py`` with the uniform prior. ``ALWAYS`` / ``NEVER`` thresholds
(``-1e12`` / ``1e12`` sensitivities) make the sparse vector's answer certain
whatever its Laplace noise, so these tests are deterministic for every seed.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import dp_accounting
import numpy as np
import pytest

from conftest import TOY_DOMAIN, RecordingNoise, toy_records
from pmwcm.engine.baselines import excess_risk
from pmwcm.engine.online import Answer, EngineHalted, OnlinePMW, query_key
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.rounds import CMRound
from pmwcm.engine.settings import AfterHalt, EngineSettings
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fixed_budget import plan_solve
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import CMQuery, QueryError
from pmwcm.kernels.solvers import minimize
from pmwcm.mechanisms.accounting import PLDAccountant, PrivacyLedger
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import NoisyGradientDescent, OracleInput, OutputPerturbation
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import LyuSuLiSparse

ALWAYS = -1e12  # threshold (in sensitivities) every query crosses
NEVER = 1e12  # threshold no query crosses

#: Ten distinct logistic queries on the toy domain (target y, two features each).
QUERIES = [
    CMQuery(loss="logistic", target="y", features=pair)
    for pair in itertools.combinations(("a", "b", "c", "d", "e"), 2)
]


def make_engine(
    data: PrivateData,
    noise: Any,
    *,
    max_updates: int = 3,
    threshold: float | None = ALWAYS,
    after_halt: AfterHalt = "refuse",
    **config: Any,
) -> OnlinePMW:
    cfg = PMWConfig(
        epsilon=config.pop("epsilon", 1.0),
        delta=config.pop("delta", 1e-6),
        max_updates=max_updates,
        threshold=threshold,
        after_halt=after_halt,
        prior=config.pop("prior", "uniform"),
        **config,
    )
    return build_engine(data, cfg, noise=noise)


def snapshot(engine: OnlinePMW, noise: RecordingNoise) -> tuple[int, int, int, float]:
    """What must not change when nothing is spent."""
    return (
        len(engine.ledger.entries),
        len(noise.calls),
        engine.sparse_vector.positives,
        engine.ledger.spent_epsilon(),
    )


def clique_inner(round_: CMRound, u: FloatArray, hist: Histogram) -> float:
    """``<u, H>`` for ``u`` living on the round's clique."""
    return float(u @ hist.marginal(round_.clique).ravel())


class ExactOracle:
    """A (non-private) oracle double returning the exact minimiser on ``D``."""

    name = "exact"

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        return dp_accounting.GaussianDpEvent(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        return None

    def answer(self, data: OracleInput, *, noise_level: float, noise: Any) -> FloatArray:
        return minimize(data.problem, data.weights, tol=1e-12, max_iter=1000).theta


# --- the sign of the update -------------------------------------------------------------


def test_update_moves_hypothesis_against_u_and_lowers_the_error() -> None:
    """Constructed example: ``D`` has ``y`` following ``a``; ``Dhat`` starts uniform.

    ``theta_hat = 0`` (symmetry), ``theta_priv`` = the exact minimiser on ``D``. The
    engine's update ``exp(-eta u)`` lowers ``<u, Dhat>`` and the excess risk of the
    new hypothesis answer on ``D``; the figure's literal ``exp(+eta u)`` raises both.
    """
    domain = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
    d = np.array([[[0.20, 0.05], [0.15, 0.05]], [[0.05, 0.20], [0.05, 0.25]]])
    problem = CMQuery(loss="logistic", target="y", features=("a", "b")).compile(domain)
    weights = d.ravel() / d.sum()
    for learning_rate in (0.25, 1.0, 4.0):
        round_ = CMRound(
            problem=problem,
            oracle=NoisyGradientDescent(),
            hypothesis_tol=1e-10,
            data_solve=plan_solve(problem, gap=1e-8, max_iterations=10**6),
            sensitivity_factor=2.0,
            learning_rate=learning_rate,
        )
        start = DenseHistogram.uniform(domain)
        marginal = start.marginal(round_.clique)
        theta_hat = round_.hypothesis_answer(marginal)
        theta_priv = round_.hypothesis_answer(weights)
        u = round_.direction(theta_hat, theta_priv)
        factor = round_.log_factor(marginal, theta_hat, theta_priv)
        np.testing.assert_allclose(factor.ravel(), -learning_rate / problem.scale * u)
        ours, literal = start.copy(), start.copy()
        ours.reweight(round_.clique, factor, marginal=marginal)
        literal.reweight(round_.clique, -factor, marginal=marginal)

        before = clique_inner(round_, u, start)
        assert before >= -1e-10  # first-order optimality of theta_hat on Dhat
        assert clique_inner(round_, u, ours) < before - 1e-3
        assert clique_inner(round_, u, literal) > before + 1e-3

        def error_of(h: DenseHistogram, r: CMRound = round_) -> float:
            return excess_risk(problem, weights, r.hypothesis_answer(h.marginal(r.clique)))

        err = error_of(start)
        assert err > 0.1
        assert error_of(ours) < err - 0.02
        assert error_of(literal) > err + 0.02


@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
def test_one_update_lowers_u_on_any_hypothesis(loss: str, seed: int) -> None:
    """``d/d eta <u, Dhat exp(-eta u)/Z> = -Var(u) <= 0``: for any ``Dhat`` and ``theta_priv``."""
    rng = np.random.default_rng(seed)
    problem = CMQuery(loss=loss, target="y", features=("a", "c")).compile(TOY_DOMAIN)
    round_ = CMRound(
        problem=problem,
        oracle=NoisyGradientDescent(),
        hypothesis_tol=1e-7,
        data_solve=plan_solve(problem, gap=1e-7, max_iterations=10**6),
        sensitivity_factor=2.0,
        learning_rate=1.0,
    )
    for _ in range(5):
        hist = DenseHistogram(
            TOY_DOMAIN, rng.dirichlet(np.ones(TOY_DOMAIN.size)).reshape(TOY_DOMAIN.shape)
        )
        marginal = hist.marginal(round_.clique)
        theta_hat = round_.hypothesis_answer(marginal)
        theta_priv = rng.normal(size=problem.dim)
        theta_priv *= problem.radius * rng.random() / np.linalg.norm(theta_priv)
        u = round_.direction(theta_hat, theta_priv)
        factor = round_.log_factor(marginal, theta_hat, theta_priv)
        ours, literal = hist.copy(), hist.copy()
        ours.reweight(round_.clique, factor, marginal=marginal)
        literal.reweight(round_.clique, -factor, marginal=marginal)
        before = clique_inner(round_, u, hist)
        assert clique_inner(round_, u, ours) <= before + 1e-12
        assert clique_inner(round_, u, literal) >= before - 1e-12
        if np.ptp(u) > 1e-6:
            assert clique_inner(round_, u, ours) < before < clique_inner(round_, u, literal)


def test_engine_update_with_exact_oracle_lowers_that_querys_error(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    cfg = PMWConfig(
        epsilon=1.0,
        delta=1e-6,
        max_updates=3,
        threshold=ALWAYS,
        prior="uniform",
        learning_rate=1.0,
        sweeps=0,
        oracle=ExactOracle(),
    )
    engine = build_engine(toy_data, cfg, noise=recording_noise)
    query = CMQuery(loss="logistic", target="y", features=("a", "b"))
    round_ = engine.cm_round(query)
    weights = toy_data.marginal(round_.clique).ravel()
    before = engine.hypothesis.copy()
    theta_hat = round_.hypothesis_answer(before.marginal(round_.clique))
    answer = engine.answer(query)
    assert answer.source == "oracle" and answer.updates == 1
    np.testing.assert_allclose(answer.value, minimize(round_.problem, weights, tol=1e-12).theta)
    u = round_.direction(theta_hat, answer.value)
    assert clique_inner(round_, u, engine.hypothesis) < clique_inner(round_, u, before)
    after = round_.hypothesis_answer(engine.hypothesis.marginal(round_.clique))
    assert excess_risk(round_.problem, weights, after) < 0.5 * excess_risk(
        round_.problem, weights, theta_hat
    )


def test_potential_drop_claim_holds_on_every_update(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    """Ullman 2015, Claim "potential drop", for the engine's noisy updates (``l2 = 0``)."""
    engine = make_engine(toy_data, recording_noise, max_updates=6, sweeps=2)
    queries = [*QUERIES[:4], CMQuery(loss="squared", target="c", features=("a", "y"))]
    queries.append(CMQuery(loss="hinge", target="y", features=("b", "d"), radius=0.5))
    for query in queries:
        round_ = engine.cm_round(query)
        dhat = engine.hypothesis.copy()
        theta_hat = round_.hypothesis_answer(dhat.marginal(round_.clique))
        answer = engine.answer(query)
        assert answer.source == "oracle"
        u = round_.direction(theta_hat, answer.value)
        d_marginal = toy_data.marginal(round_.clique).ravel()
        on_dhat = clique_inner(round_, u, dhat)
        on_d = float(u @ d_marginal)
        assert on_dhat >= -round_.hypothesis_tol  # 1e-5 for non-smooth losses
        drop = round_.problem.objective(theta_hat, d_marginal) - round_.problem.objective(
            answer.value, d_marginal
        )
        assert on_dhat - on_d >= drop - 1e-12


@pytest.mark.parametrize(
    ("loss", "target", "param"),
    [
        ("logistic", "y", None),
        ("squared", "c", None),
        ("huber", "c", 0.5),
        ("hinge", "y", None),
        ("quantile", "c", 0.3),
        ("absolute", "c", None),
    ],
)
def test_u_makes_theta_hat_first_order_optimal(
    loss: str, target: str, param: float | None, seed: int
) -> None:
    """``<u, Dhat> >= 0`` for *every* ``theta_priv`` in ``Theta`` (the Claim's first half).

    The worst ``theta_priv`` is ``-R g / ||g||`` for ``g`` the gradient behind ``u``.
    For a non-smooth loss an arbitrary subgradient at ``theta_hat`` fails this (for
    the absolute loss by up to ~0.26 at R = 1); the engine must use the one for which
    ``theta_hat`` is optimal (the solver's smoothed surrogate's), up to ``tau``.
    """
    rng = np.random.default_rng(seed)
    features = ("a", "b") if target == "y" else ("a", "y")
    for radius in (0.5, 1.0):
        query = CMQuery(
            loss=loss, target=target, features=features, radius=radius, loss_param=param
        )
        problem = query.compile(TOY_DOMAIN)
        round_ = CMRound(
            problem=problem,
            oracle=NoisyGradientDescent(),
            hypothesis_tol=1e-8,
            data_solve=plan_solve(problem, gap=1e-8, max_iterations=10**6),
            sensitivity_factor=2.0,
            learning_rate=1.0,
        )
        for _ in range(10):
            alpha = np.full(TOY_DOMAIN.size, 0.3)
            hist = DenseHistogram(TOY_DOMAIN, rng.dirichlet(alpha).reshape(TOY_DOMAIN.shape))
            marginal = hist.marginal(round_.clique)
            theta_hat = round_.hypothesis_answer(marginal)
            grad = np.array(
                [
                    clique_inner(round_, round_.direction(theta_hat, theta_hat + e), hist)
                    for e in np.eye(round_.problem.dim)
                ]
            )  # = sum_x Dhat(x) grad_x, the gradient u is built from
            worst = -radius * grad / max(float(np.linalg.norm(grad)), 1e-300)
            u = round_.direction(theta_hat, worst)
            assert clique_inner(round_, u, hist) >= -2e-8, (radius, clique_inner(round_, u, hist))


# --- halting -----------------------------------------------------------------------------


def test_refuses_after_t_updates(toy_data: PrivateData, recording_noise: RecordingNoise) -> None:
    engine = make_engine(toy_data, recording_noise, max_updates=3)
    answers = [engine.answer(q) for q in QUERIES[:3]]
    assert [a.source for a in answers] == ["oracle"] * 3
    assert [a.updates for a in answers] == [1, 2, 3]
    assert engine.halted and engine.sparse_vector.halted
    state, released = snapshot(engine, recording_noise), len(engine.answers)
    with pytest.raises(EngineHalted, match="after_halt='synthetic'"):
        engine.answer(QUERIES[3])
    assert snapshot(engine, recording_noise) == state
    assert len(engine.answers) == released
    # A released answer is still served after the halt, for free.
    again = engine.answer(QUERIES[0])
    assert again.repeated and again.value is answers[0].value
    assert snapshot(engine, recording_noise) == state


def test_synthetic_answers_after_halt_are_free(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    engine = make_engine(toy_data, recording_noise, max_updates=2, after_halt="synthetic")
    for q in QUERIES[:2]:
        engine.answer(q)
    state = snapshot(engine, recording_noise)
    final = engine.hypothesis.to_array()
    for q in QUERIES[2:]:
        answer = engine.answer(q)
        assert answer.source == "synthetic" and not answer.repeated
        assert answer.updates == 2
        assert answer.epsilon_spent == state[3]
        round_ = engine.cm_round(q)
        expected = round_.hypothesis_answer(engine.hypothesis.marginal(round_.clique))
        np.testing.assert_array_equal(answer.value, expected)
    assert snapshot(engine, recording_noise) == state
    np.testing.assert_array_equal(engine.hypothesis.to_array(), final)


# --- repeats and bad queries ---------------------------------------------------------------


@pytest.mark.parametrize(("threshold", "source"), [(ALWAYS, "oracle"), (NEVER, "hypothesis")])
def test_repeated_query_returns_the_released_answer_for_free(
    toy_data: PrivateData, recording_noise: RecordingNoise, threshold: float, source: str
) -> None:
    engine = make_engine(toy_data, recording_noise, threshold=threshold)
    first = engine.answer(QUERIES[0])
    engine.answer(QUERIES[1])
    assert first.source == source
    state = snapshot(engine, recording_noise)
    twin = CMQuery.from_dict(QUERIES[0].to_dict())  # equal spec, a different object
    for query in (QUERIES[0], twin):
        again = engine.answer(query)
        assert again.repeated and again.source == source
        assert again.value is first.value
        assert again.index == len(engine.answers) - 1
        assert snapshot(engine, recording_noise) == state


#: Four spellings of one compiled problem each (the soundness issue's list).
SPELLINGS = [
    (
        CMQuery(loss="huber", target="y", features=("a", "c")),
        CMQuery(loss="huber", target="y", features=("a", "c"), loss_param=1.0),
    ),
    (
        CMQuery(loss="logistic", target="y", features=("a", "c"), encodings={"c": "onehot"}),
        CMQuery(loss="logistic", target="y", features=("a", "c"), encodings={"c": "auto"}),
    ),
    (
        CMQuery(loss="logistic", target="y", features=("b",), radius=1, l2=0),
        CMQuery(loss="logistic", target="y", features=("b",), radius=1.0, l2=0.0),
    ),
    (
        # a binary feature is +/-1 whatever its encoding says
        CMQuery(loss="logistic", target="y", features=("d", "c"), encodings={"d": "ordinal"}),
        CMQuery(loss="logistic", target="y", features=("d", "c"), encodings={"d": "onehot"}),
    ),
]


@pytest.mark.parametrize(("first", "other"), SPELLINGS)
def test_every_spelling_of_one_problem_gets_one_key_and_one_oracle_draw(
    toy_data: PrivateData, recording_noise: RecordingNoise, first: CMQuery, other: CMQuery
) -> None:
    """Fresh noise for a respelled query would let an analyst average up to ``T`` draws."""
    assert json.dumps(first.to_dict()) != json.dumps(other.to_dict())  # different specs ...
    np.testing.assert_array_equal(  # ... of the same compiled problem
        first.compile(TOY_DOMAIN).features, other.compile(TOY_DOMAIN).features
    )
    assert query_key(first, TOY_DOMAIN) == query_key(other, TOY_DOMAIN)
    engine = make_engine(toy_data, recording_noise, threshold=ALWAYS)
    released = engine.answer(first)
    assert released.source == "oracle"
    state = snapshot(engine, recording_noise)
    again = engine.answer(other)
    assert again.repeated and engine.recorded(again).value is engine.recorded(released).value
    np.testing.assert_array_equal(again.value, released.value)  # both spellings' order
    assert snapshot(engine, recording_noise) == state  # no draw, no debit


def test_different_problems_get_different_keys() -> None:
    base = CMQuery(loss="huber", target="y", features=("a", "c"))
    for changed in (
        CMQuery(loss="huber", target="y", features=("a", "c"), loss_param=0.5),
        CMQuery(loss="huber", target="y", features=("a", "c"), encodings={"c": "ordinal"}),
        CMQuery(loss="huber", target="y", features=("a", "c"), radius=2.0),
        CMQuery(loss="huber", target="y", features=("a", "c"), intercept=False),
    ):
        assert query_key(changed, TOY_DOMAIN) != query_key(base, TOY_DOMAIN)


def bad_queries() -> list[tuple[str, CMQuery, type[Exception], str]]:
    return [
        (
            "unknown attribute",
            CMQuery(loss="logistic", target="y", features=("a", "zz")),
            QueryError,
            "zz",
        ),
        (
            "non-binary target",
            CMQuery(loss="logistic", target="c", features=("a",)),
            QueryError,
            "binary",
        ),
    ]


@pytest.mark.parametrize(("what", "query", "error", "match"), bad_queries(), ids=lambda x: str(x))
def test_bad_query_raises_before_spending(
    toy_data: PrivateData,
    recording_noise: RecordingNoise,
    what: str,
    query: CMQuery,
    error: type[Exception],
    match: str,
) -> None:
    engine = make_engine(toy_data, recording_noise)
    for warmed_up in (False, True):
        state = snapshot(engine, recording_noise)
        with pytest.raises(error, match=match):
            engine.answer(query)
        assert snapshot(engine, recording_noise) == state
        assert len(engine.answers) == int(warmed_up)
        if not warmed_up:
            assert state == (0, 0, 0, 0.0)
            engine.answer(QUERIES[0])


def test_unservable_query_raises_before_spending(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    """Output perturbation needs ``l2 > 0``: refused before the sparse vector runs."""
    engine = make_engine(toy_data, recording_noise, oracle=OutputPerturbation())
    no_l2 = CMQuery(loss="logistic", target="y", features=("a", "b"))
    with pytest.raises(ValueError, match="l2"):
        engine.answer(no_l2)
    assert snapshot(engine, recording_noise) == (0, 0, 0, 0.0)
    answer = engine.answer(CMQuery(loss="logistic", target="y", features=("a", "b"), l2=0.1))
    assert answer.source == "oracle"
    state = snapshot(engine, recording_noise)
    with pytest.raises(ValueError, match="l2"):
        engine.answer(no_l2)
    assert snapshot(engine, recording_noise) == state
    assert len(engine.answers) == 1


# --- the ledger ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sparse_vector", "accountant", "epsilon"),
    [("lyu_su_li", "pld", 1.0), ("dwork_roth", "pld", 0.3), ("lyu_su_li", "zcdp", 3.0)],
)
# zCDP converts the pure-DP sparse vector lossily (rho = eps_sv^2 / 2, then eps >=
# eps_sv sqrt(2 log(1/delta)) ~ 5.3 eps_sv at delta = 1e-6): it needs a small sv_fraction.
def test_spends_exactly_the_budget_after_t_updates(
    toy_data: PrivateData,
    recording_noise: RecordingNoise,
    sparse_vector: str,
    accountant: str,
    epsilon: float,
) -> None:
    engine = make_engine(
        toy_data,
        recording_noise,
        max_updates=4,
        epsilon=epsilon,
        sparse_vector=sparse_vector,
        accountant=accountant,
        sv_fraction=0.1 if accountant == "zcdp" else 0.3,
    )
    spent = [engine.answer(q).epsilon_spent for q in QUERIES[:4]]
    assert spent == sorted(spent) and all(s <= epsilon for s in spent)
    # PLD's grid (h = 1e-3) and the calibration's rtol leave at most ~1e-4 unspent.
    assert 0.0 <= epsilon - engine.ledger.spent_epsilon() <= 1e-3
    recomputed = engine.ledger.accountant.epsilon(engine.ledger.spent_event(), delta=1e-6)
    assert recomputed <= epsilon
    assert recomputed == pytest.approx(engine.ledger.spent_epsilon(), abs=1e-9)


def test_every_draw_is_paid_for_before_it_happens(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    engine = make_engine(toy_data, recording_noise, max_updates=3, threshold=None, epsilon=5.0)

    def labels() -> tuple[str, ...]:
        return tuple(e.label for e in engine.ledger.entries)

    recording_noise.probe = labels
    for q in QUERIES:
        engine.answer(q)
    for draw in recording_noise.calls:
        paid = draw.probe
        assert paid[0] == "sparse vector"
        if draw.kind == "gaussian":  # an oracle call: its own entry is already there
            oracle_draws = [d for d in recording_noise.calls if d.kind == "gaussian"]
            assert len(paid) == 1 + oracle_draws.index(draw) + 1
    kinds = {d.kind for d in recording_noise.calls}
    assert kinds == {"laplace", "gaussian"}
    oracle_answers = sum(a.source == "oracle" for a in engine.answers)
    assert len(engine.ledger.entries) == 1 + oracle_answers
    assert oracle_answers < len(QUERIES)  # hypothesis answers drew (paid) SV noise too


def test_answer_fields_agree_with_ledger_and_history(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    """A mixed stream at a natural threshold: hypothesis, oracle and synthetic answers."""
    engine = make_engine(
        toy_data,
        recording_noise,
        max_updates=4,
        threshold=None,
        epsilon=8.0,
        expected_queries=40,
        after_halt="synthetic",
        learning_rate=0.5,  # small steps: the y-queries stay wrong until T is spent
        sweeps=0,
    )
    # Near-zero error under the uniform start (a, b, c, d, e are independent uniform
    # draws), then queries the uniform start gets badly wrong, then more than T of them.
    # The threshold is ~10 sensitivities (~0.01 excess risk) with Laplace noise of ~4
    # and a threshold noise of ~2 sensitivities drawn once (Lyu-Su-Li); the first six
    # queries have errors well below one sensitivity.
    queries = [
        CMQuery(loss="logistic", target="d", features=("e",)),
        CMQuery(loss="logistic", target="e", features=("d",)),
        CMQuery(loss="squared", target="d", features=("e", "c")),
        CMQuery(loss="logistic", target="a", features=("d", "e")),
        CMQuery(loss="logistic", target="b", features=("d",)),
        CMQuery(loss="logistic", target="e", features=("a", "b")),
    ]
    queries += [
        *QUERIES,
        *(
            CMQuery(loss="squared", target="c", features=p)
            for p in itertools.combinations("abdey", 2)
        ),
    ]
    queries += [
        CMQuery(loss="logistic", target="y", features=f) for f in itertools.combinations("abcde", 3)
    ]
    seen: list[Answer] = []
    oracle = 0
    for i, q in enumerate(queries + queries[:5]):
        answer = engine.answer(q)
        seen.append(answer)
        assert answer.index == i
        assert answer.delta == engine.ledger.delta == 1e-6
        assert answer.epsilon_spent == engine.ledger.spent_epsilon() <= 8.0
        oracle += answer.source == "oracle" and not answer.repeated
        assert answer.updates == oracle == len(engine.updates) == engine.sparse_vector.positives
        assert len(engine.ledger.entries) == 1 + oracle
        if answer.source == "synthetic":
            assert engine.halted
        assert answer.repeated == (i >= len(queries))
    sources = {a.source for a in seen}
    assert sources == {"hypothesis", "oracle", "synthetic"}, sources
    spends = [a.epsilon_spent for a in seen]
    assert spends == sorted(spends)
    # Hypothesis and synthetic answers cost nothing (after the sparse vector's one charge).
    for prev, cur in itertools.pairwise(seen):
        if cur.source != "oracle" or cur.repeated:
            assert cur.epsilon_spent == prev.epsilon_spent

    def fields(a: Answer) -> tuple[object, ...]:
        return (a.index, a.source, a.updates, a.epsilon_spent, a.repeated)

    # The transcript keeps each answer in the canonical coordinate order; the caller
    # got it in the order asked: the same answers otherwise.
    assert [fields(a) for a in engine.answers] == [fields(a) for a in seen]


def test_hypothesis_stays_on_the_simplex(
    toy_data: PrivateData, recording_noise: RecordingNoise
) -> None:
    engine = make_engine(toy_data, recording_noise, max_updates=8, learning_rate=8.0, sweeps=3)
    queries = [*QUERIES[:6], CMQuery(loss="squared", target="c", features=("a", "y"), radius=3.0)]
    queries.append(CMQuery(loss="hinge", target="y", features=("c", "e")))
    for q in queries:
        engine.answer(q)
        values = engine.hypothesis.to_array()
        assert np.all(np.isfinite(values)) and np.all(values >= 0)
        assert values.sum() == pytest.approx(1.0, abs=1e-12)
    assert len(engine.updates) == 8
    records = engine.synthetic_records(50, rng=np.random.default_rng(0))
    assert records.shape == (50, len(TOY_DOMAIN)) and records.dtype == np.int64
    assert np.all((records >= 0) & (records < np.array(TOY_DOMAIN.sizes)))


# --- construction -----------------------------------------------------------------------------


def direct_engine(data: PrivateData, noise: Any, **kwargs: Any) -> OnlinePMW:
    settings = EngineSettings(max_updates=3, learning_rate=1.0, threshold=0.0)
    defaults: dict[str, Any] = {
        "settings": settings,
        "sparse_vector": LyuSuLiSparse.from_total(1.0, 3, noise=noise),
        "oracle": NoisyGradientDescent(),
        "oracle_noise_level": 5.0,
        "ledger": PrivacyLedger(epsilon=10.0, delta=1e-6, accountant=PLDAccountant()),
        "noise": noise,
    }
    defaults.update(kwargs)
    return OnlinePMW(data, **defaults)


def test_prior_must_match_the_domain(toy_data: PrivateData, seed: int) -> None:
    noise = NumpyNoise(seed=seed)
    other = Domain.from_sizes({"a": 2, "y": 2})
    with pytest.raises(ValueError, match="different domain"):
        direct_engine(toy_data, noise, prior=DenseHistogram.uniform(other))
    with pytest.raises(ValueError, match="different domain"):
        build_engine(
            toy_data,
            PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform"),
            noise=noise,
            prior=DenseHistogram.uniform(other),
        )
    rng = np.random.default_rng(seed)
    prior = DenseHistogram(
        TOY_DOMAIN, rng.dirichlet(np.ones(TOY_DOMAIN.size)).reshape(TOY_DOMAIN.shape)
    )
    engine = direct_engine(toy_data, noise, prior=prior)
    np.testing.assert_allclose(engine.hypothesis.to_array(), prior.to_array(), rtol=1e-12)
    assert engine.hypothesis is not prior  # a copy: updates never touch the caller's prior


def test_sparse_vector_cutoff_must_equal_t(toy_data: PrivateData, seed: int) -> None:
    noise = NumpyNoise(seed=seed)
    with pytest.raises(ValueError, match="cutoff 4 must equal max_updates=3"):
        direct_engine(toy_data, noise, sparse_vector=LyuSuLiSparse.from_total(1.0, 4, noise=noise))


def test_invalid_noise_level_is_rejected(toy_data: PrivateData, seed: int) -> None:
    with pytest.raises(ValueError, match="noise_level"):
        direct_engine(toy_data, NumpyNoise(seed=seed), oracle_noise_level=0.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_updates", 0),
        ("max_updates", 2.5),
        ("learning_rate", 0.0),
        ("learning_rate", math.inf),
        ("solver_tol", -1e-9),
        ("sensitivity_factor", math.nan),
        ("threshold", math.inf),
        ("after_halt", "ignore"),
        ("sweeps", -1),
    ],
)
def test_settings_validation_names_the_field(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"max_updates": 3, "learning_rate": 1.0, "threshold": 0.0}
    kwargs[field] = value
    with pytest.raises(ValueError, match=field):
        EngineSettings(**kwargs)


def test_toy_records_are_valid(seed: int) -> None:
    records = toy_records(seed, n=100)
    assert records.shape == (100, len(TOY_DOMAIN))
    assert np.all((records >= 0) & (records < np.array(TOY_DOMAIN.sizes)))


def test_a_failed_sweep_leaves_the_hypothesis_and_updates_as_they_were(
    toy_data: PrivateData, recording_noise: RecordingNoise, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sweeps run on a copy: a failure commits nothing, and later rounds still work."""
    engine = make_engine(toy_data, recording_noise, threshold=ALWAYS, sweeps=2)
    engine.answer(QUERIES[0])
    before = engine.hypothesis.to_array().copy()
    updates = engine.updates

    def broken_replay(hypothesis: Histogram, past: Any, *rule_and_context: Any) -> None:
        raise RuntimeError("sweep failed")

    monkeypatch.setattr("pmwcm.engine.update_step._replay", broken_replay)
    with pytest.raises(RuntimeError, match="sweep failed"):
        engine.answer(QUERIES[1])
    assert engine.updates == updates
    np.testing.assert_array_equal(engine.hypothesis.to_array(), before)
    monkeypatch.undo()
    answer = engine.answer(QUERIES[2])  # the engine is not stuck replaying a broken update
    assert answer.source == "oracle" and len(engine.updates) == len(updates) + 1
