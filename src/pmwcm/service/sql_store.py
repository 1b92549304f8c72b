"""The SQL both state stores share: one schema, one set of statements, a small dialect.

:class:`SQLStore` implements every :class:`~pmwcm.service.store.StateStore`
method that is plain SQL -- tokens, sessions, the write-ahead debits, the
append-only log, orphans, kept responses and snapshots -- once, over two
primitives a backend provides: ``_transaction()`` (a context manager yielding
a connection whose statements commit together, durably, when it exits) and
``_query(sql, args)`` (committed rows). :class:`Dialect` holds what differs
between the databases: the tables' name prefix, the parameter mark, the column
types and the driver's unique-violation error. :mod:`pmwcm.service.sqlite_store`
adds its file lock, group commit and in-memory heads;
:mod:`pmwcm.service.postgres_store` its connection pool and advisory locks.

Statements are written once with ``{p}`` before each table name and ``?`` for each
parameter (:meth:`Dialect.sql`); the two databases accept the same SQL otherwise
(``ON CONFLICT`` upserts, ``RETURNING``).
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
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

#: The schema version both stores write (:mod:`pmwcm.service.sqlite_store` migrates 1).
SCHEMA_VERSION = "2"

#: Each table's definition, by name (``{real}`` / ``{blob}``: the dialect's types).
TABLES: dict[str, str] = {
    "meta": "CREATE TABLE IF NOT EXISTS {p}meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "tokens": "CREATE TABLE IF NOT EXISTS {p}tokens (token_id TEXT PRIMARY KEY, "
    "digest TEXT NOT NULL, role TEXT NOT NULL CHECK (role IN ('curator', 'analyst')), "
    "session TEXT, label TEXT NOT NULL, created {real} NOT NULL, revoked {real})",
    "sessions": "CREATE TABLE IF NOT EXISTS {p}sessions (name TEXT PRIMARY KEY, "
    "config TEXT NOT NULL, created {real} NOT NULL)",
    "debits": "CREATE TABLE IF NOT EXISTS {p}debits (session TEXT NOT NULL, "
    "seq INTEGER NOT NULL, label TEXT NOT NULL, event TEXT NOT NULL, sv_state TEXT NOT NULL, "
    "created {real} NOT NULL, PRIMARY KEY (session, seq))",
    "releases": "CREATE TABLE IF NOT EXISTS {p}releases (session TEXT NOT NULL, "
    "idx INTEGER NOT NULL, query_key TEXT NOT NULL, answer TEXT NOT NULL, token_id TEXT, "
    "created {real} NOT NULL, PRIMARY KEY (session, idx))",
    "orphans": "CREATE TABLE IF NOT EXISTS {p}orphans (session TEXT NOT NULL, "
    "seq INTEGER NOT NULL, PRIMARY KEY (session, seq))",
    "snapshots": "CREATE TABLE IF NOT EXISTS {p}snapshots (session TEXT PRIMARY KEY, "
    "state TEXT NOT NULL, hypothesis {blob} NOT NULL, version INTEGER NOT NULL DEFAULT 0)",
    "kept_responses": "CREATE TABLE IF NOT EXISTS {p}kept_responses (session TEXT NOT NULL, "
    "token_id TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, "
    "status INTEGER NOT NULL, body {blob} NOT NULL, created {real} NOT NULL, "
    "PRIMARY KEY (session, token_id, key))",
}


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """What one database needs said differently (see the module docstring).

    Attributes:
        prefix: put before every table name.
        mark: the driver's parameter placeholder (``?`` or ``%s``).
        real: the column type of a float64.
        blob: the column type of bytes.
        unique_violation: what the driver raises when a primary key is taken.
    """

    prefix: str
    mark: str
    real: str
    blob: str
    unique_violation: type[Exception]
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, template: str) -> str:
        """``template`` in this dialect: ``{p}`` -> the prefix, ``?`` -> the mark."""
        done = self._cache.get(template)
        if done is None:
            done = template.replace("{p}", self.prefix).replace("?", self.mark)
            self._cache[template] = done
        return done

    def table(self, name: str) -> str:
        """The ``CREATE TABLE IF NOT EXISTS`` statement of table ``name``."""
        ddl = TABLES[name].replace("{real}", self.real).replace("{blob}", self.blob)
        return self.sql(ddl)


class SQLStore(StateStore):
    """The SQL of a :class:`~pmwcm.service.store.StateStore`, for a backend to complete.

    A backend sets :attr:`dialect` and provides :meth:`_transaction` and
    :meth:`_query`; :meth:`_committed` hears of each commit that moved a session's
    head (a store keeping heads in memory uses it).
    """

    dialect: Dialect

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """A connection whose statements are committed together when the block exits,
        durably, before the exit returns (rolled back if the block raises)."""

    @abstractmethod
    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """The committed rows ``sql`` (already in the dialect) selects."""

    def _committed(self, session: str, head: SessionHead) -> None:
        """Called after a commit wrote ``head``'s counts for ``session`` (a count of 0 or a
        version of -1: not written by it). Nothing by default."""

    def _select(self, template: str, *args: Any) -> list[Any]:
        return self._query(self.dialect.sql(template), args)

    def add_token(self, token: TokenRecord) -> None:
        try:
            with self._transaction() as db:
                db.execute(
                    self.dialect.sql("INSERT INTO {p}tokens VALUES (?, ?, ?, ?, ?, ?, ?)"),
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
        except self.dialect.unique_violation:
            raise StoreError(f"Token id {token.token_id!r} exists.") from None

    def get_token(self, token_id: str) -> TokenRecord | None:
        rows = self._select("SELECT * FROM {p}tokens WHERE token_id = ?", token_id)
        return token_from_row(rows[0]) if rows else None

    def list_tokens(self, *, session: str | None = None) -> list[TokenRecord]:
        if session is None:
            rows = self._select("SELECT * FROM {p}tokens ORDER BY created, token_id")
        else:
            rows = self._select(
                "SELECT * FROM {p}tokens WHERE session = ? ORDER BY created, token_id", session
            )
        return [token_from_row(r) for r in rows]

    def revoke_token(self, token_id: str, *, role: str | None = None) -> bool:
        sql = "UPDATE {p}tokens SET revoked = ? WHERE token_id = ? AND revoked IS NULL"
        args: tuple[Any, ...] = (time.time(), token_id)
        if role is not None:
            sql, args = sql + " AND role = ?", (*args, role)
        with self._transaction() as db:
            return bool(db.execute(self.dialect.sql(sql), args).rowcount > 0)

    def add_session(
        self, session: SessionRecord, debits: list[DebitRecord], snapshot: StoredSnapshot
    ) -> None:
        try:
            with self._transaction() as db:
                db.execute(
                    self.dialect.sql("INSERT INTO {p}sessions VALUES (?, ?, ?)"),
                    (session.name, json.dumps(session.config), session.created),
                )
                for debit in debits:
                    self._insert_debit(db, session.name, debit)
                version = self._put_snapshot(db, session.name, snapshot)
        except self.dialect.unique_violation:
            raise StoreError(f"Session {session.name!r} exists.") from None
        self._committed(
            session.name, SessionHead(debits=len(debits), releases=0, snapshot_version=version)
        )

    def get_session(self, name: str) -> SessionRecord | None:
        rows = self._select("SELECT * FROM {p}sessions WHERE name = ?", name)
        return session_from_row(rows[0]) if rows else None

    def list_sessions(self) -> list[SessionRecord]:
        return [
            session_from_row(r) for r in self._select("SELECT * FROM {p}sessions ORDER BY created")
        ]

    def append_debit(self, session: str, debit: DebitRecord) -> None:
        try:
            with self._transaction() as db:
                (count,) = db.execute(
                    self.dialect.sql(
                        "SELECT COALESCE(MAX(seq) + 1, 0) FROM {p}debits WHERE session = ?"
                    ),
                    (session,),
                ).fetchone()
                if debit.seq != count:
                    raise StoreError(
                        f"Debit {debit.seq} of session {session!r} is out of order: "
                        f"{count} debits are committed."
                    )
                self._insert_debit(db, session, debit)
        except self.dialect.unique_violation:
            raise StoreError(
                f"Debit {debit.seq} of session {session!r} is already committed."
            ) from None
        self._committed(session, SessionHead(debits=debit.seq + 1, releases=0, snapshot_version=-1))

    def _insert_debit(self, db: Any, session: str, debit: DebitRecord) -> None:
        db.execute(
            self.dialect.sql("INSERT INTO {p}debits VALUES (?, ?, ?, ?, ?, ?)"),
            (
                session,
                debit.seq,
                debit.label,
                json.dumps(debit.event),
                json.dumps(debit.sv_state),
                time.time(),
            ),
        )

    def _put_snapshot(self, db: Any, session: str, snapshot: StoredSnapshot) -> int:
        """Writes the session's snapshot; returns its version (0 first, then one more each)."""
        (version,) = db.execute(
            self.dialect.sql(
                "INSERT INTO {p}snapshots (session, state, hypothesis, version) "
                "VALUES (?, ?, ?, 0) ON CONFLICT (session) DO UPDATE SET state = excluded.state, "
                "hypothesis = excluded.hypothesis, version = {p}snapshots.version + 1 "
                "RETURNING version"
            ),
            (session, json.dumps(snapshot.state), snapshot.hypothesis),
        ).fetchone()
        return int(version)

    def debits(self, session: str) -> list[DebitRecord]:
        rows = self._select(
            "SELECT seq, label, event, sv_state FROM {p}debits WHERE session = ? ORDER BY seq",
            session,
        )
        return [
            DebitRecord(seq=r[0], label=r[1], event=json.loads(r[2]), sv_state=json.loads(r[3]))
            for r in rows
        ]

    def mark_orphans(self, session: str, seqs: list[int]) -> None:
        with self._transaction() as db:
            for seq in seqs:
                db.execute(
                    self.dialect.sql("INSERT INTO {p}orphans VALUES (?, ?) ON CONFLICT DO NOTHING"),
                    (session, seq),
                )

    def orphans(self, session: str) -> set[int]:
        return {
            int(r[0]) for r in self._select("SELECT seq FROM {p}orphans WHERE session = ?", session)
        }

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
                    self.dialect.sql("INSERT INTO {p}releases VALUES (?, ?, ?, ?, ?, ?)"),
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
                        self.dialect.sql(
                            "INSERT INTO {p}kept_responses VALUES (?, ?, ?, ?, ?, ?, ?)"
                        ),
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
                version = -1 if snapshot is None else self._put_snapshot(db, session, snapshot)
        except self.dialect.unique_violation:
            raise StoreError(
                f"Release {release.index} of session {session!r} (or its idempotency key) "
                "is already committed."
            ) from None
        self._committed(
            session, SessionHead(debits=0, releases=release.index + 1, snapshot_version=version)
        )

    def releases(self, session: str, *, start: int = 0) -> list[ReleaseRecord]:
        rows = self._select(
            "SELECT idx, query_key, answer, token_id FROM {p}releases WHERE session = ? "
            "AND idx >= ? ORDER BY idx",
            session,
            start,
        )
        return [
            ReleaseRecord(index=r[0], query_key=r[1], answer=json.loads(r[2]), token_id=r[3])
            for r in rows
        ]

    def kept_response(self, session: str, token_id: str, key: str) -> KeptResponse | None:
        rows = self._select(
            "SELECT fingerprint, status, body FROM {p}kept_responses "
            "WHERE session = ? AND token_id = ? AND key = ?",
            session,
            token_id,
            key,
        )
        if not rows:
            return None
        fingerprint, status, body = rows[0]
        return KeptResponse(
            token_id=token_id, key=key, fingerprint=fingerprint, status=status, body=bytes(body)
        )

    def head(self, session: str) -> SessionHead:
        return head_from_row(self._select(HEAD, session, session, session)[0])

    def load_snapshot(self, session: str) -> StoredSnapshot | None:
        rows = self._select("SELECT state, hypothesis FROM {p}snapshots WHERE session = ?", session)
        if not rows:
            return None
        return StoredSnapshot(state=json.loads(rows[0][0]), hypothesis=bytes(rows[0][1]))


#: A session's head in one statement (its three parameters: the session's name).
HEAD = (
    "SELECT (SELECT COALESCE(MAX(seq) + 1, 0) FROM {p}debits WHERE session = ?), "
    "(SELECT COALESCE(MAX(idx) + 1, 0) FROM {p}releases WHERE session = ?), "
    "(SELECT COALESCE(MAX(version), -1) FROM {p}snapshots WHERE session = ?)"
)


def head_from_row(row: Any) -> SessionHead:
    """The :class:`SessionHead` a :data:`HEAD` row holds."""
    debits, releases, version = row
    return SessionHead(debits=int(debits), releases=int(releases), snapshot_version=int(version))


def token_from_row(row: Any) -> TokenRecord:
    """The :class:`TokenRecord` a ``SELECT *`` row of the tokens table holds."""
    return TokenRecord(
        token_id=row[0],
        digest=row[1],
        role=row[2],
        session=row[3],
        label=row[4],
        created=row[5],
        revoked=row[6],
    )


def session_from_row(row: Any) -> SessionRecord:
    """The :class:`SessionRecord` a ``SELECT *`` row of the sessions table holds."""
    return SessionRecord(name=row[0], config=json.loads(row[1]), created=row[2])
