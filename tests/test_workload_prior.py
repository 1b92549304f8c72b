"""The workload-aware start (:mod:`pmwcm.mechanisms.priors.workload`, issue 35 item 4).

* the fit moves the hypothesis's marginal on a measured clique towards the
  measurement (a parity that no pair sees: the pairs-only prior misses it);
* the exponential mechanism draws with the stated law (a chi-square test);
* the plan charges the planned events whole, and with the sparse vector and the
  ``T`` measurements they compose to the budget (the selections are pure DP, which
  dp_accounting's PLD has no event for: the engine's accountant, exact for them by
  KOV 2015, recomputes the total);
* the candidates and the rounds are a public function of the schema and the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.engine.plan import plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import marginal_prior
from pmwcm.mechanisms.priors.workload import (
    MAX_CANDIDATE_CELLS,
    WorkloadPlan,
    exponential_mechanism,
    workload_candidates,
    workload_plan,
    workload_prior,
)
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({f"x{j}": 2 for j in range(6)})
PARITY = ("x0", "x1", "x2")


def _parity_records(seed: int, n: int = 20_000) -> np.ndarray:
    """x2 = x0 xor x1 (90% of records): every pair of (x0, x1, x2) looks independent."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, size=(n, 6))
    keep = rng.random(n) < 0.9
    x[keep, 2] = x[keep, 0] ^ x[keep, 1]
    return x


def test_the_fit_moves_the_measured_cliques_marginal_towards_the_measurement(seed: int) -> None:
    data = PrivateData.from_records(DOMAIN, _parity_records(seed))
    start = marginal_prior(data, noise_multiplier=0.5, noise=NumpyNoise(seed=seed))
    plan = WorkloadPlan(
        candidates=(PARITY, ("x3", "x4", "x5")), rounds=1,
        selection_epsilon=5.0, noise_multiplier=0.5,
    )  # fmt: skip
    fitted = workload_prior(data, start, plan, noise=NumpyNoise(seed=seed + 1))
    (measured,) = fitted.measurements[len(start.measurements) :]
    assert measured.clique == PARITY  # the pairs miss the parity: the selection sees it
    before = np.abs(start.hypothesis.marginal(PARITY) - measured.values).sum()
    after = np.abs(fitted.hypothesis.marginal(PARITY) - measured.values).sum()
    truth = data.marginal(PARITY)
    assert after < 0.2 * before
    assert np.abs(fitted.hypothesis.marginal(PARITY) - truth).sum() < 0.2 * before
    # the data enters only through the measurement: the same measurement, the same fit
    again = workload_prior(data, start, plan, noise=NumpyNoise(seed=seed + 1))
    assert np.array_equal(again.hypothesis.to_array(), fitted.hypothesis.to_array())


def test_the_exponential_mechanism_draws_with_its_law(seed: int) -> None:
    qualities = [0.0, 0.5, 1.0, 2.0]
    noise = NumpyNoise(seed=seed)
    draws = [
        exponential_mechanism(qualities, epsilon=1.0, sensitivity=0.5, noise=noise)
        for _ in range(20_000)
    ]
    weights = np.exp(np.asarray(qualities))  # eps q / (2 Delta) = q
    expected = 20_000 * weights / weights.sum()
    observed = np.bincount(draws, minlength=4)
    # P(reject a correct sampler) = 1e-6; a sampler at twice the epsilon gives chi2 > 10^4.
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_candidates_are_the_announced_cliques_of_three_or_more_attributes() -> None:
    announced = [("x2", "x0", "x1"), ("x0", "x1"), ("x1", "x0", "x2"), ("x3", "x4", "x5", "x0")]
    assert workload_candidates(DOMAIN, announced) == (PARITY, ("x0", "x3", "x4", "x5"))
    wide = Domain.from_sizes({f"a{j}": 8 for j in range(5)})
    assert workload_candidates(wide, [wide.names]) == ()  # 8^5 > MAX_CANDIDATE_CELLS
    assert MAX_CANDIDATE_CELLS < 8**5
    assert workload_plan([], attributes=6, rho=1.0) is None
    with pytest.raises(ValueError, match=r"schema lacks: \['nope'\]"):
        workload_candidates(DOMAIN, [("x0", "nope", "x1")])
    plan = workload_plan([PARITY] * 30, attributes=6, rho=0.06)
    assert plan is not None and plan.rounds == 24  # ROUNDS_PER_ATTRIBUTE * d, fewer than 30
    # each round: eps_0^2 / 8 + 1 / (2 m^2) = rho / R (zCDP)
    per_round = plan.selection_epsilon**2 / 8 + 1 / (2 * plan.noise_multiplier**2)
    assert per_round == pytest.approx(0.06 / 24)


