"""The budget split: which share of ``(epsilon, delta)`` each part of the engine gets."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: How far the three shares may sum from one (float round-off of ``1 - a - b``).
_SUM_TOL = 1e-12


@dataclass(frozen=True)
class BudgetSplit:
    """Shares of the total budget: the paid prior, the sparse vector, the oracle calls.

    Each share is a fraction of ``epsilon`` and, where the part spends delta, of
    ``delta`` (a paid prior measures at ``prior * (epsilon, delta)``; a
    Dwork-Roth sparse vector composes its runs at ``sparse_vector * (epsilon,
    delta)``; Lyu-Su-Li is pure ``sparse_vector * epsilon``). The oracle's share
    is what is left: its noise level is calibrated so that the prior, the sparse
    vector and the ``T`` oracle calls compose to exactly the total under the
    accountant, which under tight (PLD) composition gives the oracle calls more
    than ``oracle * epsilon`` by basic composition.

    Attributes:
        prior: the paid prior's share (``0`` for a free prior).
        sparse_vector: the sparse vector's share (> 0).
        oracle: the oracle calls' share (> 0).

    >>> BudgetSplit.from_shares(prior=0.4, sparse_vector=0.3).epsilons(1.0)
    (0.4, 0.3, 0.3)
    """

    prior: float
    sparse_vector: float
    oracle: float

    def __post_init__(self) -> None:
        for name in ("prior", "sparse_vector", "oracle"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1):
                raise ValueError(f"the {name} share must lie in [0, 1], got {name}={value!r}.")
        if self.sparse_vector == 0 or self.oracle == 0:
            raise ValueError(
                "the sparse vector and the oracle calls each need a positive share, got "
                f"sparse_vector={self.sparse_vector}, oracle={self.oracle}."
            )
        total = self.prior + self.sparse_vector + self.oracle
        if abs(total - 1.0) > _SUM_TOL:
            raise ValueError(f"the shares must sum to one, got {total!r}.")

    @classmethod
    def from_shares(cls, *, prior: float, sparse_vector: float) -> BudgetSplit:
        """The split whose oracle share is the rest, ``1 - prior - sparse_vector``."""
        return cls(prior=prior, sparse_vector=sparse_vector, oracle=1.0 - prior - sparse_vector)

    def epsilons(self, epsilon: float) -> tuple[float, float, float]:
        """``(prior, sparse_vector, oracle)`` shares of ``epsilon``."""
        return (self.prior * epsilon, self.sparse_vector * epsilon, self.oracle * epsilon)

    def prior_budget(self, epsilon: float, delta: float) -> tuple[float, float]:
        """The paid prior's ``(epsilon, delta)``."""
        return self.prior * epsilon, self.prior * delta

    def sparse_vector_budget(self, epsilon: float, delta: float) -> tuple[float, float]:
        """The sparse vector's ``(epsilon, delta)`` (Lyu-Su-Li uses only the epsilon)."""
        return self.sparse_vector * epsilon, self.sparse_vector * delta
