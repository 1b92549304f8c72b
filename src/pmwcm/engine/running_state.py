"""The engine's running state: what its rounds change, written by the engine alone.

:class:`RunningState` is the mutable form of :class:`~pmwcm.engine.state.EngineState`
(the frozen value a caller saves and restores): the hypothesis, the updates made,
whether the sparse vector is paid, the released marginals the refit reads, and
the answer log. The round steps (:class:`~pmwcm.engine.steps.EngineSteps`) change
it; :class:`StateView` gives the engine's readers read-only attributes over it,
and :meth:`StateView.state` the frozen value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pmwcm.engine.answer_log import AnswerLog
from pmwcm.engine.parts import EngineParts
from pmwcm.engine.state import Answer, EngineState, PastUpdate, UpdateRecord
from pmwcm.engine.update_slots import SlotsUsed
from pmwcm.kernels.histogram import Histogram
from pmwcm.mechanisms.priors.marginals import Measurement

__all__ = ["RunningState", "StateView"]


class RunningState:
    """The hypothesis, the updates, the sparse vector's payment, the measurements, the log.

    Args:
        hypothesis: the starting hypothesis ``Dhat_0`` (kept, not copied).
        measurements: the released marginals it was fitted to (for the refit).
    """

    def __init__(self, hypothesis: Histogram, measurements: tuple[Measurement, ...]) -> None:
        self.hypothesis = hypothesis
        self.measurements = measurements
        self.updates: list[UpdateRecord] = []
        self.sv_paid = False
        self.log = AnswerLog()
        self._slots_used: tuple[tuple[int, int, int], SlotsUsed] | None = None

    def slots_used(self, parts: EngineParts) -> SlotsUsed:
        """The update slots the updates made so far took out of ``T``: one each, but an
        oracle call on an unmeasurable clique may take more
        (:class:`~pmwcm.engine.update_slots.FallbackRule`; recomputed from the updates'
        cliques, public, so no state keeps it)."""
        update = parts.measured_update
        if update is None:
            return SlotsUsed(total=len(self.updates))
        # Asked twice a round; the updates are only appended to, so the count is
        # recomputed only when they have grown (or been replaced, by ``adopt``).
        seen = (id(parts), id(self.updates), len(self.updates))
        if self._slots_used is not None and self._slots_used[0] == seen:
            return self._slots_used[1]
        domain = parts.data.domain
        measured = [update.measures(domain, record.round.clique) for record in self.updates]
        used = update.fallback.slots_used(measured, cutoff=parts.settings.max_updates)
        self._slots_used = (seen, used)
        return used

    def export(self, parts: EngineParts, *, log: bool) -> EngineState:
        """The frozen value of this state and of ``parts``' ledger and sparse vector."""
        answers, released = self.log.export() if log else ((), {})
        return EngineState(
            hypothesis=self.hypothesis,
            updates=tuple(PastUpdate(query=u.query, private=u.private) for u in self.updates),
            answers=answers,
            released=released,
            sv_paid=self.sv_paid,
            sparse_vector=parts.sparse_vector.export_state(),
            ledger=tuple(parts.ledger.entries),
            prior_measurements=self.measurements,
        )

    def adopt(self, state: EngineState, updates: list[UpdateRecord], parts: EngineParts) -> None:
        """Takes ``state`` (its updates compiled again as ``updates``) into a fresh engine's
        running state, ``parts``' sparse vector and, if empty, ``parts``' ledger.

        Everything that can fail runs before the ledger is touched, so a refused
        state leaves the caller's ledger as it was.

        Raises:
            ValueError: the state does not fit (too many updates, another domain, a
                ledger that does not begin with the state's).
        """
        if len(state.updates) > parts.settings.max_updates:
            raise ValueError(
                f"The state holds {len(state.updates)} updates; max_updates is "
                f"{parts.settings.max_updates}."
            )
        if state.hypothesis.domain != parts.data.domain:
            raise ValueError("The state's hypothesis is over a different domain than the data.")
        entries = parts.ledger.entries
        if entries and (
            len(entries) < len(state.ledger)
            or any(
                (mine.label, mine.event) != (theirs.label, theirs.event)
                for mine, theirs in zip(entries, state.ledger, strict=False)
            )
        ):
            raise ValueError("The ledger's entries do not begin with the state's ledger.")
        parts.sparse_vector.import_state(dict(state.sparse_vector))
        if not entries:
            for entry in state.ledger:
                parts.ledger.spend(entry.event, label=entry.label)
        self.hypothesis = state.hypothesis  # shared: see EngineState.hypothesis
        self.measurements = state.prior_measurements
        self.sv_paid = state.sv_paid
        self.updates = updates
        self.log.load(state.answers, state.released)


