"""Privacy audits of the noise sources, the single-query oracles and the whole engine.

Each audit uses ``alpha = 1e-6``: a correct mechanism is flagged with
probability at most 1e-6 per test. Every broken variant is test-only; the
margin by which it is caught (the smallest lower bound over seeds 0..99) is
noted at its test. The vectorised models are cross-checked against the real
oracles and the real engine on identical draws. A refusal (any exception the
engine raises) is an output of the engine audit: one from public inputs is the
same on both neighbours and is not flagged; a data-dependent one is caught.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pmwcm.audit.cases import AuditCase, gaussian_case, laplace_case, numpy_source, opendp_source
from pmwcm.audit.engine import RAISED, EngineModel, crosscheck_engine, engine_case
from pmwcm.audit.objective import crosscheck_objective, objective_case
from pmwcm.audit.oracles import crosscheck_oracle, oracle_case
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.rounds import CMRound, as_table
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.solvers import SolverError
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles import (
    NoisyGradientDescent,
    ObjectivePerturbation,
    OracleInput,
    OutputPerturbation,
)
from pmwcm.mechanisms.private_data import PrivateData

ALPHA = 1e-6


def run(case: AuditCase, trials: int, seed: int) -> Any:
    return case.run(trials=trials, rng=np.random.default_rng(seed), alpha=ALPHA)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_numpy_noise_mechanisms_are_consistent_and_nearly_tight(kind: str, seed: int) -> None:
    make = laplace_case if kind == "laplace" else gaussian_case
    case = make(numpy_source, label="numpy")
    r = run(case, 200_000, seed)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 0.7 * case.claimed_epsilon


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_opendp_noise_mechanisms_are_consistent(kind: str, seed: int) -> None:
    # OpenDP costs ~50-100 us per draw: a modest 5,000 trials per input. Its noise comes
    # from the OS CSPRNG (not the seed): the false-failure probability stays <= 1e-6.
    make = laplace_case if kind == "laplace" else gaussian_case
    case = make(opendp_source(), label="opendp")
    r = case.run(trials=5_000, search_trials=1_000, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r


class HalfSensitivityGD(NoisyGradientDescent):
    """Broken (test-only): noise calibrated to ``G B / n`` instead of ``2 G B / n``."""

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        return super().answer(data, noise_level=noise_level / 2, noise=noise)


class HalfSensitivityOP(OutputPerturbation):
    """Broken (test-only): half the minimiser's sensitivity ``2 G B / (n lambda)``."""

    def sensitivity(self, problem: ConvexProblem, n: int) -> float:
        return super().sensitivity(problem, n) / 2


GD = NoisyGradientDescent(step_size=1e-3)


@pytest.mark.parametrize(
    "oracle", [GD, OutputPerturbation(), HalfSensitivityGD(step_size=1e-3), HalfSensitivityOP()]
)
def test_oracle_models_match_the_real_oracles(oracle: Any, seed: int) -> None:
    case = oracle_case(oracle, label=oracle.name)
    rng = np.random.default_rng(seed)
    for weights in (case.dataset0, case.dataset1):
        model: Any = case.mechanism
        assert crosscheck_oracle(model, weights, trials=20, rng=rng) < 1e-12


@pytest.mark.parametrize("oracle", [GD, OutputPerturbation()], ids=["noisy_gd", "output_pert"])
def test_correct_oracles_are_not_flagged(oracle: Any, seed: int) -> None:
    # (1/m)-GDP with m = 1 claims eps = 2.32 at delta = 0.01.
    case = oracle_case(oracle, label=oracle.name)
    r = run(case, 20_000, seed)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 0.5  # seeds 0..99: noisy_gd >= 0.85, output >= 1.41


@pytest.mark.parametrize(
    "oracle", [HalfSensitivityGD(step_size=1e-3), HalfSensitivityOP()], ids=["noisy_gd", "output"]
)
def test_oracle_with_half_sensitivity_is_caught(oracle: Any, seed: int) -> None:
    # Claims eps = 2.32 at delta = 0.01 but is ~(2/m)-GDP: lower bounds >= 2.8 (GD), 3.3 (OP).
    r = run(oracle_case(oracle, label="half sensitivity"), 20_000, seed)
    assert r.violated, r


@pytest.fixture(scope="module")
def engines() -> dict[str, AuditCase]:
    return {
        "correct": engine_case(label="engine"),
        "S/n": engine_case(label="engine with sensitivity S/n", sensitivity_factor=1.0),
    }


@pytest.mark.parametrize("which", ["correct", "S/n"])
def test_engine_model_matches_the_real_engine(
    engines: dict[str, AuditCase], which: str, seed: int
) -> None:
    case = engines[which]
    rng = np.random.default_rng(seed)
    for data in (case.dataset0, case.dataset1):
        model: Any = case.mechanism
        assert crosscheck_engine(model, data, trials=25, rng=rng) == 0


