"""How a round decides between the hypothesis and the oracle: the engine's modes, as strategies.

The engine (:class:`pmwcm.engine.online.OnlinePMW`) does what every mode shares --
key the query, answer a repeat from the released answers, compile the round,
refuse or answer synthetically after the halt -- and then hands the round to its
:class:`Mode`:

* :data:`HYBRID` (practical mode) and :data:`THEORY` (the paper's constants,
  :mod:`pmwcm.engine.theory`): the paper's loop. The data's error of the
  hypothesis's answer goes to the online sparse vector (charged whole before
  its first test); below the threshold the hypothesis's answer is released,
  above it the oracle's, followed by an update.
* :data:`COMPOSITION` (:mod:`pmwcm.engine.composition_mode`): every query goes
  to the oracle; the data's error is never computed, and the engine's stand-in
  counter (:class:`~pmwcm.engine.composition_mode.EveryQueryToOracle`, 0-DP)
  only counts the calls towards ``T = k``.

A mode reads the engine only through :class:`RoundSteps` (the steps of a round
the engine offers), so a new mode is a new class here, never a new branch in
the engine. The privacy argument of each is in the module it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from pmwcm.engine.rounds import QueryRound
    from pmwcm.engine.state import Answer, Source
    from pmwcm.kernels.counting import LinearQuery
    from pmwcm.kernels.queries import CMQuery


class RoundSteps(Protocol):
    """The steps of a round an engine offers its mode (implemented by ``EngineSteps``)."""

    def hypothesis_side(self, round_: QueryRound) -> tuple[Any, Any]:
        """The hypothesis's clique table and its answer (public)."""
        ...

    def begin_data_side(self, key: str, round_: QueryRound) -> Callable[[Any], tuple[Any, float]]:
        """Starts the real-data side (its table, then the fixed-work solve, on a worker
        thread where that pays); returns ``hyp_answer -> (data table, error)``."""
        ...

    def data_table(self, round_: QueryRound) -> Any:
        """The data's clique table (read by the oracle only)."""
        ...

    def measure_part(self, query: CMQuery | LinearQuery, round_: QueryRound) -> None:
        """An update due at the end of the stream on a clique too large to measure: a
        part of it measured and absorbed first, where the plan has one (public decision)."""
        ...

    def sparse_vector_test(self, round_: QueryRound, error: float) -> bool:
        """Charges the sparse vector (once), then tests ``error``; ``True`` above."""
        ...

    def updates_left(self) -> bool:
        """Whether an update slot is left for a flagged query (public)."""
        ...

    def halt_on_flag(self, key: str, round_: QueryRound, answer: Any) -> Answer:
        """A flag with no update slot left: the engine halts on it (closing the sparse
        vector); the query is refused or answered with the hypothesis's ``answer``."""
        ...

    def count_oracle_call(self) -> None:
        """Counts an unconditional oracle call towards the cutoff (composition mode)."""
        ...

    def oracle_release(
        self,
        query: CMQuery | LinearQuery,
        round_: QueryRound,
        key: str,
        hypothesis: tuple[Any, Any],
        data_table: Any,
    ) -> Answer:
        """A paid oracle answer, the update it defines, and its release."""
        ...

    def release(self, key: str, value: Any, source: Source) -> Answer:
        """Records and releases ``value`` under ``key``."""
        ...


class Mode(Protocol):
    """A strategy for the decision part of a round (module docstring)."""

    @property
    def name(self) -> str:
        """``"hybrid"``, ``"theory"`` or ``"composition"``."""
        ...

    @property
    def solves_ahead(self) -> bool:
        """Whether announced queries' real-data solves may start ahead of time."""
        ...

    def run(
        self, steps: RoundSteps, query: CMQuery | LinearQuery, round_: QueryRound, key: str
    ) -> Answer:
        """Runs one round of a query that is new, servable and not past the halt."""
        ...


@dataclass(frozen=True)
class SparseVectorMode:
    """The paper's loop: the sparse vector decides between hypothesis and oracle."""

    name: str = "hybrid"
    solves_ahead: bool = True

    def run(
        self, steps: RoundSteps, query: CMQuery | LinearQuery, round_: QueryRound, key: str
    ) -> Answer:
        """Steps 1-4 of the engine's loop (:mod:`pmwcm.engine.online`), after a measured
        part where one is due (:meth:`RoundSteps.measure_part`); a flag with no update
        slot left (a measured engine testing past its last update) halts the engine."""
        steps.measure_part(query, round_)
        finish = steps.begin_data_side(key, round_)  # runs while the hypothesis answers
        hypothesis = steps.hypothesis_side(round_)
        data_table, error = finish(hypothesis[1])
        if not steps.sparse_vector_test(round_, error):
            return steps.release(key, hypothesis[1], "hypothesis")
        if not steps.updates_left():
            return steps.halt_on_flag(key, round_, hypothesis[1])
        return steps.oracle_release(query, round_, key, hypothesis, data_table)


@dataclass(frozen=True)
class CompositionMode:
    """Every query to the oracle: the data's error is never computed."""

    name: str = "composition"
    solves_ahead: bool = False

    def run(
        self, steps: RoundSteps, query: CMQuery | LinearQuery, round_: QueryRound, key: str
    ) -> Answer:
        """An oracle call and its (free) update, counted towards ``T = k``."""
        hypothesis = steps.hypothesis_side(round_)
        data_table = steps.data_table(round_)
        steps.count_oracle_call()
        return steps.oracle_release(query, round_, key, hypothesis, data_table)


HYBRID: Mode = SparseVectorMode()
THEORY: Mode = SparseVectorMode(name="theory")
COMPOSITION: Mode = CompositionMode()
