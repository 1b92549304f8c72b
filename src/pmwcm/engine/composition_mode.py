"""Composition mode: every announced query answered by the oracle, no prior, no sparse vector.

When the caller announces ``k`` (:attr:`pmwcm.engine.practical.PMWConfig.announced_queries`)
and the public rule of :mod:`pmwcm.engine.budget_rule`
(:func:`~pmwcm.engine.budget_rule.prefers_composition`) finds that ``k`` oracle
calls at ``(epsilon, delta) / k`` would be more accurate than the hybrid's
certified answers, the engine runs in composition mode:

* no paid prior (the start is the uniform histogram, or a uniform support);
* the online sparse vector is replaced by :class:`EveryQueryToOracle`, which
  sends every query to the oracle and never reads a value;
* ``T = k`` oracle calls, whose noise level is calibrated so that their
  composition is exactly ``(epsilon, delta)``-DP (:func:`pmwcm.engine.practical.build_engine`
  with nothing else in the ledger): the composition baseline
  (:class:`pmwcm.engine.baselines.CompositionBaseline`) run inside the engine,
  with the engine's refusals, repeats, ledger and snapshots;
* each private answer still updates the hypothesis (the paper's fixed step, no
  sweeps: post-processing, free), which serves ``after_halt="synthetic"``.

**Privacy.** :class:`EveryQueryToOracle`'s output is a constant (``True``), so it is
0-DP and its event is ``NoOpDpEvent``. The engine then reads the data only
through the ``k`` oracle calls, each charged to the ledger before its noise is
drawn; their adaptive composition is ``(epsilon, delta)``-DP by the composition
theorem for privacy-loss distributions (Meiser and Mohammadi 2018; Koskela,
Jalko and Honkela 2020), as ``dp_accounting``'s PLD accountant computes it, and
the ledger refuses a ``(k + 1)``-th call. The statistical audit in
``tests/test_composition_mode.py`` checks a two-call engine on an adversarial
pair and shows that calibrating for one call while answering two fails it.
"""

from __future__ import annotations

from dp_accounting import dp_event

from pmwcm.mechanisms.sparse_vector import SparseVectorHalted


class EveryQueryToOracle:
    """A stand-in for the online sparse vector that answers "above" to every query.

    It never looks at the value it is given (so it costs nothing, and the engine
    need not compute the error at all) and halts after ``cutoff`` positives, like
    every sparse vector: the engine's ``T`` oracle calls.

    Args:
        cutoff: ``k``, the announced number of queries (>= 1).
    """

    def __init__(self, *, cutoff: int) -> None:
        if not (isinstance(cutoff, int) and cutoff >= 1):
            raise ValueError(f"cutoff must be a positive integer, got cutoff={cutoff!r}.")
        self._cutoff = cutoff
        self._positives = 0

    @property
    def cutoff(self) -> int:
        """``k``: the engine halts after ``k`` oracle calls."""
        return self._cutoff

    @property
    def positives(self) -> int:
        """Queries sent to the oracle so far."""
        return self._positives

    @property
    def halted(self) -> bool:
        """Whether ``cutoff`` queries have been sent."""
        return self._positives >= self._cutoff

    def above(self, value: float, *, threshold: float) -> bool:
        """``True`` for every query (the value and threshold are not read).

        Raises:
            SparseVectorHalted: after ``cutoff`` positives.
        """
        del value, threshold  # not read: that is the point (0-DP)
        if self.halted:
            raise SparseVectorHalted(f"All {self._cutoff} announced queries were answered.")
        self._positives += 1
        return True

    def close(self) -> None:
        """Halts now: the calls left are counted as made (nothing is read)."""
        self._positives = self._cutoff

    def privacy_event(self) -> dp_event.DpEvent:
        """``NoOpDpEvent``: a constant output reveals nothing."""
        return dp_event.NoOpDpEvent()

    def accuracy_margin(self, *, queries: int, beta: float) -> float:
        """0: there is no noisy comparison to be wrong about."""
        del queries, beta
        return 0.0

    def export_state(self) -> dict[str, float | int | None]:
        """The count of positives (nothing secret)."""
        return {"positives": self._positives}

    def import_state(self, state: dict[str, float | int | None]) -> None:
        """Restores :meth:`export_state`'s output."""
        positives = state.get("positives", 0)
        if not (isinstance(positives, int) and 0 <= positives <= self._cutoff):
            raise ValueError(
                f"positives must be an integer in [0, {self._cutoff}], got positives={positives!r}."
            )
        self._positives = positives
