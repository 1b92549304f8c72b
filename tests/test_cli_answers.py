"""Answers an analyst can read (issue 17): labels, the radius, halts, exit codes, help, progress."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import EXIT_CODES, app
from pmwcm.cli.progress import progress_bar
from pmwcm.kernels.coefficients import block_count, coefficient_names, natural_coefficients
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery

runner = CliRunner()
SCHEMA = {
    "attributes": [
        {"name": "age", "bins": [0, 30, 45, 60, 120]},
        {"name": "sex", "values": ["female", "male"]},
        {"name": "income", "values": ["low", "high"]},
    ]
}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(5)
    age, male = rng.integers(18, 80, 1500), rng.random(1500) < 0.5
    high = (male + (age > 45) + rng.random(1500)) > 1.6
    data = tmp_path / "data.csv"
    data.write_text("age,sex,income\n" + "".join(
        f"{a},{'male' if m else 'female'},{'high' if h else 'low'}\n"
        for a, m, h in zip(age, male, high, strict=True)))  # fmt: skip
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    return {"data": data, "schema": schema, "out": tmp_path / "out.jsonl",
            "queries": tmp_path / "q.jsonl"}  # fmt: skip


def _run(files: dict[str, Path], queries: list[dict], *extra: str) -> tuple[int, list[dict], str]:
    files["queries"].write_text("".join(json.dumps(q) + "\n" for q in queries))
    args = ["run", "--data", str(files["data"]), "--schema", str(files["schema"]),
            "--queries", str(files["queries"]), "--epsilon", "10", "--delta", "1e-6",
            "-o", str(files["out"]), *extra]  # fmt: skip
    result = runner.invoke(app, args)
    records = [json.loads(x) for x in files["out"].read_text().splitlines()] if (
        files["out"].exists()) else []  # fmt: skip
    return result.exit_code, records, result.stderr


def test_coefficient_names_follow_the_compiled_design() -> None:
    """Each name's feature is nonzero exactly on the cells the name describes."""
    domain = Domain.from_values(
        {"sex": ["f", "m"], "race": ["a", "b", "c"], "age": ["y", "mid", "old"], "t": ["0", "1"]}
    )
    query = CMQuery(loss="logistic", target="t", features=("sex", "race", "age"),
                    encodings={"age": "ordinal"}, interactions=(("sex", "race"),))  # fmt: skip
    names = coefficient_names(query, domain)
    problem = query.compile(domain)
    assert len(names) == problem.dim == 1 + 3 + 1 + 3 + 1  # sex, race, age, sex*race, intercept
    phi = problem.features * math.sqrt(block_count(query))  # the raw features
    cells = np.indices(domain.project(query.clique).shape).reshape(4, -1).T
    for j, name in enumerate(names):
        for row, (sex, race, age, _) in enumerate(cells):
            expected = {
                "sex=m": 1.0 if sex == 1 else -1.0,
                "age (ordinal)": age - 1.0,
                "intercept": 1.0,
            }.get(name)
            if name.startswith("race="):
                expected = float(domain.values_of("race")[race] == name[5:])
            if name.startswith("sex=m * race="):
                expected = (1.0 if sex == 1 else -1.0) * float(
                    domain.values_of("race")[race] == name[-1]
                )
            assert phi[row, j] == pytest.approx(expected), (name, sex, race, age)
    assert natural_coefficients(query, [math.sqrt(5)] * 9) == pytest.approx([1.0] * 9)  # 5 blocks


def test_every_answer_names_its_coefficients_and_flags_a_binding_radius(
    files: dict[str, Path],
) -> None:
    query = {"loss": "logistic", "target": "income", "features": ["age", "sex"]}
    code, records, _ = _run(
        files,
        [{"id": "r1", **query}, {"id": "r100", **query, "radius": 100.0}],
        "--method", "nonprivate",
    )  # fmt: skip
    assert code == 0
    small, large = records
    names = ["age=[0, 30)", "age=[30, 45)", "age=[45, 60)", "age=[60, 120)", "sex=male",
             "intercept"]  # fmt: skip
    assert small["coefficients"] == names == large["coefficients"]
    assert np.linalg.norm(small["theta"]) == pytest.approx(1.0, rel=1e-6)
    assert small["on_boundary"] is True  # the default radius binds: the fit is cut short
    assert np.linalg.norm(large["theta"]) < 99.0 and large["on_boundary"] is False


def test_synthetic_answers_are_marked_and_the_exit_status_says_so(files: dict[str, Path]) -> None:
    queries = [
        {"id": i, "loss": "logistic", "target": "income", "features": f}
        for i, f in enumerate([["sex"], ["age"], ["age", "sex"]])
    ]
    code, records, stderr = _run(
        files, queries, "--prior", "uniform", "--max-updates", "1", "--insecure-seeded-noise", "0",
        "--update", "oracle",  # the measured update paces T = k = 3: no halt to show
    )  # fmt: skip
    sources = [r["source"] for r in records]
    assert sources[0] == "oracle" and "synthetic" in sources, sources
    assert code == 3 and EXIT_CODES[3].startswith("pmwcm run: answers written")
    for r in records:
        assert ("warning" in r) == (r["source"] == "synthetic")
    first = sources.index("synthetic")
    assert f"from id {records[first]['id']!r} (record {first + 1}) on, are synthetic" in stderr
    assert "Exit status 3." in stderr


def test_help_lists_query_fields_losses_radius_and_exit_codes() -> None:
    result = runner.invoke(app, ["run", "-h"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for needle in ('"radius": 1.0', '"interactions"', "smoothed_hinge", "quantile",
                   '"coefficients"', '"on_boundary"', "noise scale grows in proportion to R",
                   "Exit status: 0 done", "[pmw|composition|nonprivate]"):  # fmt: skip
        assert needle in text, needle
    assert "<bool>" not in result.stdout and "<str>" not in result.stdout
    for command in ("run", "synth", "schema", "demo", "serve", "ask", "audit"):
        assert runner.invoke(app, [command, "-h"]).exit_code == 0, command


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_and_not_in_a_pipe() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with progress_bar(3, "queries", stream=stream) as advance:
            for source in ("oracle", "hypothesis", "hypothesis"):
                advance(source)
    assert pipe.getvalue() == ""
    assert "queries" in terminal.getvalue() and "hypothesis 2" in terminal.getvalue()


def test_run_in_a_pipe_prints_no_progress(files: dict[str, Path]) -> None:
    query = {"id": 1, "loss": "logistic", "target": "income", "features": ["sex"]}
    code, _, stderr = _run(files, [query], "--insecure-seeded-noise", "1")
    assert code == 0 and "\x1b" not in stderr and "━" not in stderr


@pytest.mark.parametrize("command", ["serve", "ask"])
def test_serve_and_ask_options_show_plain_metavars(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    options = [line for line in result.stdout.splitlines() if line.strip().startswith("--")]
    assert options and not any("<str>" in o or "<bool>" in o or "<path>" in o for o in options)
