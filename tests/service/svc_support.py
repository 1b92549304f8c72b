"""Shared helpers for the service tests: a tiny dataset, an adaptive analyst."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

with warnings.catch_warnings():
    # starlette >= 1 prefers the httpx2 package and warns, once, at import, when it finds httpx.
    warnings.filterwarnings("ignore", message=r".*install `httpx2` instead", category=UserWarning)
    from fastapi.testclient import TestClient

#: How long a test waits for a session's build (``POST /v1/sessions?wait=``).
BUILD_WAIT = 300

ATTRIBUTES = {"a": ["no", "yes"], "b": ["no", "yes"], "c": ["lo", "mid", "hi"], "y": ["no", "yes"]}


__all__ = [
    "BUILD_WAIT",
    "Service",
    "TestClient",
    "curator_token",
    "free_port",
    "next_query",
    "pmwcm_command",
    "pmwcm_serve",
    "serving",
    "write_tiny",
]


@dataclass
class Service:
    """A running in-process app and what the tests need to drive it."""

    client: TestClient
    curator: str
    data: Path
    schema: Path
    state: Path

    def auth(self, token: str | None = None) -> dict[str, str]:
        """Headers for ``token`` (default: the curator's)."""
        return {"Authorization": f"Bearer {token or self.curator}"}

    def create(self, name: str = "s", *, epsilon: float = 1.0, **parameters: Any) -> Any:
        """Creates a session (uniform prior unless told otherwise) and waits for its build
        (``?wait=``: 201 once it is ready); returns the response."""
        body = {
            "name": name,
            "data_path": str(self.data),
            "schema_path": str(self.schema),
            "epsilon": epsilon,
            "delta": 1e-6,
            "parameters": {"prior": "uniform", "max_updates": 5} | parameters,
        }
        return self.client.post(
            "/v1/sessions", json=body, headers=self.auth(), params={"wait": BUILD_WAIT}
        )

    def analyst(self, session: str = "s") -> str:
        """A new analyst token for ``session``."""
        response = self.client.post(
            f"/v1/sessions/{session}/tokens", json={"label": "test"}, headers=self.auth()
        )
        assert response.status_code == 201, response.text
        return str(response.json()["token"])

    def ask(self, token: str, session: str = "s", **spec: Any) -> Any:
        """Posts a query (defaults: logistic on y with feature a)."""
        body = {"loss": "logistic", "target": "y", "features": ["a"]} | spec
        path = f"/v1/sessions/{session}/queries"
        return self.client.post(path, json=body, headers=self.auth(token))


def write_tiny(directory: Path, *, n: int = 300, seed: int = 0) -> tuple[Path, Path]:
    """A CSV of ``n`` rows over four small attributes (y depends on a and c) and its schema."""
    rng = np.random.default_rng(seed)
    a, b, c = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 3, n)
    y = (rng.random(n) < 0.2 + 0.4 * a + 0.15 * c).astype(int)
    lines = ["a,b,c,y"]
    for row in zip(a, b, c, y, strict=True):
        lines.append(",".join(ATTRIBUTES[k][int(v)] for k, v in zip("abcy", row, strict=True)))
    data, schema = directory / "tiny.csv", directory / "tiny.schema.json"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = {"name": "tiny", "attributes": [{"name": k, "values": v} for k, v in ATTRIBUTES.items()]}
    schema.write_text(json.dumps(spec), encoding="utf-8")
    return data, schema


FEATURE_SETS = (("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c"), ("a", "b", "c"))


def next_query(history: list[list[float]], step: int) -> dict[str, Any]:
    """An adaptive analyst: the next query is chosen from the previous released thetas.

    The feature set is picked by the sign pattern of the last theta, the radius
    by its norm (rounded, so queries repeat and repeats must be served from the log).
    """
    if not history:
        return {"loss": "logistic", "target": "y", "features": ["a"]}
    last = np.asarray(history[-1])
    pick = int(sum(1 << i for i, v in enumerate(last[:3]) if v > 0) + step) % len(FEATURE_SETS)
    radius = 1.0 + round(float(np.linalg.norm(last)), 1)
    loss = "logistic" if step % 3 else "squared"
    return {"loss": loss, "target": "y", "features": list(FEATURE_SETS[pick]), "radius": radius}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any, *, startup_limit: float = 60.0) -> Iterator[str]:
    """Runs ``app`` under uvicorn on 127.0.0.1 in a thread; yields its URL; stops it."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_limit
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)


def pmwcm_command() -> list[str]:
    """The installed ``pmwcm`` console script (or the module, where it is not installed)."""
    exe = Path(sys.executable).with_name("pmwcm")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from pmwcm.cli import main; main()"]


@contextmanager
def pmwcm_serve(
    args: list[str], log: Path, *, env: dict[str, str] | None = None
) -> Iterator[tuple[str, queue.Queue[str]]]:
    """``pmwcm serve ARGS --port P`` as a real subprocess (its stderr appended to ``log``,
    ``env`` added to this environment); yields its URL and its stdout lines; stops it."""
    port = free_port()
    lines: queue.Queue[str] = queue.Queue()
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [*pmwcm_command(), "serve", *args, "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=None if env is None else os.environ | env,
        )
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "pmwcm serve did not start"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, lines
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        reader.join(10)
        stdout.close()


def curator_token(lines: queue.Queue[str]) -> str | None:
    """The curator token a first start prints on stdout; None when it printed none."""
    try:
        line = lines.get(timeout=5)
    except queue.Empty:
        return None
    assert line.startswith("curator token"), line
    return line.rsplit(" ", 1)[1].strip()
