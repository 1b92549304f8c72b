"""A :class:`~pmwcm.service.store.StateStore` in PostgreSQL, shared by several processes.

Two or more ``pmwcm serve --store postgresql://...`` processes (behind any load
balancer) share tokens, sessions, ledgers, answer logs and kept responses.
Every mutating call is one transaction; PostgreSQL makes a commit durable
(``synchronous_commit`` on, the server's default) before it returns, so
what returned survives ``kill -9`` of a service process -- and of the server.

**Per-session locking in the database.** :meth:`PostgresStore.session_lock`
holds a session-level advisory lock (``pg_advisory_lock`` on a 64-bit key
derived from the session's name) on a connection of its own for as long as the
session's work runs, with ``lock_timeout`` bounding the wait
(:class:`~pmwcm.service.store.StoreBusy` after it). A process killed while
holding it loses its connection, and the server releases the lock. The
sessions' engines live in each process's memory; under the lock a process
first catches up with what others committed
(:meth:`pmwcm.service.sessions.LiveSession.refresh`). As a second line,
``append_debit`` refuses a debit out of sequence and the log's primary key a
second release at one position, so two writers can never both commit.

**Credentials** come in the connection URL (or libpq's ``PGPASSWORD`` /
``~/.pgpass``); they are never logged, stored or shown: :func:`redacted`
names only the host, port and database, and errors carry no URL.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from pmwcm.service.store import (
    DebitRecord,
    KeptResponse,
    ReleaseRecord,
    SessionHead,
    SessionRecord,
    StateStore,
    StoreBusy,
    StoredSnapshot,
    StoreError,
    TokenRecord,
)

SCHEMA_VERSION = "2"
#: Idle connections kept open for reuse (more are opened while threads need them).
IDLE_CONNECTIONS = 8
#: The advisory-lock key that serialises schema creation between processes.
_SCHEMA_LOCK = 0x706D77636D  # "pmwcm"

_TABLES = """
CREATE TABLE IF NOT EXISTS pmwcm_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pmwcm_tokens (
    token_id TEXT PRIMARY KEY, digest TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('curator', 'analyst')),
    session TEXT, label TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,
    revoked DOUBLE PRECISION);
