"""The 30-attribute loans table end to end: ``pmwcm run``, ``synth``, ``schema`` and a service
session on the support backend, with nothing dense ever built (|X| = 3.1e22).

Every test forbids :class:`~pmwcm.kernels.histogram.DenseHistogram` (its constructor
raises), so a path that still builds a tensor over ``X`` fails here, not by
running out of memory. A support of a few thousand records keeps each run to
seconds.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.histogram_codec import decode_histogram
from pmwcm.kernels.support import SupportHistogram

DATA = Path(__file__).parent / "data" / "loans-wide.csv"
SCHEMA = Path(__file__).parent / "data" / "loans-wide.schema.json"
TARGET = "interest_rate>=12"
SUPPORT = 5000
QUERIES: list[dict[str, Any]] = [
    {"id": "grade", "loss": "logistic", "target": TARGET, "features": ["grade", "term"]},
    {"id": "income", "loss": "logistic", "target": TARGET,
     "features": ["annual_income", "homeownership", "loan_amount"],
     "encodings": {"annual_income": "ordinal", "loan_amount": "ordinal"}},
    {"id": "amount", "loss": "squared", "target": "loan_amount",
     "features": ["annual_income", "term"], "encodings": {"annual_income": "ordinal"}},
    {"id": "interaction", "loss": "logistic", "target": TARGET,
     "features": ["term", "verified_income"], "interactions": [["term", "verified_income"]]},
    {"id": "purpose", "loss": "logistic", "target": TARGET,
     "features": ["loan_purpose", "emp_length"], "encodings": {"emp_length": "ordinal"}},
    {"id": "again", "loss": "logistic", "target": TARGET, "features": ["grade", "term"]},
]  # fmt: skip
runner = CliRunner()


@pytest.fixture(autouse=True)
def no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any dense tensor over the universe is a failure."""

    def refuse(self: DenseHistogram, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a DenseHistogram was built on the 30-attribute table")

    monkeypatch.setattr(DenseHistogram, "__init__", refuse)


def _queries(tmp_path: Path) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUERIES), encoding="utf-8")
    return path


def _common(tmp_path: Path, seed: int) -> list[str]:
    return [
        "--data", str(DATA), "--schema", str(SCHEMA), "--queries", str(_queries(tmp_path)),
        "--epsilon", "1", "--delta", "1e-6", "--support-size", str(SUPPORT),
        "--insecure-seeded-noise", str(seed),
    ]  # fmt: skip


def test_the_universe_is_far_beyond_a_tensor() -> None:
    domain = Schema.from_json(SCHEMA).domain()
    assert len(domain) == 30 and domain.size > 10**22


def test_schema_check_names_the_support_backend() -> None:
    result = runner.invoke(app, ["schema", "--check", str(SCHEMA)])
    assert result.exit_code == 0, result.output
    assert "30 attributes" in result.stdout
    assert "backend (default settings): support:" in result.stderr
    assert "M = 262,144 records" in result.stderr


def test_run_answers_every_query_on_a_support(tmp_path: Path, seed: int) -> None:
    out, meta = tmp_path / "answers.jsonl", tmp_path / "run.json"
    args = ["run", *_common(tmp_path, seed), "--output", str(out), "--metadata", str(meta)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [q["id"] for q in QUERIES]
    assert all("error" not in r for r in records), records
    assert all(np.all(np.isfinite(r["theta"])) for r in records)
    assert records[-1]["theta"] == records[0]["theta"]  # a repeat, served again
    backend = json.loads(meta.read_text())["backend"]
    assert backend["kind"] == "support" and backend["support_size"] == SUPPORT
    assert backend["reason"].startswith("support: |X| = 3.07e+22")
    assert "backend support:" in result.stderr


def test_run_refuses_a_dense_backend_before_reading_the_data(tmp_path: Path, seed: int) -> None:
    args = ["run", *_common(tmp_path, seed), "--output", str(tmp_path / "o.jsonl")]
    result = runner.invoke(app, [*args, "--backend", "dense"])
    assert result.exit_code == 1
    assert "backend='dense' needs" in result.stderr and not (tmp_path / "o.jsonl").exists()


def test_synth_writes_rows_and_the_support(tmp_path: Path, seed: int) -> None:
    out, hist = tmp_path / "synthetic.csv", tmp_path / "hypothesis.npz"
    args = ["synth", *_common(tmp_path, seed), "--output", str(out), "--histogram", str(hist)]
    result = runner.invoke(app, [*args, "--rows", "300"])
    assert result.exit_code == 0, result.output
    header, *rows = out.read_text().splitlines()
    assert len(header.split(",")) == 30 and len(rows) == 300
    schema = Schema.from_json(SCHEMA)
    with np.load(hist) as archive:
        assert archive["records"].shape == (SUPPORT, 30)
        assert np.isclose(np.exp(archive["log_weights"]).sum(), 1.0)
    hypothesis = decode_histogram(hist.read_bytes(), schema.domain())
    assert isinstance(hypothesis, SupportHistogram) and hypothesis.size == SUPPORT


def test_a_service_session_on_the_wide_table(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*httpx2", category=UserWarning)
        from fastapi.testclient import TestClient

    from pmwcm.service import SQLiteStore, bootstrap_curator, create_app

    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    auth = {"Authorization": f"Bearer {curator}"}
    body = {
        "name": "loans", "data_path": str(DATA), "schema_path": str(SCHEMA),
        "epsilon": 1.0, "delta": 1e-6, "parameters": {"support_size": 2000},
    }  # fmt: skip
    with TestClient(create_app(store, data_dirs=[DATA.parent])) as client:
        created = client.post("/v1/sessions", json=body, headers=auth, params={"wait": 300})
        assert created.status_code == 201, created.text
        assert created.json()["parameters"]["backend"] == "auto"
        token = client.post("/v1/sessions/loans/tokens", json={}, headers=auth).json()["token"]
        analyst = {"Authorization": f"Bearer {token}"}
        for query in QUERIES[:4]:
            spec = {k: v for k, v in query.items() if k != "id"}
            answer = client.post("/v1/sessions/loans/queries", json=spec, headers=analyst)
            assert answer.status_code == 200, answer.text
        status = client.get("/v1/sessions/loans", headers=analyst).json()
    assert status["answered"] == 4
    assert status["backend"]["kind"] == "support" and status["backend"]["support_size"] == 2000
    assert "3.07e+22" in status["backend"]["reason"]


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--hypothesis-memory", "lots"], "--hypothesis-memory must be a number of bytes"),
        (["--hypothesis-memory", "2PiB"], "got '2PiB'"),
        (["--support-size", "10"], "--support-size must be 0 (the default size) or at least"),
        (["--backend", "sparse"], "--backend must be one of auto, dense, support"),
        (["--backend", "support", "--hypothesis-memory", "1KiB"], "at least 1000 are needed"),
    ],
)
def test_bad_backend_options_are_one_line_errors(
    tmp_path: Path, seed: int, flags: list[str], needle: str
) -> None:
    out = tmp_path / "o.jsonl"
    result = runner.invoke(app, ["run", *_common(tmp_path, seed), "--output", str(out), *flags])
    assert result.exit_code == 1 and needle in result.stderr, result.output
    assert result.stderr.count("error:") == 1 and not out.exists()


def test_serve_backend_flags_need_a_session(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--state", str(tmp_path / "s"), "--backend", "support"])
    assert result.exit_code == 1 and "need --data" in result.stderr
