"""The embedded :class:`~pmwcm.service.store.StateStore`: one SQLite file in WAL mode.

``synchronous=FULL`` makes SQLite fsync the write-ahead log at every commit, so
a transaction that returned survives a crash of the process (``kill -9``) and
of the machine. The statements are the shared ones of
:class:`~pmwcm.service.sql_store.SQLStore` (the tables unprefixed); this module adds the
file lock, the group commit, the in-memory heads and tokens, and the migration.

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
from pathlib import Path
from typing import Any

from pmwcm.service.sql_store import (
    HEAD,
    SCHEMA_VERSION,
    TABLES,
    Dialect,
    SQLStore,
    head_from_row,
    token_from_row,
)
from pmwcm.service.store import SessionHead, StoreError, TokenRecord

DB_NAME = "pmwcm.sqlite3"
LOCK_NAME = "pmwcm.lock"
#: The version a directory written before the append-only log has (migrated on open).
OLD_SCHEMA_VERSION = "1"
#: SQLite's dialect: the tables unprefixed (as every state directory has them).
SQLITE = Dialect(
    prefix="", mark="?", real="REAL", blob="BLOB", unique_violation=sqlite3.IntegrityError
)


class SQLiteStore(SQLStore):
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

    dialect = SQLITE

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
                for name in TABLES:
                    db.execute(SQLITE.table(name))
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

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._mutex:
            return self._reader.execute(sql, args).fetchall()

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
            record = self._tokens[token_id] = token_from_row(rows[0])
            return record

    def cached_token(self, token_id: str) -> TokenRecord | None:
        return self._tokens.get(token_id)

    def revoke_token(self, token_id: str, *, role: str | None = None) -> bool:
        revoked = super().revoke_token(token_id, role=role)
        with self._mutex:
            self._tokens.pop(token_id, None)
        return revoked

    def head(self, session: str) -> SessionHead:
        cached = self._heads.get(session)
        if cached is not None:
            return cached
        with self._mutex:  # a commit's advance waits for this fill, and then applies
            row = self._reader.execute(SQLITE.sql(HEAD), (session, session, session))
            head = head_from_row(row.fetchone())
            if head.snapshot_version >= 0:  # a session that exists (made with its snapshot)
                self._heads[session] = head
        return head

    def _committed(self, session: str, head: SessionHead) -> None:
        """Moves the remembered head of ``session`` (if any) up to what a commit just wrote
        (each count only ever grows, so commits may report in any order)."""
        with self._mutex:
            known = self._heads.get(session)
            if known is not None:
                self._heads[session] = SessionHead(
                    debits=max(known.debits, head.debits),
                    releases=max(known.releases, head.releases),
                    snapshot_version=max(known.snapshot_version, head.snapshot_version),
                )

    def close(self) -> None:
        with self._mutex, self._group.cond:
            if self._lock_fd < 0:
                return
            self._reader.close()
            self._db.close()
            os.close(self._lock_fd)  # drops the flock
            self._lock_fd = -1


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


def _add_snapshot_version(db: sqlite3.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(snapshots)")}
    if "version" not in columns:
        db.execute("ALTER TABLE snapshots ADD COLUMN version INTEGER NOT NULL DEFAULT 0")


def _migrate_v1(db: sqlite3.Connection) -> None:
    """Version 1 -> 2 inside the caller's transaction (see the module docstring)."""
    db.execute(SQLITE.table("kept_responses"))
    _add_snapshot_version(db)
    for session, state in db.execute("SELECT session, state FROM snapshots").fetchall():
        slim = json.loads(state) | {"answers": [], "released": {}}
        db.execute("UPDATE snapshots SET state = ? WHERE session = ?", (json.dumps(slim), session))
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))
