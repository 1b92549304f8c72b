"""The worker model (issue 16, Found 1): a slow session starves neither ``/health`` nor
another session; a request past its deadline or whose client left is given up before
anything is spent; every request that touched the data is committed.

No fixed timing thresholds here: each test asserts an order of events (the light
requests finish while the slow ones are still running) or counts in the store, and the
deadline test sets its deadline from a query timed on the same machine. The p99 of
``/health`` under 45 slow requests is measured in ``benchmarks/service/slow_requests.py``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
from pmwcm.service.client import Client
from service.svc_support import serving

SLOW = 45


def slow_spec(i: int) -> dict[str, Any]:
    """A distinct hinge query (no repeats) at the service's largest radius: a long solve."""
    features = [["a", "b", "c"], ["a", "c"], ["b", "c"]][i % 3]
    return {
        "loss": "hinge" if i % 2 else "absolute",
        "target": "y",
        "features": features,
        "radius": 100.0 - i,
        "l2": 0.001 * (i + 1),
    }


def _start(tmp_path: Path, tiny: tuple[Path, Path], **options: Any) -> tuple[Any, str]:
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    return create_app(store, data_dirs=[tiny[0].parent], **options), curator


def _sessions(admin: Client, tiny: tuple[Path, Path], *names: str) -> dict[str, str]:
    tokens = {}
    for name in names:
        admin.create_session(
            name,
            data_path=str(tiny[0]),
            schema_path=str(tiny[1]),
            epsilon=1.0,
            delta=1e-6,
            parameters={"prior": "uniform", "max_updates": 3, "threshold": 1e6},
        )
        tokens[name] = admin.issue_token(name)
    return tokens


