"""``/health`` and a light query on another session while 45 slow requests are in flight.

A real ``pmwcm serve`` process serves two sessions: ``slow``, over a table whose
hinge / absolute-loss queries on all five features at radius close to the limit take
about a second each (a 2 * 4^5-cell clique solved to the fixed budget), and ``light``,
over the tiny table. 45 clients each send one distinct slow query at once; while
they are in flight the benchmark samples ``GET /health`` and a distinct light query on
``light`` for ``--seconds``. The same samples are first taken on the idle server (the
baseline, same run). Loaded samples are taken only while slow requests are in flight.
Printed: p50 / p99 of each, loaded and idle, their ratio, and how many slow requests
were still in flight at the last sample.

Target (issue 16): p99 under 200 ms for both while the 45 slow requests run.

Usage: ``python benchmarks/service/slow_requests.py [--seconds 30]``; prints a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash import write_data
from throughput import ServeProcess

SLOW = 45
FEATURES, LEVELS = 5, 4


def write_wide(directory: Path, n: int = 1000) -> tuple[Path, Path]:
    """A table of five 4-level features and a binary target, and its schema."""
    rng = np.random.default_rng(0)
    names, values = [f"x{i}" for i in range(FEATURES)], [f"v{j}" for j in range(LEVELS)]
    rows = rng.integers(0, LEVELS, (n, FEATURES))
    label = rng.integers(0, 2, n)
    lines = [",".join([*names, "y"])]
    lines += [
        ",".join([*(values[v] for v in row), ("no", "yes")[t]])
        for row, t in zip(rows, label, strict=True)
    ]
    data, schema = directory / "wide.csv", directory / "wide.schema.json"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    attributes = [{"name": a, "values": values} for a in names]
    attributes.append({"name": "y", "values": ["no", "yes"]})
    schema.write_text(json.dumps({"name": "wide", "attributes": attributes}), encoding="utf-8")
    return data, schema


def _setup(workdir: Path) -> tuple[Path, dict[str, str]]:
    from pmwcm.service import SQLiteStore, bootstrap_curator, new_token
    from pmwcm.service.build import session_config
    from pmwcm.service.sessions import SessionManager

    tiny = write_data(workdir)
    wide = write_wide(workdir)
    state = workdir / "state"
    store = SQLiteStore(state)
    tokens = {}
    try:
        bootstrap_curator(store)
        for name, (data, schema) in {"slow": wide, "light": tiny}.items():
            config = session_config(
                data_path=str(data),
                schema_path=str(schema),
                epsilon=1.0,
                delta=1e-6,
                parameters={"prior": "uniform", "max_updates": 3, "threshold": 1e6},
            )
            SessionManager(store).create(name, config)
            token, record = new_token(role="analyst", session=name)
            store.add_token(record)
            tokens[name] = token
    finally:
        store.close()
    return state, tokens


def sample(
    url: str, token: str, seconds: float, offset: int, busy: Any = None
) -> dict[str, list[float]]:
    """``/health`` and light-query latencies (seconds), alternating, for ``seconds`` (or
    while ``busy()`` holds)."""
    out: dict[str, list[float]] = {"health": [], "light": []}
    headers = {"Authorization": f"Bearer {token}"}
    end = time.perf_counter() + seconds
    i = 0
    with httpx.Client(base_url=url, timeout=600) as http:
        while time.perf_counter() < end and (busy is None or busy()):
            t0 = time.perf_counter()
            assert http.get("/health").status_code == 200
            out["health"].append(time.perf_counter() - t0)
            spec = {
                "loss": "logistic",
                "target": "y",
                "features": ["a", "c"],
                # distinct problems, all within 1e-5 of radius 1 (idle and loaded alike:
                # the data solve's iterations grow with the radius)
                "radius": 1.0 + (offset + i) * 1e-12,
            }
            i += 1
            t0 = time.perf_counter()
            response = http.post("/v1/sessions/light/queries", json=spec, headers=headers)
            assert response.status_code == 200, response.text
            out["light"].append(time.perf_counter() - t0)
            time.sleep(0.02)
    return out


def _stats(values: list[float]) -> dict[str, float]:
    ms = np.asarray(values) * 1000
    return {
        "n": len(values),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pmwcm-slow-"))
    try:
        state, tokens = _setup(workdir)
        server = ServeProcess(state, workdir / "server.log")
        try:
            idle = sample(server.url, tokens["light"], min(10.0, args.seconds), 0)
            done: list[int] = []
            statuses: list[Any] = []

            def slow(i: int) -> None:
                spec = {
                    "loss": ("hinge", "absolute")[i % 2],
                    "target": "y",
                    "features": [f"x{j}" for j in range(FEATURES)],
                    "radius": 100.0 - i,
                }
                headers = {"Authorization": f"Bearer {tokens['slow']}"}
                try:
                    with httpx.Client(base_url=server.url, timeout=3600) as http:
                        r = http.post("/v1/sessions/slow/queries", json=spec, headers=headers)
                    statuses.append(r.status_code)
                except httpx.HTTPError as err:  # the server is stopped at the end
                    statuses.append(type(err).__name__)
                done.append(i)

            threads = [threading.Thread(target=slow, args=(i,), daemon=True) for i in range(SLOW)]
            for thread in threads:
                thread.start()
            time.sleep(1.0)  # all 45 sent; the first is running, the rest queued
            loaded = sample(
                server.url, tokens["light"], args.seconds, 10**6, busy=lambda: len(done) < SLOW
            )
            in_flight = SLOW - len(done)
            answered = sum(s == 200 for s in statuses)
        finally:
            server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, Any] = {
        "slow_requests": SLOW,
        "slow_in_flight_at_end": in_flight,
        "slow_answered_during": answered,
    }
    for kind in ("health", "light"):
        result[f"{kind}_idle"] = _stats(idle[kind])
        result[f"{kind}_loaded"] = _stats(loaded[kind])
        result[f"{kind}_p99_loaded_over_idle"] = round(
            result[f"{kind}_loaded"]["p99_ms"] / result[f"{kind}_idle"]["p99_ms"], 2
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
