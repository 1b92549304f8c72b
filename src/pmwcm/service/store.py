"""Durable state of the query service behind a small interface.

:class:`StateStore` is everything the service persists: access tokens (hashed),
release sessions, the write-ahead ledger of debits, the append-only log of
released answers (one row per answer), the responses kept for
``Idempotency-Key`` retries, and each session's latest engine snapshot. Every
mutating call is one transaction that is durable when it returns.
:class:`pmwcm.service.sqlite_store.SQLiteStore` is the embedded default (one
process); :class:`pmwcm.service.postgres_store.PostgresStore` implements the
same methods with the same transactions for several processes sharing one
database, and adds the per-session lock across them (:meth:`StateStore.session_lock`).

**The log is append-only and per-request I/O is O(1) in history.** A snapshot
holds only the engine's state -- the hypothesis, the sparse vector, the update
history and the ledger, all bounded by the cutoff ``T`` -- never the released
answers: those are rows of the log, read back in full only when a session is
loaded (:func:`pmwcm.service.durable.recover`). An answer that changed nothing
but the log (a below-threshold, repeated or synthetic answer) commits one row
and no snapshot.

Two calls carry the durability protocol (see :mod:`pmwcm.service.durable`):

* :meth:`StateStore.append_debit` commits one ledger debit; the engine calls it
  *before* it draws the noise the debit pays for;
* :meth:`StateStore.commit_release` commits a released answer together with
  the engine snapshot taken right after it (when the answer changed the
  engine's state) and the response kept for its ``Idempotency-Key``, in one
  transaction, *before* the response is sent.

The store holds secrets (snapshots hold the sparse vector's threshold noise and
the hypothesis; token digests): keep ``--state`` readable by the server only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any


class StoreError(RuntimeError):
    """The state store refused an operation (conflict, lock held, bad state)."""


class StoreBusy(StoreError):
    """The session's lock is held elsewhere past the wait allowed: retry later (nothing done)."""


@dataclass(frozen=True, kw_only=True)
class TokenRecord:
    """A stored access token: only the SHA-256 digest of its secret is kept."""

    token_id: str
    digest: str
    role: str
    session: str | None
    label: str
    created: float
    revoked: float | None = None


@dataclass(frozen=True, kw_only=True)
class SessionRecord:
    """A release session: its name and its JSON configuration (data, budget, parameters)."""

    name: str
    config: dict[str, Any]
    created: float


@dataclass(frozen=True, kw_only=True)
class DebitRecord:
    """One write-ahead ledger debit.

    Attributes:
        seq: position in the session's ledger (0-based, gap-free).
        label: the ledger label (``"sparse vector"``, ``"oracle call 3"``).
        event: the privacy event, as :func:`pmwcm.mechanisms.accounting.codec.event_to_dict`.
        sv_state: the sparse vector's exported state when the debit was made.
    """

    seq: int
    label: str
    event: dict[str, Any]
    sv_state: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ReleaseRecord:
    """One answered request, as released to the analyst."""

    index: int
    query_key: str
    answer: dict[str, Any]
    token_id: str | None


@dataclass(frozen=True, kw_only=True)
class KeptResponse:
    """The response to a request sent with an ``Idempotency-Key``, kept for its retries.

    Attributes:
        token_id: the token that sent it (keys are scoped per token and session).
        key: the client's ``Idempotency-Key``.
        fingerprint: SHA-256 of the request body as parsed (a retry must match it).
        status: the HTTP status sent.
        body: the response body, byte for byte.
    """

    token_id: str
    key: str
    fingerprint: str
    status: int
    body: bytes


@dataclass(frozen=True, kw_only=True)
class SessionHead:
    """How far a session's committed state has come (cheap to read; compared to tell
    whether another process has moved the session on since this one last loaded it)."""

    debits: int
    releases: int
    snapshot_version: int


@dataclass(frozen=True, kw_only=True)
class StoredSnapshot:
    """A session's latest engine snapshot (JSON state plus the hypothesis as ``.npy`` bytes)."""

    state: dict[str, Any]
    hypothesis: bytes


class StateStore(ABC):
    """What the service persists; every mutating call is one durable transaction."""

    @abstractmethod
    def add_token(self, token: TokenRecord) -> None:
        """Stores a new token (raises :class:`StoreError` if its id exists)."""

    @abstractmethod
    def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, or ``None``."""

    def cached_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id if the store has it in memory (no I/O), else ``None``
        (then ask :meth:`get_token`). The default keeps nothing: a store that other
        processes share cannot know of a revocation made elsewhere."""
        return None

    @abstractmethod
    def list_tokens(self, *, session: str | None = None) -> list[TokenRecord]:
        """All tokens, or those scoped to ``session``, oldest first."""

    @abstractmethod
    def revoke_token(self, token_id: str, *, role: str | None = None) -> bool:
        """Marks a token revoked (only one of ``role`` if given); ``False`` if none matched."""

    @abstractmethod
    def add_session(
        self, session: SessionRecord, debits: list[DebitRecord], snapshot: StoredSnapshot
    ) -> None:
        """Stores a new session with its build-time debits and first snapshot, atomically.

        Raises:
            StoreError: the name exists.
        """

    @abstractmethod
    def get_session(self, name: str) -> SessionRecord | None:
        """The session called ``name``, or ``None``."""

    @abstractmethod
    def list_sessions(self) -> list[SessionRecord]:
        """All sessions, oldest first."""

    @abstractmethod
    def append_debit(self, session: str, debit: DebitRecord) -> None:
        """Commits one debit; ``debit.seq`` must be the next position (else :class:`StoreError`)."""

    @abstractmethod
    def debits(self, session: str) -> list[DebitRecord]:
        """The session's committed debits, in commit order."""

    @abstractmethod
    def mark_orphans(self, session: str, seqs: list[int]) -> None:
        """Records (idempotently) that these debits' answers were never committed."""

    @abstractmethod
    def orphans(self, session: str) -> set[int]:
        """The debits ever found orphaned at a recovery."""

    @abstractmethod
    def commit_release(
        self,
        session: str,
        release: ReleaseRecord,
        snapshot: StoredSnapshot | None,
        kept: KeptResponse | None = None,
    ) -> None:
        """Appends a released answer to the log, atomically with the snapshot taken after
        it (``None``: the answer changed nothing else) and the response kept for its
        ``Idempotency-Key``.

        Raises:
            StoreError: ``release.index`` is taken (the log is append-only).
        """

    @abstractmethod
    def releases(self, session: str, *, start: int = 0) -> list[ReleaseRecord]:
        """The session's committed releases from position ``start`` on, in order."""

    @abstractmethod
    def kept_response(self, session: str, token_id: str, key: str) -> KeptResponse | None:
        """The response kept for ``key`` sent by ``token_id`` on ``session``, or ``None``."""

    @abstractmethod
    def head(self, session: str) -> SessionHead:
        """The session's counts of debits and releases and its snapshot's version."""

    def session_lock(self, session: str, *, timeout: float) -> AbstractContextManager[None]:
        """Holds ``session`` against every other process sharing this store.

        The default is for a store one process owns (SQLite's ``flock``): the
        process's own lock is enough, so this holds nothing.

        Raises:
            StoreBusy: not acquired within ``timeout`` seconds.
        """
        return _nothing_held()

    @abstractmethod
    def load_snapshot(self, session: str) -> StoredSnapshot | None:
        """The session's latest committed snapshot, or ``None`` before its first release."""

    @abstractmethod
    def close(self) -> None:
        """Releases the store (connections, locks)."""


@contextmanager
def _nothing_held() -> Iterator[None]:
    yield
