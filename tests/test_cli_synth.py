"""``pmwcm synth``: the synthetic CSV, the optional histogram and answers, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from test_cli_run import QUERIES, one_error_line, write_data, write_queries

runner = CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    data, schema = write_data(tmp_path)
    return {"data": data, "schema": schema, "queries": write_queries(tmp_path, QUERIES)}


def args(files: dict[str, Path], output: Path, *extra: str) -> list[str]:
    return [
        "synth", "--data", str(files["data"]), "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", "1", "--delta", "1e-6",
        "--output", str(output), *extra,
    ]  # fmt: skip


def test_writes_n_rows_readable_under_the_domain(files: dict[str, Path], seed: int) -> None:
    out = files["data"].with_name("synth.csv")
    result = runner.invoke(app, args(files, out, "--insecure-seeded-noise", str(seed)))
    assert result.exit_code == 0, result.output
    domain = Schema.from_json(files["schema"]).domain()
    synthetic = Dataset.from_csv(out, Schema.from_domain(domain))
    assert synthetic.n == 400 and synthetic.domain == domain
    header = out.read_text().splitlines()[0]
    assert header == "age,sex,smoker,income"
    assert "400 synthetic rows" in result.stderr and f"numpy(seed={seed})" in result.stderr


def test_rows_histogram_and_answers(files: dict[str, Path], tmp_path: Path, seed: int) -> None:
    out, hist, answers = tmp_path / "s.csv", tmp_path / "h.npy", tmp_path / "a.jsonl"
    extra = ("--insecure-seeded-noise", str(seed), "--rows", "50", "--histogram", str(hist))
    result = runner.invoke(app, args(files, out, *extra, "--answers", str(answers)))
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 51
    table = np.load(hist)
    assert table.shape == (4, 2, 2, 2) and table.min() >= 0
    assert table.sum() == pytest.approx(1.0)
    ran = tmp_path / "run.jsonl"
    run_args = [
        "run", "--data", str(files["data"]), "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", "1", "--delta", "1e-6",
        "--insecure-seeded-noise", str(seed), "--output", str(ran),
    ]  # fmt: skip
    assert runner.invoke(app, run_args).exit_code == 0
    assert answers.read_text() == ran.read_text()  # the same engine run as `pmwcm run`
    assert [json.loads(x)["id"] for x in answers.read_text().splitlines()] == ["q1", "q2", "q3", 4]


def test_seed_makes_the_synthetic_data_reproducible(files: dict[str, Path], seed: int) -> None:
    first, second = files["data"].with_name("1.csv"), files["data"].with_name("2.csv")
    for out in (first, second):
        assert (
            runner.invoke(app, args(files, out, "--insecure-seeded-noise", str(seed))).exit_code
            == 0
        )
    assert first.read_text() == second.read_text()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--rows", "0"], "--rows"),
        (["--answers", "{out}"], "different files"),
        (["--histogram", "{dir}"], "is a directory"),
        (["--answers", "{dir}/missing/a.jsonl"], "does not exist"),
    ],
)
def test_bad_options_are_fatal(files: dict[str, Path], extra: list[str], needle: str) -> None:
    out = files["data"].with_name("synth.csv")
    filled = [e.format(out=out, dir=files["data"].parent) for e in extra]
    result = runner.invoke(app, args(files, out, *filled))
    assert result.exit_code == 1
    one_error_line(result.stderr, needle)
    assert not out.exists()


def test_bad_input_is_fatal_and_writes_nothing(files: dict[str, Path]) -> None:
    out = files["data"].with_name("synth.csv")
    files["data"].write_text("age,sex,smoker,income\n30,male,no,maybe\n")
    result = runner.invoke(app, args(files, out))
    assert result.exit_code == 1
    one_error_line(result.stderr, "column 'income'", "1 row")  # counted, never quoted
    assert not out.exists()


def test_plain_seed_and_a_drafted_schema_are_refused(files: dict[str, Path]) -> None:
    out = files["data"].with_name("synth.csv")
    result = runner.invoke(app, args(files, out, "--seed", "5"))
    assert result.exit_code == 1
    one_error_line(result.stderr, "--seed 5", "--insecure-seeded-noise 5")
    files["schema"].write_text(
        json.dumps({**json.loads(files["schema"].read_text()), "name": "draft"})
    )
    result = runner.invoke(app, args(files, out))
    assert result.exit_code == 1
    one_error_line(result.stderr, "drafted from the data", "--accept-drafted-schema")
    assert not out.exists()
    result = runner.invoke(app, args(files, out, "--accept-drafted-schema", "--rows", "10"))
    assert result.exit_code == 0, result.output
    assert "warning: --schema" in result.stderr and len(out.read_text().splitlines()) == 11
