"""Budgets (issue 17): every (epsilon, delta) runs or is refused in one line, before the data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app

runner = CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    data = tmp_path / "data.csv"
    data.write_text("x,y\n" + "".join(f"{'ab'[i % 2]},{i % 3 % 2}\n" for i in range(500)))
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps({"attributes": [{"name": "x", "values": ["a", "b"]},
                                   {"name": "y", "values": ["0", "1"]}]})
    )  # fmt: skip
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": 1, "loss": "logistic", "target": "y", "features": ["x"]}))
    return ["--data", str(data), "--schema", str(schema), "--queries", str(queries),
            "--insecure-seeded-noise", "1"]  # fmt: skip


def _invoke(files: list[str], command: str, epsilon: str, delta: str, tmp: Path) -> tuple[int, str]:
    out = tmp / "out"
    args = [command, *files, "--epsilon", epsilon, "--delta", delta, "-o", str(out)]
    result = runner.invoke(app, args)
    return result.exit_code, result.stderr


@pytest.mark.parametrize("command", ["run", "synth"])
@pytest.mark.parametrize(
    ("epsilon", "delta", "message"),
    [
        ("1e-5", "1e-6", "--epsilon must lie in [0.001, 1000], got epsilon=1e-05: the noise"),
        ("1e-9", "1e-6", "got epsilon=1e-09"),
        ("5e-324", "1e-6", "got epsilon=4.94066e-324"),  # was "math domain error" (issue 33)
        ("3000", "1e-6", "got epsilon=3000: a likelihood ratio of e^epsilon guarantees nothing"),
        ("1e9", "1e-6", "got epsilon=1e+09"),
        ("1e4", "1e-6", "got epsilon=10000"),
        ("0.001", "1e-15", "no noise level fits epsilon=0.001 with delta=1e-15"),
        ("1000", "1e-300", "--delta must lie in [1e-15, 1/n), got delta=1e-300"),
        ("1", "1e-30", "--delta must lie in [1e-15, 1/n), got delta=1e-30"),
        ("1", "0.5", "--delta must be below 1/n = 1/500, got delta=0.5"),
        ("1", "0.002", "--delta must be below 1/n = 1/500, got delta=0.002"),
    ],
)
def test_an_unusable_budget_is_refused_in_one_line(
    files: list[str], tmp_path: Path, command: str, epsilon: str, delta: str, message: str
) -> None:
    code, stderr = _invoke(files, command, epsilon, delta, tmp_path)
    assert code == 1
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert message in stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("epsilon", "delta"), [("0.001", "1e-6"), ("1000", "1e-15")])
def test_the_ends_of_the_accepted_range_run(
    files: list[str], tmp_path: Path, epsilon: str, delta: str
) -> None:
    code, stderr = _invoke(files, "run", epsilon, delta, tmp_path)
    assert code == 0, stderr
    assert "theta" in (tmp_path / "out").read_text()
