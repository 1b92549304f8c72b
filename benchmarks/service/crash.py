"""Crash injection for ``pmwcm serve``: kill -9 at random instants, restart, check invariants.

Each cycle starts the server on 127.0.0.1, lets two adaptive analysts (each
next query chosen from the answers released so far) query it, and kills the
server with SIGKILL after a random delay -- during a solve, a debit, a commit,
a recovery, or idle. With ``--failpoint-rate`` (fork mode) the server also
SIGKILLs itself at the protocol's critical instants: right after a debit is
durable, right before and right after an answer's commit. When a session's
budget is spent the curator opens the next one (between kills). Between cycles
the state directory is read directly, and after each restart the server is
asked; every cycle checks:

* the committed debits of every session are gap-free, never shrink (the budget
  never goes backwards) and compose to at most the session's budget;
* after the restart, the spend the server reports equals the composition of
  the committed debits, recomputed here from the raw events;
* the last snapshot's ledger is a prefix of the debits (the rest are orphans);
* no query ever received two different answers: every response any client saw
  for a query, in any cycle, equals every other one and the release log's;
* new oracle releases never outnumber oracle debits.

* with ``--store postgresql``, two server processes share one PostgreSQL
  database (a real, throw-away server from ``tests/postgres_cluster.py``); each
  cycle kills one of them while the other keeps serving, and the analysts of
  the killed one fail over to the survivor, resending a cut request with its
  ``Idempotency-Key``;
* a session with ``after_halt="synthetic"`` (and a small cutoff, so crash
  orphans halt it) is asked throughout: once halted it must serve synthetic
  answers, never a refusal;
* a sample of answered requests is resent with the same ``Idempotency-Key``:
  the response must come back byte for byte.

``--mode exec`` (the default) starts a real ``pmwcm serve`` process each cycle
(slow start-up: imports). ``--mode fork`` (the test suite's) forks each server
from a pre-imported ``multiprocessing`` forkserver and runs the same
``pmwcm.cli.serve.serve_command``; the killed process is just as dead and the
new one reads only the disk.

Usage: ``python benchmarks/service/crash.py --cycles 120 [--mode fork --failpoint-rate 0.05]
[--store postgresql]``; prints a JSON summary and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from pmwcm.service.client import Client

SESSION_PARAMS = {"max_updates": 30, "threshold": 0.0, "expected_queries": 100}
#: The synthetic session: a small cutoff, so that it halts (orphans included) early.
SYNTHETIC = "syn"
SYNTHETIC_PARAMS = {"max_updates": 4, "threshold": 0.0, "after_halt": "synthetic"}
#: The share of answered requests resent with their Idempotency-Key.
REPLAY_SHARE = 0.15
PRELOAD = [
    "pmwcm.cli.serve",
    "pmwcm.service",
    "pmwcm.data.table",
    "pmwcm.data.schema",
    "pmwcm.mechanisms.priors.marginals",
    "uvicorn",
    "uvicorn.server",
    "uvicorn.lifespan.on",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
]
FEATURES = (("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c"), ("a", "b", "c"))
VALUES = {"a": ["no", "yes"], "b": ["no", "yes"], "c": ["lo", "mid", "hi"], "y": ["no", "yes"]}


@dataclass
class Summary:
    """What the run did and found."""

    mode: str
    cycles: int = 0
    kills: int = 0
    failpoint_kills: int = 0
    requests_cut: int = 0
    answered: int = 0
    repeats_served: int = 0
    budget_refusals: int = 0
    sessions: int = 0
    debits: int = 0
    orphan_debits: int = 0
    distinct_queries: int = 0
    processes: int = 1
    store: str = "sqlite"
    failovers: int = 0
    idempotent_replays: int = 0
    synthetic_answers: int = 0
    synthetic_orphans: int = 0
    restart_s_median: float = 0.0
    restart_s_max: float = 0.0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)


def write_data(directory: Path, *, n: int = 300, seed: int = 0) -> tuple[Path, Path]:
    """A tiny CSV (four small attributes) and its schema."""
    rng = np.random.default_rng(seed)
    a, b, c = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 3, n)
    y = (rng.random(n) < 0.2 + 0.4 * a + 0.15 * c).astype(int)
    rows = ["a,b,c,y"] + [
        ",".join(VALUES[k][int(v)] for k, v in zip("abcy", r, strict=True))
        for r in zip(a, b, c, y, strict=True)
    ]
    data, schema = directory / "tiny.csv", directory / "tiny.schema.json"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    attrs = [{"name": k, "values": v} for k, v in VALUES.items()]
    schema.write_text(json.dumps({"name": "tiny", "attributes": attrs}), encoding="utf-8")
    return data, schema


def next_spec(
    history: list[tuple[dict[str, Any], tuple[float, ...]]], rng: random.Random
) -> dict[str, Any]:
    """The adaptive analyst: a query chosen from the last released theta, or a repeat (30%)."""
    if not history:
        return {"loss": "logistic", "target": "y", "features": ["a"]}
    if rng.random() < 0.3:
        return dict(rng.choice(history)[0])
    last = history[-1][1]
    pick = sum(1 << i for i, v in enumerate(last[:3]) if v > 0) + rng.randrange(3)
    return {
        "loss": "logistic" if rng.random() < 0.7 else "squared",
        "target": "y",
        "features": list(FEATURES[pick % len(FEATURES)]),
        "radius": 1.0 + round(min(abs(last[0]) * 4, 1.0), 2),
        "l2": rng.choice([0.0, 0.01, 0.1]),
    }


def _install_failpoints(rate: float, seed: int) -> None:
    """In the server process: SIGKILL itself at the protocol's critical instants, at ``rate``.

    Right after a debit is durable (its noise not yet drawn); right before an
    answer's commit (noise drawn, nothing committed); right after the commit
    (the response not yet sent). Test-harness monkeypatching only.
    """
    from pmwcm.service.postgres_store import PostgresStore
    from pmwcm.service.sqlite_store import SQLiteStore

    rng = random.Random(seed)

    def die_maybe() -> None:
        if rng.random() < rate:
            os.kill(os.getpid(), signal.SIGKILL)

    for store_class in (SQLiteStore, PostgresStore):
        append_debit, commit_release = store_class.append_debit, store_class.commit_release

        def debit(self: Any, session: str, record: Any, _inner: Any = append_debit) -> None:
            _inner(self, session, record)
            die_maybe()

        def release(
            self: Any,
            session: str,
            record: Any,
            snapshot: Any,
            kept: Any = None,
            _inner: Any = commit_release,
        ) -> None:
            die_maybe()
            _inner(self, session, record, snapshot, kept)
            die_maybe()

        setattr(store_class, "append_debit", debit)  # noqa: B010 (monkeypatching on purpose)
        setattr(store_class, "commit_release", release)  # noqa: B010


def serve_child(
    state: Path, port: int, failpoint_rate: float, seed: int, store_url: str | None = None
) -> None:
    """The forked server: ``pmwcm serve --state STATE --port PORT`` (or ``--store URL``),
    with failpoints if asked."""
    from pmwcm.cli.serve import serve_command

    if failpoint_rate > 0:
        _install_failpoints(failpoint_rate, seed)
    where: dict[str, Any] = {"state": state} if store_url is None else {"store_url": store_url}
    serve_command(port=port, data_dir=[state.parent], **where)  # the harness's data


def _key(session: str, spec: dict[str, Any]) -> str:
    full = {"radius": 1.0, "l2": 0.0, "intercept": True} | spec
    return session + "|" + json.dumps(full, sort_keys=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """One server process on ``port`` (fork: from a preloaded forkserver; exec: ``pmwcm``)."""

    _context: Any = None

    def __init__(
        self,
        mode: str,
        state: Path,
        port: int,
        log: Path,
        *,
        failpoint_rate: float = 0.0,
        store_url: str | None = None,
    ) -> None:
        self.mode, self.state, self.port, self.log = mode, state, port, log
        self.failpoint_rate = failpoint_rate
        self.store_url = store_url
        self.url = f"http://127.0.0.1:{port}"
        self._proc: Any = None

    def start(self, seed: int = 0) -> None:
        if self.mode == "fork":
            if Server._context is None:
                Server._context = multiprocessing.get_context("forkserver")
                Server._context.set_forkserver_preload(PRELOAD)
            args = (self.state, self.port, self.failpoint_rate, seed, self.store_url)
            self._proc = Server._context.Process(target=serve_child, args=args)
            self._proc.start()
            return
        exe = Path(sys.executable).with_name("pmwcm")
        cmd = (
            [str(exe)]
            if exe.exists()
            else [sys.executable, "-c", "from pmwcm.cli import main; main()"]
        )
        data_dir = ["--data-dir", str(self.state.parent)]  # where the harness writes its data
        env = dict(os.environ)
        where = ["--state", str(self.state)]
        if self.store_url is not None:  # through the environment: never on a command line
            env["PMWCM_STORE"], where = self.store_url, []
        with self.log.open("ab") as err:
            self._proc = subprocess.Popen(
                [*cmd, "serve", *where, "--port", str(self.port), *data_dir],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )

    def kill(self) -> None:
        """SIGKILL, then reap (bounded)."""
        if self._proc is None:
            return
        if self.mode == "fork":
            self._proc.kill()
            self._proc.join(30)
        else:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(30)
        self._proc = None

    def alive(self) -> bool:
        if self._proc is None:
            return False
        return bool(self._proc.is_alive() if self.mode == "fork" else self._proc.poll() is None)


class Harness:
    """State, tokens, observations and checks shared by all cycles."""

    def __init__(
        self, workdir: Path, *, mode: str, seed: int, store_url: str | None = None
    ) -> None:
        from pmwcm.service import bootstrap_curator, new_token
        from pmwcm.service.sessions import SessionManager

        self.workdir, self.rng = workdir, random.Random(seed)
        self.state = workdir / "state"
        self.store_url = store_url
        self.data, self.schema = write_data(workdir, seed=seed)
        self.summary = Summary(mode=mode, store="sqlite" if store_url is None else "postgresql")
        store = self.open_store()
        try:
            self.curator = bootstrap_curator(store) or ""
            SessionManager(store).create("s0", self._config())
            token, record = new_token(role="analyst", session="s0")
            store.add_token(record)
            SessionManager(store).create(SYNTHETIC, self._config(SYNTHETIC_PARAMS))
            self.synthetic_token, record = new_token(role="analyst", session=SYNTHETIC)
            store.add_token(record)
        finally:
            store.close()
        self.session, self.token = "s0", token
        self.urls: list[str] = []
        self.spent: dict[str, float] = {}
        self.exhausted = False
        self.seen: dict[str, tuple[float, ...]] = {}
        self.debits: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def open_store(self) -> Any:
        """The state store the servers use (SQLite: only while none runs)."""
        if self.store_url is None:
            from pmwcm.service import SQLiteStore

            return SQLiteStore(self.state)
        from pmwcm.service.postgres_store import PostgresStore

        return PostgresStore(self.store_url)

    def _config(self, parameters: dict[str, Any] = SESSION_PARAMS) -> dict[str, Any]:
        from pmwcm.service.build import session_config

        return dict(
            session_config(
                data_path=str(self.data),
                schema_path=str(self.schema),
                epsilon=2.0,
                delta=1e-6,
                parameters=parameters,
            )
        )

    def violation(self, message: str) -> None:
        with self.lock:
            self.summary.violations.append(message)

    def observe(self, session: str, spec: dict[str, Any], theta: tuple[float, ...]) -> None:
        """Records an answer; a different theta for a seen query is a violation."""
        key = _key(session, spec)
        with self.lock:
            first = self.seen.setdefault(key, theta)
        if first != theta:
            self.violation(f"two answers for {key}: {first} vs {theta}")

    def analyst(
        self, stop: threading.Event, seed: int, first: int, synthetic: bool = False
    ) -> None:
        """Asks adaptively until stopped, the servers die or the session's budget is spent.

        Every request carries an ``Idempotency-Key``; a cut request is resent with it to
        the other server (when there are two), and a sample of answered ones is resent
        to check that the response comes back byte for byte.
        """
        rng = random.Random(seed)
        history: list[tuple[dict[str, Any], tuple[float, ...]]] = []
        at = first
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                if synthetic:
                    session, token = SYNTHETIC, self.synthetic_token
                else:
                    session, token = self.session, self.analyst_token()
                spec, key = next_spec(history, rng), f"k{seed}-{rng.getrandbits(64):x}"
                headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
                path = f"/v1/sessions/{session}/queries"
                try:
                    response = http.post(self.urls[at] + path, json=spec, headers=headers)
                except httpx.HTTPError:
                    if stop.is_set():
                        return
                    with self.lock:
                        self.summary.requests_cut += 1
                    if len(self.urls) < 2:
                        return
                    at = 1 - at  # fail over, and resend the same request with its key
                    try:
                        response = http.post(self.urls[at] + path, json=spec, headers=headers)
                    except httpx.HTTPError:
                        return
                    with self.lock:
                        self.summary.failovers += 1
                if response.status_code == 409:
                    if synthetic:
                        self.violation(f"the synthetic session refused: {response.text[:200]}")
                        return
                    with self.lock:
                        self.summary.budget_refusals += 1
                        self.exhausted = True
                    return
                if response.status_code == 503 and "busy" in response.text:
                    continue  # nothing was spent: ask again later
                if response.status_code != 200:
                    self.violation(f"unexpected {response.status_code}: {response.text[:200]}")
                    return
                answer = response.json()
                theta = tuple(answer["theta"])
                self.observe(session, spec, theta)
                history.append((spec, theta))
                if rng.random() < REPLAY_SHARE:
                    try:
                        again = http.post(self.urls[at] + path, json=spec, headers=headers)
                    except httpx.HTTPError:
                        again = None
                    if again is not None:
                        if again.content != response.content:
                            self.violation(f"{key}: a replay returned other bytes")
                        with self.lock:
                            self.summary.idempotent_replays += 1
                with self.lock:
                    self.summary.answered += 1
                    self.summary.repeats_served += answer["repeated"]
                    self.summary.synthetic_answers += answer["source"] == "synthetic"

    def analyst_token(self) -> str:
        with self.lock:
            return self.token

    def rotate(self) -> None:
        """The curator opens the next session once the current one is spent."""
        name = f"s{int(self.session[1:]) + 1}"
        with Client(self.urls[0], self.curator, timeout=120) as curator:
            curator.create_session(
                name,
                data_path=str(self.data),
                schema_path=str(self.schema),
                epsilon=2.0,
                delta=1e-6,
                parameters=SESSION_PARAMS,
            )
            self.session, self.token = name, curator.issue_token(name)
        self.exhausted = False

    def check_disk(self) -> None:
        """Invariants on the committed state while no request runs (SQLite: no server runs)."""
        from pmwcm.engine.practical import make_accountant
        from pmwcm.mechanisms.accounting import BudgetExceededError, PrivacyLedger
        from pmwcm.mechanisms.accounting.codec import event_from_dict

        store = self.open_store()
        try:
            for record in store.list_sessions():
                name, config = record.name, record.config
                # Releases, then the snapshot, then the debits: each commit follows the
                # debits it needs, so the checks hold even if a server is still writing.
                releases = store.releases(name)
                snap = store.load_snapshot(name)
                debits = store.debits(name)
                events = [d.event for d in debits]
                if [d.seq for d in debits] != list(range(len(debits))):
                    self.violation(f"{name}: debits not gap-free")
                before = self.debits.get(name, [])
                if events[: len(before)] != before:
                    self.violation(f"{name}: committed debits changed or shrank")
                self.debits[name] = events
                ledger = PrivacyLedger(
                    epsilon=config["epsilon"],
                    delta=config["delta"],
                    accountant=make_accountant(config["parameters"]["accountant"]),
                )
                try:
                    for d in debits:
                        ledger.spend(event_from_dict(d.event), label=d.label)
                except BudgetExceededError:
                    self.violation(f"{name}: committed debits exceed the budget")
                logged = snap.state["ledger"] if snap is not None else []
                if [e["event"] for e in logged] != events[: len(logged)]:
                    self.violation(f"{name}: snapshot ledger is not a prefix of the debits")
                if [r.index for r in releases] != list(range(len(releases))):
                    self.violation(f"{name}: the answer log has a gap")
                oracle_debits = sum(d.label.startswith("oracle") for d in debits)
                fresh_oracle = sum(
                    r.answer["source"] == "oracle" and not r.answer["repeated"] for r in releases
                )
                if fresh_oracle > oracle_debits:
                    self.violation(f"{name}: {fresh_oracle} oracle answers, {oracle_debits} debits")
                for r in releases:
                    spec = json.loads(r.query_key.removeprefix("cm:"))
                    self.observe(name, spec, tuple(r.answer["value"]))
                self.spent[name] = ledger.spent_epsilon()
        finally:
            store.close()

    def check_api(self) -> None:
        """After a restart: every server reports the spend the committed debits compose to
        (the ledger replayed)."""
        for url in self.urls:
            with Client(url, self.curator, timeout=60) as curator:
                for name, expected in self.spent.items():
                    reported = curator.status(name)["epsilon_spent"]
                    if not math.isclose(reported, expected, rel_tol=1e-12, abs_tol=1e-15):
                        self.violation(
                            f"{name}: {url} reports {reported}, debits compose to {expected}"
                        )

    def finish(self) -> Summary:
        store = self.open_store()
        try:
            sessions = store.list_sessions()
            self.summary.sessions = len(sessions)
            for record in sessions:
                snap = store.load_snapshot(record.name)
                covered = len(snap.state["ledger"]) if snap is not None else 0
                debits = len(store.debits(record.name))
                pending = set(range(covered, debits))  # orphans not yet recovered
                self.summary.debits += debits
                self.summary.orphan_debits += len(store.orphans(record.name) | pending)
                if record.name == SYNTHETIC:
                    self.summary.synthetic_orphans = len(store.orphans(record.name) | pending)
        finally:
            store.close()
        self.summary.distinct_queries = len(self.seen)
        return self.summary


def _wait_healthy(url: str, server: Server, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and server.alive():
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return False


def run(
    workdir: Path,
    *,
    cycles: int,
    mode: str = "fork",
    seed: int = 0,
    max_delay: float = 1.5,
    failpoint_rate: float = 0.0,
    time_limit: float = 3600.0,
    store_url: str | None = None,
) -> Summary:
    """Runs ``cycles`` start / query / kill -9 cycles in ``workdir``; returns the summary.

    With ``store_url`` (PostgreSQL) two servers share the store and each cycle kills
    one of them while the other keeps serving.
    """
    started = time.monotonic()
    harness = Harness(workdir, mode=mode, seed=seed, store_url=store_url)
    if failpoint_rate and mode != "fork":
        raise ValueError("failpoints need --mode fork.")
    log = workdir / "server.log"
    count = 1 if store_url is None else 2
    servers = [
        Server(
            mode,
            harness.state,
            _free_port(),
            log,
            failpoint_rate=failpoint_rate,
            store_url=store_url,
        )
        for _ in range(count)
    ]
    harness.urls = [server.url for server in servers]
    harness.summary.processes = count
    restarts: list[float] = []
    try:
        for cycle in range(cycles):
            if time.monotonic() - started > time_limit:
                harness.violation(f"time limit {time_limit}s reached after {cycle} cycles")
                break
            healthy = True
            for i, server in enumerate(servers):
                if server.alive():
                    continue
                t0 = time.monotonic()
                server.start(seed=seed * 100_003 + cycle * 2 + i)
                if not _wait_healthy(server.url, server, 90):
                    harness.violation(f"cycle {cycle}: server {i} did not become healthy")
                    healthy = False
                    break
                restarts.append(time.monotonic() - t0)
            if not healthy:
                break
            harness.check_api()
            if harness.exhausted:
                harness.rotate()
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=harness.analyst,
                    args=(stop, seed * 1000 + cycle * 3 + i, i % count, i == 2),
                )
                for i in range(3)
            ]
            for thread in threads:
                thread.start()
            victim = servers[harness.rng.randrange(count)]
            deadline = time.monotonic() + harness.rng.uniform(0.0, max_delay)
            while time.monotonic() < deadline and victim.alive():
                time.sleep(0.01)
            if victim.alive():
                harness.summary.kills += 1
            else:
                harness.summary.failpoint_kills += 1
            victim.kill()
            if count > 1:  # the survivor keeps serving the failed-over analysts a while
                time.sleep(harness.rng.uniform(0.0, max_delay / 2))
            stop.set()
            for thread in threads:
                thread.join(60)
            for server in servers:
                if not server.alive():  # a failpoint may have killed the survivor too
                    server.kill()
            harness.check_disk()
            harness.summary.cycles += 1
    finally:
        for server in servers:
            server.kill()
    summary = harness.finish()
    if restarts:
        summary.restart_s_median = round(float(np.median(restarts)), 2)
        summary.restart_s_max = round(max(restarts), 2)
    summary.seconds = round(time.monotonic() - started, 1)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=120)
    parser.add_argument("--mode", choices=("exec", "fork"), default="exec")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-delay", type=float, default=1.5, help="longest run before a kill (s)"
    )
    parser.add_argument(
        "--failpoint-rate",
        type=float,
        default=0.0,
        help="fork mode: self-kill rate at each failpoint",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="postgresql: two servers share a throw-away PostgreSQL server's database",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pmwcm-crash-"))
    options = {
        "cycles": args.cycles,
        "mode": args.mode,
        "seed": args.seed,
        "max_delay": args.max_delay,
        "failpoint_rate": args.failpoint_rate,
    }
    try:
        if args.store == "postgresql":
            sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
            from postgres_cluster import PostgresCluster

            with PostgresCluster() as cluster:
                summary = run(workdir, store_url=cluster.url, **options)
        else:
            summary = run(workdir, **options)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(asdict(summary), indent=2))
    sys.exit(1 if summary.violations else 0)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    main()
