"""What a session shows of itself: its budget and progress, and its ledger.

Both read only what the engine has released or committed -- the ledger's debits and
totals, the counts of updates and answers, whether it halted, the noise source's
name and the hypothesis backend's public choice -- never the data, the hypothesis
or the sparse vector's noisy threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pmwcm.engine.online import OnlinePMW
from pmwcm.service.store import DebitRecord

__all__ = ["LedgerLine", "SessionStatus", "ledger_lines", "status_of"]


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


def status_of(name: str, engine: OnlinePMW) -> SessionStatus:
    """The status of session ``name``, whose engine is ``engine`` (its locks held)."""
    return SessionStatus(
        name=name,
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


def ledger_lines(
    debits: Sequence[DebitRecord], engine: OnlinePMW, orphans: set[int]
) -> list[LedgerLine]:
    """Each committed debit with the ledger's total after it and whether it is an orphan.

    Raises:
        ValueError: the store and the engine's ledger hold different numbers of debits.
    """
    return [
        LedgerLine(
            seq=d.seq,
            label=d.label,
            event=d.event,
            epsilon_after=e.epsilon_after,
            orphan=d.seq in orphans,
        )
        for d, e in zip(debits, engine.ledger.entries, strict=True)
    ]
