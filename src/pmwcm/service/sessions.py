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
run in parallel. Noise comes from :func:`pmwcm.mechanisms.noise.default_noise` (OpenDP,
seeded by the OS CSPRNG), never from a seeded generator.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pmwcm.engine.online import Answer, OnlinePMW, query_key
from pmwcm.engine.snapshot import answer_to_dict
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NoiseSource, default_noise
from pmwcm.service.build import SessionUnavailable, genesis, rebuild
from pmwcm.service.durable import DurableLedger, encode_snapshot, recover
from pmwcm.service.store import (
    DebitRecord,
    ReleaseRecord,
    SessionRecord,
    StateStore,
    StoreError,
)

__all__ = ["LiveSession", "SessionManager", "SessionNotFound", "SessionUnavailable"]


class SessionNotFound(KeyError):
    """No session has this name."""


@dataclass(frozen=True, kw_only=True)
class SessionStatus:
    """A session's budget and progress (what an analyst may see)."""

    name: str
    epsilon: float
    delta: float
    epsilon_spent: float
    epsilon_remaining: float
    updates: int
    max_updates: int
    answered: int
    halted: bool
    noise: str
    backend: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class LedgerLine:
    """One committed debit as the curator sees it."""

    seq: int
    label: str
    event: dict[str, Any]
    epsilon_after: float
    orphan: bool


class LiveSession:
    """A loaded session: its engine (built lazily) behind the session lock.

    Args:
        record: the stored session.
        store: the state store.
        noise_factory: makes the engine's random source (the default: OpenDP).
    """

    def __init__(
        self,
        record: SessionRecord,
        store: StateStore,
        *,
        noise_factory: Callable[[], NoiseSource] = default_noise,
    ) -> None:
        self.record = record
        self.store = store
        self.lock = threading.Lock()
        self._noise_factory = noise_factory
        self._engine: OnlinePMW | None = None

    @property
    def name(self) -> str:
        """The session's name."""
        return self.record.name

    @property
    def domain(self) -> Domain:
        """The session's data universe (public: its schema's), loading the engine if needed."""
        with self.lock:
            return self._load().domain

    def _load(self) -> OnlinePMW:
        """The engine, rebuilt and recovered from the store if not loaded (lock held)."""
        if self._engine is None:
            debits = self.store.debits(self.name)
            engine = rebuild(self.record.config, debits, noise=self._noise_factory())
            try:
                engine, orphans = recover(engine, self.store.load_snapshot(self.name), debits)
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
        return self._engine

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
        from pmwcm.engine.online import EngineHalted
        from pmwcm.kernels.fixed_budget import SolveRefused
        from pmwcm.kernels.queries import QueryError
        from pmwcm.mechanisms.sparse_vector import SparseVectorHalted

        with self.lock:
            engine = self._load()
            try:
                answer = engine.answer(query)
                self.store.commit_release(
                    self.name,
                    ReleaseRecord(
                        index=answer.index,
                        query_key=query_key(query, engine.domain),
                        answer=answer_to_dict(answer),
                        token_id=token_id,
                    ),
                    encode_snapshot(engine),
                )
            except (QueryError, SolveRefused, EngineHalted, SparseVectorHalted):
                raise  # raised before the engine changed anything
            except BaseException:
                self._engine = None  # memory may be ahead of the store: reload from it
                raise
            return answer

    def status(self) -> SessionStatus:
        """The budget and progress (loads the engine)."""
        with self.lock:
            engine = self._load()
            return SessionStatus(
                name=self.name,
                epsilon=engine.ledger.epsilon,
                delta=engine.ledger.delta,
                epsilon_spent=engine.ledger.spent_epsilon(),
                epsilon_remaining=engine.ledger.remaining_epsilon(),
                updates=len(engine.updates),
                max_updates=engine.settings.max_updates,
                answered=len(engine.answers),
                halted=engine.halted or engine.sparse_vector.halted,
                noise=engine.noise.name,
                backend=None if engine.backend is None else engine.backend.to_dict(),
            )

    def ledger(self) -> list[LedgerLine]:
        """Every committed debit, with the total after it and whether it was found orphaned."""
        with self.lock:
            engine = self._load()
            orphans = self.store.orphans(self.name)
            debits = self.store.debits(self.name)
            entries = engine.ledger.entries
            if len(debits) != len(entries):
                self._engine = None
                raise SessionUnavailable(f"Session {self.name!r}: ledger and store disagree.")
            return [
                LedgerLine(
                    seq=d.seq,
                    label=d.label,
                    event=d.event,
                    epsilon_after=e.epsilon_after,
                    orphan=d.seq in orphans,
                )
                for d, e in zip(debits, entries, strict=True)
            ]


class SessionManager:
    """Creates sessions and hands out their :class:`LiveSession` (one per name).

    Args:
        store: the state store.
        noise_factory: makes each engine's random source (the default: OpenDP).
    """

    def __init__(
        self, store: StateStore, *, noise_factory: Callable[[], NoiseSource] = default_noise
    ) -> None:
        self.store = store
        self._noise_factory = noise_factory
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
        built, debits, snapshot = genesis(config, noise=self._noise_factory())
        record = SessionRecord(name=name, config=built, created=time.time())
        self.store.add_session(record, debits, snapshot)
        return record

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
                live = LiveSession(record, self.store, noise_factory=self._noise_factory)
                self._live[name] = live
            return live
