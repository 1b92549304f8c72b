"""Marginals of a dense C-ordered table: ``D_C(x_C) = sum_{x : x_C fixed} D(x)``.

Two ways, chosen by size (:func:`planned_marginal`):

* **Planned passes** (large tables): runs of dropped axes are summed out one
  memory pass each, by the cheapest of a few BLAS/NumPy reductions
  (:class:`_Step`), in a greedy order cached per shape and kept-axis set
  (:func:`_passes`). NumPy's ``sum(axis=...)`` is slow when the kept axes are
  trailing (short inner loops); a gemv against a ones vector stays memory-bound
  whatever the axis order (``benchmarks/histogram.py`` measures the methods).
* **One compiled pass** (at most :data:`ONE_PASS_MAX_CELLS` cells): every cell is
  added into its marginal cell through a table of row codes
  (:func:`sum_into_cells`), with no plan to build.

Either way a clique's marginal in any axis order is the sorted-axis marginal
transposed, bit for bit (the histogram's marginal cache relies on it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import FloatArray

#: Bytes of contiguous inner loop from which NumPy's strided loops run at memory speed.
_LONG_ROW = 256
#: Per-step overhead of a marginal pass, in cells (about a microsecond of Python and NumPy).
_STEP_OVERHEAD = 2048.0
#: Relative cost per cell of each reduction, against a copy (measured by benchmarks/histogram.py
#: with one BLAS thread): gemv on long rows or columns, NumPy's reduce over a middle axis with
#: long inner rows, a complex gemv for a trailing pair, einsum for short trailing runs.
_COST = {"rows": 0.6, "columns": 0.75, "middle": 0.8, "pairs": 0.8, "short": 2.0}


@dataclass(frozen=True)
class _Step:
    """Sums a run of dropped axes out of the current flat table, viewed as ``(pre, size, post)``.

    ``method``: ``"rows"`` (``post == 1``: gemv against ones), ``"columns"`` (``pre == 1``:
    ones against the matrix), ``"middle"`` (long inner rows: NumPy's reduce), ``"pairs"``
    (``post == 2``: the pairs viewed as complex numbers, one complex gemv), ``"short"``
    (einsum). ``split > 1`` first sums the run's leading ``split`` cells with NumPy's
    reduce (long inner rows), leaving ``size / split`` for the method.
    """

    method: str
    pre: int
    size: int
    post: int
    split: int = 1

    @functools.cached_property
    def _ones(self) -> NDArray[Any]:
        """The gemv's right-hand side, made once per (cached) plan."""
        size = self.size // self.split
        ones = np.ones(size, dtype=np.complex128 if self.method == "pairs" else np.float64)
        ones.flags.writeable = False
        return ones

    def apply(self, flat: FloatArray) -> FloatArray:
        pre, size, post = self.pre, self.size, self.post
        if self.split > 1:
            size //= self.split
            flat = np.add.reduce(flat.reshape(pre, self.split, size * post), axis=1).reshape(-1)
        method = self.method
        if method == "rows":
            return np.dot(flat.reshape(pre, size), self._ones)
        if method == "columns":
            return np.dot(self._ones, flat.reshape(size, post))
        if method == "middle":
            return np.add.reduce(flat.reshape(pre, size, post), axis=1).reshape(-1)
        if method == "pairs":
            pairs = flat.view(np.complex128).reshape(pre, size)
            return np.dot(pairs, self._ones).view(np.float64)
        return np.einsum("ijk->ik", flat.reshape(pre, size, post)).reshape(-1)


_ROWS = (_COST["rows"], "rows", 1)
_COLUMNS = (_COST["columns"], "columns", 1)
_MIDDLE = (_COST["middle"], "middle", 1)


def _step_rate(pre: int, sizes: tuple[int, ...], post: int) -> tuple[float, str, int]:
    """The cheapest way to sum out one run (axis sizes ``sizes``) of a ``pre x run x post``
    table: its cost per cell against a copy, its method and its split (no step is built:
    the planner prices every candidate run and builds the chosen one only)."""
    # The three plain cases first: the planner prices every dropped run at every
    # pass, and a cache look-up costs more than these tests.
    if post == 1:
        return _ROWS
    if pre == 1:
        return _COLUMNS
    if post * 8 >= _LONG_ROW * 4:
        return _MIDDLE
    return _split_rate(sizes, post)


@functools.lru_cache(maxsize=65536)
def _step(method: str, pre: int, size: int, post: int, split: int) -> _Step:
    """One :class:`_Step` per distinct pass (plans share them, and with them their ``ones``)."""
    return _Step(method, pre, size, post, split)


@functools.lru_cache(maxsize=65536)
def _split_rate(sizes: tuple[int, ...], post: int) -> tuple[float, str, int]:
    """:func:`_step_rate` for a run with short inner rows (``pre > 1``, ``post > 1``)."""
    # Split off leading axes of the run while the remainder keeps long inner rows.
    split, rest = 1, math.prod(sizes)
    for s in sizes[:-1]:
        if (rest // s) * post * 8 < _LONG_ROW:
            break
        split, rest = split * s, rest // s
    method = "pairs" if post == 2 else "short"
    rate = _COST[method] / split
    if split > 1:
        rate += _COST["middle"]
    return rate, method, split


@dataclass(frozen=True)
class _MarginalPlan:
    """The order and methods that sum every dropped axis out of a C-contiguous array.

    Consecutive axes merge into runs; the dropped runs are summed out one pass each
    (each pass makes the table smaller, so the expensive passes should come late,
    on small tables).
    """

    steps: tuple[_Step, ...]
    kept_shape: tuple[int, ...]
    order: tuple[int, ...]
    out_shape: tuple[int, ...]

    @property
    def transposed(self) -> bool:
        """Whether the clique's axes are not in increasing order."""
        return self.order != tuple(range(len(self.order)))


def _merged(shape: tuple[int, ...], kept: frozenset[int]) -> list[tuple[tuple[int, ...], bool]]:
    """Consecutive axes merged into runs ``(axis sizes, is_kept)`` (size-1 axes dropped)."""
    runs: list[tuple[tuple[int, ...], bool]] = []
    for axis, size in enumerate(shape):
        keep = axis in kept
        if size == 1 and not keep:
            continue
        if runs and runs[-1][1] == keep:
            runs[-1] = ((*runs[-1][0], size), keep)
        else:
            runs.append(((size,), keep))
    return runs


@functools.lru_cache(maxsize=8192)
def _marginal_plan(shape: tuple[int, ...], axes: tuple[int, ...]) -> _MarginalPlan:
    """Plans :func:`dense_marginal` (cached: the engine asks for the same cliques again).

    The passes depend on the set of kept axes only (:func:`_passes`, cached by that
    set), so a clique in another order costs a look-up and its final transpose.
    """
    kept_sorted = tuple(sorted(axes))
    return _MarginalPlan(
        steps=_passes(shape, kept_sorted),
        kept_shape=tuple(shape[a] for a in kept_sorted),
        order=tuple(kept_sorted.index(a) for a in axes),
        out_shape=tuple(shape[a] for a in axes),
    )


@functools.lru_cache(maxsize=8192)
def _passes(shape: tuple[int, ...], kept_sorted: tuple[int, ...]) -> tuple[_Step, ...]:
    """The passes that sum every axis not in ``kept_sorted`` out of ``shape``.

    Greedy: the next pass is the cheapest per cell, ties going to the run that
    shrinks the table most (then to the first such run); the costly methods thus
    run last, on small tables.
    """
    runs = _merged(shape, frozenset(kept_sorted))
    sizes = [math.prod(s) for s, _ in runs]
    total = math.prod(sizes)
    steps: list[_Step] = []
    while True:
        best: tuple[float, int] | None = None
        index = -1
        pre = 1
        for i, (axis_sizes, keep) in enumerate(runs):
            if not keep:
                rank = (_step_rate(pre, axis_sizes, total // (pre * sizes[i]))[0], -sizes[i])
                if best is None or rank < best:
                    best, index = rank, i
            pre *= sizes[i]
        if best is None:
            return tuple(steps)
        pre = math.prod(sizes[:index])
        size = sizes[index]
        post = total // (pre * size)
        _, method, split = _step_rate(pre, runs[index][0], post)
        steps.append(_step(method, pre, size, post, split))
        total //= size
        # The run is summed out: its neighbours (both kept, or both dropped) merge.
        del runs[index], sizes[index]
        if 0 < index < len(runs) and runs[index - 1][1] == runs[index][1]:
            left, right = runs[index - 1], runs.pop(index)
            runs[index - 1] = ((*left[0], *right[0]), left[1])
            sizes[index - 1] *= sizes.pop(index)


def dense_marginal(array: FloatArray, axes: Sequence[int]) -> FloatArray:
    """Sums ``array`` over every axis not in ``axes``; result axes in ``axes`` order.

    Runs of dropped axes are summed out one memory pass each, in a cached
    order and by methods that stay memory-bound whatever the axis layout
    (:class:`_MarginalPlan`; ``benchmarks/histogram.py`` measures them).
    """
    axes = tuple(axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"Marginal axes must be distinct, got {axes}.")
    return planned_marginal(np.ascontiguousarray(array, dtype=np.float64), axes)


#: Arrays of at most this many cells take their marginals in one compiled pass
#: (:func:`_one_pass_marginal`). Planning a new clique's passes costs about 20 us of
#: Python, which the engine pays on every clique it has not seen: at 2^14 cells a
#: new clique's marginal took 31 us planned and takes about 10 in one pass. A
#: known clique's planned passes are faster (2.5 to 10 us at 2^14, against 4 to 18
#: in one pass; ``benchmarks/histogram.py``), and at 2^15 a clique spread over the
#: domain would take 36 us in one pass, past the 20 us a kernel that the passes keep.
ONE_PASS_MAX_CELLS = 2**14
#: The innermost cells one row of :func:`sum_into_cells` reads through a table of
#: cell codes (a row of at most this many cells keeps the table in L1).
_ROW_CELLS = 256
#: The copies :func:`sum_into_cells` adds a row's cells into, in turn, when they
#: fall on fewer marginal cells than this (written out as four in the final sum).
_LANES = 4


def planned_marginal(array: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """:func:`dense_marginal` of a C-contiguous float64 ``array`` and distinct ``axes``."""
    if array.size <= ONE_PASS_MAX_CELLS:
        return _one_pass_marginal(array, axes)
    return _marginal_by_passes(array, axes)


def _marginal_by_passes(array: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """:func:`planned_marginal` by the planned passes (:class:`_MarginalPlan`)."""
    plan = _marginal_plan(array.shape, axes)
    if not plan.steps:  # nothing dropped: a transposed copy, never an alias
        return np.array(array.reshape(plan.kept_shape).transpose(plan.order), order="C")
    flat = array.reshape(-1)
    for step in plan.steps:
        flat = step.apply(flat)
    table = flat.reshape(plan.kept_shape)
    if plan.transposed:
        # ascontiguousarray turns a 0-d table (empty clique) into shape (1,): reshape back.
        return np.ascontiguousarray(table.transpose(plan.order)).reshape(plan.out_shape)
    return table


def _one_pass_marginal(array: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """:func:`planned_marginal` for a small ``array``: one compiled pass, no plan.

    Every cell of the marginal sums its cells' values in an order that the shape
    and the set of kept axes fix (increasing flat order, in at most four
    interleaved sums), whatever the order of ``axes``: a clique's marginal in any
    axis order is the same numbers, transposed, bit for bit (:class:`MarginalCache`
    relies on it).
    """
    out_shape = tuple([array.shape[a] for a in axes])
    out = np.zeros(math.prod(out_shape))
    sum_into_cells(
        array.reshape(-1),
        np.array(array.shape, dtype=np.int64),
        np.array(axes, dtype=np.int64),
        out,
    )
    return out.reshape(out_shape)


@njit(cache=True, nogil=True)
def _row_codes(
    shape: NDArray[np.int64], stride: NDArray[np.int64], cut: int, last: int, row: int
) -> NDArray[np.int64]:
    """The marginal-cell offsets of one row's ``row`` cells (axes ``cut .. last-1``,
    C order): ``sum_a x_a stride_a`` over those axes, built digit by digit."""
    codes = np.zeros(row, dtype=np.int64)
    filled = 1
    for a in range(last - 1, cut - 1, -1):
        for digit in range(1, shape[a]):
            for j in range(filled):
                codes[digit * filled + j] = codes[j] + digit * stride[a]
        filled *= shape[a]
    return codes


@njit(cache=True, nogil=True)
def row_layout(
    shape: NDArray[np.int64], axes: NDArray[np.int64]
) -> tuple[NDArray[np.int64], int, int, int, int, int, NDArray[np.int64]]:
    """How a pass over a C-ordered ``shape`` reads its cells as rows for the marginal on
    ``axes`` (:func:`sum_into_cells` and its adjoint): ``(stride, last, post, cut, row,
    rows, codes)``.

    ``stride_a`` is the marginal's stride of axis ``a`` (0 where it is dropped); the
    dropped axes after the last kept one, ``last..ndim-1``, make ``post`` contiguous
    cells; axes ``cut..last-1`` make a row of ``row`` cells (at most :data:`_ROW_CELLS`,
    or the one axis ``last - 1`` where it alone is longer) coded through ``codes``; the
    ``rows`` rows are counted over axes ``0..cut-1``.
    """
    ndim = shape.shape[0]
    stride = np.zeros(ndim, dtype=np.int64)
    step = 1
    for i in range(axes.shape[0] - 1, -1, -1):
        stride[axes[i]] = step
        step *= shape[axes[i]]
    last, post = ndim, 1  # the trailing run of dropped axes
    while last > 0 and stride[last - 1] == 0:
        last -= 1
        post *= int(shape[last])
    cut, row = last, 1  # axes cut..last-1 make a row, coded through a table
    # The row holds at least the innermost kept axis: rows of one cell would advance
    # the counter over the outer axes once a cell (a 600-value attribute's marginal on
    # 9,600 cells took 260 us that way, 11-12 in rows of its 600 values).
    while cut > 0 and (cut == last or row * shape[cut - 1] <= _ROW_CELLS):
        cut -= 1
        row *= int(shape[cut])
    codes = _row_codes(shape, stride, cut, last, row)
    rows = 1
    for a in range(cut):
        rows *= int(shape[a])
    return stride, last, post, cut, row, rows, codes


@njit(cache=True, nogil=True)
def next_row_base(
    digits: NDArray[np.int64],
    shape: NDArray[np.int64],
    stride: NDArray[np.int64],
    base: int,
    cut: int,
) -> int:
    """The next row's base code: ``digits``, a mixed-radix counter over axes
    ``0..cut-1``, advanced by one in place, and ``base`` moved with it."""
    a = cut - 1
    while a >= 0:
        digits[a] += 1
        base += stride[a]
        if digits[a] < shape[a]:
            break
        base -= digits[a] * stride[a]
        digits[a] = 0
        a -= 1
    return base


@njit(cache=True, nogil=True)
def sum_into_cells(
    flat: FloatArray, shape: NDArray[np.int64], axes: NDArray[np.int64], out: FloatArray
) -> None:
    """``out[code(x)] += flat[x]`` for every cell ``x`` of a C-ordered ``shape``,
    where ``code(x)`` is ``x``'s cell in the marginal on ``axes`` (C order, axes as given).

    ``code`` is linear in the coordinates: ``code(x) = sum_a x_a stride_a`` with
    ``stride_a = 0`` for a dropped axis. The cells are read as rows: the dropped
    axes after the last kept one (``post`` cells, contiguous) are first summed with
    four accumulators (independent adds, not one dependent chain); the innermost
    axes up to :data:`_ROW_CELLS` cells then go through a table of their codes,
    and a counter over the outer axes gives each row's base code. A row whose
    consecutive cells fall on fewer than :data:`_LANES` marginal cells (a clique
    spread over the domain) is added into four interleaved copies, for the same
    reason. Loop bounds and the choice depend on the shapes only.
    """
    stride, last, post, cut, row, rows, codes = row_layout(shape, axes)
    # Consecutive cells of a row cycle through ``period`` marginal cells (the kept
    # axes at the row's end). Fewer than four make each cell's adds one dependent
    # chain, so then cell j goes to lane j mod 4 of four copies, summed at the end.
    period, a = 1, last - 1
    while a >= cut and stride[a] != 0:
        period *= int(shape[a])
        a -= 1
    cells = out.shape[0]
    mask = _LANES - 1 if period < _LANES and post == 1 else 0
    sums = np.zeros(_LANES * cells) if mask else out
    digits = np.zeros(max(cut, 1), dtype=np.int64)
    base = 0
    width = row * post
    for r in range(rows):
        start = r * width
        if post == 1:
            for j in range(row):
                sums[(j & mask) * cells + base + codes[j]] += flat[start + j]
        else:
            for j in range(row):
                first = start + j * post
                a0 = a1 = a2 = a3 = 0.0
                k = 0
                while k + 4 <= post:
                    a0 += flat[first + k]
                    a1 += flat[first + k + 1]
                    a2 += flat[first + k + 2]
                    a3 += flat[first + k + 3]
                    k += 4
                while k < post:
                    a0 += flat[first + k]
                    k += 1
                sums[base + codes[j]] += (a0 + a1) + (a2 + a3)  # one lane: sums is out
        base = next_row_base(digits, shape, stride, base, cut)
    if mask:
        for c in range(cells):
            out[c] = (sums[c] + sums[cells + c]) + (sums[2 * cells + c] + sums[3 * cells + c])
