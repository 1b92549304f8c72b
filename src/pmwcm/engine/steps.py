"""The steps of a round, over the engine's running state (private to the engine).

The engine (:class:`~pmwcm.engine.online.OnlinePMW`) keys a query, answers a
repeat, compiles the round and hands it to its mode (:mod:`pmwcm.engine.modes`);
the mode runs the round through :class:`EngineSteps`, which holds everything a
round changes -- the hypothesis, the updates, whether the sparse vector is paid,
the measurements, the answer log (:mod:`pmwcm.engine.running_state`) -- and is
the only writer of it.

**Privacy** (Ullman 2015, Theorem "dp"). The data is read only by the data side
(:mod:`pmwcm.engine.data_side`), whose error goes to the sparse vector (charged
whole before its first test: :meth:`EngineSteps.sparse_vector_test`), and by
the oracle (each call charged before its noise is drawn:
:meth:`EngineSteps.private_answer`) or issue 35's clique measurement (likewise).
The update after an oracle answer (:mod:`pmwcm.engine.update_step`) reads
released values only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pmwcm.engine.data_side import DataSide
from pmwcm.engine.measured_update import part_to_measure
from pmwcm.engine.parts import EngineParts
from pmwcm.engine.rounds import CMRound, QueryRound, as_table
from pmwcm.engine.running_state import RunningState
from pmwcm.engine.state import Answer, Source, UpdateRecord
from pmwcm.engine.step_size import PublicContext
from pmwcm.engine.update_slots import FallbackRule
from pmwcm.engine.update_step import updated_hypothesis
from pmwcm.errors import Halted, Refused
from pmwcm.kernels.clique_table import is_dense
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery, QueryError
from pmwcm.mechanisms.priors.marginals import Measurement

__all__ = ["SECOND_CORE_MIN_WORK", "EngineHalted", "EngineSteps", "worth_a_second_core"]

#: The least planned real-data work (rows times iterations) handed to the worker
#: thread: below it (small dense cliques) the hand-off costs more than it saves.
SECOND_CORE_MIN_WORK = 2**15


class EngineHalted(Halted, RuntimeError):
    """The engine has halted (its sparse vector's cutoff reached, or a flag with no update
    slot left to act on); it refuses new queries."""


def worth_a_second_core(domain: Domain, round_: CMRound) -> bool:
    """Whether the round's real-data solve runs on a worker thread: a public rule.

    A large clique's data table is sparse and its row count is the data's
    occupied cells, so it always goes (deciding by the count would let the data
    choose); a small one goes when its cells times the planned iterations are
    many, since below that the hand-off costs more than it saves.
    """
    shape = domain.sizes_of(round_.clique)
    if not is_dense(shape):
        return True
    return math.prod(shape) * round_.data_solve.iterations >= SECOND_CORE_MIN_WORK


class EngineSteps:
    """The steps of a round (:class:`~pmwcm.engine.modes.RoundSteps`) over the running state.

    Args:
        parts: the engine's parts.
        running: the engine's running state (these steps are its only writer).
    """

    def __init__(
        self,
        parts: EngineParts,
        running: RunningState,
        compile_round: Callable[[CMQuery], CMRound],
    ) -> None:
        self.parts = parts
        self.running = running
        #: the engine's round compiler (public inputs only), for a measured part's round.
        self.compile_round = compile_round
        #: the real-data side of rounds: worker threads, the only reader of the data.
        self.data_side = DataSide(parts.data)

    def hypothesis_side(self, round_: QueryRound) -> tuple[Any, Any]:
        """The hypothesis's clique table and its answer (public)."""
        table = self.running.hypothesis.clique_table(round_.clique)
        return table, round_.hypothesis_answer(table)

    def begin_data_side(self, key: str, round_: QueryRound) -> Callable[[Any], tuple[Any, float]]:
        """Starts the real-data side (its counts, then the fixed-work solve, independent
        of the answer) on a worker thread, unless it already ran ahead or the clique is
        small (then it runs when the answer is known: :mod:`pmwcm.engine.data_side`)."""
        if isinstance(round_, CMRound) and worth_a_second_core(self.parts.data.domain, round_):
            pending = self.data_side.start(key, round_)

            def finish_pending(hyp_answer: Any) -> tuple[Any, float]:
                table, error_of = pending.result()
                return table, error_of(hyp_answer)

            return finish_pending

        def finish_inline(hyp_answer: Any) -> tuple[Any, float]:
            table = self.data_side.table(round_.clique)
            return table, round_.error(table, hyp_answer)

        return finish_inline

    def data_table(self, round_: QueryRound) -> Any:
        """The data's clique table (what the oracle reads)."""
        return self.data_side.table(round_.clique)

    def measure_part(self, query: CMQuery | LinearQuery, round_: QueryRound) -> None:
        """Issue 35's paced update on a clique too large to measure, before the round.

        Where the pacing spends what is left at the end of the stream
        (:meth:`~pmwcm.engine.measured_update.MeasuredUpdate.part_due`) at a fresh query
        whose clique no measurement takes, on a stream announced by its length alone
        (:meth:`~pmwcm.engine.measured_update.MeasuredUpdate.measures_parts`), the part
        of the query :func:`~pmwcm.engine.measured_update.part_to_measure` picks is
        measured (one update slot, charged first, as a measured update's) and the
        hypothesis refitted onto it. The round then runs as any other: its own
        sparse vector test on the refitted hypothesis, so its answer keeps the
        round's certificate. The part is kept as an update (its query and the
        refitted hypothesis's answer to it), so the slots it took are counted, and
        snapshotted, as every update's are.

        Every decision reads public values only: the setting, the schema, the query,
        the counts of answers and updates, the cliques measured so far. It needs two
        slots left: a flag of the round's own test may take the other.
        """
        parts, update = self.parts, self.parts.measured_update
        if update is None or not isinstance(query, CMQuery) or not isinstance(round_, CMRound):
            return
        domain = parts.data.domain
        if not update.measures_parts(domain, round_.clique):
            return
        used = self.running.slots_used(parts)
        if not update.part_due(
            answered=len(self.running.log.released),
            updates=used.total,
            cutoff=parts.settings.max_updates,
        ):
            return
        cliques = [measurement.clique for measurement in self.running.measurements]
        part = part_to_measure(domain, query, cliques)
        if part is None:
            return
        try:
            part_round = self.compile_round(part)
        except (QueryError, Refused):
            return  # public: nothing read, nothing spent
        measurement = self._measurement(part_round, self.data_side.table(part_round.clique))
        assert measurement is not None  # a measurable clique of a measured plan
        self._absorb(part, part_round, measurement)

    def sparse_vector_test(self, round_: QueryRound, error: float) -> bool:
        """Charges the sparse vector's event (once, before its first test), then tests
        ``error`` in units of the round's sensitivity; ``True`` above the threshold."""
        parts = self.parts
        if not self.running.sv_paid:
            parts.ledger.spend(parts.sparse_vector.privacy_event(), label="sparse vector")
            self.running.sv_paid = True
        # Issue 35's pacing: an update due by the public schedule skips the sparse
        # vector's test (it reads only the count of distinct queries answered and of
        # updates; repeats, answered without a round, do not advance the schedule).
        update = parts.measured_update
        if update is not None:
            used = self.running.slots_used(parts)
            if update.due(
                answered=len(self.running.log.released),
                updates=used.total,
                pooled=used.pooled,
                cutoff=parts.settings.max_updates,
                measured=update.measures(parts.data.domain, round_.clique),
            ):
                return True
        # The threshold a hypothesis answer is certified to: one method for both.
        threshold = self.round_threshold_units(round_)
        return parts.sparse_vector.above(
            error / round_.sensitivity(parts.data.n), threshold=threshold
        )

    def threshold_units(self, sensitivity: float) -> float:
        """The rule's sparse-vector threshold in units of a query's sensitivity."""
        settings = self.parts.settings
        if settings.absolute_threshold is not None:
            return settings.absolute_threshold / sensitivity
        return settings.threshold

    def round_threshold_units(self, round_: QueryRound) -> float:
        """The threshold ``round_``'s test would use as the next fresh query, in units of
        its sensitivity: the rule's, times the fallback's factor where a flag on its clique
        would buy an oracle call instead of a measurement
        (:class:`~pmwcm.engine.update_slots.FallbackRule`), times the pacing's once the
        flags have run ahead of its schedule beyond the reserve
        (:meth:`~pmwcm.engine.measured_update.MeasuredUpdate.threshold_factor`). Public:
        the plan, the schema and the counts. A hypothesis answer is certified to it."""
        parts = self.parts
        update = parts.measured_update
        threshold = self.threshold_units(round_.sensitivity(parts.data.n))
        if update is not None:  # 1.0 each where neither applies: the same float
            measured = update.measures(parts.data.domain, round_.clique)
            used = self.running.slots_used(parts)
            threshold *= update.fallback.threshold_factor(measured=measured) * (
                update.threshold_factor(
                    answered=len(self.running.log.released),
                    updates=used.total,
                    pooled=used.pooled,
                    cutoff=parts.settings.max_updates,
                )
            )
        return threshold

    def updates_left(self) -> bool:
        """Whether an update slot is left for a flagged query (public: the counts)."""
        return self.running.slots_used(self.parts).total < self.parts.settings.max_updates

    def halt_on_flag(self, key: str, round_: QueryRound, answer: Any) -> Answer:
        """A flag past the last update slot (a measured engine that answers after its
        halt tests on after it: :attr:`~pmwcm.engine.running_state.StateView.halted`):
        nothing is left to answer it with, so the engine halts here. The sparse vector
        is closed (its positive is released by the halt; closing is post-processing),
        and the query is answered as every query after the halt is (:meth:`after_halt`:
        synthetic, the hypothesis's ``answer``, released with the closed state)."""
        self.parts.sparse_vector.close()
        return self.after_halt(key, round_, answer)

    def after_halt(self, key: str, round_: QueryRound, answer: Any = None) -> Answer:
        """A query past the halt: refused (``after_halt="refuse"``, the paper), or the
        hypothesis's ``answer`` released as ``"synthetic"`` (post-processing, no accuracy
        check behind it; computed here when not given).

        Raises:
            EngineHalted: with ``after_halt="refuse"``.
        """
        settings = self.parts.settings
        if settings.after_halt == "refuse":
            raise EngineHalted(
                f"The privacy budget is spent: all {settings.max_updates} updates were "
                "used, so no further query can be answered with an accuracy check. "
                "Use after_halt='synthetic' to answer from the final hypothesis."
            )
        if answer is None:
            _, answer = self.hypothesis_side(round_)
        return self.release(key, answer, "synthetic")

    def count_oracle_call(self) -> None:
        """Counts an unconditional oracle call (composition mode's 0-DP counter)."""
        self.parts.sparse_vector.above(0.0, threshold=0.0)  # reads nothing

    def oracle_release(
        self,
        query: CMQuery | LinearQuery,
        round_: QueryRound,
        key: str,
        hypothesis: tuple[Any, Any],
        data_table: Any,
    ) -> Answer:
        """A paid oracle answer, the update it defines, and its release (source ``oracle``).

        With issue 35's measured update the flagged clique's marginal is measured (and
        paid) first; ``update="measure"`` then releases the hypothesis's answer after
        it absorbs the measurement, with no oracle call (:meth:`_measured_release`).
        """
        measurement = self._measurement(round_, data_table)
        update = self.parts.measured_update
        if measurement is not None and update is not None and not update.calls_oracle:
            return self._measured_release(query, round_, key, measurement)
        private = self.private_answer(round_, data_table)
        self._update(query, round_, hypothesis[0], hypothesis[1], private, measurement)
        return self.release(key, private, "oracle")

    def _measurement(self, round_: QueryRound, data_marginal: Any) -> Measurement | None:
        """The flagged clique's noisy marginal, charged to the ledger before any noise
        is drawn, when the measured update asks for it (a public decision: the
        setting and the clique's shape); ``None`` otherwise."""
        parts, update = self.parts, self.parts.measured_update
        if update is None or not update.measures(parts.data.domain, round_.clique):
            return None
        label = f"clique measurement {len(self.running.updates) + 1}"
        parts.ledger.spend(update.event(), label=label)
        table = as_table(data_marginal).table()
        return update.measure(table, round_.clique, n=parts.data.n, noise=parts.noise)

    def _measured_release(
        self, query: CMQuery | LinearQuery, round_: QueryRound, key: str, measurement: Measurement
    ) -> Answer:
        """``update="measure"``: the hypothesis absorbs the measurement and its answer
        is released (source ``"oracle"``: a private release paid in this round; its
        certificate is :meth:`~pmwcm.engine.measured_update.MeasuredUpdate.certificate`).
        Post-processing of the measurement; committed at once."""
        answer = self._absorb(query, round_, measurement)
        return self.release(key, answer, "oracle")

    def _absorb(
        self, query: CMQuery | LinearQuery, round_: QueryRound, measurement: Measurement
    ) -> Any:
        """The hypothesis refitted onto every measurement, ``measurement`` last, committed
        with the update it makes; the refitted hypothesis's answer to ``round_``.
        Post-processing of the measurement."""
        assert self.parts.measured_update is not None
        every = (*self.running.measurements, measurement)
        updated = self.parts.measured_update.absorb(self.running.hypothesis, every)
        answer = round_.hypothesis_answer(updated.clique_table(round_.clique))
        self.running.hypothesis = updated
        self.running.measurements = every
        self.running.updates.append(UpdateRecord(query=query, round=round_, private=answer))
        return answer

    def oracle_level(self, round_: QueryRound) -> float:
        """This round's oracle noise level: the plan's, or, where the measured update
        gives an unmeasurable clique more slots, ``level / sqrt(slots)`` (public)."""
        parts, update = self.parts, self.parts.measured_update
        level = parts.oracle_noise_level
        if update is None or not isinstance(round_, CMRound):
            return level
        slots = update.fallback.slots_taken(
            measured=update.measures(parts.data.domain, round_.clique),
            used=self.running.slots_used(parts),
            cutoff=parts.settings.max_updates,
        )
        return FallbackRule.oracle_level(level, slots)

    def private_answer(self, round_: QueryRound, data_marginal: Any) -> Any:
        """A fresh private answer, paid for in the ledger before any noise is drawn."""
        parts = self.parts
        level = self.oracle_level(round_)
        event = round_.privacy_event(level)
        parts.ledger.spend(event, label=f"oracle call {len(self.running.updates) + 1}")
        return round_.private_answer(
            data_marginal, n=parts.data.n, noise_level=level, noise=parts.noise
        )

    def _update(
        self,
        query: CMQuery | LinearQuery,
        round_: QueryRound,
        marginal: Any,
        answer: Any,
        private: Any,
        measurement: Measurement | None = None,
    ) -> None:
        """Builds the updated hypothesis (:func:`~pmwcm.engine.update_step.updated_hypothesis`,
        on a copy), then commits it and the update at once: an update that raised
        leaves the hypothesis and the updates as they were, so no later round replays
        a half-made one."""
        record = UpdateRecord(query=query, round=round_, private=private)
        parts = self.parts
        measurements = self.running.measurements
        if measurement is not None:  # update="both": the clique's measurement joins them
            measurements = (*measurements, measurement)
        self.running.hypothesis = updated_hypothesis(
            self.running.hypothesis,
            self.running.updates,
            record,
            marginal=marginal,
            answer=answer,
            measurements=measurements,
            settings=parts.settings,
            context=PublicContext(n=parts.data.n, noise_level=self.oracle_level(round_)),
        )
        self.running.measurements = measurements
        self.running.updates.append(record)

    def release(self, key: str, value: Any, source: Source) -> Answer:
        """Records and releases ``value`` under ``key``."""
        return self.running.log.release(
            key, value, source, updates=len(self.running.updates), ledger=self.parts.ledger
        )

    def repeat(self, released: Answer, *, log: bool = True) -> Answer:
        """A repeat of a released answer (the same value, no noise, no cost), recorded
        in the transcript unless ``log`` is false (:meth:`AnswerLog.echo`)."""
        if not log:
            return self.running.log.echo(
                released, updates=len(self.running.updates), ledger=self.parts.ledger
            )
        return self.running.log.record(
            released.value,
            released.source,
            repeated=True,
            updates=len(self.running.updates),
            ledger=self.parts.ledger,
        )
