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
(:meth:`pmwcm.service.sessions.LiveSession.refresh`). Every statement a thread
makes while it holds a session's lock goes through the lock's own connection, so
the lock is released -- by the unlock, or by the server when a killed process's
connection drops -- only after the transactions made under it have ended: the
next holder always sees the last one's commits (with a transaction on another
connection, a killed process's last commit could still be in flight when its
lock fell, and the next holder would write the same log position). As a second line,
``append_debit`` refuses a debit out of sequence and the log's primary key a
second release at one position, so two writers can never both commit.

The statements are the shared ones of :class:`~pmwcm.service.sql_store.SQLStore`
(tables prefixed ``pmwcm_``); this module adds the connection pool, the advisory
locks and the schema's creation between processes.

**Credentials** come in the connection URL (or libpq's ``PGPASSWORD`` /
``~/.pgpass``); they are never logged, stored or shown: :func:`redacted`
names only the host, port and database, and errors carry no URL.
"""

from __future__ import annotations

import hashlib
import math
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from pmwcm.service.sql_store import SCHEMA_VERSION, TABLES, Dialect, SQLStore
from pmwcm.service.store import StoreBusy, StoreError

#: Idle connections kept open for reuse (more are opened while threads need them).
IDLE_CONNECTIONS = 8
#: The advisory-lock key that serialises schema creation between processes.
_SCHEMA_LOCK = 0x706D77636D  # "pmwcm"
#: PostgreSQL's dialect: every table prefixed ``pmwcm_`` (the database may hold others).
POSTGRES = Dialect(
    prefix="pmwcm_",
    mark="%s",
    real="DOUBLE PRECISION",
    blob="BYTEA",
    unique_violation=pg_errors.UniqueViolation,
)


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


class PostgresStore(SQLStore):
    """:class:`StateStore` over a PostgreSQL database (see the module docstring).

    Args:
        url: a ``postgresql://`` connection URL (libpq's rules: a password may also
            come from ``PGPASSWORD`` or ``~/.pgpass``).

    Raises:
        StoreError: the server cannot be reached, or its schema is another version
            (the message names the host and database only).
    """

    dialect = POSTGRES

    def __init__(self, url: str) -> None:
        self._url = url
        self.where = redacted(url)
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._closed = False
        self._open_lock = threading.Lock()
        self._pinned = threading.local()  # the connection holding this thread's session lock
        try:
            with self._connection() as db, db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for name in TABLES:
                    db.execute(POSTGRES.table(name))  # our own constant SQL
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
        """A connection from the idle set (or a new one), returned to it afterwards; while
        this thread holds a session lock, the lock's own connection."""
        pinned: psycopg.Connection[Any] | None = getattr(self._pinned, "db", None)
        if pinned is not None:
            yield pinned
            return
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
            outer = getattr(self._pinned, "db", None)
            self._pinned.db = db  # every statement under the lock goes through its connection
            try:
                yield
            finally:
                self._pinned.db = outer
                db.execute("SELECT pg_advisory_unlock(%s)", (key,))

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
