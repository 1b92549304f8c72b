"""``pmwcm audit``: the report's shape and exit status (the heavy parts are stubbed).

The long run itself (10^6 trials per mechanism) is recorded in docs/audit.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import pmwcm.audit.suite as suite
from pmwcm.cli import app


@pytest.fixture
def light(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, bool]]:
    checks = [("sparse vector", "0 of 2 trials differ", True)]
    monkeypatch.setattr(suite, "standard_crosschecks", lambda **kw: checks)
    monkeypatch.setattr(suite, "standard_sensitivity", lambda **kw: [])
    return checks


def test_audit_prints_the_table_and_succeeds(light: Any, tmp_path: Any) -> None:
    out = tmp_path / "audit.md"
    result = CliRunner().invoke(app, ["audit", "--trials", "2000", "--no-opendp", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "| mechanism | guarantee | delta | claimed eps | eps lower bound |" in result.stdout
    assert "Lyu-Su-Li eps=2 c=1" in result.stdout and "engine: T=1" in result.stdout
    assert "prior marginals (K=6, n=12)" in result.stdout
    assert "pmwcm audit --trials 2000 --alpha 0.01 --seed 0 --no-opendp" in result.stdout
    assert result.stdout.count("| consistent |") == 10
    assert out.read_text() == result.stdout


def test_audit_fails_when_a_crosscheck_disagrees(light: Any) -> None:
    light[0] = ("sparse vector", "1 of 2 trials differ", False)
    result = CliRunner().invoke(app, ["audit", "--trials", "1000", "--no-opendp"])
    assert result.exit_code == 1
    assert "| sparse vector | 1 of 2 trials differ | NO |" in result.stdout
