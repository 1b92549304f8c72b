"""The embedded :class:`~pmwcm.service.store.StateStore`: one SQLite file in WAL mode.

``synchronous=FULL`` makes SQLite fsync the write-ahead log at every commit, so
a transaction that returned survives a crash of the process (``kill -9``) and
of the machine.

**Group commit.** The fsync is most of a write's cost, and requests of different
sessions write at the same time. Each mutating call runs its statements inside
a savepoint of a shared ``BEGIN IMMEDIATE`` transaction; the call that finds no
other call queued behind it commits that transaction (one fsync) for all of
them, and every call returns only after the commit that holds its writes. A
call that fails rolls back to its savepoint alone; a failed commit fails every
call in it. Calls queued while a commit runs form the next batch. Reads use a
second connection, so they never wait for an fsync (WAL readers see every
committed transaction).

**What this process wrote, it remembers.** The ``flock`` makes this store the
only writer of its directory, so two things every request reads are kept in
memory, exact, instead of being read back from SQLite each time: each
session's :class:`~pmwcm.service.store.SessionHead` (advanced after each
commit from the values the commit wrote: the next debit and release positions
and the snapshot's version, which the upsert returns) and each token record
looked up (dropped from memory once a revocation is committed). Either is
filled from the database on first use, under the same lock as the reads.

**Schema versions.** Version 2 (this one) keeps released answers only as rows
of the ``releases`` log, snapshots without them (with a ``version`` counter),
and the ``kept_responses`` of ``Idempotency-Key`` requests. A version-1
directory (whose every snapshot also held every released answer) is migrated
in place when it is opened, in one transaction: the kept-responses table and
the snapshot counter are added and each snapshot's copy of the answers is
dropped (the same answers are the log's rows, committed in the same
transactions). A crash during the migration leaves version 1, migrated again
at the next start. Nothing else changes; an unknown version is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pmwcm.service.store import (
    DebitRecord,
    KeptResponse,
    ReleaseRecord,
    SessionHead,
    SessionRecord,
    StateStore,
    StoredSnapshot,
    StoreError,
    TokenRecord,
)

DB_NAME = "pmwcm.sqlite3"
LOCK_NAME = "pmwcm.lock"
SCHEMA_VERSION = "2"
#: The version a directory written before the append-only log has (migrated on open).
OLD_SCHEMA_VERSION = "1"

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY, digest TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('curator', 'analyst')),
    session TEXT, label TEXT NOT NULL, created REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS sessions (name TEXT PRIMARY KEY, config TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS debits (session TEXT NOT NULL, seq INTEGER NOT NULL,
    label TEXT NOT NULL, event TEXT NOT NULL, sv_state TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS releases (session TEXT NOT NULL, idx INTEGER NOT NULL,
    query_key TEXT NOT NULL, answer TEXT NOT NULL, token_id TEXT, created REAL NOT NULL,
    PRIMARY KEY (session, idx));
CREATE TABLE IF NOT EXISTS orphans (session TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS snapshots (session TEXT PRIMARY KEY, state TEXT NOT NULL,
    hypothesis BLOB NOT NULL);
"""
_V2_TABLES = """
CREATE TABLE IF NOT EXISTS kept_responses (session TEXT NOT NULL, token_id TEXT NOT NULL,
    key TEXT NOT NULL, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body BLOB NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (session, token_id, key));
"""


