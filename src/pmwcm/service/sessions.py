"""Release sessions: one dataset, one budget, one engine, one lock.

A session is created by the curator from a CSV file and a schema on the
server, a total ``(epsilon, delta)`` and practical-mode parameters
(:class:`pmwcm.engine.practical.PMWConfig`). Its configuration and the SHA-256 of both
files are stored; the engine is rebuilt from them deterministically on first
use after a (re)start and the committed state is loaded into it
(:func:`pmwcm.service.durable.recover`). A file that changed on disk is
refused: continuing would pair the old answers with other data.

Every request on a session runs under the session's lock, so the engine sees
one query at a time and the write-ahead ledger is gap-free; different sessions
run in parallel. The lock is this process's (a :class:`threading.Lock`) and,
for a store shared by several processes, the store's too
(:meth:`~pmwcm.service.store.StateStore.session_lock`); on taking them the
session catches up with what other processes committed
(:meth:`LiveSession.refresh`): the new rows of the answer log only, or a full
reload when a debit or a snapshot was committed elsewhere. Each wait is
bounded (:class:`~pmwcm.service.store.StoreBusy` after it). Noise comes from
:func:`pmwcm.mechanisms.noise.default_noise` (OpenDP, seeded by the OS CSPRNG),
never from a seeded generator.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pmwcm.engine.online import Answer, EngineHalted, OnlinePMW, query_key
from pmwcm.engine.snapshot import answer_to_dict
from pmwcm.errors import Refused
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fixed_budget import SolveRefused
from pmwcm.kernels.queries import CMQuery, QueryError
from pmwcm.mechanisms.noise import NoiseSource, default_noise
from pmwcm.mechanisms.sparse_vector import SparseVectorHalted
from pmwcm.service.build import genesis, rebuild
from pmwcm.service.connections import Connections
from pmwcm.service.durable import (
    DurableLedger,
    encode_snapshot,
    recover,
    state_mark,
    take_released,
)
from pmwcm.service.idempotency import Idempotency, Reply
from pmwcm.service.locations import SessionUnavailable
from pmwcm.service.session_views import LedgerLine, SessionStatus, ledger_lines, status_of
from pmwcm.service.store import (
    DebitRecord,
    ReleaseRecord,
    SessionHead,
    SessionRecord,
    StateStore,
    StoreBusy,
    StoreError,
)

__all__ = [
    "Abandoned",
    "LiveSession",
    "SessionManager",
    "SessionNotFound",
    "SessionUnavailable",
]


class SessionNotFound(KeyError):
    """No session has this name."""


class Abandoned(RuntimeError):
    """The request was given up (its client went away, or its deadline passed) before it
    read any data or spent any budget."""


#: What :meth:`LiveSession.respond` may raise before the engine changed anything: its
#: memory still matches the store.
_BEFORE_ANY_CHANGE = (
    Abandoned,
    Refused,
    QueryError,
    SolveRefused,
    EngineHalted,
    SparseVectorHalted,
)


class LiveSession:
    """A loaded session: its engine (built lazily) behind the session lock.

    Args:
        record: the stored session.
        store: the state store.
        noise_factory: makes the engine's random source (the default: OpenDP).
        connections: the operator's named database connections (a session on a
            PostgreSQL table reopens it by name).
    """

    def __init__(
        self,
        record: SessionRecord,
        store: StateStore,
        *,
        noise_factory: Callable[[], NoiseSource] = default_noise,
        connections: Connections | None = None,
    ) -> None:
        self.record = record
        self.store = store
        self.lock = threading.Lock()
        self._noise_factory = noise_factory
        self._connections = connections
        self._engine: OnlinePMW | None = None
        self._head: SessionHead | None = None  # the store's head the engine reflects

    @property
    def name(self) -> str:
        """The session's name."""
        return self.record.name

    @contextmanager
    def locked(self, *, wait: float = math.inf) -> Iterator[OnlinePMW]:
        """Holds the session (this process's lock, then the store's) and yields its engine,
        caught up with the store (:meth:`refresh`).

        Raises:
            StoreBusy: a lock was not free within ``wait`` seconds (nothing was done).
            SessionUnavailable: the session cannot be loaded.
        """
        until = time.monotonic() + wait
        if not self.lock.acquire(timeout=-1 if math.isinf(wait) else max(0.0, wait)):
            raise StoreBusy(f"Session {self.name!r} is busy; retry later.")
        try:
            with self.store.session_lock(self.name, timeout=max(0.0, until - time.monotonic())):
                yield self.refresh()
        finally:
            self.lock.release()

    def refresh(self) -> OnlinePMW:
        """The engine, caught up with the store (locks held).

        Only the log's new rows are read when nothing but answers was committed since
        this process last saw the session (another process sharing the store answered);
        a new debit or snapshot (or none loaded yet) reloads it in full.
        """
        head = self.store.head(self.name)
        known = self._head
        if self._engine is not None and known is not None:
            if head == known:
                return self._engine
            if (head.debits, head.snapshot_version) == (known.debits, known.snapshot_version):
                new = self.store.releases(self.name, start=known.releases)
                try:
                    self._engine = take_released(self._engine, new)
                except (StoreError, ValueError):
                    self._engine = None
                else:
                    self._head = head
                    return self._engine
        self._engine, self._head = None, None
        engine = self._load()
        self._head = head
        return engine

    def _load(self) -> OnlinePMW:
        """The engine, rebuilt and recovered from the store (locks held)."""
        debits = self.store.debits(self.name)
        engine = rebuild(
            self.record.config, debits, noise=self._noise_factory(), connections=self._connections
        )
        try:
            engine, orphans = recover(
                engine, self.store.load_snapshot(self.name), debits, self.store.releases(self.name)
            )
        except (StoreError, ValueError) as err:
            message = f"Session {self.name!r} cannot be restored: {err}"
            raise SessionUnavailable(message) from err
        if orphans:
            self.store.mark_orphans(self.name, orphans)
        ledger = engine.ledger
        if not isinstance(ledger, DurableLedger):  # never sent an answer without it
            raise SessionUnavailable(f"Session {self.name!r}: the ledger is not durable.")
        ledger.attach(self._commit_debit, engine.sparse_vector.export_state)
        self._engine = engine
        # A loaded log is one object per answer, alive as long as the engine: left to the
        # cyclic collector, every full collection walks them all (0.2-0.5 s with 10^5
        # answers, a pause for every request of every session). Frozen, it skips them.
        gc.freeze()
        return engine

    def _commit_debit(self, debit: DebitRecord) -> None:
        self.store.append_debit(self.name, debit)

    def ask(self, query: CMQuery, *, token_id: str | None) -> Answer:
        """Answers ``query`` under the write-ahead protocol (:mod:`pmwcm.service.durable`).

        Raises:
            QueryError: the spec does not fit the session's domain (nothing spent).
            SolveRefused: the query's constants are too costly to solve (nothing spent).
            EngineHalted, SparseVectorHalted, BudgetExceededError: the budget is spent.
            SessionUnavailable: the session cannot be loaded.
        """
        reply = self.respond(query, token_id=token_id, render=lambda _answer, _domain: b"")
        assert reply.answer is not None  # no idempotency key: always a fresh release
        return reply.answer

    def respond(
        self,
        query: CMQuery,
        *,
        token_id: str | None,
        render: Callable[[Answer, Domain], bytes],
        idempotency: Idempotency | None = None,
        proceed: Callable[[], None] | None = None,
        wait: float = math.inf,
    ) -> Reply:
        """Answers ``query`` and commits the answer (with its rendered response, kept for
        ``idempotency``'s key) before returning; a key already answered returns its kept
        response unchanged.

        Args:
            query: the query.
            token_id: the asking token (logged with the answer).
            render: the response body for an answer (and the session's domain, public).
            idempotency: the request's ``Idempotency-Key`` and body fingerprint, if sent.
            proceed: called after the locks are held and the query compiled (public
                work), right before the data is read; raising :class:`Abandoned`
                gives the request up with nothing spent.
            wait: the longest wait for the session's locks, in seconds.

        Raises:
            Abandoned: ``proceed`` gave the request up (nothing spent).
            IdempotencyConflict: the key answered another body (nothing spent).
            StoreBusy: the session was busy past ``wait`` (nothing spent).
            QueryError, SolveRefused: refused from public inputs (nothing spent).
            EngineHalted, SparseVectorHalted, BudgetExceededError: the budget is spent.
            SessionUnavailable: the session cannot be loaded.
        """
        with self.locked(wait=wait) as engine:
            if idempotency is not None:
                kept = self.store.kept_response(self.name, token_id or "", idempotency.key)
                if kept is not None:
                    kept = idempotency.check(kept)
                    return Reply(answer=None, status=kept.status, body=kept.body)
            mark = state_mark(engine)
            try:
                # The engine's one door; it calls proceed() once the query is compiled
                # (public: QueryError / SolveRefused before it), right before the data.
                answer = engine.ask(query, proceed=proceed)
                body = render(answer, engine.domain)
                changed = state_mark(engine) != mark
                kept_response = None
                if idempotency is not None:
                    kept_response = idempotency.keep(token_id=token_id or "", status=200, body=body)
                self.store.commit_release(
                    self.name,
                    ReleaseRecord(
                        index=answer.index,
                        query_key=query_key(query, engine.domain),
                        answer=answer_to_dict(engine.recorded(answer)),  # canonical order
                        token_id=token_id,
                    ),
                    encode_snapshot(engine) if changed else None,
                    kept_response,
                )
            except _BEFORE_ANY_CHANGE:
                raise  # the engine's memory still matches the store
            except BaseException:
                self._engine, self._head = None, None  # memory may be ahead of the store
                raise
            assert self._head is not None
            self._head = SessionHead(
                debits=len(engine.ledger.entries),
                releases=len(engine.answers),
                snapshot_version=self._head.snapshot_version + int(changed),
            )
            return Reply(answer=answer, status=200, body=body)

    def status(self, *, wait: float = math.inf) -> SessionStatus:
        """The budget and progress (loads the engine; :class:`StoreBusy` after ``wait``)."""
        with self.locked(wait=wait) as engine:
            return status_of(self.name, engine)

    def ledger(self, *, wait: float = math.inf) -> list[LedgerLine]:
        """Every committed debit, with the total after it and whether it was found orphaned."""
        with self.locked(wait=wait) as engine:
            orphans = self.store.orphans(self.name)
            debits = self.store.debits(self.name)
            if len(debits) != len(engine.ledger.entries):
                self._engine, self._head = None, None
                raise SessionUnavailable(f"Session {self.name!r}: ledger and store disagree.")
            return ledger_lines(debits, engine, orphans)


