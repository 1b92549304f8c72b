"""One clique of a support, in fused passes over its records (issue 37 item 1).

A below-threshold round on a support of ``M`` records reads the hypothesis's
table on the query's clique ``C``::

    Dhat_C(c) = sum_i p_i [x_{i,C} = c],

and, on a clique too large to keep dense, only its occupied cells and each
record's index among them (the index is what a later reweight on ``C`` gathers
its factor through). Done with NumPy this is an ``M``-long ``int64`` code array
built attribute by attribute (Horner's rule over strided byte columns), a
direct count or a sort over it, an ``int32`` copy of the index and a
``bincount``: at ``M = 2^23`` on full-resolution Adult that was about 0.4 s of
a fresh round's 0.6 s (``benchmarks/support_scale.py``'s stream, profiled).

Here each step is a numba pass that computes a record's cell code on the fly
from its byte codes (the same C-order code as
:func:`~pmwcm.kernels.clique_table.cell_codes`), nothing ``M``-long is
allocated but the index itself, and the passes that add masses run on the
support passes' threads (:func:`~pmwcm.kernels.support_passes.pass_chunks`,
each chunk into its own table, the tables added in chunk order, so the sums
do not depend on the machine):

* :func:`clique_mass`: the dense table of a small clique, one pass;
* :func:`occupied_index`: a large clique's sorted occupied cells and every
  record's index among them. While the clique has at
  most :data:`DIRECT_CELLS_PER_RECORD` cells per record, two passes over the
  records (the first marks the occupied cells in a bitmap; the second reads
  each record's rank from it, as the bitmap's set bits before it) and one over
  the bitmap's words; beyond, one fused pass makes each record a key of its
  code and position, a radix sort of the keys by their code bits orders them
  (:func:`~pmwcm.kernels.clique_table.sort_keys_by_code`) and one pass reads the
  ranks off the sorted keys;
* :func:`index_mass`: the masses on the cells from the index (kept between
  rounds: a later round on the clique, after a reweight, starts here), one
  pass;
* :func:`occupied_mass`: a round's table on a clique of few cells
  (:data:`BY_CODE_CELLS_PER_RECORD`, :data:`BY_CODE_MAX_CELLS`) without the
  index, in one pass that marks each record's cell and adds its mass into a
  table of all the clique's cells, by code. The index is made only where a
  reweight on the clique needs it. The sums are :func:`index_mass`'s, bit for
  bit: the same records, in the same order, into each chunk's table, the tables
  added in chunk order.

Everything here is post-processing of the hypothesis (public); no private
record is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.cell_bitmap import ONE, rank_of, rank_words
from pmwcm.kernels.clique_table import position_bits, sort_keys_by_code, split_sorted_keys
from pmwcm.kernels.support_passes import map_chunks, pass_chunks

__all__ = [
    "BY_CODE_CELLS_PER_RECORD",
    "BY_CODE_MAX_CELLS",
    "clique_mass",
    "index_mass",
    "occupied_index",
    "occupied_mass",
]

FloatArray = NDArray[np.float64]
#: A large clique's occupied cells are found in a bitmap of all its cells (one bit a
#: cell, and one ``int64`` count per 64 cells: 0.25 bytes a cell) while it has at most
#: this many cells per record; beyond, the records' keys of code and position are
#: sorted. The bitmap's passes grow with the cells, the sort with the records: on 2^23
#: uniform records of a two-attribute clique (session 10, the radix sort of
#: :func:`~pmwcm.kernels.clique_table.sort_keys_by_code`; wall ms, two runs, load 2.5)
#: the bitmap took 66 at 0.25-0.5 cells a record, 92 at 1, 110 at 2, 125-159 at 3,
#: 132-191 at 4, 161-248 at 5, 238-241 at 6 and 263-338 at 8, the whole sort path
#: 167-300 throughout (217-255 from 5 on). With NumPy's comparison sort (550 ms for
#: the keys alone on this machine) the limit was 2.
DIRECT_CELLS_PER_RECORD = 5
#: A chunk's own table is kept only while the chunks' tables together stay within
#: this many cells per record (a clique of nearly ``M`` occupied cells is summed
#: by one pass instead of four ``M``-cell temporaries).
CHUNK_TABLE_CELLS_PER_RECORD = 1
#: :func:`occupied_mass` takes a clique while the chunks' tables of all its cells
#: together hold at most this many cells per record (8 bytes a record, made and
#: dropped in the call). Then each chunk's table of occupied cells fits the same
#: bound, so :func:`index_mass` would cut the records into the same chunks.
BY_CODE_CELLS_PER_RECORD = 1
#: ... and while the clique has at most this many cells: each record's mass lands at
#: random in its chunk's table, which must stay in cache. On 2^23 uniform records of
#: full Adult's sizes (load 3.6-3.8; the index path's three passes against the one):
#: 17,000 cells 81 -> 33 ms, 133,056 84 -> 55, 269,280 80 -> 70, 420,000 64 -> 61,
#: 850,000 81 -> 102, 1,683,000 166 -> 310.
BY_CODE_MAX_CELLS = 2**18


@njit(cache=True, nogil=True, inline="always")
def _code(records: NDArray[np.integer], i: int, axes: NDArray[np.int64],
          sizes: NDArray[np.int64]) -> int:  # fmt: skip
    code = 0
    for j in range(axes.size):
        code = code * sizes[j] + records[i, axes[j]]
    return code


@njit(cache=True, nogil=True)
def _dense_mass(records, axes, sizes, weights, out, begin, end):  # type: ignore[no-untyped-def]
    for i in range(begin, end):
        out[_code(records, i, axes, sizes)] += weights[i]


@njit(cache=True, nogil=True)
def _marked_mass(records, axes, sizes, weights, words, out, begin, end):  # type: ignore[no-untyped-def]
    # Each record's cell marked in the chunk's bitmap and its mass added at its code.
    for i in range(begin, end):
        code = _code(records, i, axes, sizes)
        words[code >> 6] |= ONE << np.uint64(code & 63)
        out[code] += weights[i]


@njit(cache=True, nogil=True)
def _codes(records, axes, sizes, out, begin, end):  # type: ignore[no-untyped-def]
    for i in range(begin, end):
        out[i] = _code(records, i, axes, sizes)


@njit(cache=True, nogil=True)
def _mark(records, axes, sizes, words, begin, end):  # type: ignore[no-untyped-def]
    for i in range(begin, end):
        code = _code(records, i, axes, sizes)
        words[code >> 6] |= ONE << np.uint64(code & 63)


@njit(cache=True, nogil=True)
def _read_ranks(records, axes, sizes, words, before, index, begin, end):  # type: ignore[no-untyped-def]
    # Each record's rank among the occupied cells: the bitmap's set bits before its own.
    for i in range(begin, end):
        index[i] = rank_of(words, before, _code(records, i, axes, sizes))


@njit(cache=True, nogil=True)
def _keyed_codes(records, axes, sizes, shift, keys, begin, end):  # type: ignore[no-untyped-def]
    # Each record's cell code above its own position: sorting the keys sorts the codes
    # and carries every record along (the keys are distinct, so no stable sort is needed).
    for i in range(begin, end):
        keys[i] = (_code(records, i, axes, sizes) << shift) | i


@njit(cache=True, nogil=True)
def _index_mass(index, weights, out, begin, end):  # type: ignore[no-untyped-def]
    for i in range(begin, end):
        out[index[i]] += weights[i]


def _clique(
    records: NDArray[np.integer], axes: Sequence[int], sizes: Sequence[int]
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    if records.ndim != 2 or len(axes) != len(sizes):
        raise ValueError("records must be (M, m) codes and axes and sizes of equal length.")
    return np.asarray(axes, np.int64), np.asarray(sizes, np.int64), math.prod(sizes)


def _each(chunks: list[tuple[int, int]], run_chunk) -> None:  # type: ignore[no-untyped-def]
    """``run_chunk(begin, end)`` for every chunk (:func:`map_chunks`: on the passes'
    threads where there are several)."""
    map_chunks(lambda chunk: run_chunk(*chunk), chunks)


def _per_chunk(
    size: int,
    table: Callable[[], Any],
    table_bytes: int,
    run_chunk: Callable[..., None],
    combine: Callable[[Any, Any], object],
    *,
    max_bytes_per_record: int,
) -> Any:
    """``run_chunk(out, begin, end)`` over ``size`` records, each chunk into its own fresh
    ``table()`` (of ``table_bytes``) on the passes' threads, the tables folded in chunk
    order by ``combine(total, more)``; one pass into one table where the chunks' tables
    together would take more than ``max_bytes_per_record`` bytes a record."""
    chunks = pass_chunks(size)
    if len(chunks) * table_bytes > max_bytes_per_record * size:
        chunks = [(0, size)]

    def run(chunk: tuple[int, int]) -> Any:
        out = table()
        run_chunk(out, *chunk)
        return out

    parts = map_chunks(run, chunks)
    total = parts[0]
    for more in parts[1:]:
        combine(total, more)
    return total


def _marked(size: int, word_count: int, run_chunk) -> NDArray[np.uint64]:  # type: ignore[no-untyped-def]
    """The occupied cells' bitmap: ``run_chunk(words, begin, end)`` sets the bits of the
    records in ``[begin, end)``. Each chunk into its own bitmap (two threads setting bits
    of one word would lose one), OR-ed together, while the chunks' bitmaps together take
    at most a byte per record."""
    return _per_chunk(
        size,
        lambda: np.zeros(word_count, dtype=np.uint64),
        8 * word_count,
        run_chunk,
        lambda total, more: np.bitwise_or(total, more, out=total),
        max_bytes_per_record=1,
    )


def _summed(count: int, size: int, run_chunk) -> FloatArray:  # type: ignore[no-untyped-def]
    """``run_chunk(out, begin, end)`` over ``size`` records into tables of ``count`` cells:
    one table per chunk added in chunk order, while the chunks' tables together hold at
    most :data:`CHUNK_TABLE_CELLS_PER_RECORD` cells per record."""
    return _per_chunk(
        size,
        lambda: np.zeros(count),
        8 * count,
        run_chunk,
        lambda total, more: np.add(total, more, out=total),
        max_bytes_per_record=8 * CHUNK_TABLE_CELLS_PER_RECORD,
    )


def clique_mass(
    records: NDArray[np.integer], axes: Sequence[int], sizes: Sequence[int], weights: FloatArray
) -> FloatArray:
    """``out[c] = sum_i weights_i [code_C(records_i) = c]`` over every cell of the clique
    of ``axes`` (sizes ``sizes``), flat in C order: ``np.bincount`` of
    :func:`~pmwcm.kernels.clique_table.cell_codes` with ``weights``, in one fused pass.

    >>> records = np.array([[0, 1], [1, 1], [0, 1]], dtype=np.uint8)
    >>> clique_mass(records, [1, 0], [2, 2], np.array([0.5, 0.25, 0.25])).tolist()
    [0.0, 0.0, 0.75, 0.25]
    """
    axes_, sizes_, count = _clique(records, axes, sizes)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    return _summed(
        count,
        records.shape[0],
        lambda out, begin, end: _dense_mass(records, axes_, sizes_, weights, out, begin, end),
    )


def occupied_index(
    records: NDArray[np.integer], axes: Sequence[int], sizes: Sequence[int]
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """The sorted distinct cell codes the records occupy on the clique, and each record's
    index among them (``int32``: ``cells[index[i]] == code_C(records_i)``), as
    :func:`~pmwcm.kernels.clique_table.occupied_cells` of the records' codes gives them.

    >>> records = np.array([[3, 0], [1, 2], [3, 0]], dtype=np.uint8)
    >>> cells, index = occupied_index(records, [0, 1], [4, 3])
    >>> cells.tolist(), index.tolist()
    ([5, 9], [1, 0, 1])
    """
    axes_, sizes_, count = _clique(records, axes, sizes)
    size = records.shape[0]
    if count > DIRECT_CELLS_PER_RECORD * max(size, 1):
        return _sorted_index(records, axes_, sizes_, count)
    words = _marked(size, -(-count // 64), lambda out, begin, end: _mark(
        records, axes_, sizes_, out, begin, end
    ))  # fmt: skip
    cells, before = rank_words(words)
    index = np.empty(size, dtype=np.int32)
    # Each chunk writes its own slice of the index (the bitmap is only read). Summing the
    # masses in the same pass was slower: its chunk tables, as large as the clique's
    # occupied cells, kept a large clique's pass on one thread.
    _each(
        pass_chunks(size),
        lambda begin, end: _read_ranks(records, axes_, sizes_, words, before, index, begin, end),
    )
    return cells, index


def occupied_mass(
    records: NDArray[np.integer], axes: Sequence[int], sizes: Sequence[int], weights: FloatArray
) -> tuple[NDArray[np.int64], FloatArray] | None:
    """A large clique's sorted occupied cells and their masses, as
    :func:`occupied_index` and :func:`index_mass` give them (bit for bit), without the
    index: one pass that marks each record's cell in its chunk's bitmap and adds its
    weight into its chunk's table of all the clique's cells, then the set bits'
    cells gathered from each chunk's table, added in chunk order. ``None`` where
    the chunks' tables would hold more than :data:`BY_CODE_CELLS_PER_RECORD` cells a
    record, or the clique more than :data:`BY_CODE_MAX_CELLS` (the caller takes the
    index path).

    A below-threshold round needs only the table; the index is for a reweight on the
    clique. At ``M = 2^23`` (load 3.6) the index path's three passes (mark, ranks,
    masses) took 25 + 34 + 8 ms on a clique of 17,000 cells, this one 33 in all
    (:data:`BY_CODE_MAX_CELLS`; benchmarks/README.md, issue 37 item 1, session 25).

    >>> records = np.array([[1, 0], [0, 1], [1, 0], [1, 1]], dtype=np.uint8)
    >>> cells, mass = occupied_mass(records, [0, 1], [2, 2], np.full(4, 0.25))
    >>> cells.tolist(), mass.tolist()
    ([1, 2, 3], [0.25, 0.5, 0.25])
    >>> occupied_mass(records, [0, 1], [3, 2], np.full(4, 0.25)) is None  # 6 cells > 4 records
    True
    """
    axes_, sizes_, count = _clique(records, axes, sizes)
    size = records.shape[0]
    chunks = pass_chunks(size)
    if len(chunks) * count > BY_CODE_CELLS_PER_RECORD * size or count > BY_CODE_MAX_CELLS:
        return None
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    word_count = -(-count // 64)

    def run(chunk: tuple[int, int]) -> tuple[NDArray[np.uint64], FloatArray]:
        words, out = np.zeros(word_count, dtype=np.uint64), np.zeros(count)
        _marked_mass(records, axes_, sizes_, weights, words, out, *chunk)
        return words, out

    parts = map_chunks(run, chunks)
    words = parts[0][0]
    for more, _ in parts[1:]:
        np.bitwise_or(words, more, out=words)
    cells, _ = rank_words(words)
    mass = parts[0][1][cells]
    for _, out in parts[1:]:
        mass += out[cells]  # index_mass's chunk tables, added in the same order
    return cells, mass


def _sorted_index(
    records: NDArray[np.integer], axes: NDArray[np.int64], sizes: NDArray[np.int64], count: int
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """:func:`occupied_index` by sorting, for a clique of many cells per record: each
    record's key of code and position made in one fused pass, a radix sort of the
    keys by their code bits (:func:`~pmwcm.kernels.clique_table.sort_keys_by_code`) and
    one pass over the sorted keys (:func:`~pmwcm.kernels.clique_table.position_bits`);
    ``np.unique`` over the codes where a code and a position do not fit in 63 bits."""
    size = records.shape[0]
    shift = position_bits(count, size)
    if shift is None:
        codes = np.empty(size, dtype=np.int64)
        _each(pass_chunks(size), lambda begin, end: _codes(records, axes, sizes, codes, begin, end))
        cells, inverse = np.unique(codes, return_inverse=True)
        return cells, inverse.reshape(-1).astype(np.int32)  # at most M < 2^31 cells
    keys = np.empty(size, dtype=np.int64)
    _each(
        pass_chunks(size),
        lambda begin, end: _keyed_codes(records, axes, sizes, shift, keys, begin, end),
    )
    keys = sort_keys_by_code(keys, shift, count)
    index = np.empty(size, dtype=np.int32)
    return split_sorted_keys(keys, shift, index), index


def index_mass(index: NDArray[np.integer], weights: FloatArray, count: int) -> FloatArray:
    """``out[j] = sum_i weights_i [index_i = j]`` for ``j < count``: ``np.bincount(index,
    weights, minlength=count)`` summed on the passes' threads.

    >>> index_mass(np.array([1, 0, 1], dtype=np.int32), np.array([0.5, 0.25, 0.25]), 3).tolist()
    [0.25, 0.75, 0.0]
    """
    index = np.ascontiguousarray(index)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    return _summed(
        count,
        index.size,
        lambda out, begin, end: _index_mass(index, weights, out, begin, end),
    )
