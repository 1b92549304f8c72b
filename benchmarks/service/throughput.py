"""Throughput of ``pmwcm serve`` on SQLite: below-threshold answers per second at 1, 4 and
16 clients, and the p95 latency as the answer log grows from 10^3 to 10^5 answers.

The server is a real ``pmwcm serve`` process (``synchronous=FULL``: every answer is one
fsync'd commit). Every measured request is a **distinct** query (no earlier request of
the run posed the same problem) on a session whose threshold no query reaches, so each
one runs the full below-threshold path: compile, hypothesis solve, the fixed-budget data
solve, the sparse-vector test and the commit. The queries cycle through ``--pool``
logistic feature sets on the table (``--table``: ``tiny``, four attributes; ``adult``,
the dense Adult schema, 14 binary attributes; ``adult-full``, Adult at full resolution,
a support hypothesis), 1 to 4 features each, each request with its own radius
(``1 + i/10^12``: the same clique, a new problem, every measurement at the same
radius), so the answers are distinct while
their cliques recur as an analyst's would (a large pool: mostly new cliques within a
short measurement; a small one: cliques already seen). After each distinct measurement
the same clients **repeat** requests already answered (the engine's log answers them
without a solve); those are reported apart (``repeat_per_s``). ``--backend`` picks the
sessions' hypothesis backend (``support`` with ``--support-size`` records). The clients
spread over ``--sessions`` sessions (client ``i`` on session ``i mod sessions``); each
client sends for ``--seconds``.

Between measurements the server is stopped and the log of session ``s0`` is filled
up to the next size with answers to repeated queries, in this process, with
``synchronous=OFF`` (filling is not measured; the rows are real released answers, one
per request, as the server writes them). The server then restarts (recovery reads the
whole log once) and is measured again at 16 clients. Before each measurement every
session answers one query (one client per session, at once), so that the loading of
the sessions (rebuilt from their configuration, recovered from the whole log) is not
counted as throughput; the seconds this warm-up took are printed as ``load_s``. "p95
flat" means the ratio
of session ``s0``'s p95 (its clients' requests; its log is the one grown) at 10^5
answers to that at 10^3 (same run, same machine) stays near 1.

Usage: ``python benchmarks/service/throughput.py [--table adult] [--backend dense]
[--seconds 8] [--sessions 4] [--sizes 1000 10000 100000]``; prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash import _free_port, write_data

PARAMETERS = {"prior": "uniform", "max_updates": 5, "threshold": 1e6, "expected_queries": 10**6}
FEATURES = (["a"], ["b"], ["c"], ["a", "b"], ["a", "c"], ["b", "c"])
#: The bundled schema of each Adult table (the records are the bundled ``adult.csv``).
ADULT_SCHEMAS = {"adult": "adult-binary.schema.json", "adult-full": "adult-full.schema.json"}
TARGETS = {"tiny": "y", "adult": "income>50K", "adult-full": "income>50K"}


def write_table(workdir: Path, table: str) -> tuple[Path, Path]:
    """The table's CSV and schema, copied into ``workdir`` (the service reads them there)."""
    if table == "tiny":
        return write_data(workdir)
    from importlib import resources

    files = Path(str(resources.files("pmwcm.data.bundled").joinpath("files")))
    data, schema = workdir / "adult.csv", workdir / ADULT_SCHEMAS[table]
    shutil.copy(files / "adult.csv", data)
    shutil.copy(files / ADULT_SCHEMAS[table], schema)
    return data, schema


def feature_pool(table: str, schema: Path, size: int = 512) -> list[list[str]]:
    """Distinct feature sets (1 to 4 attributes besides the target) the queries cycle through."""
    if table == "tiny":
        return [list(f) for f in FEATURES]
    names = [a["name"] for a in json.loads(schema.read_text())["attributes"]]
    others = [n for n in names if n != TARGETS[table]]
    rng = np.random.default_rng(0)
    pool: dict[tuple[str, ...], None] = {}
    while len(pool) < size:
        chosen = rng.choice(len(others), size=int(rng.integers(1, 5)), replace=False)
        pool[tuple(others[i] for i in sorted(chosen))] = None
    return [list(f) for f in pool]


