"""The private dataset, seen only through its clique marginals.

Every read of the real data ``D`` by the engines, oracles and baselines goes
through :class:`PrivateData`, so that the places where privacy is spent are
easy to audit: the sparse vector's query ``err_l(D, Dhat)`` and the oracle's
solve both need only ``D_C``, the marginal of ``D`` on the query's clique.

Where the counts come from is pluggable (docs/design.md, "The data layer"):

* records in memory (a :class:`~pmwcm.data.table.Dataset`'s integer codes);
* a histogram with a stated ``n`` -- tests reproduce the paper's theorems at
  ``n`` far beyond what records would allow;
* any :class:`CountSource`: a database or engine that answers ``GROUP BY``
  counts on a clique where the data lives (DuckDB, PostgreSQL, Spark; see
  :mod:`pmwcm.data.sources`). No rows cross into Python, only counts.

``n`` is public (as in the paper) and fixed when the data is opened, and so is
the data itself: records are copied in (:class:`~pmwcm.kernels.coded_records.CodedRecords`),
and every source of :mod:`pmwcm.data.sources` reads its table once, at open,
into a snapshot of distinct coded records and counts (a :class:`PinnedSource`)
that every clique is counted from. So the data an engine answers from is the
data it opened, whatever happens to the file or table afterwards, and every
clique table has total mass exactly ``n``. Marginals are cached per clique: the
data never changes, so a repeated clique is free.

How records are counted (issue 18, the data side at its limit). Both rules
read only public inputs (``|X|`` and ``n``):

* ``|X| <= n``: the data histogram (counts on all of ``X``) is built in one
  pass over the records, on first use; each new clique is then a marginal of
  it (at most two passes over ``|X|`` cells), never a pass over the rows.
* ``|X| > n``: the records are kept column by column in the smallest unsigned
  dtype; a new clique reads only its own columns (Horner's rule into a cell
  code, then one ``bincount``, or the occupied cells of a large clique).

A source follows the same rules on its snapshot (the first only when ``|X|``
also fits :data:`FULL_HISTOGRAM_CELLS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import CliqueTable, is_dense
from pmwcm.kernels.coded_records import CodedRecords, code_dtype
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import (
    CACHED_MARGINAL_TOTAL,
    DenseHistogram,
    FloatArray,
    MarginalCache,
)
from pmwcm.kernels.lru import CellBudgetCache, LRUCache

__all__ = ["FULL_HISTOGRAM_CELLS", "CountSource", "PinnedSource", "PrivateData", "code_dtype"]

#: A :class:`CountSource` is asked for the full histogram once (instead of one
#: ``GROUP BY`` per clique) when ``|X| <= n`` and ``|X|`` is at most this (128 MiB of float64).
FULL_HISTOGRAM_CELLS = 2**24


#: The data's sparse clique tables are kept up to this many cells per record (and at
#: least :data:`MIN_SPARSE_TABLE_CELLS`), each counted at its public bound
#: (:func:`sparse_table_bound`). A count of 256 tables let a stream of fresh wide
#: cliques hold up to ``256 n`` cells (about 25 bytes each: code, mass, attribute
#: codes), gigabytes at ``n = 2^23``; the support's tables have the same rule
#: (:data:`~pmwcm.kernels.support.TABLE_CELLS_PER_RECORD`).
SPARSE_TABLE_CELLS_PER_RECORD = 2
#: ... so that a stream over many moderately wide cliques stays cached at small ``n``
#: (full-resolution Adult, ``n = 39,073``: about a hundred tables).
MIN_SPARSE_TABLE_CELLS = 2**22
#: ... and at most this many (about 420 MB): at ``n = 10^8`` two cells a record let the
#: cache hold 5 GB of tables where the records are mostly distinct (a table's public
#: bound is then its real size), ten times the snapshot's memory.
MAX_SPARSE_TABLE_CELLS = 2**24


def sparse_table_bound(shape: Sequence[int], n: int) -> int:
    """The cells a sparse clique table of ``shape`` may hold: its occupied cells are at
    most ``min(n, |C|)``. The cache charges this public bound, never the occupied count,
    so which tables it keeps (and how long a round takes) does not depend on the data.

    >>> sparse_table_bound((100, 100), 39_073), sparse_table_bound((10, 10, 10), 39_073)
    (10000, 1000)
    >>> sparse_table_bound((3_000, 3_000), 39_073)
    39073
    """
    return min(n, math.prod(shape))


def sparse_cache_cells(n: int) -> int:
    """The cells the data's sparse clique tables may hold together (public: from ``n``).

    >>> sparse_cache_cells(39_073), sparse_cache_cells(5_000_000), sparse_cache_cells(10**8)
    (4194304, 10000000, 16777216)
    """
    per_record = SPARSE_TABLE_CELLS_PER_RECORD * n
    return max(MIN_SPARSE_TABLE_CELLS, min(per_record, MAX_SPARSE_TABLE_CELLS))


@runtime_checkable
class CountSource(Protocol):
    """Where the private records live: answers integer counts on a clique.

    Implementations validate the whole table against the schema when they
    are opened (so a query never meets a bad row) and fix ``n`` there.
    """

    @property
    def domain(self) -> Domain:
        """The data universe (from the public schema)."""
        ...

    @property
    def n(self) -> int:
        """The number of records (public, fixed at open)."""
        ...

    def counts(self, clique: tuple[str, ...]) -> CliqueTable:
        """The record counts on ``clique`` (axes in the order given), in the form
        :func:`~pmwcm.kernels.clique_table.is_dense` gives the clique: every cell,
        or the occupied cells only (sorted codes). ``mass`` holds the counts."""
        ...

    def close(self) -> None:
        """Releases the connection or engine (idempotent)."""
        ...


@runtime_checkable
class PinnedSource(CountSource, Protocol):
    """A :class:`CountSource` that read its data once, when it was opened, and answers
    every clique from that snapshot (every source :mod:`pmwcm.data.sources` opens)."""

    @property
    def pinned(self) -> CodedRecords:
        """The distinct coded records and their counts, read at open."""
        ...


class PrivateData:
    """Read-only access to the real data's marginals.

    Args:
        domain: the data universe.
        n: number of records (public, as in the paper).
        records: integer codes, shape ``(n, len(domain))``; or
        histogram: the normalised histogram ``D`` (with ``n`` given); or
        source: a :class:`CountSource` over ``domain`` with this ``n``.
    """

    def __init__(
        self,
        *,
        domain: Domain,
        n: int,
        records: NDArray[np.integer] | None = None,
        histogram: DenseHistogram | None = None,
        source: CountSource | None = None,
    ) -> None:
        if sum(x is not None for x in (records, histogram, source)) != 1:
            raise ValueError("PrivateData needs exactly one of records=, histogram= or source=.")
        if not (isinstance(n, int | np.integer) and n >= 1):
            raise ValueError(f"n must be a positive integer, got n={n!r}.")
        pinned: CodedRecords | None = None
        if records is not None:
            records = np.asarray(records)
            if records.ndim != 2 or records.shape[1] != len(domain):
                raise ValueError(
                    f"records must have shape (n, {len(domain)}), got {records.shape}."
                )
            if records.shape[0] != n:
                raise ValueError(f"n={n} but {records.shape[0]} records were given.")
            if records.dtype.kind not in "iu":
                raise ValueError(f"records must hold integer codes, got dtype {records.dtype}.")
            for j, size in enumerate(domain.sizes):  # checked when the data is opened
                column = records[:, j]
                if n and (column.min() < 0 or column.max() >= size):
                    raise ValueError(
                        f"records hold codes outside 0..{size - 1} for attribute "
                        f"{domain.names[j]!r}."
                    )
            # One contiguous column per attribute, in the narrowest dtype, copied: a clique
            # then reads len(C) * n bytes, and nothing the caller holds can change the data.
            pinned = CodedRecords(domain, [records[:, j] for j in range(len(domain))])
        if histogram is not None and histogram.domain != domain:
            raise ValueError("histogram is over a different domain.")
        if source is not None:
            if source.domain != domain:
                raise ValueError("source is over a different domain.")
            if source.n != n:
                raise ValueError(f"n={n} but the source holds n={source.n} records.")
            if isinstance(source, PinnedSource):
                pinned = source.pinned
        self.domain = domain
        self.n = int(n)
        # What every count is read from: the records, or the snapshot a source took at
        # open (so the data answered from is the data opened); None for a histogram or a
        # source that counts where the data lives.
        self._pinned = pinned
        self._histogram = histogram
        self._source = source
        self._counts: FloatArray | None = None  # the data histogram's counts, when built
        # Its small marginals by set of axes: the counts never change, and a clique in
        # another order is a transposed copy (integer counts: exact in any order).
        self._count_marginals = MarginalCache()
        self._cache: LRUCache[tuple[str, ...], FloatArray] = LRUCache()
        # Dense tables (at most DENSE_CLIQUE_CELLS cells each) by the cells they hold: a
        # long stream meets thousands of small cliques, and each is free once read.
        self._dense_tables: CellBudgetCache[tuple[str, ...], CliqueTable] = CellBudgetCache(
            CACHED_MARGINAL_TOTAL
        )
        # Sparse tables of large cliques, by the cells they may hold (sparse_table_bound).
        self._tables: CellBudgetCache[tuple[str, ...], CliqueTable] = CellBudgetCache(
            sparse_cache_cells(self.n)
        )

    @classmethod
    def from_records(cls, domain: Domain, records: NDArray[np.integer]) -> PrivateData:
        """Wraps integer-coded records (``n`` is their number)."""
        records = np.asarray(records)
        return cls(domain=domain, n=int(records.shape[0]), records=records)

    @classmethod
    def from_source(cls, source: CountSource) -> PrivateData:
        """Wraps a :class:`CountSource` (its domain and its public ``n``)."""
        return cls(domain=source.domain, n=source.n, source=source)

    @classmethod
    def of(cls, opened: object) -> PrivateData:
        """The private data of what a source opener returned: a :class:`CountSource`,
        records with their domain (a :class:`~pmwcm.data.table.Dataset`, read by its
        ``domain`` and ``records``), or a :class:`PrivateData` (returned as is).

        Raises:
            TypeError: for anything else.
        """
        if isinstance(opened, PrivateData):
            return opened
        if isinstance(opened, CountSource):
            return cls.from_source(opened)
        domain, records = getattr(opened, "domain", None), getattr(opened, "records", None)
        if isinstance(domain, Domain) and records is not None:
            return cls.from_records(domain, records)
        raise TypeError(f"cannot read private data from a {type(opened).__name__}.")

    def held_records(self) -> NDArray[np.int64] | None:
        """The ``n`` records, for data held as records or pinned by its source at open;
        ``None`` for a histogram or a source that counts where the data lives.

        For mechanisms that take records themselves (OpenDP's AIM and MST,
        :mod:`pmwcm.mechanisms.priors.synthetic`). Which kind of data this is
        is public (how the curator opened it); the records are not.
        """
        return None if self._pinned is None else self._pinned.records()

    def fingerprint(self) -> str | None:
        """A SHA-256 of the data's coded records (any order), for data held as records or
        pinned by its source: what a service stores to check, when it opens the data
        again, that it is the data its session answered from. Never released."""
        return None if self._pinned is None else self._pinned.fingerprint()

    @property
    def source(self) -> CountSource | None:
        """The :class:`CountSource` read, or ``None`` for data held in memory."""
        return self._source

    def close(self) -> None:
        """Releases the source's connection, if any (cached marginals stay usable)."""
        if self._source is not None:
            self._source.close()

    def _use_full_histogram(self) -> bool:
        """The public rule: one histogram of counts when ``|X| <= n`` (and, for a
        source, ``|X| <= FULL_HISTOGRAM_CELLS``)."""
        if self._histogram is not None or self.domain.size > self.n:
            return False
        return self._source is None or self.domain.size <= FULL_HISTOGRAM_CELLS

    def _full_counts(self) -> FloatArray:
        """Counts on every cell of ``X``: one pass over the records, or one query."""
        if self._counts is None:
            if self._pinned is not None:
                counts = self._pinned.full_counts()
            else:
                assert self._source is not None
                counts = self._source.counts(self.domain.names).table()
            counts = counts.reshape(self.domain.shape)
            counts.setflags(write=False)
            self._counts = counts
        return self._counts

    def _count_table(self, key: tuple[str, ...]) -> CliqueTable:
        """Counts on the clique ``key`` in its :func:`is_dense` form (not cached)."""
        axes = self.domain.axes(key)
        if self._use_full_histogram():
            return CliqueTable.of_marginal(
                self._count_marginals.marginal(self._full_counts(), axes)
            )
        if self._pinned is not None:
            return self._pinned.count_table(key)
        assert self._source is not None
        return self._source.counts(key)

    def marginal(self, clique: Sequence[str]) -> FloatArray:
        """``D_C``: the normalised marginal on ``clique`` (axes in the order given)."""
        key = tuple(clique)
        table = self._cache.get(key)
        if table is None:
            if self._histogram is not None:
                table = self._histogram.marginal(key)
            elif not key:  # the empty clique: all the mass in one cell, as for histograms
                table = np.ones(())
            else:
                table = self._count_table(key).table() / self.n
            table.setflags(write=False)
            self._cache.put(key, table)
        return table

    def clique_table(self, clique: Sequence[str]) -> CliqueTable:
        """``D_C`` as the engine's rounds read it: dense on a small clique, on the
        occupied cells (at most ``n``) of a large one (the rule of
        :func:`~pmwcm.kernels.clique_table.is_dense`, public)."""
        key = tuple(clique)
        table = self._dense_tables.get(key)
        if table is None:
            table = self._tables.get(key)
        if table is None:
            axes = self.domain.axes(key)
            shape = tuple(self.domain.sizes[a] for a in axes)
            if is_dense(shape) and self._use_full_histogram():
                # marginal()'s numbers (counts summed, then divided by n), without
                # the layers and the cache entry it adds.
                summed = self._count_marginals.table(self._full_counts(), axes)
                table = CliqueTable.dense(summed / self.n)
            elif is_dense(shape) or self._histogram is not None:
                table = CliqueTable.of_marginal(self.marginal(key))
            else:
                counts = self._count_table(key)
                table = CliqueTable(shape=shape, codes=counts.codes, mass=counts.mass / self.n)
            table.mass.setflags(write=False)
            if table.is_dense:  # the clique's shape decides (is_dense), never the counts
                self._dense_tables.put(key, table, table.mass.size)
            else:
                self._tables.put(key, table, sparse_table_bound(shape, self.n))
        return table

    def histogram(self) -> DenseHistogram:
        """The full histogram ``D`` (dense; for baselines and tests)."""
        if self._histogram is not None:
            return self._histogram.copy()
        if self._use_full_histogram():
            return DenseHistogram(self.domain, self._full_counts())
        return DenseHistogram(self.domain, self._count_table(self.domain.names).table())