def test_the_plan_charges_the_workload_rounds_and_spends_exactly_the_budget(seed: int) -> None:
    data = PrivateData.from_records(DOMAIN, _parity_records(seed, n=5000))
    # pairs: at eps n = 40,000 the default would measure these six bits' every triple
    config = PMWConfig(
        epsilon=8.0, delta=1e-6, announced_queries=50, mode="hybrid", prior_cliques="pairs"
    )
    workload = [PARITY, ("x3", "x4", "x5"), ("x0", "x4")]
    small = dataclasses.replace(config, epsilon=1.0)  # eps n = 5,000: the pairs get it all
    assert plan_budget(small, n=data.n, domain=DOMAIN, workload=workload).workload is None
    plan = plan_budget(config, n=data.n, domain=DOMAIN, workload=workload)
    assert plan.workload is not None and plan.workload.rounds == 2
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed), plan=plan, workload=workload)
    charged = [entry.event for entry in engine.ledger.entries]
    assert tuple(charged) == plan.prior_events
    assert len(engine.prior_measurements) == math.comb(6, 2) + 2
    with pytest.raises(ValueError, match="plan was made for another"):
        build_engine(data, config, noise=NumpyNoise(seed=seed), plan=plan)
    # the prior's events, the sparse vector's and T measurements compose to (8, 1e-6)
    sv = plan.sparse_vector
    assert sv is not None
    updates = [dp_accounting.GaussianDpEvent(plan.oracle_noise_level)] * plan.config.max_updates
    total = dp_accounting.ComposedDpEvent([*charged, sv.event(), *updates])
    assert 7.96 <= engine.ledger.accountant.epsilon(total, delta=1e-6) <= 8.0


def test_pmwcm_run_announces_its_files_cliques_to_the_plan(tmp_path: Path) -> None:
    """``pmwcm run`` reads its file first: a 3-way clique it asks is a candidate of the
    workload-aware start (eps n = 20 x 2,000 >= 40,000), shown by ``--dry-run``; a pair
    and an unknown attribute are not. Ten-valued features keep the triples' cells too
    many for the all-triples prior, which would replace the rounds."""
    rng = np.random.default_rng(0)
    rows = np.column_stack([rng.integers(0, 10, size=(2000, 3)), rng.integers(0, 2, 2000)])
    data = tmp_path / "data.csv"
    data.write_text("a,b,c,y\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    schema = tmp_path / "schema.json"
    ten = [str(v) for v in range(10)]
    attributes = [{"name": name, "values": ten} for name in "abc"]
    attributes.append({"name": "y", "values": ["0", "1"]})
    schema.write_text(json.dumps({"attributes": attributes}))
    queries = tmp_path / "q.jsonl"
    lines = [
        {"id": 1, "loss": "logistic", "target": "y", "features": ["a", "b"]},
        {"id": 2, "loss": "logistic", "target": "y", "features": ["c"]},
        {"id": 3, "loss": "logistic", "target": "y", "features": ["nope", "a"]},
    ]
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = [
        "run",
        "--data",
        str(data),
        "--schema",
        str(schema),
        "--queries",
        str(queries),
        "--epsilon",
        "20",
        "--delta",
        "1e-6",
        "-o",
        str(tmp_path / "out"),
        "--dry-run",
        "--mode",
        "hybrid",
    ]  # fmt: skip  (auto: 3 queries at eps 20 go to composition)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert json.loads(shown["workload"])["candidates"] == 1
    assert json.loads(shown["workload"])["rounds"] == 1
    assert shown["update"] == "measure"  # the file is announced: the measured update
