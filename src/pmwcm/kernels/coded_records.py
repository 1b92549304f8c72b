"""Records as integer codes, column by column, each with a count: the data an engine answers from.

A dataset on a universe ``X = s_1 x ... x s_m`` is, for every query the engine
can ask, its multiset of coded records: the count of each distinct record. This
module holds that multiset as one contiguous column per attribute in the
narrowest unsigned dtype, plus one count per row (also in the narrowest unsigned
dtype that holds the largest: a table of mostly distinct records has counts of 1).
The columns are in memory or, for a snapshot whose codes pass
:data:`~pmwcm.kernels.spilled_columns.SPILL_BYTES`, in private files mapped
read-only (:class:`SnapshotBuilder`); the counts are always in memory:

* records read into memory are rows of count 1;
* a table read where it lives (DuckDB, PostgreSQL, Spark) is reduced, in the one
  scan made when it is opened, to its distinct coded records and their counts
  (``GROUP BY`` every coded attribute). That is the **pinned snapshot** of the
  data: every later clique is counted from it, never from the live source, so a
  table replaced, appended to or deleted from after the open changes nothing the
  engine answers from (docs/design.md section 8, "Pinned data").

Every clique table counted here is a marginal of the same counts, so its total
mass is ``n = sum(counts)`` by construction: integer counts below ``2^53`` sum
exactly in float64 in any order, so counting in blocks of rows gives the same
table, float for float, as counting all rows at once.

A clique is counted :data:`COUNT_BLOCK_ROWS` rows at a time, so that the rows'
cell codes and their ranks are temporaries of one block, not of the whole
snapshot: a snapshot of ``10^8`` distinct records of six 100-value attributes
holds 7 bytes a record (0.65 GiB), and counting one of its cliques in one piece
took 12-32 bytes a record more (codes, ranks, sort keys). A clique of at most
:data:`DIRECT_COUNT_CELLS` cells is summed into a table over all its cells; a
larger one through a bitmap of its cells (:data:`BITMAP_COUNT_CELLS`), and one
larger still block by block, each block's occupied cells and masses merged in
code order (:func:`merge_counts`).

A block's cell codes are Horner's rule, one compiled pass an attribute after the
first (:func:`_horner_step`), and a summed clique folds its last attribute into the
count itself (:func:`_add_counts_at`), so the codes are never written in full; a
clique of at most :data:`THREADED_COUNT_CELLS` cells is counted on
:data:`COUNT_THREADS` threads, each into its own table, the tables then added.
Integer counts make every such order give the same floats. On 10^7 mostly distinct
rows of full Adult's cliques (benchmarks/README.md, issue 37 item 2) a summed clique
took 2-2.7x less time than with NumPy's two passes an attribute on one thread, and one
counted through its bitmap 1.6-1.8x less.
"""

from __future__ import annotations

import functools
import math
import mmap
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels import spilled_columns
from pmwcm.kernels.cell_bitmap import add_ranked, mark_codes, rank_words
from pmwcm.kernels.clique_table import (
    DIRECT_CELLS_PER_CODE,
    CliqueTable,
    is_dense,
    occupied_cells,
)
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.records_fingerprint import records_fingerprint
from pmwcm.kernels.spilled_columns import ColumnFiles, file_map, release_pages

__all__ = [
    "BITMAP_CELLS_PER_ROW",
    "BITMAP_COUNT_CELLS",
    "COUNT_BLOCK_ROWS",
    "COUNT_THREADS",
    "DIRECT_COUNT_CELLS",
    "THREADED_COUNT_CELLS",
    "CodedRecords",
    "SnapshotBuilder",
    "code_dtype",
    "count_dtype",
    "merge_counts",
    "own_pages",
]

