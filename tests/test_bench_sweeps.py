"""The prior-share sweep of ``benchmarks/accuracy/online_updates.py`` (issue 35's gain target).

``--prior-shares`` runs the measured engine with the prior's share of epsilon fixed:
the share must reach the engine's budget plan (and ``rule`` leave the budget rule in
charge), a swept stream must be the benchmark's own stream under that plan, and the
report must compare each share's mean with the rule's on the same cell.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

ACCURACY = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy"
sys.path.insert(0, str(ACCURACY))

import online_updates  # noqa: E402

from pmwcm.engine.plan import plan_budget  # noqa: E402
from pmwcm.engine.practical import PMWConfig  # noqa: E402
from pmwcm.kernels.domain import Domain  # noqa: E402


def _plan(share: str) -> tuple[float, float]:
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, update="measure", **online_updates.share_overrides(share)
    )
    domain = Domain.from_sizes({f"a{i}": 2 for i in range(14)})
    plan = plan_budget(config, n=8_000, domain=domain)
    return plan.config.prior_fraction, plan.config.sv_fraction


def test_a_swept_share_reaches_the_budget_plan() -> None:
    prior, sparse_vector = _plan("0.8")
    assert prior == 0.8
    assert sparse_vector == pytest.approx(online_updates.SWEPT_SV_PART * 0.2, abs=1e-6)
    # "rule": the budget rule's own split (95% to the prior at this signal), untouched
    assert _plan("rule")[0] == 0.95


def test_a_swept_stream_is_the_benchmarks_stream_under_its_plan() -> None:
    ev = online_updates.table("adult-8000")
    rule = online_updates.run_stream(ev, update="measure", epsilon=1.0, seed=3, k=40)
    same = online_updates.run_stream(ev, update="measure", epsilon=1.0, seed=3, k=40, overrides={})
    assert same["mean"] == rule["mean"] and same["max"] == rule["max"]
    swept = online_updates.run_stream(
        ev, update="measure", epsilon=1.0, seed=3, k=40,
        overrides=online_updates.share_overrides("0.5"),
    )  # fmt: skip
    assert swept["k"] == rule["k"]
    assert swept["prior_mean"] != rule["prior_mean"]  # a start paid with less


def test_a_swept_support_size_reaches_the_plan_and_its_rows_name_it() -> None:
    domain = Domain.from_sizes({f"a{i}": 40 for i in range(20)})  # too wide to keep dense
    # pairs of 1,600 cells: the default holds 32 records a cell, 2^16 of them
    for size, expected in (("default", 2**16), ("131072", 131072)):
        config = PMWConfig(
            epsilon=1.0, delta=1e-6, update="measure", **online_updates.size_overrides(size)
        )
        plan = plan_budget(config, n=10_000, domain=domain)
        assert plan.backend.kind == "support" and plan.backend.support_size == expected
        table = cast(Any, SimpleNamespace(train=SimpleNamespace(n=10_000), domain=domain))
        assert online_updates.size_label(size, table) == str(expected)


def test_the_report_compares_each_share_with_the_rule(tmp_path: Path) -> None:
    rows = [
        {"table": "t", "k": 10, "epsilon": 1.0, "prior_share": share, "mean": mean,
         "max": 2 * mean, "gain": gain, "T": 20, "spent": 1.0, "unchecked": 0.0}
        for share, mean, gain in (("rule", 1.0, 1.0), ("rule", 3.0, 1.2), ("0.8", 4.0, 1.5),
                                  ("0.5", 6.0, 3.0))
    ]  # fmt: skip
    path = tmp_path / "shares.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = online_updates.sweep_report("prior_share", path).splitlines()
    assert [line.split(" | ")[4] for line in lines[2:]] == ["rule", "0.8", "0.5"]
    assert "| 2 | 2 | 1.00x |" in lines[2]  # two seeds, mean 2, its own ratio
    assert "| 4 | 2.00x |" in lines[3] and "| 6 | 3.00x |" in lines[4]
    assert "1.10x (1.00-1.20)" in lines[2]
    assert online_updates.sweep_report("prior_share", tmp_path / "none.jsonl") == ""
    sizes = [
        dict(row, support_size=size)
        for row, size in zip(rows, ("16384", "65536", "65536", "262144"), strict=True)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in sizes))
    lines = online_updates.sweep_report("support_size", path).splitlines()
    assert "mean vs 16384" in lines[0]
    assert [line.split(" | ")[4] for line in lines[2:]] == ["16384", "65536", "262144"]
    assert "| 3.5 | 3.50x |" in lines[3]  # (3 + 4) / 2 over 2^14's 1


def test_the_workload_start_is_compared_seed_by_seed_where_the_rounds_run() -> None:
    def row(update: str, seed: int, eps: float, mean: float, start: float) -> dict[str, Any]:
        return {"table": "t", "workload": "random", "k": 10, "epsilon": eps, "n": 40_000,
                "update": update, "seed": seed, "mean": mean, "max": 10 * mean,
                "prior_mean": start, "gain": 1.0}  # fmt: skip

    rows = [
        row("measure", 0, 1.0, 2.0, 4.0), row("measure", 1, 1.0, 4.0, 4.0),
        row("workload", 0, 1.0, 3.0, 2.0), row("workload", 1, 1.0, 6.0, 2.0),
        row("workload", 2, 1.0, 100.0, 1.0),  # no measured stream of seed 2: left out
        row("measure", 0, 0.5, 1.0, 1.0), row("workload", 0, 0.5, 1.0, 1.0),  # eps n < 40,000
    ]  # fmt: skip
    groups: online_updates.Groups = {}
    for r in rows:
        cell = groups.setdefault(("t", "random", 10, r["epsilon"]), {})
        cell.setdefault(r["update"], []).append(r)
    lines = online_updates.workload_against_measure(groups).splitlines()
    assert len(lines) == 3  # the header, its rule, one cell
    assert lines[2] == "| t | random | 10 | 1 | 40,000 | 2 | 1.50x | 1.50x | 0.50x |"
    del groups[("t", "random", 10, 1.0)]
    assert online_updates.workload_against_measure(groups) == ""


def test_the_replaced_rounds_are_compared_with_the_measured_streams(tmp_path: Path) -> None:
    def row(update: str, seed: int, mean: float) -> dict[str, Any]:
        return {"table": "t", "workload": "random", "k": 10, "epsilon": 4.0, "n": 40_000,
                "update": update, "seed": seed, "mean": mean, "max": mean,
                "prior_mean": mean, "gain": 1.0}  # fmt: skip

    results, before = tmp_path / "rows.jsonl", tmp_path / "before.jsonl"
    assert online_updates.rounds_before_the_triples(results, before) == ""
    current = [row("measure", 0, 2.0), row("workload", 0, 2.0)]  # the same engine now
    results.write_text("".join(json.dumps(r) + "\n" for r in current))
    before.write_text(json.dumps(row("workload", 0, 3.0)) + "\n")
    lines = online_updates.rounds_before_the_triples(results, before).splitlines()
    assert lines[2:] == ["| t | random | 10 | 4 | 160,000 | 1 | 1.50x | 1.50x | 1.50x |"]
