"""Linear (counting) queries (Hardt, Rothblum 2010); their round is in :mod:`pmwcm.engine.rounds`.

The paper's Table 1, first row: a counting query ``q : X -> [0, 1]`` asks for
``<q, D> = E_{x ~ D} q(x)``. A linear query here lives on a clique ``C``
(``q`` depends on ``x`` only through ``x_C``), so every step is a clique
marginal, exactly as for CM queries.

* hypothesis answer ``a_hat = <q, Dhat_C>``;
* sparse-vector query ``|<q, D_C> - a_hat|``, sensitivity ``1/n`` under
  replace-one (one record moves ``<q, D>`` by at most ``1/n``);
* private answer ``<q, D_C> + Lap(m / n)``: the Laplace mechanism, the event
  ``LaplaceDpEvent(m)`` (``(1/m)``-DP; Dwork, Roth 2014, Theorem 3.6);
* update ``Dhat ∝ Dhat exp(-eta u)``, ``u(x) = sign(a_hat - a_priv) q(x)``: raise
  the weight of ``q``'s support when the hypothesis under-counts (Hardt,
  Rothblum 2010, Figure 1, with ``eta = sqrt(log|X| / T)`` as for CM queries).

>>> from pmwcm.kernels.domain import Domain
>>> q = LinearQuery.conjunction({"a": 1, "b": 0})
>>> q.table(Domain.from_sizes({"a": 2, "b": 2})).tolist()
[[0.0, 0.0], [1.0, 0.0]]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.problem import FloatArray
from pmwcm.kernels.queries import QueryError


@dataclass(frozen=True, kw_only=True)
class LinearQuery:
    """A counting query on a clique: ``values[x_C] in [0, 1]``.

    Attributes:
        clique: the attributes ``q`` depends on.
        values: nested list / array of shape ``sizes(clique)`` with entries in [0, 1].
    """

    clique: tuple[str, ...]
    values: tuple[float, ...]
    shape: tuple[int, ...]

    @classmethod
    def from_table(cls, clique: tuple[str, ...], table: FloatArray) -> LinearQuery:
        """A query from its table over the clique (axes in clique order)."""
        arr = np.asarray(table, dtype=np.float64)
        if arr.ndim != len(clique):
            raise QueryError(f"table has {arr.ndim} axes for clique {list(clique)}.")
        if not np.all((arr >= 0) & (arr <= 1)):
            raise QueryError("A counting query's values must lie in [0, 1].")
        return cls(clique=tuple(clique), values=tuple(arr.ravel().tolist()), shape=arr.shape)

    @classmethod
    def conjunction(cls, literals: Mapping[str, int]) -> LinearQuery:
        """The fraction of records with ``attr == code`` for every ``(attr, code)``."""
        if not literals:
            raise QueryError("A conjunction needs at least one literal.")
        return cls(
            clique=tuple(literals), values=(), shape=tuple(int(c) for c in literals.values())
        )

    def table(self, domain: Domain) -> FloatArray:
        """The query's table over its clique, validated against ``domain``."""
        for name in self.clique:
            if name not in domain:
                raise QueryError(
                    f"Unknown attribute {name!r}; the domain has {list(domain.names)}."
                )
        sizes = tuple(domain.size_of(a) for a in self.clique)
        if self.values:
            if self.shape != sizes:
                raise QueryError(f"table shape {self.shape} does not match clique sizes {sizes}.")
            return np.asarray(self.values).reshape(sizes)
        table = np.zeros(sizes)
        for name, code, size in zip(self.clique, self.shape, sizes, strict=True):
            if not 0 <= code < size:
                raise QueryError(f"Code {code} out of range for {name!r} (size {size}).")
        table[self.shape] = 1.0
        return table

    def key(self) -> str:
        """A canonical identity (repeats are answered from the released value)."""
        return "linear:" + json.dumps([self.clique, self.values, self.shape])
