"""Output paths (issue 17): never an input, a device or a directory; - is stdout or stdin."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app

runner = CliRunner()
SCHEMA = {"attributes": [{"name": "x", "values": ["a", "b"]}, {"name": "y", "values": ["0", "1"]}]}
QUERY = {"id": "q1", "loss": "logistic", "target": "y", "features": ["x"]}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    data = tmp_path / "data.csv"
    data.write_text("x,y\n" + "".join(f"{'ab'[i % 2]},{i % 3 % 2}\n" for i in range(60)))
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps(QUERY) + "\n")
    return {"data": data, "schema": schema, "queries": queries}


def _run(files: dict[str, Path], output: str, command: str = "run", *extra: str) -> list[str]:
    return [
        command, "--data", str(files["data"]), "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", "1", "--delta", "1e-6",
        "--insecure-seeded-noise", "3", "-o", output, *extra,
    ]  # fmt: skip


@pytest.mark.parametrize("command", ["run", "synth"])
@pytest.mark.parametrize("victim", ["data", "schema", "queries"])
def test_an_output_that_is_an_input_is_refused_and_the_input_survives(
    files: dict[str, Path], command: str, victim: str
) -> None:
    before = files[victim].read_bytes()
    result = runner.invoke(app, _run(files, str(files[victim]), command))
    assert result.exit_code == 1
    assert f"is the --{victim} file" in result.stderr
    assert files[victim].read_bytes() == before


def test_a_symlink_or_hard_link_to_the_data_is_seen_through(
    files: dict[str, Path], tmp_path: Path
) -> None:
    before = files["data"].read_bytes()
    (tmp_path / "link.jsonl").symlink_to(files["data"])
    os.link(files["data"], tmp_path / "hard.jsonl")
    for name in ("link.jsonl", "hard.jsonl"):
        result = runner.invoke(app, _run(files, str(tmp_path / name)))
        assert result.exit_code == 1 and "is the --data file" in result.stderr
    assert files["data"].read_bytes() == before


def test_a_device_is_refused_not_replaced(files: dict[str, Path]) -> None:
    assert Path("/dev/null").exists()
    result = runner.invoke(app, _run(files, "/dev/null"))
    assert result.exit_code == 1
    assert "is not a regular file" in result.stderr and "Use - to write to stdout" in result.stderr
    assert Path("/dev/null").is_char_device()


def test_a_directory_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    result = runner.invoke(app, _run(files, str(tmp_path)))
    assert result.exit_code == 1 and "is a directory" in result.stderr


def test_dash_writes_the_answers_to_stdout_and_reads_queries_from_stdin(
    files: dict[str, Path],
) -> None:
    args = _run(files, "-")
    args[args.index("--queries") + 1] = "-"
    result = runner.invoke(app, args, input=json.dumps(QUERY) + "\n")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout.strip().splitlines()[0])
    assert record["id"] == "q1" and len(record["theta"]) == 2
    assert not Path("-").exists()


def test_synth_dash_writes_csv_to_stdout(files: dict[str, Path]) -> None:
    result = runner.invoke(app, _run(files, "-", "synth", "--rows", "5"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "x,y" and len(result.stdout.splitlines()) == 6


def test_schema_draft_output_cannot_be_the_data(files: dict[str, Path]) -> None:
    before = files["data"].read_bytes()
    result = runner.invoke(app, ["schema", "--data", str(files["data"]), "-o", str(files["data"])])
    assert result.exit_code == 1 and "is the --data file" in result.stderr
    assert files["data"].read_bytes() == before


def test_two_outputs_to_stdout_are_refused(files: dict[str, Path]) -> None:
    result = runner.invoke(app, _run(files, "-", "run", "--metadata", "-"))
    assert result.exit_code == 1 and "must be different files" in result.stderr


def test_dash_reads_the_data_from_stdin_like_the_file(files: dict[str, Path]) -> None:
    from_file = runner.invoke(app, _run(files, "-"))
    args = _run(files, "-")
    args[args.index("--data") + 1] = "-"
    from_stdin = runner.invoke(app, args, input=files["data"].read_text())
    assert from_stdin.exit_code == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout  # same seeded answers
    bad = runner.invoke(app, args, input="x,y\nc,1\n")
    assert bad.exit_code == 1 and "column 'x'" in bad.stderr
    assert "pmwcm-stdin" not in bad.stderr  # no temporary path shown


def test_data_and_queries_cannot_both_read_stdin(files: dict[str, Path]) -> None:
    args = _run(files, "-")
    args[args.index("--data") + 1] = "-"
    args[args.index("--queries") + 1] = "-"
    result = runner.invoke(app, args, input="")
    assert result.exit_code == 1 and "cannot both read stdin" in result.stderr