def _setup(
    workdir: Path, sessions: int, table: str, parameters: dict[str, Any]
) -> tuple[Path, list[str]]:
    """A state directory with ``sessions`` sessions and one analyst token for each."""
    from pmwcm.service import SQLiteStore, bootstrap_curator, new_token
    from pmwcm.service.build import session_config
    from pmwcm.service.sessions import SessionManager

    data, schema = write_table(workdir, table)
    state = workdir / "state"
    store = SQLiteStore(state)
    tokens = []
    try:
        bootstrap_curator(store)
        config = session_config(
            data_path=str(data),
            schema_path=str(schema),
            epsilon=1.0,
            delta=1e-6,
            parameters=parameters,
        )
        for i in range(sessions):
            SessionManager(store).create(f"s{i}", config)
            token, record = new_token(role="analyst", session=f"s{i}")
            store.add_token(record)
            tokens.append(token)
    finally:
        store.close()
    return state, tokens


def fill(state: Path, total: int, pool: list[list[str]], target: str) -> float:
    """Answers repeated queries on session ``s0`` in process until its log has ``total``
    rows (``synchronous=OFF`` while filling); returns the seconds it took."""
    from pmwcm.kernels.queries import CMQuery
    from pmwcm.service import SQLiteStore
    from pmwcm.service.sessions import SessionManager

    started = time.perf_counter()
    store = SQLiteStore(state)
    try:
        store._db.execute("PRAGMA synchronous=OFF")  # filling only; the server uses FULL
        session = SessionManager(store).get("s0")
        have = store.head("s0").releases
        queries = [
            CMQuery.from_dict({"loss": "logistic", "target": target, "features": f})
            for f in pool[:6]
        ]
        for i in range(have, total):
            session.ask(queries[i % len(queries)], token_id=None)
    finally:
        store.close()
    return time.perf_counter() - started


class ServeProcess:
    """``pmwcm serve --state STATE`` on a free port (started, then stopped by SIGTERM)."""

    def __init__(self, state: Path, log: Path, extra: tuple[str, ...] = ()) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = Path(sys.executable).with_name("pmwcm")
        args = ["serve", "--state", str(state), "--port", str(self.port), *extra]
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                [str(exe), *args], stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ)
            )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("pmwcm serve did not start")

    def stop(self) -> None:
        """SIGTERM (uvicorn finishes what runs), SIGKILL after 20 s (queued work is dropped)."""
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(20)


def _distinct(pool: list[list[str]], target: str, client: int, n: int, offset: int) -> dict:
    """Client ``client``'s ``n``-th distinct query: a feature set of the pool, its own radius.

    The radii differ in their twelfth decimal (every one a new problem), all within
    ``10^-4`` of 1 over a run, so every measurement asks the same problems' cost: the
    fixed-budget data solve's iterations grow with the radius
    (:func:`~pmwcm.kernels.fixed_budget.plan_solve`), and the radius ``1 + i/10^6``
    with ``offset`` 10^7 a measurement asked radius 1, 11, 21, ... in turn, each
    measurement's solves slower than the last's.
    """
    return {
        "loss": "logistic",
        "target": target,
        "features": pool[(client * 7 + n) % len(pool)],
        "radius": 1.0 + (offset + client * 100_000 + n) * 1e-12,
    }


