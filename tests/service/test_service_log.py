"""The append-only answer log (issue 16, Found 7), Idempotency-Key retries (Found 8) and
a store shared by two processes. Each store-contract test runs on SQLite and on the
real PostgreSQL server (``open_store``)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.service import SQLiteStore, StateStore, bootstrap_curator, create_app
from pmwcm.service.build import session_config
from pmwcm.service.sessions import SessionManager
from pmwcm.service.store import StoreBusy
from service.svc_support import Service, TestClient

SPECS = [
    {"loss": loss, "target": "y", "features": features, "radius": radius}
    for loss in ("logistic", "squared")
    for features in (["a"], ["b"], ["c"], ["a", "b"], ["a", "c"], ["b", "c"])
    for radius in (1.0, 2.0)
]


def _manager(store: StateStore, seed: int) -> SessionManager:
    return SessionManager(store, noise_factory=lambda: NumpyNoise(seed=seed))


def _create(manager: SessionManager, tiny: tuple[Path, Path], **parameters: Any) -> None:
    config = session_config(
        data_path=str(tiny[0]),
        schema_path=str(tiny[1]),
        epsilon=1.0,
        delta=1e-6,
        parameters={"prior": "uniform", "max_updates": 3} | parameters,
    )
    manager.create("s", config)


def test_an_answer_that_changes_no_state_is_one_row_and_no_snapshot(
    open_store: Callable[[], StateStore], tiny: tuple[Path, Path], seed: int
) -> None:
    store = open_store()
    manager = _manager(store, seed)
    _create(manager, tiny, threshold=1e6)  # every test is below the threshold
    session = manager.get("s")
    session.ask(CMQuery.from_dict(SPECS[0]), token_id=None)  # pays the sparse vector
    after_first = store.head("s")
    snapshot_bytes = len(json.dumps(store.load_snapshot("s").state))  # type: ignore[union-attr]
    for spec in SPECS[1:]:
        assert session.ask(CMQuery.from_dict(spec), token_id=None).source == "hypothesis"
    head = store.head("s")
    assert head.snapshot_version == after_first.snapshot_version  # no snapshot rewritten
    assert head.releases == len(SPECS) and head.debits == after_first.debits
    stored = store.load_snapshot("s")
    assert stored is not None and stored.state["answers"] == [] and stored.state["released"] == {}
    assert len(json.dumps(stored.state)) == snapshot_bytes  # does not grow with the log
    store.close()


def test_a_restart_serves_every_released_answer_from_the_log(
    open_store: Callable[[], StateStore], tiny: tuple[Path, Path], seed: int
) -> None:
    store = open_store()
    manager = _manager(store, seed)
    _create(manager, tiny, threshold=0.0, max_updates=4, after_halt="synthetic")
    first = {
        json.dumps(spec): manager.get("s").ask(CMQuery.from_dict(spec), token_id=None)
        for spec in SPECS[:8]
    }
    store.close()
    store = open_store()
    session = _manager(store, seed + 1).get("s")
    for key, before in first.items():
        again = session.ask(CMQuery.from_dict(json.loads(key)), token_id=None)
        assert again.repeated and again.source == before.source
        assert again.value.tolist() == before.value.tolist()
    assert [r.index for r in store.releases("s")] == list(range(16))
    assert [r.index for r in store.releases("s", start=10)] == list(range(10, 16))
    store.close()


def test_the_head_a_store_reports_is_the_one_its_database_holds(
    open_store: Callable[[], StateStore], tiny: tuple[Path, Path], seed: int
) -> None:
    """SQLite keeps each session's head in memory (its only writer): after debits, releases
    and snapshots it must equal what a reopened store reads back from the database."""
    store = open_store()
    manager = _manager(store, seed)
    _create(manager, tiny, threshold=0.0, max_updates=3, after_halt="synthetic")
    heads = [store.head("s")]  # read (and, on SQLite, remembered) before any answer
    for spec in SPECS[:10]:  # updates (debits, snapshots), then synthetic answers
        manager.get("s").ask(CMQuery.from_dict(spec), token_id=None)
        heads.append(store.head("s"))
    store.close()
    reopened = open_store()
    assert reopened.head("s") == heads[-1]
    assert heads[-1].releases == 10 and heads[-1].debits > heads[0].debits
    assert heads[-1].snapshot_version > heads[0].snapshot_version
    assert all(a.releases + 1 == b.releases for a, b in itertools.pairwise(heads))
    reopened.close()


def test_a_version_1_state_directory_is_migrated_in_place(
    tmp_path: Path, tiny: tuple[Path, Path], seed: int
) -> None:
    store = SQLiteStore(tmp_path / "state")
    manager = _manager(store, seed)
    _create(manager, tiny, threshold=0.0, max_updates=4, after_halt="synthetic")
    answers = [manager.get("s").ask(CMQuery.from_dict(s), token_id=None) for s in SPECS[:6]]
    store.close()
    # Rewrite it as version 1 wrote it: every snapshot holds every released answer.
    db = sqlite3.connect(tmp_path / "state" / "pmwcm.sqlite3")
    with db:
        rows = db.execute("SELECT idx, query_key, answer FROM releases ORDER BY idx").fetchall()
        (state,) = db.execute("SELECT state FROM snapshots").fetchone()
        old = json.loads(state)
        old["answers"] = [json.loads(r[2]) for r in rows]
        old["released"] = {r[1]: r[0] for r in rows if not json.loads(r[2])["repeated"]}
        db.execute("UPDATE snapshots SET state = ?", (json.dumps(old),))
        db.execute("DROP TABLE kept_responses")
        db.execute("ALTER TABLE snapshots DROP COLUMN version")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    db.close()
    store = SQLiteStore(tmp_path / "state")
    (version,) = store._query("SELECT value FROM meta WHERE key = 'schema'", ())[0]
    assert version == "2"
    stored = store.load_snapshot("s")
    assert stored is not None and stored.state["answers"] == []
    session = _manager(store, seed + 1).get("s")
    for spec, before in zip(SPECS[:6], answers, strict=True):
        again = session.ask(CMQuery.from_dict(spec), token_id=None)
        assert again.repeated and again.value.tolist() == before.value.tolist()
    store.close()


def _app_service(store: StateStore, tiny: tuple[Path, Path], curator: str) -> Service:
    client = TestClient(create_app(store, data_dirs=[tiny[0].parent]))
    return Service(client, curator, tiny[0], tiny[1], Path("unused"))


def test_an_idempotency_key_returns_the_original_response_byte_for_byte(
    open_store: Callable[[], StateStore], tiny: tuple[Path, Path]
) -> None:
    store = open_store()
    curator = bootstrap_curator(store)
    assert curator is not None
    service = _app_service(store, tiny, curator)
    with service.client:
        assert service.create(threshold=0.0).status_code == 201
        analyst, other = service.analyst(), service.analyst()
        spec = {"loss": "logistic", "target": "y", "features": ["a", "c"]}
        path = "/v1/sessions/s/queries"

        def post(token: str, body: dict[str, Any], key: str) -> Any:
            headers = service.auth(token) | {"Idempotency-Key": key}
            return service.client.post(path, json=body, headers=headers)

        first = post(analyst, spec, "retry-1")
        assert first.status_code == 200
        again = post(analyst, dict(reversed(spec.items())), "retry-1")  # key order is no change
        assert again.status_code == 200 and again.content == first.content
        conflict = post(analyst, spec | {"features": ["b"]}, "retry-1")
        assert conflict.status_code == 422
        assert "Idempotency-Key was already used" in conflict.text
        assert post(other, spec, "retry-1").json()["repeated"]  # keys are per token
        bad = post(analyst, spec, "")
        assert bad.status_code == 422  # an empty key
        status = service.client.get("/v1/sessions/s", headers=service.auth()).json()
        assert status["answered"] == 2  # the retry released nothing
        spec_paths = service.client.get("/openapi.json").json()["paths"]
        operation = spec_paths["/v1/sessions/{name}/queries"]["post"]
        assert "Idempotency-Key" in {p["name"] for p in operation["parameters"]}
    store.close()
    store = open_store()  # a restart: the kept response survives it
    with _app_service(store, tiny, curator).client as client:
        headers = {"Authorization": f"Bearer {analyst}", "Idempotency-Key": "retry-1"}
        assert client.post(path, json=spec, headers=headers).content == first.content


def test_a_client_that_lost_its_response_gets_it_with_its_key_after_a_kill(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    """The answer and its kept response are one transaction: no state in which the answer
    is committed and a retry with its key would be answered anew."""
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    service = _app_service(store, tiny, curator)
    with service.client:
        assert service.create().status_code == 201
        analyst = service.analyst()
        headers = service.auth(analyst) | {"Idempotency-Key": "k"}
        spec = {"loss": "logistic", "target": "y", "features": ["b"]}
        sent = service.client.post("/v1/sessions/s/queries", json=spec, headers=headers)
    store.close()
    db = sqlite3.connect(tmp_path / "state" / "pmwcm.sqlite3")
    (kept,) = db.execute("SELECT body FROM kept_responses").fetchone()
    (logged,) = db.execute("SELECT COUNT(*) FROM releases").fetchone()
    db.close()
    assert kept == sent.content and logged == 1


def test_two_processes_share_one_postgresql_store(
    pg_database: str, tiny: tuple[Path, Path], seed: int
) -> None:
    from pmwcm.service.postgres_store import PostgresStore

    one, two = PostgresStore(pg_database), PostgresStore(pg_database)
    first, second = _manager(one, seed), _manager(two, seed + 1)
    _create(first, tiny, threshold=0.0, max_updates=4, after_halt="synthetic")
    released: dict[str, list[float]] = {}
    for i, spec in enumerate(SPECS[:10] + SPECS[:10]):
        manager = (first, second)[i % 2]  # alternate, as behind a load balancer
        answer = manager.get("s").ask(CMQuery.from_dict(spec), token_id=None)
        key = json.dumps(spec)
        if key in released:  # released by either process: served from the log
            assert answer.repeated and answer.value.tolist() == released[key]
        released.setdefault(key, answer.value.tolist())
    assert [r.index for r in one.releases("s")] == list(range(20))
    debits = one.debits("s")
    assert [d.seq for d in debits] == list(range(len(debits)))
    assert first.get("s").status().answered == second.get("s").status().answered == 20
    held = one.session_lock("s", timeout=5)
    with held, pytest.raises(StoreBusy), two.session_lock("s", timeout=0.2):  # across processes
        pass
    with two.session_lock("s", timeout=5):
        pass
    one.close()
    two.close()


def test_a_postgresql_session_lock_carries_every_statement_made_under_it(
    pg_database: str,
) -> None:
    """Found in the crash run (a killed process's lock fell while its last commit, on
    another connection, was still in flight; the next holder wrote the same log position):
    under a session lock, this thread's statements run on the lock holder's backend, so the
    lock can only fall after them. Elsewhere, and after the lock, the pool serves."""
    from pmwcm.service.postgres_store import PostgresStore

    store = PostgresStore(pg_database)
    holder = (  # the test's own database: the only advisory lock in it is the session's
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    with store.session_lock("s", timeout=5):
        (mine,) = store._query("SELECT pg_backend_pid()")[0]
        assert store._query(holder) == [(mine,)]
        store.mark_orphans("s", [0])  # a transaction: the same backend, the lock still held
        assert store._query("SELECT pg_backend_pid()")[0] == (mine,)
    assert store._query(holder) == []
    assert store.orphans("s") == {0}
    store.close()


def test_the_postgresql_url_is_never_shown(postgres_url: str) -> None:
    from pmwcm.service.postgres_store import PostgresStore, redacted
    from pmwcm.service.store import StoreError

    password = postgres_url.split(":")[2].split("@")[0]
    assert password not in redacted(postgres_url)
    wrong = postgres_url.replace(password, password + "x")
    with pytest.raises(StoreError) as refused:
        PostgresStore(wrong)
    assert password not in str(refused.value) and "127.0.0.1" in str(refused.value)


def test_group_commit_keeps_each_writer_apart(tmp_path: Path) -> None:
    """Writes of many threads share commits; one that fails is rolled back alone, and every
    other is durable when its call returns (read back after a reopen)."""
    import threading

    from pmwcm.service.store import DebitRecord, StoreError

    store = SQLiteStore(tmp_path / "state")
    errors: list[Exception] = []

    def writer(t: int) -> None:
        for seq in range(20):
            debit = DebitRecord(seq=seq, label=f"w{t}", event={"t": t}, sv_state={})
            store.append_debit(f"s{t}", debit)
        try:  # out of order: refused, and nothing of it is kept
            store.append_debit(f"s{t}", DebitRecord(seq=99, label="bad", event={}, sv_state={}))
        except StoreError as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    store = SQLiteStore(tmp_path / "state")
    assert len(errors) == 8
    for t in range(8):
        assert [d.seq for d in store.debits(f"s{t}")] == list(range(20))
        assert {d.label for d in store.debits(f"s{t}")} == {f"w{t}"}
    store.close()


def test_pmwcm_serve_takes_exactly_one_store_and_never_shows_its_password(
    tmp_path: Path, postgres_url: str
) -> None:
    from typer.testing import CliRunner

    from pmwcm.cli import app

    runner = CliRunner()
    neither = runner.invoke(app, ["serve"])
    assert neither.exit_code == 1 and "exactly one of --state" in neither.output
    both = runner.invoke(app, ["serve", "--state", str(tmp_path / "s"), "--store", postgres_url])
    assert both.exit_code == 1 and "exactly one of --state" in both.output
    password = postgres_url.split(":")[2].split("@")[0]
    wrong = runner.invoke(
        app, ["serve", "--port", "1"], env={"PMWCM_STORE": postgres_url.replace(password, "no")}
    )
    assert wrong.exit_code == 1 and "127.0.0.1" in wrong.output
    assert password not in wrong.output and ":no@" not in wrong.output
    assert runner.invoke(app, ["serve", "--state", str(tmp_path), "--workers", "0"]).exit_code == 1