class StateView:
    """Read-only attributes over an engine's running state, and its frozen value."""

    _parts: EngineParts
    _running: RunningState

    @property
    def hypothesis(self) -> Histogram:
        """The current hypothesis ``Dhat_t`` (replaced by each update, never changed in place)."""
        return self._running.hypothesis

    @property
    def updates(self) -> tuple[UpdateRecord, ...]:
        """The updates made so far, in order."""
        return tuple(self._running.updates)

    @property
    def answers(self) -> Sequence[Answer]:
        """Every answer given, in order (repeats included)."""
        return self._running.log.answers

    @property
    def released(self) -> Mapping[str, Answer]:
        """The released answer of each query key (repeats are answered from here)."""
        return self._running.log.released

    @property
    def sv_paid(self) -> bool:
        """Whether the sparse vector's event is in the ledger."""
        return self._running.sv_paid

    @property
    def prior_measurements(self) -> tuple[Measurement, ...]:
        """The released marginals the refit pulls towards (the prior's, then issue 35's)."""
        return self._running.measurements

    @property
    def halted(self) -> bool:
        """Whether the sparse vector has halted, or (without a measured update) the ``T``
        updates are spent.

        Without a measured update every update follows a positive, so the two agree
        except after crash recovery: a positive whose oracle debit was committed but
        whose answer never was (an orphan) still counts towards the sparse vector's
        cutoff, with no update behind it. The sparse vector can then halt first; the
        engine is halted from then on, so ``after_halt="synthetic"`` serves the final
        hypothesis as promised instead of refusing every later query.

        **A measured engine that answers after its halt tests on past its last update**
        (issue 35). Its paced updates take slots without a positive, so when the ``T``
        slots are spent the sparse vector has positives left (its cutoff is ``T``, its
        cost charged whole): with ``after_halt="synthetic"`` the engine keeps testing,
        a query below the threshold is still a checked ``"hypothesis"`` answer, and the
        first flag with no slot to act on halts the engine there, its answer synthetic
        (:meth:`~pmwcm.engine.steps.EngineSteps.halt_on_flag` closes the sparse vector,
        so the halt is in its exported state, committed with that answer). Until then
        nothing is unchecked: on full-resolution Adult's random streams the pacing
        spends its last slots at the last announced measurable query, and every answer
        after it (0.05-1.1% of the stream, the same answers at every ``epsilon``) had
        been synthetic. With ``after_halt="refuse"`` it halts when the slots are spent,
        as the paper's engine does: a flag past them would be refused, and a refusal is
        no answer that a durable store commits, so the test's outcome would be seen
        before the closed sparse vector could be saved (a restart would reopen it).
        """
        if (
            self._parts.measured_update is not None
            and self._parts.settings.after_halt == "synthetic"
        ):
            return self._parts.sparse_vector.halted
        used = self._running.slots_used(self._parts).total
        return used >= self._parts.settings.max_updates or self._parts.sparse_vector.halted

    def state(self, *, log: bool = True) -> EngineState:
        """The engine's state as one frozen value (secret; see :class:`EngineState`).

        With ``log=False`` its ``LOG`` fields (the answers, the released keys) are
        left empty: what a service that logs its answers apart snapshots, at a
        cost bounded by ``T`` rather than by the answers.
        """
        return self._running.export(self._parts, log=log)