class SQLiteStore(StateStore):
    """:class:`StateStore` on ``DIR/pmwcm.sqlite3`` (WAL, ``synchronous=FULL``).

    One process owns a state directory at a time: opening takes an exclusive
    ``flock`` on ``DIR/pmwcm.lock`` (the kernel drops it when the process
    dies, even by ``kill -9``). Calls from many threads are serialised by a
    lock around the single connection.

    Args:
        directory: the state directory (created with mode ``0o700`` if missing).

    Raises:
        StoreError: another process holds the state directory.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreError(
                f"State directory '{self.directory}' is in use by another process."
            ) from None
        self._mutex = threading.Lock()  # the reading connection's, and the caches' fills
        self._group = _GroupCommit()
        self._heads: dict[str, SessionHead] = {}
        self._tokens: dict[str, TokenRecord] = {}
        try:
            self._db = sqlite3.connect(
                self.directory / DB_NAME, isolation_level=None, check_same_thread=False
            )
            self._group.db = self._db
            self._init_schema()
            self._reader = sqlite3.connect(
                self.directory / DB_NAME, isolation_level=None, check_same_thread=False
            )
        except BaseException:
            if hasattr(self, "_db"):
                self._db.close()
            os.close(self._lock_fd)
            raise

    def _init_schema(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        with self._transaction() as db:
            version = None
            if self._has_table(db, "meta"):
                row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                version = None if row is None else row[0]
            if version is None:
                for statement in _statements(_TABLES + _V2_TABLES):
                    db.execute(statement)
                _add_snapshot_version(db)
                db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif version == OLD_SCHEMA_VERSION:
                _migrate_v1(db)
            elif version != SCHEMA_VERSION:
                raise StoreError(
                    f"Unsupported state schema version {version!r} (this pmwcm reads "
                    f"version {SCHEMA_VERSION} and migrates version {OLD_SCHEMA_VERSION})."
                )

    @staticmethod
    def _has_table(db: sqlite3.Connection, name: str) -> bool:
        found = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,))
        return found.fetchone() is not None

    def _transaction(self) -> _GroupCommit:
        return self._group

    def add_token(self, token: TokenRecord) -> None:
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        token.token_id,
                        token.digest,
                        token.role,
                        token.session,
                        token.label,
                        token.created,
                        token.revoked,
                    ),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"Token id {token.token_id!r} exists.") from None

    def get_token(self, token_id: str) -> TokenRecord | None:
        cached = self._tokens.get(token_id)
        if cached is not None:
            return cached
        with self._mutex:  # a revocation's eviction waits for this fill (never undone by it)
            rows = self._reader.execute(
                "SELECT * FROM tokens WHERE token_id = ?", (token_id,)
            ).fetchall()
            if not rows:
                return None  # misses are not kept: unknown ids would grow the cache
            record = self._tokens[token_id] = _token(rows[0])
            return record

    def cached_token(self, token_id: str) -> TokenRecord | None:
        return self._tokens.get(token_id)

    def list_tokens(self, *, session: str | None = None) -> list[TokenRecord]:
        if session is None:
            rows = self._query("SELECT * FROM tokens ORDER BY created, token_id", ())
        else:
            rows = self._query(
                "SELECT * FROM tokens WHERE session = ? ORDER BY created, token_id", (session,)
            )
        return [_token(r) for r in rows]

    def revoke_token(self, token_id: str, *, role: str | None = None) -> bool:
        sql = "UPDATE tokens SET revoked = ? WHERE token_id = ? AND revoked IS NULL"
        args: tuple[Any, ...] = (time.time(), token_id)
        if role is not None:
            sql, args = sql + " AND role = ?", (*args, role)
        with self._transaction() as db:
            revoked = db.execute(sql, args).rowcount > 0
        with self._mutex:
            self._tokens.pop(token_id, None)
        return revoked

    def add_session(
        self, session: SessionRecord, debits: list[DebitRecord], snapshot: StoredSnapshot
    ) -> None:
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO sessions VALUES (?, ?, ?)",
                    (session.name, json.dumps(session.config), session.created),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"Session {session.name!r} exists.") from None
            for debit in debits:
                self._insert_debit(db, session.name, debit)
            version = self._put_snapshot(db, session.name, snapshot)
        self._advance(
            session.name, SessionHead(debits=len(debits), releases=0, snapshot_version=version)
        )

    def get_session(self, name: str) -> SessionRecord | None:
        rows = self._query("SELECT * FROM sessions WHERE name = ?", (name,))
        return _session(rows[0]) if rows else None

    def list_sessions(self) -> list[SessionRecord]:
        return [_session(r) for r in self._query("SELECT * FROM sessions ORDER BY created", ())]

    def append_debit(self, session: str, debit: DebitRecord) -> None:
        with self._transaction() as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM debits WHERE session = ?", (session,)
            ).fetchone()
            if debit.seq != count:
                raise StoreError(
                    f"Debit {debit.seq} of session {session!r} is out of order: "
                    f"{count} debits are committed."
                )
            self._insert_debit(db, session, debit)
        self._advance(session, SessionHead(debits=debit.seq + 1, releases=0, snapshot_version=-1))

    def _advance(self, session: str, committed: SessionHead) -> None:
        """Moves the remembered head of ``session`` (if any) up to what a commit just wrote
        (each count only ever grows, so commits may report in any order)."""
        with self._mutex:
            known = self._heads.get(session)
            if known is not None:
                self._heads[session] = SessionHead(
                    debits=max(known.debits, committed.debits),
                    releases=max(known.releases, committed.releases),
                    snapshot_version=max(known.snapshot_version, committed.snapshot_version),
                )

    @staticmethod
    def _insert_debit(db: sqlite3.Connection, session: str, debit: DebitRecord) -> None:
        db.execute(
            "INSERT INTO debits VALUES (?, ?, ?, ?, ?, ?)",
            (
                session,
                debit.seq,
                debit.label,
                json.dumps(debit.event),
                json.dumps(debit.sv_state),
                time.time(),
            ),
        )

    @staticmethod
    def _put_snapshot(db: sqlite3.Connection, session: str, snapshot: StoredSnapshot) -> int:
        """Writes the session's snapshot; returns its version."""
        (version,) = db.execute(
            "INSERT INTO snapshots (session, state, hypothesis, version) VALUES (?, ?, ?, 0) "
            "ON CONFLICT (session) DO UPDATE SET state = excluded.state, "
            "hypothesis = excluded.hypothesis, version = snapshots.version + 1 "
            "RETURNING version",
            (session, json.dumps(snapshot.state), snapshot.hypothesis),
        ).fetchone()
        return int(version)

    def debits(self, session: str) -> list[DebitRecord]:
        rows = self._query(
            "SELECT seq, label, event, sv_state FROM debits WHERE session = ? ORDER BY seq",
            (session,),
        )
        return [
            DebitRecord(seq=r[0], label=r[1], event=json.loads(r[2]), sv_state=json.loads(r[3]))
            for r in rows
        ]

    def mark_orphans(self, session: str, seqs: list[int]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO orphans VALUES (?, ?)", [(session, s) for s in seqs]
            )

    def orphans(self, session: str) -> set[int]:
        rows = self._query("SELECT seq FROM orphans WHERE session = ?", (session,))
        return {int(r[0]) for r in rows}

    def commit_release(
        self,
        session: str,
        release: ReleaseRecord,
        snapshot: StoredSnapshot | None,
        kept: KeptResponse | None = None,
    ) -> None:
        now = time.time()
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO releases VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        session,
                        release.index,
                        release.query_key,
                        json.dumps(release.answer),
                        release.token_id,
                        now,
                    ),
                )
                if kept is not None:
                    db.execute(
                        "INSERT INTO kept_responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            session,
                            kept.token_id,
                            kept.key,
                            kept.fingerprint,
                            kept.status,
                            kept.body,
                            now,
                        ),
                    )
            except sqlite3.IntegrityError:
                raise StoreError(
                    f"Release {release.index} of session {session!r} (or its idempotency key) "
                    "is already committed."
                ) from None
            version = -1 if snapshot is None else self._put_snapshot(db, session, snapshot)
        self._advance(
            session, SessionHead(debits=0, releases=release.index + 1, snapshot_version=version)
        )

    def kept_response(self, session: str, token_id: str, key: str) -> KeptResponse | None:
        rows = self._query(
            "SELECT fingerprint, status, body FROM kept_responses "
            "WHERE session = ? AND token_id = ? AND key = ?",
            (session, token_id, key),
        )
        if not rows:
            return None
        fingerprint, status, body = rows[0]
        return KeptResponse(
            token_id=token_id, key=key, fingerprint=fingerprint, status=status, body=bytes(body)
        )

    def head(self, session: str) -> SessionHead:
        cached = self._heads.get(session)
        if cached is not None:
            return cached
        with self._mutex:  # a commit's advance waits for this fill, and then applies
            db = self._reader
            (debits,) = db.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM debits WHERE session = ?", (session,)
            ).fetchone()
            (releases,) = db.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM releases WHERE session = ?", (session,)
            ).fetchone()
            row = db.execute("SELECT version FROM snapshots WHERE session = ?", (session,))
            found = row.fetchone()
            version = -1 if found is None else int(found[0])
            head = SessionHead(debits=debits, releases=releases, snapshot_version=version)
            if found is not None:  # a session that exists (its snapshot is made with it)
                self._heads[session] = head
        return head

    def releases(self, session: str, *, start: int = 0) -> list[ReleaseRecord]:
        rows = self._query(
            "SELECT idx, query_key, answer, token_id FROM releases WHERE session = ? "
            "AND idx >= ? ORDER BY idx",
            (session, start),
        )
        return [
            ReleaseRecord(index=r[0], query_key=r[1], answer=json.loads(r[2]), token_id=r[3])
            for r in rows
        ]

    def load_snapshot(self, session: str) -> StoredSnapshot | None:
        rows = self._query("SELECT state, hypothesis FROM snapshots WHERE session = ?", (session,))
        if not rows:
            return None
        return StoredSnapshot(state=json.loads(rows[0][0]), hypothesis=bytes(rows[0][1]))

    def close(self) -> None:
        with self._mutex, self._group.cond:
            if self._lock_fd < 0:
                return
            self._reader.close()
            self._db.close()
            os.close(self._lock_fd)  # drops the flock
            self._lock_fd = -1

    def _query(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        with self._mutex:
            return self._reader.execute(sql, args).fetchall()


class _GroupCommit:
    """One write call inside the current group transaction (see the module docstring).

    Used as ``with group as db:``: the body's statements run in a savepoint of
    the open ``BEGIN IMMEDIATE`` transaction, under the group's lock; ``__exit__``
    returns once the transaction holding them is committed (or raises).
    """

    def __init__(self) -> None:
        self.db: sqlite3.Connection | None = None
        self.cond = threading.Condition()
        self._queued = 0  # calls that have arrived and not yet finished their statements
        self._committing = False
        self._open = False
        self._batch = 0
        self._outcomes: dict[int, BaseException | None] = {}
        self._mine = threading.local()

    def __enter__(self) -> sqlite3.Connection:
        db = self.db
        assert db is not None
        with self.cond:
            self._queued += 1
        self.cond.acquire()
        try:
            while self._committing:
                self.cond.wait()
            if not self._open:
                db.execute("BEGIN IMMEDIATE")
                self._open, self._batch = True, self._batch + 1
            db.execute("SAVEPOINT write")
        except BaseException:
            self._queued -= 1
            if self._queued == 0 and self._open:  # the others in the batch wait for a commit
                self._commit(self._batch)
            self.cond.release()
            raise
        self._mine.batch = self._batch
        return db

    def _commit(self, batch: int) -> None:
        """Commits the open batch for everyone in it (called, and returns, with the lock)."""
        db = self.db
        assert db is not None
        self._committing = True
        self.cond.release()
        outcome: BaseException | None = None
        try:
            db.execute("COMMIT")  # the fsync
        except BaseException as err:
            outcome = err
            if db.in_transaction:
                db.execute("ROLLBACK")
        self.cond.acquire()
        self._committing, self._open = False, False
        self._outcomes[batch] = outcome
        self._outcomes.pop(batch - 64, None)
        self.cond.notify_all()

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        db = self.db
        assert db is not None
        batch: int = self._mine.batch
        try:
            if kind is not None:
                db.execute("ROLLBACK TO write")
            db.execute("RELEASE write")
        finally:
            self._queued -= 1
            if self._queued == 0:  # nobody queued behind: commit the batch, for everyone in it
                self._commit(batch)
            else:
                while batch not in self._outcomes:
                    self.cond.wait()
            failed = self._outcomes[batch]
            self.cond.release()
        if failed is not None and kind is None:
            raise StoreError(f"The commit failed: {failed}") from None


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


def _add_snapshot_version(db: sqlite3.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(snapshots)")}
    if "version" not in columns:
        db.execute("ALTER TABLE snapshots ADD COLUMN version INTEGER NOT NULL DEFAULT 0")


def _migrate_v1(db: sqlite3.Connection) -> None:
    """Version 1 -> 2 inside the caller's transaction (see the module docstring)."""
    for statement in _statements(_V2_TABLES):
        db.execute(statement)
    _add_snapshot_version(db)
    for session, state in db.execute("SELECT session, state FROM snapshots").fetchall():
        slim = json.loads(state) | {"answers": [], "released": {}}
        db.execute("UPDATE snapshots SET state = ? WHERE session = ?", (json.dumps(slim), session))
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))


def _token(row: Any) -> TokenRecord:
    return TokenRecord(
        token_id=row[0],
        digest=row[1],
        role=row[2],
        session=row[3],
        label=row[4],
        created=row[5],
        revoked=row[6],
    )


def _session(row: Any) -> SessionRecord:
    return SessionRecord(name=row[0], config=json.loads(row[1]), created=row[2])
