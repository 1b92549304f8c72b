"""One door into the engine (issue 34 item 2): the command line, the service and the
estimators answer through :meth:`OnlinePMW.ask`, which keys, canonicalises and compiles a
query once; and one budget plan (item 1), which ``pmwcm run --dry-run`` prints.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.round_compiler import RoundCompiler
from pmwcm.estimators import Session
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData
from service.svc_support import Service

runner = CliRunner()

LINES: list[dict[str, Any]] = [
    {"id": "ab", "loss": "logistic", "target": "y", "features": ["a", "b"]},
    {"id": "ba", "loss": "logistic", "target": "y", "features": ["b", "a"]},  # a permutation
    {"id": "c", "loss": "squared", "target": "y", "features": ["c"], "radius": 2},
    {"id": "c again", "loss": "squared", "target": "y", "features": ["c"], "radius": 2.0},
    {"id": "ac", "loss": "huber", "target": "y", "features": ["c", "a"]},
]


def _run(service: Service, tmp: Path, *extra: str) -> Any:
    queries = tmp / "q.jsonl"
    queries.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    args = ["run", "--data", str(service.data), "--schema", str(service.schema),
            "--queries", str(queries), "--epsilon", "1", "--delta", "1e-6",
            "--insecure-seeded-noise", "3", "-o", str(tmp / "out.jsonl"), *extra]  # fmt: skip
    return runner.invoke(app, args)


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: Counter[str]) -> None:
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def test_a_query_line_is_canonicalised_once_and_each_problem_compiled_once(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five lines, three problems: five canonicalisations (one per line, however often the
    run counts, announces, keys and labels it), three compilations."""
    calls: Counter[str] = Counter()
    _counting(monkeypatch, CMQuery, "_canonical_fields", calls)
    _counting(monkeypatch, CMQuery, "_build_canonical", calls)
    _counting(monkeypatch, RoundCompiler, "_compile", calls)
    _counting(monkeypatch, OnlinePMW, "ask", calls)
    result = _run(service, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert calls["_canonical_fields"] == calls["_build_canonical"] == len(LINES)
    assert calls["_compile"] == 3
    assert calls["ask"] == len(LINES)  # every line through the one door
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records if r["id"] in ("ba", "c again")] == [
        records[0]["source"],
        records[2]["source"],
    ]


def test_the_service_the_cli_and_the_estimators_go_through_ask(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, ...]] = []
    original = OnlinePMW.ask

    def recorded(self: OnlinePMW, query: Any, **kwargs: Any) -> Any:
        asked.append(tuple(query.features))
        return original(self, query, **kwargs)

    monkeypatch.setattr(OnlinePMW, "ask", recorded)
    assert _run(service, tmp_path).exit_code == 0
    assert asked == [tuple(line["features"]) for line in LINES]
    asked.clear()
    assert service.create().status_code == 201
    response = service.ask(service.analyst(), features=["b", "a"])
    assert response.status_code == 200, response.text
    assert asked == [("b", "a")]
    asked.clear()
    schema = Schema.from_json(service.schema)
    records = Dataset.from_csv(service.data, schema).records
    engine = build_engine(
        PrivateData.from_records(schema.domain(), records),
        PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform"),
        noise=NumpyNoise(seed=0),
    )
    Session.local(engine, schema).logistic_regression("y", ["b", "a"])
    assert asked == [("b", "a")]


def test_dry_run_prints_the_plan_the_engine_is_built_on(service: Service, tmp_path: Path) -> None:
    """``--dry-run`` prints :func:`plan_budget`'s plan and writes nothing; the run built
    on the same inputs has the plan's noise level."""
    result = _run(service, tmp_path, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert not (tmp_path / "out.jsonl").exists()
    shown = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    schema = Schema.from_json(service.schema)
    records = Dataset.from_csv(service.data, schema).records
    data = PrivateData.from_records(schema.domain(), records)
    config = PMWConfig(epsilon=1.0, delta=1e-6, announced_queries=3, after_halt="synthetic")
    plan = plan_budget(config, n=data.n, domain=data.domain)
    assert shown["mode"] == plan.mode and float(shown["n"]) == data.n == 300
    assert float(shown["oracle_noise_level"]) == plan.oracle_noise_level
    assert float(shown["prior_multiplier"]) == plan.prior_multiplier
    assert json.loads(shown["shares"]) == plan.to_dict()["shares"]
    engine = build_engine(data, config, noise=NumpyNoise(seed=0), plan=plan)
    assert engine.oracle_noise_level == plan.oracle_noise_level
    # The ledger holds exactly the events the plan counted for the prior.
    assert tuple(entry.event for entry in engine.ledger.entries) == plan.prior_events
    with pytest.raises(ValueError, match="plan was made for another"):
        build_engine(data, PMWConfig(epsilon=0.5, delta=1e-6), noise=NumpyNoise(seed=0), plan=plan)


def test_a_plan_calibrates_each_level_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prior's multiplier and the oracle's level are each calibrated once per engine
    (no cache: the CLI's second calibration and the global memo are gone)."""
    import pmwcm.engine.plan as plan_module
    import pmwcm.engine.prior_plan as prior_plan_module
    from pmwcm.data.bundled import load_adult

    calls: Counter[str] = Counter()
    _counting(monkeypatch, prior_plan_module, "calibrate_gaussian_multiplier", calls)
    _counting(monkeypatch, plan_module, "calibrate_oracle", calls)
    adult = load_adult()
    data = PrivateData.from_records(adult.domain, adult.records[:20_000])
    build_engine(data, PMWConfig(epsilon=1.0, delta=1e-6), noise=NumpyNoise(seed=0))
    assert calls == {"calibrate_gaussian_multiplier": 1, "calibrate_oracle": 1}


def test_the_service_returns_the_plan_its_engine_was_built_on(service: Service) -> None:
    response = service.create()
    assert response.status_code == 201, response.text
    shown = response.json()["plan"]
    schema = Schema.from_json(service.schema)
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", max_updates=5)
    plan = plan_budget(config, n=300, domain=schema.domain())
    assert shown == json.loads(json.dumps(plan.to_dict()))
    listed = service.client.get("/v1/sessions", headers=service.auth()).json()
    assert [session["plan"] for session in listed] == [shown]
