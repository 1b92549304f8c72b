"""``pmwcm audit``: the report's shape and exit status (the heavy parts are stubbed; the
reach rows' data is written and opened for real, PostgreSQL on a server started here).

The long run itself (10^6 trials per vectorised mechanism, the end-to-end pipeline
and its negative controls) is recorded in docs/audit.md.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

import pmwcm.audit.suite as suite
from pmwcm.audit import reach
from pmwcm.audit.cases import AuditCase, LaplaceMechanism, laplace_case, numpy_source
from pmwcm.cli import app


def stub(label: str, *, scale: float = 1.0) -> AuditCase:
    """A cheap Laplace case standing in for a pipeline row (``scale < 1`` is broken)."""
    case = laplace_case(numpy_source, label=label)
    return dataclasses.replace(case, mechanism=LaplaceMechanism(scale=scale, source=numpy_source))


@pytest.fixture
def light(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {
        "checks": [("sparse vector", "0 of 2 trials differ", True)],
        "controls": [(stub("BROKEN half scale", scale=0.5), True)],
    }
    monkeypatch.setattr(suite, "standard_crosschecks", lambda **kw: state["checks"])
    monkeypatch.setattr(suite, "standard_sensitivity", lambda **kw: [])
    monkeypatch.setattr(suite, "pipeline_cases", lambda: [stub("default pipeline")])
    memo = [("pipeline, memoised PLD", "0 of 6 differ", True)]
    monkeypatch.setattr(suite, "pipeline_crosschecks", lambda **kw: memo)
    monkeypatch.setattr(suite, "negative_controls", lambda: state["controls"])

    def reach_cases(sources: Any) -> list[AuditCase]:
        state["sources"] = list(sources)
        return [stub("reach row")]

    monkeypatch.setattr(suite, "reach_cases", reach_cases)
    monkeypatch.setattr(suite, "reach_controls", lambda sources: [])
    return state


def test_audit_prints_the_table_and_succeeds(light: Any, tmp_path: Any) -> None:
    out = tmp_path / "audit.md"
    result = CliRunner().invoke(app, ["audit", "--trials", "2000", "--no-opendp", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "| mechanism | guarantee | delta | claimed eps | eps lower bound |" in result.stdout
    assert "Lyu-Su-Li eps=2 c=1" in result.stdout and "engine: T=1" in result.stdout
    assert "prior marginals (K=6, n=12)" in result.stdout
    assert "Laplace mechanism (default pipeline)" in result.stdout
    assert "| pipeline, memoised PLD | 0 of 6 differ | yes |" in result.stdout
    assert (
        "pmwcm audit --trials 2000 --alpha 0.01 --seed 0 --no-opendp --pipeline-trials 2000"
        in result.stdout
    )
    assert result.stdout.count("| consistent |") == 15  # 4 oracles, 3 priors
    assert "prior marginals, pairs and 1-ways (K=3, n=12)" in result.stdout
    assert "Laplace mechanism (reach row)" in result.stdout
    assert "| jain_thakurta oracle |" in result.stdout
    assert "Negative controls" not in result.stdout
    assert out.read_text() == result.stdout


def test_audit_fails_when_a_crosscheck_disagrees(light: Any) -> None:
    light["checks"][0] = ("sparse vector", "1 of 2 trials differ", False)
    result = CliRunner().invoke(app, ["audit", "--trials", "1000", "--no-opendp"])
    assert result.exit_code == 1
    assert "| sparse vector | 1 of 2 trials differ | NO |" in result.stdout


def test_negative_controls_must_be_caught(light: Any) -> None:
    args = ["audit", "--no-suite", "--negative-controls", "--pipeline-trials", "20000"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "## Negative controls: deliberately broken pipelines" in result.stdout
    assert "| violation | yes |" in result.stdout
    assert "Lyu-Su-Li" not in result.stdout and "Sensitivity search" not in result.stdout
    assert "| pipeline, memoised PLD | 0 of 6 differ | yes |" in result.stdout
    assert "| sparse vector |" not in result.stdout
    light["controls"][0] = (stub("BROKEN but correct"), True)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "| consistent | yes |" in result.stdout


def test_the_reach_rows_open_their_data_as_pmwcm_run_does(light: Any, postgres_url: str) -> None:
    args = ["audit", "--no-suite", "--pipeline-trials", "1000", "--postgres", postgres_url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--postgres URL" in result.stdout and postgres_url not in result.stdout
    sources = light["sources"]
    assert [s.label for s in sources] == ["DuckDB, Parquet", "PostgreSQL"]
    # The DuckDB files lived in a folder removed after the run; the tables stay.
    data = sources[1].private_data(sources[1].dataset1)
    assert data.n == 4000 and reach.distinct_records(data) == 2177
    data.close()


def test_an_unreachable_postgres_is_named_without_its_url(light: Any) -> None:
    url = "postgresql://audit:secret@127.0.0.1:9/nowhere"
    result = CliRunner().invoke(app, ["audit", "--no-suite", "--postgres", url])
    assert result.exit_code == 2
    assert "--postgres" in result.output and "secret" not in result.output


def test_the_spark_row_reads_the_parquet_pair_with_spark(
    light: Any, monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    """``--spark`` adds the Parquet pair read by Spark (the session's local one, which
    ``getOrCreate`` returns), opened while the audit's folder exists."""
    opened: dict[str, tuple[int, int, int]] = {}

    def reach_cases(sources: Any) -> list[AuditCase]:
        for source in sources:
            data = [source.private_data(source.dataset0), source.private_data(source.dataset1)]
            opened[source.label] = (data[0].n, *(reach.distinct_records(d) for d in data))
            for d in data:
                d.close()
        return [stub("reach row")]

    monkeypatch.setattr(suite, "reach_cases", reach_cases)
    args = ["audit", "--no-suite", "--pipeline-trials", "1000", "--spark"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--pipeline-trials 1000 --no-suite --spark`" in result.stdout
    assert opened == {"DuckDB, Parquet": (4000, 2176, 2177), "Spark, Parquet": (4000, 2176, 2177)}


@pytest.mark.parametrize("package", ["pyspark", "pyarrow"])
def test_spark_without_its_packages_is_refused_before_any_row(
    light: Any, monkeypatch: pytest.MonkeyPatch, package: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    result = CliRunner().invoke(app, ["audit", "--no-suite", "--spark"])
    assert result.exit_code == 2
    assert f"needs the optional package {package}" in result.output
    assert "--spark" in result.output and "sources" not in light