def measure(
    url: str,
    tokens: list[str],
    clients: int,
    seconds: float,
    offset: int,
    *,
    pool: list[list[str]],
    target: str,
    repeat: list[list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """``clients`` threads send distinct below-threshold queries for ``seconds`` (or, with
    ``repeat``, client ``i`` re-sends the requests ``repeat[i]`` it sent then); the row's
    ``sent`` holds each client's answered requests."""
    latencies: list[float] = []
    grown: list[float] = []  # session s0's, whose log is the one filled
    sources: dict[str, int] = {}
    errors = 0
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = []
    sent: list[list[dict[str, Any]]] = [[] for _ in range(clients)]

    def client(i: int) -> None:
        nonlocal errors
        token = tokens[i % len(tokens)]
        session = f"s{i % len(tokens)}"
        headers = {"Authorization": f"Bearer {token}"}
        mine: list[float] = []
        with httpx.Client(base_url=url, timeout=120) as http:
            n = 0
            start.wait()
            while time.perf_counter() < stop_at[0]:
                if repeat is not None and not repeat[i]:
                    break
                spec = (
                    repeat[i][n % len(repeat[i])]
                    if repeat is not None
                    else _distinct(pool, target, i, n, offset)
                )
                n += 1
                t0 = time.perf_counter()
                response = http.post(f"/v1/sessions/{session}/queries", json=spec, headers=headers)
                elapsed = time.perf_counter() - t0
                with lock:
                    if response.status_code == 200:
                        source = response.json()["source"]
                        sources[source] = sources.get(source, 0) + 1
                        mine.append(elapsed)
                        sent[i].append(spec)
                    else:
                        errors += 1
        with lock:
            latencies.extend(mine)
            if session == "s0":
                grown.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    stop_at.append(time.perf_counter() + seconds)
    began = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    below = sources.get("hypothesis", 0)
    return {
        "clients": clients,
        "answers_per_s": round(len(latencies) / wall, 1),
        "below_threshold_per_s": round(below / wall, 1),
        "p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 1) if latencies else None,
        "p95_ms": round(float(np.percentile(latencies, 95)) * 1000, 1) if latencies else None,
        "s0_p95_ms": round(float(np.percentile(grown, 95)) * 1000, 1) if grown else None,
        "errors": errors,
        "sources": sources,
        "sent": sent,
    }


def warm(url: str, tokens: list[str], offset: int, target: str, features: list[str]) -> float:
    """One query on every session at once (each is loaded by its first request); returns
    the seconds until all have answered."""
    started = time.perf_counter()

    def one(i: int) -> None:
        spec = {"loss": "logistic", "target": target, "features": features, "radius": 50 + i * 1e-3}
        spec["radius"] += offset * 1e-9
        headers = {"Authorization": f"Bearer {tokens[i]}"}
        response = httpx.post(
            f"{url}/v1/sessions/s{i}/queries", json=spec, headers=headers, timeout=300
        )
        response.raise_for_status()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(tokens))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def _measured(
    url: str, tokens: list[str], clients: int, seconds: float, offset: int, **query: Any
) -> dict[str, Any]:
    """A distinct measurement, then its clients repeating what they were answered."""
    row = measure(url, tokens, clients, seconds, offset, **query)
    again = measure(url, tokens, clients, seconds, offset, **query, repeat=row.pop("sent"))
    row["repeat_per_s"] = again["answers_per_s"]
    row["repeat_p95_ms"] = again["p95_ms"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default="tiny", choices=["tiny", *ADULT_SCHEMAS])
    parser.add_argument("--backend", default="auto", choices=["auto", "dense", "support"])
    parser.add_argument("--support-size", type=int, default=0, help="M (0: the default)")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--workers", type=int, default=None, help="pmwcm serve --workers")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument(
        "--pool", type=int, default=512, help="distinct feature sets the queries cycle through"
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pmwcm-throughput-"))
    rows: list[dict[str, Any]] = []
    parameters = PARAMETERS | {"backend": args.backend, "support_size": args.support_size}
    target = TARGETS[args.table]
    try:
        state, tokens = _setup(workdir, args.sessions, args.table, parameters)
        schema = workdir / ADULT_SCHEMAS.get(args.table, "tiny.schema.json")
        query = {"pool": feature_pool(args.table, schema, args.pool), "target": target}
        offset = 0
        for k, size in enumerate(sorted(args.sizes)):
            filled = fill(state, size, query["pool"], target)
            extra = () if args.workers is None else ("--workers", str(args.workers))
            server = ServeProcess(state, workdir / "server.log", extra)
            try:
                loaded = warm(server.url, tokens, k, target, query["pool"][0])
                for clients in args.clients if k == 0 else (max(args.clients),):
                    row = _measured(server.url, tokens, clients, args.seconds, offset, **query)
                    offset += 10**7
                    row["log_answers_at_start"] = size
                    row["fill_s"] = round(filled, 1)
                    row["load_s"] = round(loaded, 2)
                    row["load_average_1m"] = round(os.getloadavg()[0], 1)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                server.stop()
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    most = max(args.clients)
    base = next(r for r in rows if r["clients"] == most)
    one = next(r for r in rows if r["clients"] == min(args.clients))
    print(
        f"\n{args.table}, backend {args.backend}, pool {args.pool}:\n\n| s0 log answers | clients "
        "| distinct below-threshold/s | x 1 client | p95 ms | s0 p95 ms | s0 p95 / first "
        "| repeats/s | repeat p95 ms | load s | load average |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        speedup = r["below_threshold_per_s"] / max(one["below_threshold_per_s"], 1e-9)
        ratio = r["s0_p95_ms"] / base["s0_p95_ms"] if r["clients"] == most else float("nan")
        print(
            f"| {r['log_answers_at_start']} | {r['clients']} | {r['below_threshold_per_s']} "
            f"| {speedup:.2f} | {r['p95_ms']} | {r['s0_p95_ms']} | {ratio:.2f} "
            f"| {r['repeat_per_s']} | {r['repeat_p95_ms']} | {r['load_s']} "
            f"| {r['load_average_1m']} |"
        )
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
