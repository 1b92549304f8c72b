"""Durable state of the query service behind a small interface.

:class:`StateStore` is everything the service persists: access tokens (hashed),
release sessions, the write-ahead ledger of debits, the log of released answers
and each session's latest engine snapshot. Every mutating call is one
transaction that is durable when it returns.
:class:`pmwcm.service.sqlite_store.SQLiteStore` is the embedded default; another
backend (PostgreSQL) implements the same methods with the same transactions.

Two calls carry the durability protocol (see :mod:`pmwcm.service.durable`):

* :meth:`StateStore.append_debit` commits one ledger debit; the engine calls it
  *before* it draws the noise the debit pays for;
* :meth:`StateStore.commit_release` commits a released answer together with
  the engine snapshot taken right after it, in one transaction, *before* the
  response is sent.

The store holds secrets (snapshots hold the sparse vector's threshold noise and
the hypothesis; token digests): keep ``--state`` readable by the server only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


class StoreError(RuntimeError):
    """The state store refused an operation (conflict, lock held, bad state)."""


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
        self, session: str, release: ReleaseRecord, snapshot: StoredSnapshot
    ) -> None:
        """Commits a released answer and the snapshot taken after it, atomically."""

    @abstractmethod
    def releases(self, session: str) -> list[ReleaseRecord]:
        """The session's committed releases, in order."""

    @abstractmethod
    def load_snapshot(self, session: str) -> StoredSnapshot | None:
        """The session's latest committed snapshot, or ``None`` before its first release."""

    @abstractmethod
    def close(self) -> None:
        """Releases the store (connections, locks)."""
