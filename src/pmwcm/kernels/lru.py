"""A small least-recently-used cache for per-clique tables.

Hypotheses and the private data cache their clique marginals: many queries
share a clique, and a marginal costs a pass over the records. A stream of
thousands of distinct cliques on a full-resolution table would otherwise keep
every table it ever saw (about a gigabyte for 2,000 random queries on Adult at
native resolution), so the caches keep the :data:`DEFAULT_ENTRIES` most
recently used tables and recompute the rest.

>>> cache = LRUCache[str, int](maxsize=2)
>>> cache.put("a", 1); cache.put("b", 2); cache.get("a")
1
>>> cache.put("c", 3); cache.get("b") is None, len(cache)
(True, 2)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["DEFAULT_ENTRIES", "CellBudgetCache", "LRUCache"]

K = TypeVar("K")
V = TypeVar("V")

#: Tables kept per cache.
DEFAULT_ENTRIES = 256


class LRUCache(Generic[K, V]):
    """A mapping that keeps its ``maxsize`` most recently used entries."""

    def __init__(self, maxsize: int = DEFAULT_ENTRIES) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be positive, got maxsize={maxsize}.")
        self.maxsize = maxsize
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry for ``key`` (now the most recent), or ``None``."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Stores ``value``, evicting the least recently used entry beyond ``maxsize``."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drops every entry."""
        self._entries.clear()

    def copy(self) -> LRUCache[K, V]:
        """A shallow copy (the values are shared)."""
        twin: LRUCache[K, V] = LRUCache(self.maxsize)
        twin._entries = OrderedDict(self._entries)
        return twin

    def __len__(self) -> int:
        return len(self._entries)


class CellBudgetCache(Generic[K, V]):
    """Tables by key, at most ``budget`` cells in all; the oldest entry goes first.

    For many small tables, where a count of entries would be the wrong bound: a
    stream over Adult's 14 binary attributes meets thousands of cliques of a few
    cells each, which an :class:`LRUCache` of 256 entries keeps recomputing.
    Eviction is by age of insertion, not of use: a look-up moves nothing, so a hit
    costs one dictionary read.

    >>> cache = CellBudgetCache[str, str](budget=10)
    >>> cache.put("a", "four", 4); cache.put("b", "six", 6); cache.put("c", "two", 2)
    >>> cache.get("a") is None, cache.get("b"), cache.cells
    (True, 'six', 8)
    """

    def __init__(self, budget: int) -> None:
        if budget < 1:
            raise ValueError(f"budget must be positive, got budget={budget}.")
        self.budget = budget
        self._entries: dict[K, tuple[V, int]] = {}
        self.cells = 0

    def get(self, key: K) -> V | None:
        """The entry for ``key``, or ``None``."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: K, value: V, cells: int) -> None:
        """Stores ``value`` of ``cells`` cells, first evicting the oldest entries it
        needs room from; a value larger than the whole budget is not stored."""
        if cells > self.budget:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.cells -= old[1]
        while self.cells + cells > self.budget:
            self.cells -= self._entries.pop(next(iter(self._entries)))[1]
        self._entries[key] = (value, cells)
        self.cells += cells

    def clear(self) -> None:
        """Drops every entry."""
        self._entries.clear()
        self.cells = 0

    def copy(self) -> CellBudgetCache[K, V]:
        """A cache of the same budget holding the same entries (the values shared)."""
        twin: CellBudgetCache[K, V] = CellBudgetCache(self.budget)
        twin._entries = dict(self._entries)
        twin.cells = self.cells
        return twin

    def __len__(self) -> int:
        return len(self._entries)
