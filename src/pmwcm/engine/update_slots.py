"""Update slots: how a measured plan pays an oracle call on a clique too large to measure.

A measured plan (:mod:`pmwcm.engine.measured_update`) calibrates its updates as
``T`` Gaussian events at one multiplier ``m``: each update, a clique measurement,
takes one *slot*. At full resolution most cliques of a query exceed the ``2^12``
cells a measurement takes (:func:`~pmwcm.kernels.clique_table.is_dense`), so a
flagged one gets the oracle's update instead, and at one slot its released answer
is a ``1/T``-th share of the update budget: on full-resolution Adult (eps = 1,
k = 2,000, seed 0) those calls were the stream's worst answers (max excess risk
1.5e-3, against 6.4e-4 for the paper's update with its own plan, while the
measured mean was half of its).

**Several slots, one Gaussian.** An oracle call on an unmeasurable clique takes
``j`` slots as one Gaussian at ``m / sqrt(j)``. Gaussian privacy loss adds in
``1 / m^2`` (Bun, Steinke 2016, Lemma 2.3; Dong, Roth, Su 2022, Cor. 3.3), so the
call composes to exactly the ``j`` Gaussians at ``m`` it replaces, and the
plan's guarantee holds whatever the mix of measurements and calls. Only where
the oracle's event is Gaussian.

**The pool.** Four slots for every such call took the pacing's slots and halted
the stream early (18.7% unchecked on the same stream). A support plan therefore
keeps a pool of :data:`ORACLE_POOL_CALLS` such calls beyond the measurements'
``T``; once the pool is taken, such a call takes one slot again. The pool's
unused slots join the pacing schedule in step with the stream
(:meth:`~pmwcm.engine.measured_update.MeasuredUpdate.due`), so a stream with few
such calls still spends its budget.

**A higher threshold.** The rule's sparse-vector threshold lets about ``T / 2``
queries through on noise alone: cheap where a flag buys a measurement, not where
it buys an oracle call. On an unmeasurable clique of a support plan the
threshold is :data:`UNMEASURED_THRESHOLD` times the rule's. A per-query threshold
that is a public function of the query leaves the sparse vector's guarantee as it
is (Lyu, Su, Li 2017, Alg. 1 takes any public thresholds ``T_i``); a hypothesis
answer it lets through is then certified to that larger threshold.

Everything here reads public values only: the setting, the schema, the cliques of
past updates, the counts. The slots a past update took are recomputed from its
clique (:meth:`FallbackRule.slots_used`), so neither the engine's state nor a
snapshot keeps them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ORACLE_POOL_CALLS",
    "ORACLE_SLOTS",
    "UNMEASURED_THRESHOLD",
    "FallbackRule",
    "SlotsUsed",
]

#: Update slots an oracle call on an unmeasurable clique takes while the pool lasts. On
#: full-resolution Adult (eps = 1, k = 2,000, seed 0, ``T = 20``) one slot gave the max
#: excess risk 1.5e-3, four slots 4.7e-4.
ORACLE_SLOTS = 4
#: Such calls a support plan keeps slots for beyond the measurements' ``T``.
ORACLE_POOL_CALLS = 3
#: The sparse vector's threshold on an unmeasurable clique of a support plan, in units
#: of the rule's. On full-resolution Adult from the workload-aware start (eps = 1,
#: k = 2,000, seed 0) the factor 1 flagged the stream's unmeasurable cliques into
#: oracle calls: max excess risk 1.7e-3, 12.5% unchecked, the updates' gain 0.95x; at 3
#: (and at 100, where no such query was flagged) 1.9e-4, none unchecked.
UNMEASURED_THRESHOLD = 3.0


@dataclass(frozen=True, kw_only=True)
class SlotsUsed:
    """The update slots used so far: all of them, and those taken from the pool.

    Attributes:
        total: slots used of the plan's ``max_updates`` (the pool included).
        pooled: of those, the slots the pool's oracle calls took.
    """

    total: int = 0
    pooled: int = 0


@dataclass(frozen=True, kw_only=True)
class FallbackRule:
    """How a measured plan pays an oracle call on an unmeasurable clique (module docstring).

    Attributes:
        slots: the slots such a call takes while the pool lasts (1: one, as a
            measurement does).
        pool: the slots kept for such calls beyond the measurements' ``T``.
        threshold: the sparse vector's threshold on such a clique, in units of the rule's.
    """

    slots: int = 1
    pool: int = 0
    threshold: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.slots, int) and self.slots >= 1):
            raise ValueError(f"slots must be a positive integer, got slots={self.slots!r}.")
        if not (isinstance(self.pool, int) and self.pool >= 0):
            raise ValueError(f"pool must be a non-negative integer, got pool={self.pool!r}.")
        if not (math.isfinite(self.threshold) and self.threshold >= 1.0):
            raise ValueError(f"threshold must be at least 1, got threshold={self.threshold!r}.")

    @classmethod
    def of(cls, update: str, *, backend: str, gaussian_oracle: bool) -> FallbackRule:
        """The rule of a plan (public): on a weighted support (full-resolution tables, where
        most cliques of a query are too large to measure) an ``update="measure"`` plan
        whose oracle's event is Gaussian gets :data:`ORACLE_SLOTS` slots a call, a pool of
        :data:`ORACLE_POOL_CALLS` calls and :data:`UNMEASURED_THRESHOLD`; any other plan
        one slot, no pool, the rule's threshold (a dense hypothesis's flagged cliques
        were measurable in every measured regime).

        >>> FallbackRule.of("measure", backend="support", gaussian_oracle=True)
        FallbackRule(slots=4, pool=12, threshold=3.0)
        >>> FallbackRule.of("measure", backend="dense", gaussian_oracle=True)
        FallbackRule(slots=1, pool=0, threshold=1.0)
        """
        if update == "measure" and backend == "support" and gaussian_oracle:
            return cls(
                slots=ORACLE_SLOTS,
                pool=ORACLE_SLOTS * ORACLE_POOL_CALLS,
                threshold=UNMEASURED_THRESHOLD,
            )
        return cls()

    def threshold_factor(self, *, measured: bool) -> float:
        """The threshold on a flagged query's clique in units of the rule's: 1 where the
        clique is ``measured``, :attr:`threshold` where it is not."""
        return 1.0 if measured else self.threshold

    def slots_taken(self, *, measured: bool, used: SlotsUsed, cutoff: int) -> int:
        """The slots a flagged query takes after ``used`` of ``cutoff``: one where its clique
        is ``measured``; else :attr:`slots` while they fit in the pool (and in ``cutoff``),
        and one once they do not. Its oracle's noise level is then :meth:`oracle_level`.

        >>> rule = FallbackRule(slots=4, pool=8)
        >>> rule.slots_taken(measured=True, used=SlotsUsed(), cutoff=28)
        1
        >>> rule.slots_taken(measured=False, used=SlotsUsed(), cutoff=28)
        4
        >>> rule.slots_taken(measured=False, used=SlotsUsed(total=9, pooled=8), cutoff=28)
        1
        """
        if measured or self.slots == 1:
            return 1
        if used.pooled + self.slots <= self.pool and used.total + self.slots <= cutoff:
            return self.slots
        return 1

    def slots_used(self, measured: Sequence[bool], *, cutoff: int) -> SlotsUsed:
        """The slots the updates whose cliques were ``measured`` or not (in order) took."""
        used = SlotsUsed()
        for each in measured:
            taken = self.slots_taken(measured=each, used=used, cutoff=cutoff)
            pooled = used.pooled + (taken if taken > 1 else 0)
            used = SlotsUsed(total=used.total + taken, pooled=pooled)
        return used

    @staticmethod
    def oracle_level(level: float, slots: int) -> float:
        """The oracle's noise level for a call taking ``slots`` slots: ``level / sqrt(slots)``."""
        return level / math.sqrt(slots)
