"""End to end: a real ``pmwcm serve`` process on 127.0.0.1, an adaptive analyst, ``pmwcm ask``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.service import SQLiteStore
from pmwcm.service.build import session_config
from pmwcm.service.client import Client
from pmwcm.service.sessions import SessionManager
from service.svc_support import (
    curator_token,
    free_port,
    next_query,
    pmwcm_command,
    pmwcm_serve,
)

PARAMS = {"prior": "uniform", "max_updates": 12, "threshold": 0.0}  # > queries: never spent


def test_real_server_adaptive_analyst_ledger_and_restart(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    data, schema = tiny
    args = [
        "--state", str(tmp_path / "state"), "--data", str(data), "--schema", str(schema),
        "--epsilon", "1.0", "--delta", "1e-6", "--params", json.dumps(PARAMS),
    ]  # fmt: skip
    log = tmp_path / "serve.log"
    seen: dict[str, tuple[float, ...]] = {}
    with pmwcm_serve(args, log) as (url, lines):
        curator = curator_token(lines)
        assert curator is not None
        with Client(url, curator) as admin:
            analyst = admin.issue_token("default", label="e2e")
            history: list[list[float]] = []
            answers = []
            with Client(url, analyst) as client:
                for step in range(10):
                    spec = next_query(history, step)
                    answer = client.ask("default", spec)
                    key = json.dumps(spec, sort_keys=True)
                    assert seen.setdefault(key, answer.theta) == answer.theta
                    history.append(list(answer.theta))
                    answers.append(answer)
                last = answers[-1]
            ledger = admin.ledger("default")
            log_ = admin.answers("default")
        assert ledger["epsilon_spent"] == last.epsilon_spent <= 1.0
        oracle = sum(r["source"] == "oracle" and not r["repeated"] for r in log_)
        assert [e["label"] for e in ledger["entries"]] == ["sparse vector"] + [
            f"oracle call {i + 1}" for i in range(oracle)
        ]
        assert len(log_) == 10 and len({r["index"] for r in log_}) == 10
        first_spec = next_query([], 0)
        env = os.environ | {"PMWCM_TOKEN": analyst, "PMWCM_URL": url}
        out = subprocess.run(
            [*pmwcm_command(), "ask", json.dumps(first_spec)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        asked = json.loads(out.stdout)
        assert asked["repeated"] is True
        assert tuple(asked["theta"]) == seen[json.dumps(first_spec, sort_keys=True)]
        bad = CliRunner().invoke(
            app, ["ask", "--url", url, "--token", analyst, '{"loss": "logistic", "target": "q"}']
        )
        assert bad.exit_code == 1 and "features" in bad.output
    with pmwcm_serve(args, log) as (url, lines):  # restart: same state, no new token
        assert curator_token(lines) is None
        with Client(url, analyst) as client:
            again = client.ask("default", first_spec)
            assert again.repeated and again.theta == seen[json.dumps(first_spec, sort_keys=True)]
            assert client.status("default")["epsilon_spent"] == ledger["epsilon_spent"]


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def test_serve_refuses_bad_or_changed_sessions(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    data, schema = tiny
    state = tmp_path / "state"
    partial = _invoke(["serve", "--state", str(state), "--data", str(data)])
    assert partial.exit_code == 1 and "go together" in partial.output
    store = SQLiteStore(state)
    config = session_config(
        data_path=str(data), schema_path=str(schema), epsilon=1.0, delta=1e-6, parameters=PARAMS
    )
    SessionManager(store).create("default", config)
    store.close()
    base = ["serve", "--state", str(state), "--data", str(data), "--schema", str(schema)]
    changed = _invoke(
        [*base, "--epsilon", "2.0", "--delta", "1e-6", "--params", json.dumps(PARAMS)]
    )
    assert changed.exit_code == 1 and "another configuration" in changed.output
    bad = _invoke([*base, "--epsilon", "1.0", "--delta", "1e-6", "--params", '{"sweeps": -1}'])
    assert bad.exit_code == 1 and "sweeps" in bad.output
    held = SQLiteStore(state)
    try:
        busy = _invoke(["serve", "--state", str(state)])
        assert busy.exit_code == 1 and "in use" in busy.output
    finally:
        held.close()


def test_ask_needs_a_token_and_a_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PMWCM_TOKEN", raising=False)
    missing = _invoke(["ask", '{"loss": "logistic"}'])
    assert missing.exit_code == 1 and "PMWCM_TOKEN" in missing.output
    bad = _invoke(["ask", "--token", "x.y", "not json"])
    assert bad.exit_code == 1 and "spec" in bad.output
    port = free_port()  # nothing listens there
    down = _invoke(["ask", "--token", "x.y", "--url", f"http://127.0.0.1:{port}", "{}"])
    assert down.exit_code == 1 and "cannot reach" in down.output


@pytest.mark.parametrize(
    ("extra", "stored"),
    [({}, "oracle"), ({"announced_queries": 50}, "measure"), ({"update": "both"}, "both")],
)
def test_a_session_stores_its_update_resolved(
    tiny: tuple[Path, Path], extra: dict[str, Any], stored: str
) -> None:
    """``update="auto"`` is stored as what it resolved to (measure on an announced
    stream, the oracle's otherwise), so a later change of what auto means cannot change
    the update a created session replays on restart."""
    data, schema = tiny
    config = session_config(
        data_path=str(data), schema_path=str(schema), epsilon=1.0, delta=1e-6,
        parameters={**PARAMS, **extra},
    )  # fmt: skip
    assert config["parameters"]["update"] == stored