def test_correct_engine_is_not_flagged(engines: dict[str, AuditCase], seed: int) -> None:
    r = run(engines["correct"], 100_000, seed)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 1.0  # seeds 0..99: 1.23-1.52


def test_engine_with_sensitivity_s_over_n_is_caught(
    engines: dict[str, AuditCase], seed: int
) -> None:
    # S/n instead of 2S/n doubles the sparse vector's loss: claims (2, 1e-6), bounds >= 2.7.
    r = run(engines["S/n"], 100_000, seed)
    assert r.violated, r


def test_objective_perturbation_model_and_audit(seed: int) -> None:
    # Pure 2-DP claimed. The model matches the real oracle to its certified gap (~1e-6);
    # the audit is loose here (bounds ~0.4-0.5): logistic gradients of one record move
    # by at most B, not the 2B the proof allows, so it guards only against gross errors.
    case = objective_case(ObjectivePerturbation(), label="objective_perturbation")
    model: Any = case.mechanism
    rng = np.random.default_rng(seed)
    for weights in (case.dataset0, case.dataset1):
        assert crosscheck_objective(model, weights, trials=10, rng=rng) < 1e-5
    r = run(case, 20_000, seed)
    assert r.verdict == "consistent", r


# --- Refusals are outputs: the engine audit compares them across neighbours. ---


class RefusingRound(CMRound):
    """Broken (test-only): the real-data side raises when the clique's last cell holds
    more than 42.5% of the data -- a free, data-dependent refusal, like the pre-fix
    certified solve's. On :func:`adversarial_pair` the "up" queries' cell ``(a=1, y=1)``
    holds 9/20 of ``D0`` and 8/20 of ``D1``; the "down" queries' holds 8/20 of both."""

    def error(self, data_marginal: Any, answer: Any) -> float:
        if float(as_table(data_marginal).mass[-1]) > 0.425:
            raise SolverError("could not certify the gap on this data")
        return super().error(data_marginal, answer)


class RefusingEngine(OnlinePMW):
    def cm_round(self, query: CMQuery) -> CMRound:
        r = super().cm_round(query)
        return RefusingRound(**{f.name: getattr(r, f.name) for f in dataclasses.fields(r)})


def with_engine_class(model: EngineModel, cls: type[OnlinePMW]) -> EngineModel:
    def build(data: PrivateData, noise: NoiseSource) -> OnlinePMW:
        engine = model.build(data, noise)
        return cls.from_parts(engine.parts, state=engine.state())

    return dataclasses.replace(model, build=build)


@pytest.fixture(scope="module")
def refusing(engines: dict[str, AuditCase]) -> dict[str, AuditCase]:
    """The correct engine with a refusal from public inputs (a query on an unknown
    attribute) inserted after the second query, and the data-dependent refusal."""
    case = engines["correct"]
    model: Any = case.mechanism
    unknown = CMQuery(loss="hinge", target="y", features=("nope",), radius=0.5)
    public = dataclasses.replace(model, queries=(*model.queries[:2], unknown, *model.queries[2:]))
    return {
        "public": dataclasses.replace(case, mechanism=public, name="public refusal"),
        "data": dataclasses.replace(
            case, mechanism=with_engine_class(model, RefusingEngine), name="refusing engine"
        ),
    }


@pytest.mark.parametrize("which", ["public", "data"])
def test_engine_model_counts_refusals_like_the_real_engine(
    refusing: dict[str, AuditCase], which: str, seed: int
) -> None:
    case = refusing[which]
    model: Any = case.mechanism
    rng = np.random.default_rng(seed)
    for data in (case.dataset0, case.dataset1):
        assert crosscheck_engine(model, data, trials=25, rng=rng) == 0
    codes = model(case.dataset0, 200, rng)
    assert np.any(codes == RAISED)


def test_a_refusal_from_public_inputs_is_not_flagged(
    refusing: dict[str, AuditCase], seed: int
) -> None:
    # The unknown attribute is refused on every dataset alike: the same output code.
    r = run(refusing["public"], 100_000, seed)
    assert r.verdict == "consistent", r


def test_a_data_dependent_refusal_is_caught(refusing: dict[str, AuditCase], seed: int) -> None:
    # D0 refuses every "up" query, D1 none: code RAISED at position 0 has probability
    # 1 vs 0. 1,000 trials give a bound of log(1000 / 14.5) = 4.2 > 2 for every seed.
    r = run(refusing["data"], 1_000, seed)
    assert r.violated and r.epsilon_lower_bound > 4.0, r
