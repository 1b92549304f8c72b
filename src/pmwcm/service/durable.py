"""The write-ahead protocol that makes a session survive ``kill -9`` at any instant.

For each query the service does, under the session's lock:

1. **Validate and compile** the spec (a bad one is a 4xx; nothing is spent).
2. **Debit before noise.** The engine's ledger is a :class:`DurableLedger`:
   its ``spend`` checks the budget, then commits the debit to the store (one
   fsync'd transaction, together with the sparse vector's state at that
   instant), and only then records it in memory and returns -- so the engine
   draws the noise a debit pays for only after the debit is on disk.
3. **Commit, then respond.** After the engine answers, the released answer is
   appended to the session's log as one row, in one transaction with a fresh
   engine snapshot (hypothesis, sparse-vector state including its secret
   threshold noise, update history, ledger) when the answer changed any of
   them (:func:`state_mark`); the response is sent after that. A snapshot
   never holds the released answers, so per-request I/O does not grow with
   the history.

**Recovery** (:func:`recover`) rebuilds the engine deterministically from the
session's configuration, then loads the last committed snapshot, the whole
answer log and *all* committed debits. The snapshot's ledger is always a prefix of the committed
debits; the debits after it are **orphans**: spent, but their answer was never
committed, so it was never sent. The rebuilt ledger is the union, in commit
order (the budget never goes backwards). An orphan is either the sparse
vector's one-off charge (then it stays paid: the engine will not charge it
again) or an oracle call made after a positive sparse-vector test; the
sparse-vector state saved with the latest orphan is restored, so orphaned
positives still count towards the cutoff ``T`` and the threshold noise they
were tested against is kept. The hypothesis and the released answers are the
snapshot's and the released answers the log's, so every committed answer is
served again from the log, never with fresh noise.

Test outcomes whose debit never reached the disk (a crash between a sparse
vector test and the next commit) are simply lost: nothing depending on them was
released or charged. We assume crashes do not depend on the private data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from dp_accounting import DpEvent

from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.snapshot import EngineSnapshot, answer_from_dict, decode_state, encode_state
from pmwcm.kernels.histogram_codec import decode_histogram, encode_histogram
from pmwcm.mechanisms.accounting import Accountant, LedgerEntry, PrivacyLedger
from pmwcm.mechanisms.accounting.codec import event_from_dict, event_to_dict
from pmwcm.service.store import DebitRecord, ReleaseRecord, StoredSnapshot, StoreError

DebitSink = Callable[[DebitRecord], None]


class DurableLedger(PrivacyLedger):
    """A :class:`~pmwcm.mechanisms.accounting.PrivacyLedger` committing each debit first.

    Until :meth:`attach` is called it is a plain ledger (recovery re-spends the
    committed debits through it without writing them again).

    Args:
        epsilon: the budget.
        delta: the delta at which every epsilon is reported.
        accountant: how events compose.
    """

    def __init__(self, *, epsilon: float, delta: float, accountant: Accountant) -> None:
        super().__init__(epsilon=epsilon, delta=delta, accountant=accountant)
        self._sink: DebitSink | None = None
        self._sv_state: Callable[[], dict[str, Any]] = dict

    def attach(self, sink: DebitSink, sv_state: Callable[[], dict[str, Any]]) -> None:
        """From now on, every spend is committed through ``sink`` before it is accepted.

        Args:
            sink: commits one debit durably; raising aborts the spend.
            sv_state: the sparse vector's current exported state.
        """
        self._sink, self._sv_state = sink, sv_state

    def spend(self, event: DpEvent, *, label: str) -> LedgerEntry:
        """Budget check, durable commit, then the in-memory record (see the module docstring).

        Raises:
            BudgetExceededError: ``event`` does not fit (nothing is committed).
            StoreError: the commit failed (nothing is spent; no noise may be drawn).
        """
        if self._sink is not None:
            self.check(event)
            self._sink(
                DebitRecord(
                    seq=len(self.entries),
                    label=label,
                    event=event_to_dict(event),
                    sv_state=dict(self._sv_state()),
                )
            )
        return super().spend(event, label=label)


def encode_snapshot(engine: OnlinePMW) -> StoredSnapshot:
    """The engine's snapshot without its released answers (they are the log's rows), with
    the hypothesis as bytes (:func:`~pmwcm.kernels.histogram_codec.encode_histogram`).

    Its size is bounded by the cutoff ``T`` (updates and ledger entries), never by the
    number of answers."""
    snap = encode_state(engine.state(log=False))
    return StoredSnapshot(state=snap.state, hypothesis=encode_histogram(snap.hypothesis))


def state_mark(engine: OnlinePMW) -> tuple[Any, ...]:
    """What a snapshot holds besides the hypothesis, in brief: equal marks before and after
    an answer mean the answer changed nothing but the log (no snapshot is needed).

    Read from the state's own fields (:meth:`~pmwcm.engine.state.EngineState.mark`),
    so a field added to the state is marked (and snapshotted) without a change here.
    """
    return engine.state(log=False).mark()


def take_released(engine: OnlinePMW, releases: Sequence[ReleaseRecord]) -> OnlinePMW:
    """``engine`` continued with log rows committed after its last answer (by another
    process sharing the store), exactly as :func:`recover` would have loaded them.

    The engine is resumed from its own state plus the rows (through its one door,
    :meth:`~pmwcm.engine.online.OnlinePMW.resumed`, keeping its ledger and sparse
    vector): drop ``engine`` and use the one returned. Nothing is read but the rows.

    Raises:
        StoreError: the rows do not continue the engine's answers.
    """
    state = engine.state()
    answers = list(state.answers)
    released = dict(state.released)
    for release in releases:
        if release.index != len(answers):
            raise StoreError("The answer log does not continue the session's answers.")
        answer = answer_from_dict(release.answer)
        answers.append(answer)
        if not answer.repeated:
            released[release.query_key] = release.index
    caught_up = dataclasses.replace(state, answers=tuple(answers), released=released)
    return engine.resumed(caught_up, ledger=engine.ledger)


def recover(
    engine: OnlinePMW,
    stored: StoredSnapshot | None,
    debits: list[DebitRecord],
    releases: Sequence[ReleaseRecord] = (),
) -> tuple[OnlinePMW, list[int]]:
    """The engine continuing the committed state, built from a fresh ``engine``'s ingredients.

    The recovered engine's ledger is a fresh, detached :class:`DurableLedger`
    holding every committed debit (whatever ledger ``engine`` had). ``engine``
    only supplies the ingredients, its sparse vector included (whose state the
    committed one replaces): drop it and serve the engine returned.

    Args:
        engine: built from the session's configuration, never used.
        stored: the last committed snapshot (``None`` before the first release).
        debits: every committed debit, in order.
        releases: the whole answer log, in order (the released answers; a snapshot
            of schema version 1 also held them, and the log's rows are the same).

    Returns:
        The recovered engine, and the positions of the orphan debits (committed,
        but after the snapshot).

    Raises:
        StoreError: the snapshot's ledger is not a prefix of the debits.
        ValueError: the snapshot does not fit the engine.
    """
    logged = stored.state["ledger"] if stored is not None else []
    if len(logged) > len(debits) or any(
        entry["label"] != debit.label or entry["event"] != debit.event
        for entry, debit in zip(logged, debits, strict=False)
    ):
        raise StoreError("The stored snapshot's ledger is not a prefix of the committed debits.")
    orphans = debits[len(logged) :]
    if any(r.index != i for i, r in enumerate(releases)):
        raise StoreError("The answer log has a gap.")
    answers = [r.answer for r in releases]
    released = {r.query_key: r.index for r in releases if not r.answer["repeated"]}
    if stored is None:
        hypothesis = engine.hypothesis
        state_dict: dict[str, Any] = encode_state(
            dataclasses.replace(engine.state(), ledger=())
        ).state
    else:
        hypothesis = decode_histogram(stored.hypothesis, engine.domain)
        state_dict = stored.state
    logged_state = state_dict | {"answers": answers, "released": released}
    state = decode_state(EngineSnapshot(state=logged_state, hypothesis=hypothesis), engine.domain)
    if stored is None:  # the fresh engine's own start, not a re-normalised copy of it
        state = dataclasses.replace(state, hypothesis=hypothesis)
    if orphans:
        # Orphaned positives still count towards the cutoff, and the threshold
        # noise they were tested against is kept; the sparse vector is always
        # charged first, so an orphan means it is paid.
        state = dataclasses.replace(state, sparse_vector=orphans[-1].sv_state, sv_paid=True)
    old = engine.ledger
    ledger = DurableLedger(epsilon=old.epsilon, delta=old.delta, accountant=old.accountant)
    for debit in debits:  # the union, in commit order
        ledger.spend(event_from_dict(debit.event), label=debit.label)
    return engine.resumed(state, ledger=ledger), [d.seq for d in orphans]