CREATE TABLE IF NOT EXISTS pmwcm_sessions (name TEXT PRIMARY KEY, config TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS pmwcm_debits (session TEXT NOT NULL, seq INTEGER NOT NULL,
    label TEXT NOT NULL, event TEXT NOT NULL, sv_state TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL, PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS pmwcm_releases (session TEXT NOT NULL, idx INTEGER NOT NULL,
    query_key TEXT NOT NULL, answer TEXT NOT NULL, token_id TEXT,
    created DOUBLE PRECISION NOT NULL, PRIMARY KEY (session, idx));
CREATE TABLE IF NOT EXISTS pmwcm_orphans (session TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS pmwcm_snapshots (session TEXT PRIMARY KEY, state TEXT NOT NULL,
    hypothesis BYTEA NOT NULL, version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS pmwcm_kept_responses (session TEXT NOT NULL,
    token_id TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    status INTEGER NOT NULL, body BYTEA NOT NULL, created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session, token_id, key))
"""


def redacted(url: str) -> str:
    """``url`` as it may be shown: host, port and database, never the user or password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://<unparseable>"
    host, port, name = parts.get("host", ""), parts.get("port", ""), parts.get("dbname", "")
    return f"postgresql://{host}{':' if port else ''}{port}/{name}"


def lock_key(session: str) -> int:
    """The session's advisory-lock key: a signed 64-bit integer from SHA-256 of its name."""
    digest = hashlib.sha256(f"pmwcm-session:{session}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresStore(StateStore):
    """:class:`StateStore` over a PostgreSQL database (see the module docstring).

    Args:
        url: a ``postgresql://`` connection URL (libpq's rules: a password may also
            come from ``PGPASSWORD`` or ``~/.pgpass``).

    Raises:
        StoreError: the server cannot be reached, or its schema is another version
            (the message names the host and database only).
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self.where = redacted(url)
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._closed = False
        self._open_lock = threading.Lock()
        try:
            with self._connection() as db, db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _TABLES.split(";"):
                    db.execute(statement)  # our own constant SQL
                row = db.execute("SELECT value FROM pmwcm_meta WHERE key = 'schema'").fetchone()
                if row is None:
                    db.execute("INSERT INTO pmwcm_meta VALUES ('schema', %s)", (SCHEMA_VERSION,))
                elif row[0] != SCHEMA_VERSION:
                    raise StoreError(
                        f"Unsupported state schema version {row[0]!r} in {self.where}."
                    )
        except psycopg.Error as err:
            self.close()
            raise StoreError(f"PostgreSQL store {self.where}: {_reason(err)}") from None
        except BaseException:
            self.close()
            raise

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection from the idle set (or a new one), returned to it afterwards."""
        try:
            db = self._idle.get_nowait()
        except queue.Empty:
            db = self._connect()
        broken = False
        try:
            yield db
        except psycopg.OperationalError:
            broken = True
            raise
        finally:
            if broken or db.closed or self._closed or self._idle.qsize() >= IDLE_CONNECTIONS:
                db.close()
            else:
                self._idle.put(db)

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=10)
        except psycopg.Error as err:
            raise StoreError(f"PostgreSQL store {self.where}: {_reason(err)}") from None

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._connection() as db:
            return db.execute(sql, args).fetchall()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self._connection() as db, db.transaction():
            yield db

    def session_lock(self, session: str, *, timeout: float) -> Any:
        return self._session_lock(session, timeout)

    @contextmanager
    def _session_lock(self, session: str, timeout: float) -> Iterator[None]:
        key = lock_key(session)
        with self._connection() as db:
            millis = 0 if math.isinf(timeout) else max(1, int(timeout * 1000))
            db.execute("SELECT set_config('lock_timeout', %s, false)", (f"{millis}ms",))
            try:
                db.execute("SELECT pg_advisory_lock(%s)", (key,))
            except pg_errors.LockNotAvailable:
                raise StoreBusy(
                    f"Session {session!r} is busy in another process; retry later."
                ) from None
            finally:
                db.execute("SELECT set_config('lock_timeout', '0', false)")
            try:
                yield
            finally:
                db.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def add_token(self, token: TokenRecord) -> None:
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO pmwcm_tokens VALUES (%s, %s, %s, %s, %s, %s, %s)",
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
        except pg_errors.UniqueViolation:
            raise StoreError(f"Token id {token.token_id!r} exists.") from None

    def get_token(self, token_id: str) -> TokenRecord | None:
        rows = self._query("SELECT * FROM pmwcm_tokens WHERE token_id = %s", (token_id,))
        return _token(rows[0]) if rows else None

    def list_tokens(self, *, session: str | None = None) -> list[TokenRecord]:
        if session is None:
            rows = self._query("SELECT * FROM pmwcm_tokens ORDER BY created, token_id")
        else:
            rows = self._query(
                "SELECT * FROM pmwcm_tokens WHERE session = %s ORDER BY created, token_id",
                (session,),
            )
        return [_token(r) for r in rows]

    def revoke_token(self, token_id: str, *, role: str | None = None) -> bool:
        sql = "UPDATE pmwcm_tokens SET revoked = %s WHERE token_id = %s AND revoked IS NULL"
        args: tuple[Any, ...] = (time.time(), token_id)
        if role is not None:
            sql, args = sql + " AND role = %s", (*args, role)
        with self._transaction() as db:
            return db.execute(sql, args).rowcount > 0

    def add_session(
        self, session: SessionRecord, debits: list[DebitRecord], snapshot: StoredSnapshot
    ) -> None:
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO pmwcm_sessions VALUES (%s, %s, %s)",
                    (session.name, json.dumps(session.config), session.created),
                )
                for debit in debits:
                    _insert_debit(db, session.name, debit)
                _put_snapshot(db, session.name, snapshot)
        except pg_errors.UniqueViolation:
            raise StoreError(f"Session {session.name!r} exists.") from None

    def get_session(self, name: str) -> SessionRecord | None:
        rows = self._query("SELECT * FROM pmwcm_sessions WHERE name = %s", (name,))
        return _session(rows[0]) if rows else None

    def list_sessions(self) -> list[SessionRecord]:
        rows = self._query("SELECT * FROM pmwcm_sessions ORDER BY created")
        return [_session(r) for r in rows]

    def append_debit(self, session: str, debit: DebitRecord) -> None:
        try:
            with self._transaction() as db:
                row = db.execute(
                    "SELECT COALESCE(MAX(seq) + 1, 0) FROM pmwcm_debits WHERE session = %s",
                    (session,),
                ).fetchone()
                count = 0 if row is None else int(row[0])
                if debit.seq != count:
                    raise StoreError(
                        f"Debit {debit.seq} of session {session!r} is out of order: "
                        f"{count} debits are committed."
                    )
                _insert_debit(db, session, debit)
        except pg_errors.UniqueViolation:
            raise StoreError(
                f"Debit {debit.seq} of session {session!r} is already committed."
            ) from None

    def debits(self, session: str) -> list[DebitRecord]:
        rows = self._query(
            "SELECT seq, label, event, sv_state FROM pmwcm_debits WHERE session = %s ORDER BY seq",
            (session,),
        )
        return [
            DebitRecord(seq=r[0], label=r[1], event=json.loads(r[2]), sv_state=json.loads(r[3]))
            for r in rows
        ]

    def mark_orphans(self, session: str, seqs: list[int]) -> None:
        with self._transaction() as db:
            for seq in seqs:
                db.execute(
                    "INSERT INTO pmwcm_orphans VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (session, seq),
                )

    def orphans(self, session: str) -> set[int]:
        rows = self._query("SELECT seq FROM pmwcm_orphans WHERE session = %s", (session,))
        return {int(r[0]) for r in rows}

    def commit_release(
        self,
        session: str,
        release: ReleaseRecord,
        snapshot: StoredSnapshot | None,
        kept: KeptResponse | None = None,
    ) -> None:
        now = time.time()
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO pmwcm_releases VALUES (%s, %s, %s, %s, %s, %s)",
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
                        "INSERT INTO pmwcm_kept_responses VALUES (%s, %s, %s, %s, %s, %s, %s)",
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
                if snapshot is not None:
                    _put_snapshot(db, session, snapshot)
        except pg_errors.UniqueViolation:
            raise StoreError(
                f"Release {release.index} of session {session!r} (or its idempotency key) "
                "is already committed."
            ) from None

    def releases(self, session: str, *, start: int = 0) -> list[ReleaseRecord]:
        rows = self._query(
            "SELECT idx, query_key, answer, token_id FROM pmwcm_releases WHERE session = %s "
            "AND idx >= %s ORDER BY idx",
            (session, start),
        )
        return [
            ReleaseRecord(index=r[0], query_key=r[1], answer=json.loads(r[2]), token_id=r[3])
            for r in rows
        ]

    def kept_response(self, session: str, token_id: str, key: str) -> KeptResponse | None:
        rows = self._query(
            "SELECT fingerprint, status, body FROM pmwcm_kept_responses "
            "WHERE session = %s AND token_id = %s AND key = %s",
            (session, token_id, key),
        )
        if not rows:
            return None
        fingerprint, status, body = rows[0]
        return KeptResponse(
            token_id=token_id, key=key, fingerprint=fingerprint, status=status, body=bytes(body)
        )

    def head(self, session: str) -> SessionHead:
        rows = self._query(
            "SELECT (SELECT COALESCE(MAX(seq) + 1, 0) FROM pmwcm_debits WHERE session = %s), "
            "(SELECT COALESCE(MAX(idx) + 1, 0) FROM pmwcm_releases WHERE session = %s), "
            "(SELECT COALESCE(MAX(version), -1) FROM pmwcm_snapshots WHERE session = %s)",
            (session, session, session),
        )
        debits, releases, version = rows[0]
        return SessionHead(
            debits=int(debits), releases=int(releases), snapshot_version=int(version)
        )

    def load_snapshot(self, session: str) -> StoredSnapshot | None:
        rows = self._query(
            "SELECT state, hypothesis FROM pmwcm_snapshots WHERE session = %s", (session,)
        )
        if not rows:
            return None
        return StoredSnapshot(state=json.loads(rows[0][0]), hypothesis=bytes(rows[0][1]))

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


def _reason(err: psycopg.Error) -> str:
    """The server's or libpq's one-line reason (it never carries the password)."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _insert_debit(db: psycopg.Connection[Any], session: str, debit: DebitRecord) -> None:
    db.execute(
        "INSERT INTO pmwcm_debits VALUES (%s, %s, %s, %s, %s, %s)",
        (
            session,
            debit.seq,
            debit.label,
            json.dumps(debit.event),
            json.dumps(debit.sv_state),
            time.time(),
        ),
    )


def _put_snapshot(db: psycopg.Connection[Any], session: str, snapshot: StoredSnapshot) -> None:
    db.execute(
        "INSERT INTO pmwcm_snapshots (session, state, hypothesis, version) "
        "VALUES (%s, %s, %s, 0) ON CONFLICT (session) DO UPDATE SET state = excluded.state, "
        "hypothesis = excluded.hypothesis, version = pmwcm_snapshots.version + 1",
        (session, json.dumps(snapshot.state), snapshot.hypothesis),
    )


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
