"""``pmwcm schema``: drafting and checking, clear one-line errors, atomic output."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.data.schema_draft import DRAFT_WARNING

runner = CliRunner()
DATA = resources.files("pmwcm.data.bundled").joinpath("files")
CSV = "y,count,city\n" + "".join(f"{i % 2},{i},{'ab'[i % 2]}\n" for i in range(100))


@pytest.fixture
def csv(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    path.write_text(CSV)
    return path


def _one_error_line(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]


def test_draft_to_stdout_with_warning_on_stderr(csv: Path) -> None:
    result = runner.invoke(app, ["schema", "--data", str(csv)])
    assert result.exit_code == 0, result.output
    schema = Schema.from_json(json.loads(result.stdout))
    assert schema.attribute("y").values == ("0", "1")
    assert schema.attribute("count").kind == "bins"
    assert DRAFT_WARNING in result.stderr


def test_draft_to_file_then_check_it(csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = runner.invoke(app, ["schema", "--data", str(csv), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert DRAFT_WARNING in result.stderr and "wrote" in result.stderr
    result = runner.invoke(app, ["schema", "--check", str(out), "--data", str(csv)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1
    assert "100 rows, 3 attributes, |X| = 40" in result.stdout
    assert "marked as drafted from the data" in result.stderr  # run, synth and serve refuse it
    assert 'its name is "draft"' in result.stderr and "draft WARNING" in result.stderr


def test_draft_notes_skipped_columns(tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_text("id,y\n" + "".join(f"u{i},{i % 2}\n" for i in range(100)))
    result = runner.invoke(app, ["schema", "--data", str(path)])
    assert result.exit_code == 0, result.output
    assert "note: skipped columns: 'id'" in result.stderr


def test_check_bundled_schema_without_and_with_data() -> None:
    with resources.as_file(DATA) as data:
        schema = str(data / "adult-binary.schema.json")
        result = runner.invoke(app, ["schema", "--check", schema])
        assert result.exit_code == 0, result.output
        assert result.stdout == "ok: schema 'adult-binary': 14 attributes, |X| = 16,384\n"
        result = runner.invoke(
            app, ["schema", "--check", schema, "--data", str(data / "adult.csv")]
        )
        assert result.exit_code == 0, result.output
        assert "48,842 rows, 14 attributes, |X| = 16,384" in result.stdout


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        ([], ["give --data"]),
        (["--data", "nope.csv"], ["data file not found", "nope.csv"]),
        (["--check", "nope.json"], ["schema file not found", "nope.json"]),
        (["--check", "{schema}", "--data", "{csv}", "--output", "x.json"], ["--output is only"]),
        (["--check", "{bad_schema}"], ["unknown key 'bin'"]),
        (["--check", "{schema}", "--data", "{bad_csv}"], ["column 'y', line 3", "not one of"]),
        (["--data", "{csv}", "--output", "{tmp}/missing-dir/s.json"], ["does not exist"]),
        (["--data", "{csv}", "--output", "{tmp}"], ["is a directory"]),
    ],
)
def test_bad_input_prints_one_line_and_exits_1(
    csv: Path, tmp_path: Path, args: list[str], needles: list[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"attributes": [{"name": "y", "values": [0, 1]}]}))
    bad_schema = tmp_path / "bad.json"
    bad_schema.write_text(json.dumps({"attributes": [{"name": "y", "bin": [0, 1]}]}))
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("y\n0\n2\n")
    names = {"csv": csv, "schema": schema, "bad_schema": bad_schema, "bad_csv": bad_csv}
    names["tmp"] = tmp_path
    result = runner.invoke(app, ["schema", *(a.format(**names) for a in args)])
    assert result.exit_code == 1
    assert result.stdout == ""
    _one_error_line(result.stderr, *needles)


def test_failed_draft_leaves_an_existing_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    out.write_text("keep me\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("a,b\n")
    result = runner.invoke(app, ["schema", "--data", str(empty), "--output", str(out)])
    assert result.exit_code == 1
    _one_error_line(result.stderr, "no data rows")
    assert out.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.csv", "schema.json"]


def test_version_and_help() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("pmwcm ")
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "schema" in result.stdout


def test_installed_console_script(csv: Path) -> None:
    """One real process: the ``pmwcm`` script installed next to this interpreter."""
    script = Path(sys.executable).with_name("pmwcm")
    assert script.exists(), f"{script} is missing: run `pip install -e .` (make test does)"
    proc = subprocess.run(
        [str(script), "schema", "--data", str(csv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert Schema.from_json(json.loads(proc.stdout)).names == ("y", "count", "city")
    assert DRAFT_WARNING in proc.stderr
    proc = subprocess.run(
        [str(script), "schema", "--data", str(csv.with_name("nope.csv"))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    _one_error_line(proc.stderr, "data file not found")


def test_a_bundled_schema_is_taken_by_name_where_a_schema_is_taken(tmp_path: Path) -> None:
    """``schema --check`` and ``run --schema`` take a bundled schema's name (issue 36 item 6);
    a name that is neither a file nor bundled is refused in one line listing them."""
    result = runner.invoke(app, ["schema", "--check", "adult-binary"])
    assert result.exit_code == 0, result.output
    assert "schema 'adult-binary': 14 attributes" in result.output
    from importlib import resources

    queries = tmp_path / "q.jsonl"
    queries.write_text(
        '{"id": 1, "loss": "logistic", "target": "income>50K", "features": ["male"]}\n'
    )
    adult = resources.files("pmwcm.data.bundled").joinpath("files", "adult.csv")
    with resources.as_file(adult) as data:
        ran = runner.invoke(app, ["run", "--data", str(data), "--schema", "adult-binary",
                                  "--queries", str(queries), "--epsilon", "1", "--delta", "1e-6",
                                  "--output", str(tmp_path / "a.jsonl")])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert '"theta"' in (tmp_path / "a.jsonl").read_text()
    missing = runner.invoke(app, ["schema", "--check", "adult-nope"])
    assert missing.exit_code == 1
    _one_error_line(missing.stderr, "'adult-nope'", "adult-binary, adult-categorical, adult-full")


def _backend_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if "support:" in line)


def test_schema_check_sizes_the_support_as_run_does(tmp_path: Path) -> None:
    """``schema --check adult-full`` and ``run`` on the same data report one support,
    ``M = 65,536`` in 3.9 MiB (issue 36: the check said 262,144 / 15.5 MiB): by name from
    the bundled file's rows, with ``--data`` from the data's; a schema file alone says
    the most it can be."""
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        '{"id": 1, "loss": "logistic", "target": "income>50K", "features": ["sex"]}\n'
    )
    with resources.as_file(DATA.joinpath("adult.csv")) as data:
        ran = runner.invoke(app, [
            "run", "--data", str(data), "--schema", "adult-full", "--queries", str(queries),
            "--epsilon", "1", "--delta", "1e-6", "--prior", "uniform",
            "--output", str(tmp_path / "a.jsonl"),
        ])  # fmt: skip
        with_data = runner.invoke(app, ["schema", "--check", "adult-full", "--data", str(data)])
    by_name = runner.invoke(app, ["schema", "--check", "adult-full"])
    for result in (ran, with_data, by_name):
        assert result.exit_code == 0, result.output
        assert "M = 65,536 records (for n = 48,842 records) takes 3.9 MiB" in _backend_line(
            result.stderr
        )
    with resources.as_file(DATA.joinpath("adult-full.schema.json")) as path:
        file_only = runner.invoke(app, ["schema", "--check", str(path)])
    assert "M = 262,144 records (at most;" in _backend_line(file_only.stderr)