def write_wide(directory: Path, *, features: int = 5, levels: int = 4, n: int = 1000) -> Path:
    """A CSV whose hinge queries over every feature are slow (a 2 * 4^5-cell clique solved
    to the fixed budget: about 0.3 s on the development machine in November 2026, a
    second before the kernels got faster), with its schema next to it; returns the CSV."""
    rng = np.random.default_rng(0)
    names, values = [f"x{i}" for i in range(features)], [f"v{j}" for j in range(levels)]
    rows = rng.integers(0, levels, (n, features))
    label = rng.integers(0, 2, n)
    lines = [",".join([*names, "y"])]
    lines += [
        ",".join([*(values[v] for v in row), ("no", "yes")[t]])
        for row, t in zip(rows, label, strict=True)
    ]
    data = directory / "wide.csv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    attributes = [{"name": a, "values": values} for a in names]
    attributes.append({"name": "y", "values": ["no", "yes"]})
    schema = {"name": "wide", "attributes": attributes}
    (directory / "wide.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    return data


def wide_spec(i: int) -> dict[str, Any]:
    """A distinct slow query on :func:`write_wide`'s data (no repeats)."""
    features = [f"x{j}" for j in range(5)]
    loss = ("hinge", "absolute")[i % 2]
    return {"loss": loss, "target": "y", "features": features, "radius": 100.0 - i}


def test_health_and_another_session_answer_while_45_slow_requests_run(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    wide = write_wide(tiny[0].parent)
    app, curator = _start(tmp_path, tiny, request_deadline=3600)
    with serving(app) as url, Client(url, curator) as admin:
        tokens = _sessions(admin, tiny, "light")
        tokens |= _sessions(admin, (wide, wide.with_suffix(".schema.json")), "slow")
        headers = {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
        light_spec = {"loss": "logistic", "target": "y", "features": ["a"]}
        with httpx.Client(base_url=url, timeout=600) as http:  # load the light session
            assert http.post(
                "/v1/sessions/light/queries", json=light_spec, headers=headers["light"]
            )
        done: list[int] = []
        first = threading.Event()
        outcomes: list[str] = []

        def slow(i: int) -> None:
            spec = wide_spec(i)
            try:  # the client gives up after a while: its queued request is then dropped
                with httpx.Client(base_url=url, timeout=6) as http:
                    response = http.post(
                        "/v1/sessions/slow/queries", json=spec, headers=headers["slow"]
                    )
                outcomes.append(str(response.status_code))
                done.append(i)
                first.set()
            except httpx.TimeoutException:
                outcomes.append("gave up")

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(SLOW)]
        for thread in threads:
            thread.start()
        assert first.wait(600)  # the slow work is running, and the rest of it queued
        with httpx.Client(base_url=url, timeout=600) as http:
            health = http.get("/health")
            pending_at_health = SLOW - len(done)
            light = http.post(
                "/v1/sessions/light/queries",
                json=light_spec | {"features": ["b"]},
                headers=headers["light"],
            )
            pending_at_light = SLOW - len(done)
        for thread in threads:
            thread.join(600)
        answered = len(admin.answers("slow"))
    assert health.status_code == 200 and light.status_code == 200, light.text
    # Under the old model (sync handlers waiting on the session lock inside the shared
    # 40-thread pool) /health and the light query queued behind the slow requests that
    # held that pool's threads: they could only finish after at least six of those had.
    assert pending_at_health >= SLOW - 2 and pending_at_light >= SLOW - 2
    assert set(outcomes) <= {"200", "gave up"} and len(outcomes) == SLOW
    # Every slow request that reached the data was committed (even if its client left);
    # those still queued when their client left were dropped, and cost nothing.
    assert outcomes.count("200") <= answered < SLOW


def _seconds_per_wide_query(tmp_path: Path, tiny: tuple[Path, Path], wide: Path) -> float:
    """How long one :func:`wide_spec` query takes on this machine, asked alone of a
    loaded session (its own app and store; it also compiles the kernels for the test)."""
    app, curator = _start(tmp_path / "probe", tiny, request_deadline=3600)
    with serving(app) as url, Client(url, curator) as admin:
        token = _sessions(admin, (wide, wide.with_suffix(".schema.json")), "probe")["probe"]
        admin.status("probe")
        with httpx.Client(base_url=url, timeout=600) as http:
            headers = {"Authorization": f"Bearer {token}"}
            path = "/v1/sessions/probe/queries"
            http.post(path, json=wide_spec(10), headers=headers)
            start = time.perf_counter()
            answers = [http.post(path, json=wide_spec(i), headers=headers) for i in (8, 9)]
            seconds = (time.perf_counter() - start) / 2  # one of each loss
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    return seconds


def test_a_request_past_its_deadline_is_a_503_with_nothing_spent(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    """Eight queries of one session run one after another; with a deadline of about
    three of them (measured here: a fixed one was met by all eight once the solves
    got faster), the first few are answered and the rest refused, on any machine."""
    wide = write_wide(tiny[0].parent)
    deadline = 3 * _seconds_per_wide_query(tmp_path, tiny, wide)
    app, curator = _start(tmp_path, tiny, request_deadline=deadline)
    with serving(app) as url, Client(url, curator) as admin:
        tokens = _sessions(admin, (wide, wide.with_suffix(".schema.json")), "s")
        admin.status("s")  # loads the session (its first load counts toward a deadline too)
        responses: list[httpx.Response] = []

        def ask(i: int) -> None:
            with httpx.Client(base_url=url, timeout=600) as http:
                responses.append(
                    http.post(
                        "/v1/sessions/s/queries",
                        json=wide_spec(i),
                        headers={"Authorization": f"Bearer {tokens['s']}"},
                    )
                )

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        answered = [r for r in responses if r.status_code == 200]
        busy = [r for r in responses if r.status_code == 503]
        assert len(answered) + len(busy) == 8 and busy and answered
        for response in busy:
            assert int(response.headers["Retry-After"]) >= 1
            assert "nothing was spent" in response.json()["detail"]
        assert len(admin.answers("s")) == len(answered)  # one log row per answer, no more
        status = admin.status("s")
        assert status["answered"] == len(answered)


REQUESTS = 24


def test_a_client_that_leaves_before_its_work_starts_costs_nothing(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    app, curator = _start(tmp_path, tiny, request_deadline=3600)
    with serving(app) as url, Client(url, curator) as admin:
        tokens = _sessions(admin, tiny, "s")
        gave_up: list[int] = []

        def ask(i: int) -> None:
            try:
                # The requests queue on one session: whatever each costs, the later ones
                # wait for the earlier ones far longer than this.
                with httpx.Client(base_url=url, timeout=0.05) as http:
                    http.post(
                        "/v1/sessions/s/queries",
                        json=slow_spec(i),
                        headers={"Authorization": f"Bearer {tokens['s']}"},
                    )
            except httpx.TimeoutException:
                gave_up.append(i)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(REQUESTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        assert gave_up
        # Every request that reached the data committed its answer, even if its client
        # had gone (a retry gets it from the log); those still queued were dropped.
        with httpx.Client(base_url=url, timeout=600) as http:  # queues behind what still runs
            last = http.post(
                "/v1/sessions/s/queries",
                json={"loss": "logistic", "target": "y", "features": ["a"]},
                headers={"Authorization": f"Bearer {tokens['s']}"},
            )
        assert last.status_code == 200
        log = admin.answers("s")
        assert len(log) - 1 < REQUESTS  # queued requests of clients that left: never answered
        assert [r["index"] for r in log] == list(range(len(log)))
        assert admin.status("s")["answered"] == len(log)