#: Rows a clique is counted over at a time: their cell codes (8 MiB at most) and
#: ranks are the count's only temporaries as long as the rows.
COUNT_BLOCK_ROWS = 2**20
#: A sparse clique of at most this many cells (and at most
#: :data:`~pmwcm.kernels.clique_table.DIRECT_CELLS_PER_CODE` a row) is summed into a
#: float64 table over every cell (128 MiB at most), then its occupied cells read off.
DIRECT_COUNT_CELLS = 2**24
#: A larger one of at most this many cells (and :data:`BITMAP_CELLS_PER_ROW` a row) is
#: counted through a bitmap of its cells (:mod:`pmwcm.kernels.cell_bitmap`: 512 MiB at
#: most, and at most 16 bytes a row, where merging the blocks' tables holds 32 or more);
#: beyond, each block's occupied cells are merged (:func:`merge_counts`).
BITMAP_COUNT_CELLS = 2**31
BITMAP_CELLS_PER_ROW = 64
#: A summed clique of at most this many cells is counted on :data:`COUNT_THREADS`
#: threads, each into a table of its own (8 MiB each at most): a larger one on one
#: thread, so that a table of up to :data:`DIRECT_COUNT_CELLS` is held once.
THREADED_COUNT_CELLS = 2**20
#: Threads a summed clique of several blocks is counted on (blocks dealt round-robin).
COUNT_THREADS = max(1, min(4, os.cpu_count() or 1))

FloatArray = NDArray[np.float64]

#: The counts of a block whose rows are one record each.
_ONE_EACH = np.empty(0, dtype=np.uint8)


def code_dtype(cells: int) -> np.dtype:
    """The narrowest unsigned dtype holding the codes ``0..cells-1``.

    >>> code_dtype(256), code_dtype(257)
    (dtype('uint8'), dtype('uint16'))
    """
    return np.min_scalar_type(max(cells - 1, 0))


def count_dtype(largest: int) -> np.dtype:
    """The narrowest unsigned dtype holding counts up to ``largest``.

    >>> count_dtype(1), count_dtype(70000)
    (dtype('uint8'), dtype('uint32'))
    """
    return np.min_scalar_type(max(int(largest), 0))


def own_pages(array: NDArray[Any]) -> NDArray[Any]:
    """A copy of ``array`` in its own anonymous memory map: freeing it gives its pages
    back to the system at once.

    The C allocator serves a block of a few MiB from the process's heap (its mmap
    threshold rises to 32 MiB) and keeps it when it is freed, so a snapshot read as a
    hundred 1 MiB blocks and then joined into its columns held both the blocks and the
    columns: twice the snapshot (at ``10^8`` distinct records, 1.58 GB resident for a
    667 MB snapshot). Blocks held in their own maps are returned as they are joined.
    """
    if array.nbytes < mmap.PAGESIZE:
        return array.copy()
    pages = np.frombuffer(mmap.mmap(-1, array.nbytes), dtype=array.dtype, count=array.size)
    pages[...] = array
    return pages


@njit(cache=True, nogil=True)
def _add_counts(table: FloatArray, codes: NDArray[np.integer], counts: NDArray[np.integer]) -> None:
    """``table[codes[i]] += counts[i]`` (an empty ``counts``: one each)."""
    ones = counts.size == 0
    for i in range(codes.size):
        table[codes[i]] += 1.0 if ones else counts[i]


@njit(cache=True, nogil=True)
def _horner_step(
    codes: NDArray[np.unsignedinteger], column: NDArray[np.integer], size: np.uint64
) -> None:
    """``codes = codes * size + column`` in place: one step of Horner's rule, in one pass.

    The arithmetic is in ``uint64`` and stored in the codes' dtype, which holds the
    result (it holds the clique's last cell): a factor wider than that dtype (a clique
    of one 256-value attribute and sizes of 1) multiplies codes that are still 0.
    """
    for i in range(codes.size):
        codes[i] = codes[i] * size + column[i]


@njit(cache=True, nogil=True)
def _add_counts_at(
    table: FloatArray,
    codes: NDArray[np.unsignedinteger],
    column: NDArray[np.integer],
    size: np.uint64,
    counts: NDArray[np.integer],
) -> None:
    """``table[codes[i] * size + column[i]] += counts[i]`` (an empty ``counts``: one
    each): Horner's last step and the count in one pass, the codes never stored."""
    ones = counts.size == 0
    for i in range(codes.size):
        table[codes[i] * size + column[i]] += 1.0 if ones else counts[i]


@functools.cache
def _count_pool() -> ThreadPoolExecutor:
    """Threads for a summed clique's blocks (the compiled passes release the GIL)."""
    return ThreadPoolExecutor(COUNT_THREADS, thread_name_prefix="pmwcm-count")


