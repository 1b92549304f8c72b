"""Universe size (issue 17): every command knows the hypothesis memory before allocating it.

A 20-attribute schema (|X| = 3^20, 26 GiB per dense tensor) with a forced dense
backend, or a memory budget over the machine's memory, is refused in one line
(the size, the budget, what to do) by ``schema --check``, ``run``, ``synth`` and
``serve``; ``schema --check`` reports the backend the default settings give.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.cli.memory_size import physical_memory

runner = CliRunner()
WIDE = 20


@pytest.fixture
def wide(tmp_path: Path) -> dict[str, str]:
    names = [f"a{i}" for i in range(WIDE)]
    schema = tmp_path / "wide.json"
    schema.write_text(
        json.dumps({"name": "wide", "attributes": [{"name": n, "values": ["0", "1", "2"]}
                                                   for n in names]})
    )  # fmt: skip
    data = tmp_path / "wide.csv"
    rows = [",".join(str((i * (j + 1)) % 3) for j in range(WIDE)) for i in range(300)]
    data.write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": 1, "loss": "logistic", "target": "a0",
                                   "features": ["a1"]}) + "\n")  # fmt: skip
    return {"data": str(data), "schema": str(schema), "queries": str(queries),
            "out": str(tmp_path / "out"), "state": str(tmp_path / "state")}  # fmt: skip


def _one_line_error(stderr: str, *parts: str) -> None:
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    for part in parts:
        assert part in stderr, stderr


def test_schema_check_reports_the_support_for_a_wide_schema(wide: dict[str, str]) -> None:
    result = runner.invoke(app, ["schema", "--check", wide["schema"], "--data", wide["data"]])
    assert result.exit_code == 0, result.stderr
    assert "|X| = 3,486,784,401" in result.stdout
    assert "backend (default settings): support:" in result.stderr
    assert "a dense tensor would need 106,408.2 MiB" in result.stderr


DENSE_PARTS = ("backend='dense' needs 106,408.2 MiB", "budget of 512.0 MiB", "--backend auto")


def test_schema_check_refuses_a_forced_dense_backend(wide: dict[str, str]) -> None:
    result = runner.invoke(app, ["schema", "--check", wide["schema"], "--backend", "dense"])
    assert result.exit_code == 1
    _one_line_error(result.stderr, *DENSE_PARTS)


@pytest.mark.parametrize("command", ["run", "synth"])
def test_run_and_synth_refuse_a_dense_tensor_before_reading_the_data(
    wide: dict[str, str], command: str
) -> None:
    args = [command, "--data", wide["data"], "--schema", wide["schema"], "--queries",
            wide["queries"], "--epsilon", "1", "--delta", "1e-6", "-o", wide["out"],
            "--backend", "dense"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    _one_line_error(result.stderr, *DENSE_PARTS)
    assert not Path(wide["out"]).exists()


@pytest.mark.parametrize("command", ["run", "synth", "schema"])
def test_a_memory_budget_over_the_machine_is_refused(wide: dict[str, str], command: str) -> None:
    physical = physical_memory()
    assert physical is not None  # Linux reports it
    too_much = f"{physical // 2**30 + 64}GiB"
    if command == "schema":
        args = ["schema", "--check", wide["schema"]]
    else:
        args = [command, "--data", wide["data"], "--schema", wide["schema"], "--queries",
                wide["queries"], "--epsilon", "1", "--delta", "1e-6",
                "-o", wide["out"]]  # fmt: skip
    result = runner.invoke(app, [*args, "--backend", "dense", "--hypothesis-memory", too_much])
    assert result.exit_code == 1
    _one_line_error(result.stderr, f"--hypothesis-memory {too_much} is more than this machine")


def test_serve_refuses_a_dense_tensor_before_printing_a_token(wide: dict[str, str]) -> None:
    args = ["serve", "--state", wide["state"], "--data", wide["data"], "--schema",
            wide["schema"], "--epsilon", "1", "--delta", "1e-6", "--backend", "dense"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "curator token" not in result.stdout
    assert "needs 106,408.2 MiB" in result.stderr and result.stderr.count("\n") == 1
