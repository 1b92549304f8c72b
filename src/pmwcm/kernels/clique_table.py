"""A clique marginal as the engine's rounds see it: dense, or on its occupied cells only.

A query's loss reads a distribution only through its marginal ``D_C`` on the
query's clique ``C`` (docs/design.md section 2). On a small clique that marginal
is a dense table of ``prod_{a in C} s_a`` cells. At full resolution a clique of
six native attributes can have ``10^10`` cells while a distribution on ``n``
records or ``M`` support points puts mass on at most ``n`` (or ``M``) of them:
the marginal is then kept **on its occupied cells only**, as sorted flat cell
codes (C-order over the clique's shape) and their masses. Every sum over the
clique (a loss, a gradient, a counting query) is the same on either form,
because the omitted cells carry zero mass.

Whether a clique is dense or sparse is decided by :func:`is_dense` from the
clique's cell count alone (public: the schema), never from the data, and every
producer of tables (the hypothesis backends, the private data, a round given a
marginal array) follows it, so all the tables of one clique have one form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

__all__ = [
    "DENSE_CLIQUE_CELLS",
    "MAX_CLIQUE_CELLS",
    "CliqueTable",
    "FloatArray",
    "cell_codes",
    "is_dense",
    "occupied_cells",
    "position_bits",
    "sort_keys_by_code",
    "split_sorted_keys",
]

#: Cliques with at most this many cells are kept dense (one float per cell).
DENSE_CLIQUE_CELLS = 2**12
#: Cell codes are int64: a query's clique must have fewer cells than this.
MAX_CLIQUE_CELLS = 2**62
#: :func:`occupied_cells` counts into a table over every cell of the clique (no
#: sort) while the clique has at most this many cells per code.
DIRECT_CELLS_PER_CODE = 8
#: The direct count's table holds int32 ranks: beyond this many cells, the sort.
_MAX_RANKED_CELLS = 2**31 - 1
#: :func:`sort_keys_by_code` sorts at most this many bits a pass: a count table of
#: ``2^11`` buckets (16 KiB) stays in the first-level cache while the keys stream by.
RADIX_BITS = 11


def is_dense(shape: tuple[int, ...]) -> bool:
    """Whether a clique of this shape is kept as a dense table (a public rule)."""
    return math.prod(shape) <= DENSE_CLIQUE_CELLS


def cell_codes(
    records: NDArray[np.integer],
    axes: Sequence[int],
    sizes: Sequence[int],
    dtype: np.dtype | type[np.integer] = np.int64,
) -> NDArray[np.integer]:
    """Each record's flat (C-order) cell code on the clique of ``axes``, sizes ``sizes``.

    Horner's rule, computed in ``dtype``: every partial code is at most the final
    one, so a dtype that holds ``prod(sizes) - 1`` holds them all (a narrow one
    moves fewer bytes); callers keep cliques under :data:`MAX_CLIQUE_CELLS`.
    """
    dtype = np.dtype(dtype)
    codes = np.zeros(records.shape[0], dtype=dtype)
    for axis, size in zip(axes, sizes, strict=True):
        codes *= dtype.type(size)
        codes += records[:, axis]
    return codes


def occupied_cells(
    codes: NDArray[np.integer], cell_count: int
) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """The sorted distinct cell ``codes`` and each code's index among them.

    ``codes[i] == cells[inverse[i]]``, as ``np.unique(codes, return_inverse=True)``
    returns. A clique with at most :data:`DIRECT_CELLS_PER_CODE` cells per code is
    counted into a table over all its cells and ranked by a cumulative sum,
    ``O(len(codes) + cell_count)``; a larger one is sorted, ``O(len(codes) log)``, as
    keys of code and position (:func:`position_bits`, :func:`sort_keys_by_code`).

    >>> cells, inverse = occupied_cells(np.array([5, 2, 5, 7]), 8)
    >>> cells.tolist(), inverse.tolist()
    ([2, 5, 7], [1, 0, 1, 2])
    """
    codes = np.asarray(codes)
    direct = min(DIRECT_CELLS_PER_CODE * max(codes.size, 1), _MAX_RANKED_CELLS)
    if cell_count <= direct:
        return _ranked_cells(codes.reshape(-1), cell_count)
    codes = codes.reshape(-1)
    shift = position_bits(cell_count, codes.size)
    if shift is None:
        cells, inverse = np.unique(codes.astype(np.int64, copy=False), return_inverse=True)
        return cells, inverse.reshape(-1)
    keys = codes.astype(np.int64)  # a copy, shifted and tagged in place
    keys <<= shift
    keys |= np.arange(codes.size, dtype=np.int64)
    keys = sort_keys_by_code(keys, shift, cell_count)
    inverse = np.empty(codes.size, dtype=np.intp)
    return split_sorted_keys(keys, shift, inverse), inverse


def position_bits(cell_count: int, size: int) -> int | None:
    """The bits a position among ``size`` codes takes below a code of a clique of
    ``cell_count`` cells in one ``int64`` sort key (:func:`split_sorted_keys`), or
    ``None`` where code and position do not fit in 63 bits together.

    Sorting the keys ``code << shift | position`` orders the codes and carries each
    position along, in one ``M``-long array (:func:`sort_keys_by_code`), where
    ``np.unique(codes, return_inverse=True)`` does an ``argsort`` and gathers
    through several ``M``-long temporaries (at ``M = 2^23`` on the two widest cliques
    of ``benchmarks/support_tables.py``, the whole occupied index 0.30-0.32 s against
    1.0 s with NumPy's sort of the keys, session 9).
    """
    shift = max(size - 1, 1).bit_length()
    return None if (max(cell_count, 1) - 1) >> (63 - shift) else shift


@njit(cache=True, nogil=True)
def sort_keys_by_code(keys: NDArray[np.int64], shift: int, cell_count: int) -> NDArray[np.int64]:
    """The keys ``code << shift | position`` (:func:`position_bits`) of codes below
    ``cell_count``, written in position order, sorted: ``np.sort(keys)``, by a
    least-significant-digit radix sort of the code bits alone.

    Each pass is a stable counting sort on the next :data:`RADIX_BITS` or fewer
    bits of the code (a count per digit, its prefix sums, one scatter), so after
    the passes the keys are ordered by code and, within a code, in the order they
    came: by position, since position ``i`` was written at index ``i``. That is the
    order of the whole keys, so the result is ``np.sort``'s, element for element.
    ``ceil(b / 11)`` passes over ``b = bit_length(cell_count - 1)`` code bits, each
    reading and writing the keys once: at ``M = 2^23`` keys of 28-34 code bits, 3-4
    passes took 150-165 ms of CPU where NumPy's comparison sort took 550-560
    (``benchmarks/README.md``, session 10). Returns ``keys`` or a second buffer of
    its size (its only temporary, 8 bytes a key); which one is the pass count's.
    """
    bits = 1  # bit_length(cell_count - 1), at least 1
    while (cell_count - 1) >> bits:
        bits += 1
    passes = -(-bits // RADIX_BITS)
    width = -(-bits // passes)
    mask = (1 << width) - 1
    counts = np.empty((1 << width) + 1, dtype=np.int64)
    source, target = keys, np.empty_like(keys)
    for step in range(passes):
        low = shift + step * width
        counts[:] = 0
        for j in range(source.size):
            counts[((source[j] >> low) & mask) + 1] += 1
        for digit in range(1, counts.size):  # counts[d]: where digit d's keys start
            counts[digit] += counts[digit - 1]
        for j in range(source.size):
            key = source[j]
            digit = (key >> low) & mask
            target[counts[digit]] = key
            counts[digit] += 1
        source, target = target, source
    return source


@njit(cache=True, nogil=True)
def split_sorted_keys(
    keys: NDArray[np.int64], shift: int, index: NDArray[np.integer]
) -> NDArray[np.int64]:
    """The distinct codes of the sorted keys ``code << shift | position``, in order,
    and, into ``index[position]``, each position's rank among them
    (:func:`position_bits`)."""
    position = (1 << shift) - 1
    distinct, previous = 0, -1  # codes are >= 0
    for j in range(keys.size):
        code = keys[j] >> shift
        if code != previous:
            distinct += 1
            previous = code
    cells = np.empty(distinct, dtype=np.int64)
    rank, previous = -1, -1
    for j in range(keys.size):
        code = keys[j] >> shift
        if code != previous:
            rank += 1
            cells[rank] = code
            previous = code
        index[keys[j] & position] = rank
    return cells


@njit(cache=True, nogil=True)
def _ranked_cells(
    codes: NDArray[np.integer], cell_count: int
) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """:func:`occupied_cells`' direct count: one int32 table over the clique's cells,
    first marking the occupied ones, then holding each one's rank (three passes; 4
    bytes a cell, where a count, a mask and a cumulative sum took 17: at
    ``M = 2^23`` records and 8 cells per code, 268 MB against 1.1 GB)."""
    rank = np.zeros(cell_count, dtype=np.int32)
    for code in codes:
        rank[code] = 1
    occupied = 0
    for cell in range(cell_count):
        occupied += rank[cell]
    cells = np.empty(occupied, dtype=np.int64)
    next_rank = 0
    for cell in range(cell_count):
        if rank[cell]:
            rank[cell] = next_rank
            cells[next_rank] = cell
            next_rank += 1
    inverse = np.empty(codes.size, dtype=np.intp)
    for i in range(codes.size):
        inverse[i] = rank[codes[i]]
    return cells, inverse


#: Below this many cells :func:`_unravel` divides through a float reciprocal: a code
#: ``c < 2^50`` converts exactly, and ``c * fl(1 / s)`` is within ``c / s * 2^-51.9 <
#: 0.25`` of ``c / s``, so its truncation is the quotient or one off it, which one
#: comparison of the remainder corrects.
_RECIPROCAL_CELLS = 2**50


@njit(cache=True, nogil=True)
def _unravel(
    codes: NDArray[np.int64], shape: NDArray[np.int64], out: NDArray[np.integer]
) -> NDArray[np.integer]:
    """``np.stack(np.unravel_index(codes, shape), axis=1)`` in one pass, into ``out``
    (shape ``(codes, |C|)``, of an integer type that holds every size; returned): a
    support's large clique has up to ``M`` occupied cells, where NumPy's form made
    ``|C|`` arrays, then a stacked copy and an ``int64`` one. The caller makes ``out``
    column-major: the design reads it attribute by attribute.

    Each digit is ``code mod s`` and the code carried on is ``code div s``, taken by
    multiplying by ``1 / s`` where the clique has fewer than :data:`_RECIPROCAL_CELLS`
    cells (exactly: the constant's comment), by integer division above: on 181,440
    codes of six attributes 0.4-1.3 ms against 5.1, on 8.3 million 250-280 against
    400-420 (there the writes bound it).
    """
    cells = 1
    for size in shape:
        cells *= size
    if cells > _RECIPROCAL_CELLS:  # public: the shape
        for i in range(codes.size):
            code = codes[i]
            for j in range(shape.size - 1, -1, -1):
                out[i, j] = code % shape[j]
                code //= shape[j]
        return out
    inverse = 1.0 / shape.astype(np.float64)
    for i in range(codes.size):
        code = codes[i]
        for j in range(shape.size - 1, -1, -1):
            size = shape[j]
            quotient = np.int64(code * inverse[j])
            digit = code - quotient * size
            if digit < 0:
                quotient -= 1
                digit += size
            elif digit >= size:
                quotient += 1
                digit -= size
            out[i, j] = digit
            code = quotient
    return out


@dataclass(frozen=True, eq=False)
class CliqueTable:
    """A marginal on a clique: masses on all its cells, or on its occupied ones.

    Attributes:
        shape: the clique's sizes, in clique order.
        codes: ``None`` for a dense table (every cell, C-order); otherwise the
            sorted, distinct flat codes of the cells carrying mass.
        mass: the masses, flat, aligned with ``codes`` (or with every cell).
    """

    shape: tuple[int, ...]
    codes: NDArray[np.int64] | None
    mass: FloatArray

    @classmethod
    def dense(cls, table: FloatArray) -> CliqueTable:
        """A dense table (any shape): every cell, C-order."""
        table = np.asarray(table, dtype=np.float64)
        return cls(shape=tuple(table.shape), codes=None, mass=table.reshape(-1))

    @classmethod
    def of_marginal(cls, table: FloatArray) -> CliqueTable:
        """A marginal array in the form :func:`is_dense` gives its clique: dense, or
        its cells of non-zero mass (the form every producer of tables uses)."""
        table = np.asarray(table, dtype=np.float64)
        if is_dense(table.shape):
            return cls.dense(table)
        flat = table.reshape(-1)
        codes = np.flatnonzero(flat).astype(np.int64)
        return cls(shape=tuple(table.shape), codes=codes, mass=flat[codes])

    @classmethod
    def from_codes(
        cls, shape: tuple[int, ...], codes: NDArray[np.integer], weights: FloatArray | None = None
    ) -> CliqueTable:
        """The (weighted) histogram of flat cell ``codes``, kept on the occupied cells.

        ``weights`` default to ``1 / len(codes)`` each (an empirical marginal).
        """
        codes = np.asarray(codes)
        cells, inverse = occupied_cells(codes, math.prod(shape))
        return cls.on_cells(shape, cells, inverse, weights)

    @classmethod
    def on_cells(
        cls,
        shape: tuple[int, ...],
        cells: NDArray[np.int64],
        inverse: NDArray[np.integer],
        weights: FloatArray | None = None,
    ) -> CliqueTable:
        """The table of :meth:`from_codes` from its :func:`occupied_cells` already found."""
        if weights is None:
            counts = np.bincount(inverse, minlength=cells.size)
            mass: FloatArray = counts.astype(np.float64) / max(inverse.size, 1)
        else:
            mass = np.asarray(
                np.bincount(inverse, weights=weights, minlength=cells.size), dtype=np.float64
            )
        return cls(shape=tuple(shape), codes=cells, mass=np.asarray(mass, dtype=np.float64))

    @property
    def is_dense(self) -> bool:
        """Whether every cell of the clique is present."""
        return self.codes is None

    def cells(self) -> NDArray[np.integer]:
        """The present cells as per-attribute codes, shape ``(cells, |C|)`` (read-only):
        ``int64`` for a dense table, and for a sparse one the narrowest unsigned type that
        holds the clique's codes.

        Computed once per table: a hypothesis keeps its tables between updates, and
        every query on the clique asks for them (on a support's large clique the
        ``unravel_index`` of its occupied cells was a tenth of a distinct answer's time).
        A support's large clique has up to ``M`` occupied cells, so the narrow type
        matters: at ``M = 2^23`` a six-attribute clique's cells take 50 MB in ``uint8``
        where they took 400 in ``int64``, held as long as the table is.
        """
        cached: NDArray[np.integer] | None = self.__dict__.get("_cells")
        if cached is None:
            cached = self._unravelled()
            cached.flags.writeable = False
            object.__setattr__(self, "_cells", cached)
        return cached

    def _unravelled(self) -> NDArray[np.integer]:
        if self.codes is None:
            return np.indices(self.shape).reshape(len(self.shape), -1).T.astype(np.int64)
        if not self.shape:
            return np.zeros((self.codes.size, 0), dtype=np.int64)
        narrow = np.min_scalar_type(max(self.shape) - 1)
        out = np.empty((len(self.shape), self.codes.size), dtype=narrow).T
        return _unravel(self.codes, np.asarray(self.shape, dtype=np.int64), out)

    def table(self) -> FloatArray:
        """The dense table of shape ``shape`` (only for a dense clique or a small one)."""
        if self.codes is None:
            return self.mass.reshape(self.shape)
        out = np.zeros(math.prod(self.shape))
        out[self.codes] = self.mass
        return out.reshape(self.shape)

    def gather(self, values: FloatArray) -> FloatArray:
        """A dense per-cell array (shape ``shape``) read at the present cells, flat."""
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        return flat if self.codes is None else flat[self.codes]
