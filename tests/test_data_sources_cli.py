"""``pmwcm run --data`` reads the data where it lives, with the same answers everywhere.

One seeded run (``--insecure-seeded-noise``) on a CSV held in memory is the
reference; the same run reading the CSV and a Parquet copy through DuckDB, a
PostgreSQL table (``--table``) and the Parquet file through Spark
(``--engine spark``) must write the identical answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.cli.answers import answer_with_engine
from pmwcm.cli.planning import build_run_engine, plan_run
from pmwcm.cli.query_file import QueryFile
from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.mechanisms.noise import NumpyNoise
from test_cli_run import QUERIES, one_error_line, write_data, write_queries
from test_data_sources import load_postgres_table

runner = CliRunner()
SEED = 11


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    data, schema = write_data(tmp_path)
    parquet = tmp_path / "data.parquet"
    typed = (
        f"SELECT * REPLACE (CAST(age AS BIGINT) AS age) FROM read_csv('{data}', all_varchar = true)"
    )
    duckdb.sql(f"COPY ({typed}) TO '{parquet}' (FORMAT parquet)")
    return {
        "data": data,
        "parquet": parquet,
        "schema": schema,
        "queries": write_queries(tmp_path, QUERIES),
        "output": tmp_path / "answers.jsonl",
    }


def run_argv(files: dict[str, Path], data: str, *extra: str) -> list[str]:
    """``pmwcm run`` on ``data`` with the fixture's schema, queries and output."""
    return [
        "run", "--data", data, "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", "1", "--delta", "1e-6",
        "--output", str(files["output"]), *extra,
    ]  # fmt: skip


def run(files: dict[str, Path], data: str, *extra: str) -> list[dict[str, Any]]:
    argv = run_argv(files, data, "--insecure-seeded-noise", str(SEED), *extra)
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in files["output"].read_text().splitlines()]


def in_memory(files: dict[str, Path]) -> list[dict[str, Any]]:
    """The reference: the records in memory, the same engine and seed."""
    dataset = Dataset.from_csv(files["data"], Schema.from_json(files["schema"]))
    with QueryFile(files["queries"]) as queries:
        survey = queries.survey(dataset.domain)
        # as pmwcm run does: the file's distinct queries and their cliques are announced
        plan = plan_run(
            dataset, epsilon=1.0, delta=1e-6, after_halt="synthetic", max_updates=None,
            prior="marginals", announced_queries=survey.answerable, workload=survey.cliques,
        )  # fmt: skip
        engine = build_run_engine(dataset, plan, noise=NumpyNoise(seed=SEED))
        return json.loads(json.dumps(list(answer_with_engine(engine, queries))))


def test_files_are_read_by_duckdb_with_the_in_memory_answers(files: dict[str, Path]) -> None:
    expected = in_memory(files)
    assert run(files, str(files["data"])) == expected
    assert run(files, str(files["parquet"]), "--engine", "duckdb") == expected
    assert run(files, str(files["parquet"].parent), "--method", "pmw") == expected  # a directory


def test_a_postgres_table_gives_the_same_answers(files: dict[str, Path], postgres_url: str) -> None:
    load_postgres_table(postgres_url, "cli_data", files["data"])
    assert run(files, postgres_url, "--table", "cli_data") == in_memory(files)
    result = runner.invoke(app, ["run", "--data", postgres_url, "--schema", str(files["schema"]),
                                 "--queries", str(files["queries"]), "--epsilon", "1",
                                 "--delta", "1e-6", "--output", str(files["output"]),
                                 "--table", "missing_table"])  # fmt: skip
    assert result.exit_code == 1
    one_error_line(result.stderr, "table 'missing_table' not found", "***")


def test_spark_reads_the_parquet_file(files: dict[str, Path], spark: Any) -> None:
    assert run(files, str(files["parquet"]), "--engine", "spark") == in_memory(files)


def test_spark_without_pyarrow_is_one_line_naming_the_extra(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot comes from Spark as Arrow columns: without pyarrow the open is refused
    before Spark reads anything, in one line that names the extra to install."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails, as uninstalled
    result = runner.invoke(app, run_argv(files, str(files["parquet"]), "--engine", "spark"))
    assert result.exit_code == 1
    one_error_line(result.stderr, "this --data needs the optional package pyarrow")
    assert "pip install 'pmwcm[spark]'" in result.stderr
    assert not files["output"].exists()


def test_an_unknown_engine_is_one_error_line(files: dict[str, Path]) -> None:
    result = runner.invoke(app, run_argv(files, str(files["data"]), "--engine", "oracle"))
    assert result.exit_code == 1
    one_error_line(result.stderr, "--engine must be duckdb or spark")


def test_a_service_session_reads_a_parquet_file(files: dict[str, Path]) -> None:
    """The curator's session creation takes a Parquet file (read by DuckDB) as well."""
    from pmwcm.service.build import _parts, session_config

    parts = {}
    for key in ("data", "parquet"):
        config = session_config(
            data_path=str(files[key]), schema_path=str(files["schema"]),
            epsilon=1.0, delta=1e-6, parameters={},
        )  # fmt: skip
        parts[key] = _parts(config, None, creating=True)[0]
    assert parts["parquet"].source is not None and parts["data"].source is None
    assert parts["parquet"].n == parts["data"].n
    for clique in (("age", "sex"), ("income", "smoker", "age")):
        np.testing.assert_array_equal(
            parts["parquet"].marginal(clique), parts["data"].marginal(clique)
        )
    parts["parquet"].close()


def test_spark_started_by_the_cli_prints_no_warnings_or_progress_bars(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """A fresh process, so that the CLI starts Spark itself (the ``spark`` fixture's session
    would otherwise be reused): its stderr has no log4j WARN line, no ``[Stage`` bar and
    no pandas-version FutureWarning (issue 36 item 7)."""
    out = tmp_path / "spark-answers.jsonl"
    argv = [str(Path(sys.executable).parent / "pmwcm"), "run", "--data", str(files["parquet"]),
            "--engine", "spark", "--schema", str(files["schema"]),
            "--queries", str(files["queries"]), "--epsilon", "1", "--delta", "1e-6",
            "--insecure-seeded-noise", "1", "--output", str(out)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert " WARN " not in done.stderr and "[Stage" not in done.stderr
    assert "FutureWarning" not in done.stderr
    assert len(out.read_text().splitlines()) == len(QUERIES)