@njit(cache=True, nogil=True)
def merge_counts(
    cells_a: NDArray[np.int64], mass_a: FloatArray, cells_b: NDArray[np.int64], mass_b: FloatArray
) -> tuple[NDArray[np.int64], FloatArray]:
    """Two count tables' sorted occupied cells and masses, merged: the sorted union of
    the cells, a cell in both with the sum of its masses (``O(a + b)``). The result
    is a view of a buffer of ``a + b`` cells unless a quarter of it or more went
    unused (cells in both), then a trimmed copy.

    >>> cells, mass = merge_counts(np.array([1, 4]), np.array([2.0, 1.0]),
    ...                            np.array([4, 6]), np.array([3.0, 1.0]))
    >>> cells.tolist(), mass.tolist()
    ([1, 4, 6], [2.0, 4.0, 1.0])
    """
    cells = np.empty(cells_a.size + cells_b.size, dtype=np.int64)
    mass = np.empty(cells.size, dtype=np.float64)
    i = j = out = 0
    while i < cells_a.size and j < cells_b.size:
        if cells_a[i] < cells_b[j]:
            cells[out], mass[out] = cells_a[i], mass_a[i]
            i += 1
        elif cells_b[j] < cells_a[i]:
            cells[out], mass[out] = cells_b[j], mass_b[j]
            j += 1
        else:
            cells[out], mass[out] = cells_a[i], mass_a[i] + mass_b[j]
            i += 1
            j += 1
        out += 1
    while i < cells_a.size:
        cells[out], mass[out] = cells_a[i], mass_a[i]
        i += 1
        out += 1
    while j < cells_b.size:
        cells[out], mass[out] = cells_b[j], mass_b[j]
        j += 1
        out += 1
    if 4 * out >= 3 * cells.size:  # a view: a trimmed copy would briefly hold both
        return cells[:out], mass[:out]
    return cells[:out].copy(), mass[:out].copy()


