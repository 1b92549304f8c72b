"""``pmwcm serve`` at start (issue 17): a busy port and a --params typo fail in one line."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app

runner = CliRunner()


def test_a_busy_port_is_refused_before_a_token_is_created(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = runner.invoke(app, ["serve", "--state", str(tmp_path / "s"), "--port", str(port)])
    assert result.exit_code == 1
    assert "curator token" not in result.stdout and result.stdout == ""
    assert result.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "s").exists()  # nothing was stored either


def test_a_params_typo_is_one_line(tmp_path: Path) -> None:
    data, schema = tmp_path / "d.csv", tmp_path / "s.json"
    data.write_text("x\na\nb\n")
    schema.write_text(json.dumps({"attributes": [{"name": "x", "values": ["a", "b"]}]}))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    args = ["serve", "--state", str(tmp_path / "st"), "--port", str(port), "--data", str(data),
            "--schema", str(schema), "--epsilon", "1", "--delta", "1e-6",
            "--params", '{"max_updatess": 3}']  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: --params max_updatess: Extra inputs are not permitted, got 3.\n"
    )
    assert "curator token" not in result.stdout


@pytest.mark.parametrize(("command", "module"), [("serve", "uvicorn"), ("ask", "httpx")])
def test_without_the_service_extra_one_line_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    args = ["serve", "--state", str(tmp_path / "s")] if command == "serve" else ["ask", "{}"]
    result = runner.invoke(app, args, env={"PMWCM_TOKEN": "t"})
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: pmwcm {command} needs the 'service' extra (module {module!r} is not "
        "installed): pip install 'pmwcm[service]'\n"
    )


@pytest.mark.parametrize(
    ("epsilon", "needle"), [("1e-6", "got epsilon=1e-06"), ("5000", "got epsilon=5000")]
)
def test_serve_refuses_an_epsilon_out_of_range_before_a_token(
    tmp_path: Path, epsilon: str, needle: str
) -> None:
    data, schema = tmp_path / "d.csv", tmp_path / "s.json"
    data.write_text("x\na\nb\n")
    schema.write_text(json.dumps({"attributes": [{"name": "x", "values": ["a", "b"]}]}))
    args = ["serve", "--state", str(tmp_path / "st"), "--data", str(data), "--schema",
            str(schema), "--epsilon", epsilon, "--delta", "1e-6"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error: --epsilon must lie in [0.001, 1000]")
    assert needle in result.stderr and result.stderr.count("\n") == 1