class SessionManager:
    """Creates sessions and hands out their :class:`LiveSession` (one per name).

    Args:
        store: the state store.
        noise_factory: makes each engine's random source (the default: OpenDP).
        connections: the operator's named database connections (``pmwcm serve --connections``).
    """

    def __init__(
        self,
        store: StateStore,
        *,
        noise_factory: Callable[[], NoiseSource] = default_noise,
        connections: Connections | None = None,
    ) -> None:
        self.store = store
        self._noise_factory = noise_factory
        self.connections = connections
        self._live: dict[str, LiveSession] = {}
        self._lock = threading.Lock()

    def create(self, name: str, config: dict[str, Any]) -> SessionRecord:
        """Builds the session's engine (:func:`~pmwcm.service.build.genesis`), then stores it.

        Raises:
            ValueError: bad data, schema or parameters.
            StoreError: the name is taken.
        """
        if self.store.get_session(name) is not None:
            raise StoreError(f"Session {name!r} exists.")
        built, debits, snapshot = genesis(
            config, noise=self._noise_factory(), connections=self.connections
        )
        record = SessionRecord(name=name, config=built, created=time.time())
        self.store.add_session(record, debits, snapshot)
        return record

    def loaded(self, name: str) -> LiveSession | None:
        """The live session called ``name`` if one is already made (no I/O), else ``None``."""
        return self._live.get(name)

    def get(self, name: str) -> LiveSession:
        """The live session called ``name``.

        Raises:
            SessionNotFound: no such session.
        """
        with self._lock:
            live = self._live.get(name)
            if live is None:
                record = self.store.get_session(name)
                if record is None:
                    raise SessionNotFound(name)
                live = LiveSession(
                    record,
                    self.store,
                    noise_factory=self._noise_factory,
                    connections=self.connections,
                )
                self._live[name] = live
            return live