class CodedRecords:
    """Distinct (or repeated) coded records with their counts.

    Args:
        domain: the universe (public).
        columns: one array of codes per attribute of ``domain``, all of one length;
            every code must lie in ``0..size-1`` (the caller validated them).
        counts: how many records each row stands for (positive integers), or
            ``None`` for one record per row.

    The arrays are copied into read-only storage owned here: nothing the caller
    holds can change them afterwards. :meth:`from_blocks` builds the same from
    blocks of rows without a second copy of the whole.
    """

    def __init__(
        self,
        domain: Domain,
        columns: Sequence[NDArray[np.integer]],
        counts: NDArray[np.integer] | None = None,
    ) -> None:
        if len(columns) != len(domain):
            raise ValueError(f"{len(columns)} columns for a domain of {len(domain)} attributes.")
        rows = len(columns[0]) if columns else 0
        stored = []
        for column, size in zip(columns, domain.sizes, strict=True):
            array = np.array(column, dtype=code_dtype(size), copy=True)
            if array.shape != (rows,):
                raise ValueError("the columns must be one-dimensional and of one length.")
            stored.append(array)
        weights = None
        if counts is not None:
            weights = np.asarray(counts)
            if weights.shape != (rows,):
                raise ValueError("counts must have one entry per row.")
            largest = int(weights.max()) if rows else 0
            weights = np.array(weights, dtype=count_dtype(largest), copy=True)
        self._own(domain, stored, weights)

    @classmethod
    def from_blocks(
        cls,
        domain: Domain,
        column_blocks: Sequence[list[NDArray[Any]]],
        count_blocks: list[NDArray[Any]],
    ) -> CodedRecords:
        """The records read in blocks of rows: ``column_blocks[j]`` holds attribute
        ``j``'s codes block by block, ``count_blocks`` each block's counts.

        Each attribute's column is written into its final storage block by block and
        its blocks dropped from the lists as it is done (the lists are emptied), so
        the peak is the snapshot plus one attribute's blocks, never two copies of
        the whole.
        """
        if len(column_blocks) != len(domain):
            raise ValueError(
                f"{len(column_blocks)} columns for a domain of {len(domain)} attributes."
            )
        counts, lengths = _joined_counts(count_blocks)
        columns = []
        for blocks, size in zip(column_blocks, domain.sizes, strict=True):
            if [len(block) for block in blocks] != lengths:
                raise ValueError("every column must have the counts' blocks.")
            columns.append(_joined(blocks, code_dtype(size), lengths))
        records = cls.__new__(cls)
        records._own(domain, columns, counts)
        return records

    @classmethod
    def from_files(
        cls, domain: Domain, files: ColumnFiles, count_blocks: list[NDArray[Any]]
    ) -> CodedRecords:
        """The records whose columns were written to private files (the snapshot of a
        table of mostly distinct records, :mod:`pmwcm.kernels.spilled_columns`): the
        columns are mapped read-only, not copied; the counts, in ``count_blocks``, are
        joined in memory (one byte a row where the records are distinct)."""
        columns = files.mapped()
        if len(columns) != len(domain):
            raise ValueError(f"{len(columns)} columns for a domain of {len(domain)} attributes.")
        counts, _ = _joined_counts(count_blocks)
        if any(column.size != counts.size for column in columns):
            raise ValueError("every column must have a count a row.")
        records = cls.__new__(cls)
        records._own(domain, columns, counts)
        return records

    def _own(
        self,
        domain: Domain,
        columns: list[NDArray[np.unsignedinteger]],
        counts: NDArray[np.unsignedinteger] | None,
    ) -> None:
        for column in columns:
            column.setflags(write=False)
        if counts is not None:
            counts.setflags(write=False)
        self.domain = domain
        self._columns = tuple(columns)
        self._counts = counts
        rows = len(columns[0]) if columns else 0
        self.n = rows if counts is None else int(np.sum(counts, dtype=np.int64))

    @property
    def rows(self) -> int:
        """The number of stored rows (distinct records for a snapshot, ``n`` for records)."""
        return len(self._columns[0]) if self._columns else 0

    @property
    def columns(self) -> tuple[NDArray[np.unsignedinteger], ...]:
        """The code columns (read-only)."""
        return self._columns

    @property
    def counts(self) -> NDArray[np.unsignedinteger] | None:
        """Each row's count (read-only, the narrowest unsigned dtype that holds the
        largest), or ``None`` when each row is one record."""
        return self._counts

    @property
    def nbytes(self) -> int:
        """The bytes the snapshot holds (its columns in memory or, spilled, in their
        private files; the counts in memory)."""
        held = sum(c.nbytes for c in self._columns)
        return held + (self._counts.nbytes if self._counts is not None else 0)

    @property
    def spilled(self) -> bool:
        """Whether the columns are mapped from private files (:meth:`from_files`)."""
        return any(file_map(column) is not None for column in self._columns)

    def cell_codes(
        self, axes: Sequence[int], start: int = 0, stop: int | None = None
    ) -> NDArray[np.unsignedinteger]:
        """The flat (C-order) cell code on the clique of ``axes`` (Horner's rule) of
        each row from ``start`` to ``stop`` (every row by default)."""
        stop = self.rows if stop is None else min(stop, self.rows)
        dtype = code_dtype(math.prod(self.domain.sizes[a] for a in axes))
        if not axes:
            return np.zeros(max(stop - start, 0), dtype=dtype)
        # Each attribute's codes are at most the clique's, so the first column fits.
        codes = self._columns[axes[0]][start:stop].astype(dtype)
        for axis in axes[1:]:
            size = np.uint64(self.domain.sizes[axis])
            _horner_step(codes, self._columns[axis][start:stop], size)
        return codes

    def _block_counts(self, start: int, stop: int) -> NDArray[np.unsignedinteger]:
        """The counts of rows ``start..stop`` (empty when each row is one record)."""
        return _ONE_EACH if self._counts is None else self._counts[start:stop]

    def _release(self, axes: Sequence[int], start: int, stop: int) -> None:
        """Lets a spilled snapshot's pages of rows ``start..stop`` go (:func:`release_pages`)."""
        for axis in axes:
            release_pages(self._columns[axis], start, stop)

    def _block_codes(
        self, axes: Sequence[int]
    ) -> Iterator[tuple[NDArray[np.unsignedinteger], NDArray[np.unsignedinteger]]]:
        """Each block of :data:`COUNT_BLOCK_ROWS` rows: its cell codes on the clique of
        ``axes`` and its counts (empty when each row is one record). A spilled
        snapshot's pages of the block are let go once the caller has used it."""
        for start in range(0, self.rows, COUNT_BLOCK_ROWS):
            stop = start + COUNT_BLOCK_ROWS
            yield self.cell_codes(axes, start, stop), self._block_counts(start, stop)
            self._release(axes, start, stop)

    def _summed(self, axes: Sequence[int], cell_count: int) -> FloatArray:
        """The counts on every one of the clique's ``cell_count`` cells, block by block:
        on :data:`COUNT_THREADS` threads (blocks dealt round-robin, a table each, added
        at the end) where the clique has at most :data:`THREADED_COUNT_CELLS` cells."""
        *leading, last = axes
        size = np.uint64(self.domain.sizes[last])
        starts = range(0, self.rows, COUNT_BLOCK_ROWS)
        threads = 1
        if cell_count <= THREADED_COUNT_CELLS:
            threads = max(1, min(COUNT_THREADS, len(starts)))

        def count(first: int) -> FloatArray:
            table = np.zeros(cell_count, dtype=np.float64)
            for start in starts[first::threads]:
                stop = start + COUNT_BLOCK_ROWS
                codes = self.cell_codes(leading, start, stop)  # the thread's one temporary
                column = self._columns[last][start:stop]
                _add_counts_at(table, codes, column, size, self._block_counts(start, stop))
                del codes  # before the next block's are made
                self._release(axes, start, stop)
            return table

        if threads <= 1:
            return count(0)
        tables = list(_count_pool().map(count, range(threads)))
        for table in tables[1:]:  # integer counts: the same floats in any order
            tables[0] += table
        return tables[0]

    def _ranked(self, axes: Sequence[int], cell_count: int) -> tuple[NDArray[np.int64], FloatArray]:
        """The clique's occupied cells (sorted) and their counts through a bitmap of its
        cells (:mod:`pmwcm.kernels.cell_bitmap`): one pass marks the rows' cells, one
        adds each row's count at its cell's rank; a quarter of a byte a cell."""
        words = np.zeros(-(-cell_count // 64), dtype=np.uint64)
        for codes, _ in self._block_codes(axes):
            mark_codes(words, codes)
        cells, before = rank_words(words)
        mass = np.zeros(cells.size, dtype=np.float64)
        for codes, counts in self._block_codes(axes):
            add_ranked(mass, words, before, codes, counts)
        return cells, mass

    def _merged(self, axes: Sequence[int], cell_count: int) -> tuple[NDArray[np.int64], FloatArray]:
        """The clique's occupied cells (sorted) and their counts: each block's, merged
        pairwise in code order (``O(R log(R / B))`` for ``R`` rows in blocks of ``B``)."""
        parts = []
        for codes, counts in self._block_codes(axes):
            cells, inverse = occupied_cells(codes, cell_count)
            mass = np.zeros(cells.size, dtype=np.float64)
            _add_counts(mass, inverse, counts)
            parts.append((cells, mass))
        while len(parts) > 1:  # each pair's inputs dropped as soon as they are merged
            merged = []
            while len(parts) > 1:
                (cells_a, mass_a), (cells_b, mass_b) = parts.pop(0), parts.pop(0)
                merged.append(merge_counts(cells_a, mass_a, cells_b, mass_b))
                del cells_a, mass_a, cells_b, mass_b
            parts = merged + parts
        if not parts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        return parts[0]

    def count_table(self, clique: Sequence[str]) -> CliqueTable:
        """The record counts on ``clique`` (axes in the order given), in the form
        :func:`~pmwcm.kernels.clique_table.is_dense` gives the clique's shape.

        The masses sum to :attr:`n` exactly (integer counts, summed in float64). The
        rows are read :data:`COUNT_BLOCK_ROWS` at a time; a sparse clique's occupied
        cells are those of positive count.
        """
        axes = self.domain.axes(tuple(clique))
        shape = tuple(self.domain.sizes[a] for a in axes)
        if not axes:
            return CliqueTable.dense(np.full((), float(self.n)))
        cell_count = math.prod(shape)
        if is_dense(shape):
            return CliqueTable.dense(self._summed(axes, cell_count).reshape(shape))
        rows = max(self.rows, 1)
        if cell_count <= min(DIRECT_COUNT_CELLS, DIRECT_CELLS_PER_CODE * rows):
            table = self._summed(axes, cell_count)
            cells = np.flatnonzero(table)
            return CliqueTable(shape=shape, codes=cells.astype(np.int64), mass=table[cells])
        if cell_count <= min(BITMAP_COUNT_CELLS, BITMAP_CELLS_PER_ROW * rows):
            cells, mass = self._ranked(axes, cell_count)
        else:
            cells, mass = self._merged(axes, cell_count)
        return CliqueTable(shape=shape, codes=cells, mass=mass)

    def full_counts(self) -> FloatArray:
        """Counts on every cell of ``X`` (for a universe small enough to hold)."""
        axes = tuple(range(len(self.domain)))
        return self._summed(axes, self.domain.size).reshape(self.domain.shape)

    def records(self) -> NDArray[np.int64]:
        """One row per record (a row of count ``c`` repeated ``c`` times), shape ``(n, m)``."""
        matrix = np.stack(self._columns, axis=1).astype(np.int64)
        if self._counts is None:
            return matrix
        return np.repeat(matrix, self._counts.astype(np.int64), axis=0)

    def fingerprint(self) -> str:
        """A SHA-256 of the multiset of records (the same for any row order or split of
        equal rows): stored by a service to tell, when it opens the data again, that the
        data is still the data its session answered from. Never released. Taken a
        batch of the sorted records at a time (:mod:`pmwcm.kernels.records_fingerprint`).
        """
        return records_fingerprint(self.domain.sizes, self._columns, self._counts)


def _joined_counts(count_blocks: list[NDArray[Any]]) -> tuple[NDArray[Any], list[int]]:
    """The blocks' counts joined in the narrowest dtype that holds the largest, and the
    blocks' lengths (the list ends empty)."""
    lengths = [len(block) for block in count_blocks]
    largest = max((int(block.max()) for block in count_blocks if len(block)), default=0)
    return _joined(count_blocks, count_dtype(largest), lengths), lengths


def _joined(
    blocks: list[NDArray[Any]], dtype: np.dtype, lengths: list[int]
) -> NDArray[np.unsignedinteger]:
    """``np.concatenate(blocks).astype(dtype)``, written in place block by block, each
    block dropped from ``blocks`` once copied (the list ends empty)."""
    joined = np.empty(sum(lengths), dtype=dtype)
    at = 0
    for length in lengths:
        joined[at : at + length] = blocks[0]
        del blocks[0]
        at += length
    return joined


class SnapshotBuilder:
    """Collects a snapshot read in blocks of rows, then makes it :class:`CodedRecords`.

    Blocks are held in memory (each in its own map, :func:`own_pages`) until their
    codes pass :data:`~pmwcm.kernels.spilled_columns.SPILL_BYTES`; from then on the
    columns go to private files (:class:`~pmwcm.kernels.spilled_columns.ColumnFiles`)
    and the snapshot is mapped from them, so a table of mostly distinct records far
    larger than memory can be opened. The counts stay in memory, narrowed a block at a
    time. Which way is taken depends on the snapshot's size (its distinct records, as
    its memory did before): seen by the process that opens the data, never released.

    Args:
        domain: the universe (public).
    """

    def __init__(self, domain: Domain) -> None:
        self._domain = domain
        self._dtypes = [code_dtype(size) for size in domain.sizes]
        self._blocks: list[list[NDArray[Any]]] = [[] for _ in domain.sizes]
        self._counts: list[NDArray[Any]] = []
        self._held = 0
        self._files: ColumnFiles | None = None

    def add(self, columns: Sequence[NDArray[np.integer]], counts: NDArray[np.integer]) -> None:
        """One block: each attribute's codes (valid, ``0..size-1``) and each row's count."""
        largest = int(counts.max()) if counts.size else 0
        self._counts.append(own_pages(np.asarray(counts).astype(count_dtype(largest))))
        narrow = [
            np.asarray(c).astype(d, copy=False) for c, d in zip(columns, self._dtypes, strict=True)
        ]
        self._held += sum(c.nbytes for c in narrow)
        if self._files is None and self._held > spilled_columns.SPILL_BYTES:
            self._spill()
        for j, column in enumerate(narrow):
            if self._files is not None:
                self._files.append(j, column)
            else:
                self._blocks[j].append(own_pages(column))

    def _spill(self) -> None:
        """Moves the blocks held so far to private files; later blocks go there too."""
        self._files = ColumnFiles(self._dtypes)
        for j, blocks in enumerate(self._blocks):
            for block in blocks:
                self._files.append(j, block)
            blocks.clear()

    def records(self) -> CodedRecords:
        """The snapshot (ends the building: the blocks are handed over)."""
        if self._files is not None:
            return CodedRecords.from_files(self._domain, self._files, self._counts)
        return CodedRecords.from_blocks(self._domain, self._blocks, self._counts)

    def discard(self) -> None:
        """Drops what was collected and removes any files (idempotent)."""
        if self._files is not None:
            self._files.discard()
        for blocks in self._blocks:
            blocks.clear()
        self._counts.clear()
