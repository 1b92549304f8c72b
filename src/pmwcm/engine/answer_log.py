"""The engine's record of its answers, and the released ones by query key.

Every answer the engine gives is recorded in order (its transcript); a new
query's answer is also *released* under the query's key
(:func:`~pmwcm.engine.state.query_key`), and a repeat of that key is answered
from here: the same value again, with no new noise and no cost (post-processing
of a released value). Were a repeat answered afresh, an analyst could average
up to ``T`` independent oracle draws of one problem.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, overload

from pmwcm.engine.state import Answer, Source
from pmwcm.mechanisms.accounting import PrivacyLedger

__all__ = ["AnswerLog"]


class _ReadOnly(Sequence[Answer]):
    """A read-only view of a list (the engine's answers, as it grows)."""

    def __init__(self, items: list[Answer]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> Answer: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Answer]: ...
    def __getitem__(self, index: int | slice) -> Answer | Sequence[Answer]:
        if isinstance(index, slice):
            return tuple(self._items[index])
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Answer]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"answers({self._items!r})"


class AnswerLog:
    """Every answer in order, and the released answer of each query key.

    Only the engine writes here (:meth:`record`, :meth:`release`, :meth:`load`);
    readers get read-only views (:attr:`answers`, :attr:`released`).
    """

    def __init__(self) -> None:
        self._answers: list[Answer] = []
        self._released: dict[str, Answer] = {}

    @property
    def answers(self) -> Sequence[Answer]:
        """Every answer given, in order (repeats included); a read-only view."""
        return _ReadOnly(self._answers)

    @property
    def released(self) -> Mapping[str, Answer]:
        """The released answer of each query key; a read-only view."""
        return MappingProxyType(self._released)

    def repeat_of(self, key: str) -> Answer | None:
        """The answer released under ``key``, if any."""
        return self._released.get(key)

    def record(
        self, value: Any, source: Source, *, repeated: bool, updates: int, ledger: PrivacyLedger
    ) -> Answer:
        """Appends an answer (``updates`` made so far, the ledger's spend at this point)."""
        answer = Answer(
            index=len(self._answers),
            value=value,
            source=source,
            updates=updates,
            epsilon_spent=ledger.spent_epsilon(),
            delta=ledger.delta,
            repeated=repeated,
        )
        self._answers.append(answer)
        return answer

    def echo(self, released: Answer, *, updates: int, ledger: PrivacyLedger) -> Answer:
        """A repeat of ``released`` that is not appended: its ``index`` is the
        released answer's own (a caller that keeps its own record of every line,
        such as a streamed query file, keeps the log's size bounded by the distinct
        queries)."""
        return Answer(
            index=released.index,
            value=released.value,
            source=released.source,
            updates=updates,
            epsilon_spent=ledger.spent_epsilon(),
            delta=ledger.delta,
            repeated=True,
        )

    def release(
        self, key: str, value: Any, source: Source, *, updates: int, ledger: PrivacyLedger
    ) -> Answer:
        """Records a new query's answer and releases it under ``key``."""
        answer = self.record(value, source, repeated=False, updates=updates, ledger=ledger)
        self._released[key] = answer
        return answer

    def export(self) -> tuple[tuple[Answer, ...], dict[str, int]]:
        """The answers, and each released key's position among them (the state's form)."""
        return tuple(self._answers), {key: a.index for key, a in self._released.items()}

    def load(self, answers: Sequence[Answer], released: Mapping[str, int]) -> None:
        """Replaces the log with :meth:`export`'s form (positions already checked)."""
        self._answers = list(answers)
        self._released = {key: self._answers[index] for key, index in released.items()}
