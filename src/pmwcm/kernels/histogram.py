"""Histograms over a domain: the engine's hypothesis ``Dhat`` and the data's ``D``.

A histogram is a non-negative float64 tensor of shape ``domain.shape`` summing
to one (docs/design.md section 1). The engine needs four operations, all behind the
:class:`Histogram` protocol so that other backends (JAX/GPU, sharded, factored)
can replace the dense one without touching the engine:

* ``marginal(C)``: ``D_C(x_C) = sum_{x : x_C fixed} D(x)``, shape ``sizes(C)`` in
  the order ``C`` is given;
* ``reweight(C, log_factor)``: ``D(x) <- D(x) exp(log_factor(x_C)) / Z``, the
  multiplicative-weights update, whose factor depends on ``x`` only through the
  clique ``C``;
* ``sample(n)``: ``n`` records drawn from ``D`` (the synthetic dataset);
* ``to_array()``: the dense tensor.

**Speed.** Both the marginal and the reweight are one streaming pass over the
``|X|`` cells. NumPy's ``sum(axis=...)`` is slow when the kept axes are
trailing (short inner loops), so :func:`dense_marginal` reduces each run of
dropped axes with a BLAS matrix-vector product against a ones vector, which
stays memory-bound whatever the axis order (see ``benchmarks/histogram.py``).

>>> from pmwcm.kernels.domain import Domain
>>> h = DenseHistogram.uniform(Domain.from_sizes({"a": 2, "b": 3}))
>>> h.marginal(["b"]).round(3).tolist()
[0.333, 0.333, 0.333]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import CliqueTable, FloatArray
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.logspace import logsumexp
from pmwcm.kernels.lru import CellBudgetCache

#: The largest log-factor a reweight applies to a cell without mass (``e^700`` is finite).
MAX_LOG_SCALE = 700.0


@runtime_checkable
class Histogram(Protocol):
    """The operations the engine needs from a histogram backend."""

    domain: Domain

    def marginal(self, attrs: Sequence[str]) -> FloatArray:
        """The marginal table on ``attrs``, axes in the order given."""
        ...

    def reweight(
        self, attrs: Sequence[str], log_factor: FloatArray, *, marginal: FloatArray | None = None
    ) -> None:
        """In place: ``D(x) <- D(x) exp(log_factor[x_attrs]) / Z``."""
        ...

    def clique_table(self, attrs: Sequence[str]) -> CliqueTable:
        """The marginal on ``attrs`` as the engine's rounds read it (dense or sparse)."""
        ...

    def reweight_table(
        self, attrs: Sequence[str], table: CliqueTable, log_factor: FloatArray
    ) -> None:
        """:meth:`reweight` by a factor given on ``table``'s cells (``table`` is the
        current :meth:`clique_table` on ``attrs``)."""
        ...

    def sample(self, n: int, *, rng: np.random.Generator) -> NDArray[np.int64]:
        """``n`` records drawn from the histogram, shape ``(n, len(domain))``."""
        ...

    def to_array(self) -> FloatArray:
        """The dense tensor (a copy)."""
        ...

    def copy(self) -> Histogram:
        """An independent copy."""
        ...


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
    return _planned_marginal(np.ascontiguousarray(array, dtype=np.float64), axes)


#: Arrays of at most this many cells take their marginals in one compiled pass
#: (:func:`_one_pass_marginal`). Planning a new clique's passes costs about 20 us of
#: Python, which the engine pays on every clique it has not seen: at 2^14 cells a
#: new clique's marginal took 31 us planned and takes about 10 in one pass. A
#: known clique's planned passes are faster (2.5 to 10 us at 2^14, against 4 to 18
#: in one pass; ``benchmarks/histogram.py``), and at 2^15 a clique spread over the
#: domain would take 36 us in one pass, past the 20 us a kernel that the passes keep.
ONE_PASS_MAX_CELLS = 2**14
#: The innermost cells one row of :func:`_sum_into_cells` reads through a table of
#: cell codes (a row of at most this many cells keeps the table in L1).
_ROW_CELLS = 256
#: The copies :func:`_sum_into_cells` adds a row's cells into, in turn, when they
#: fall on fewer marginal cells than this (written out as four in the final sum).
_LANES = 4


def _planned_marginal(array: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """:func:`dense_marginal` of a C-contiguous float64 ``array`` and distinct ``axes``."""
    if array.size <= ONE_PASS_MAX_CELLS:
        return _one_pass_marginal(array, axes)
    return _marginal_by_passes(array, axes)


def _marginal_by_passes(array: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """:func:`_planned_marginal` by the planned passes (:class:`_MarginalPlan`)."""
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
    """:func:`_planned_marginal` for a small ``array``: one compiled pass, no plan.

    Every cell of the marginal sums its cells' values in an order that the shape
    and the set of kept axes fix (increasing flat order, in at most four
    interleaved sums), whatever the order of ``axes``: a clique's marginal in any
    axis order is the same numbers, transposed, bit for bit (:class:`MarginalCache`
    relies on it).
    """
    out_shape = tuple([array.shape[a] for a in axes])
    out = np.zeros(math.prod(out_shape))
    _sum_into_cells(
        array.reshape(-1),
        np.array(array.shape, dtype=np.int64),
        np.array(axes, dtype=np.int64),
        out,
    )
    return out.reshape(out_shape)


@njit(cache=True, nogil=True)
def _sum_into_cells(
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
    while cut > 0 and row * shape[cut - 1] <= _ROW_CELLS:
        cut -= 1
        row *= int(shape[cut])
    codes = np.zeros(row, dtype=np.int64)
    filled = 1
    for a in range(last - 1, cut - 1, -1):
        for digit in range(1, shape[a]):
            for j in range(filled):
                codes[digit * filled + j] = codes[j] + digit * stride[a]
        filled *= shape[a]
    rows = 1
    for a in range(cut):
        rows *= shape[a]
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
        a = cut - 1  # the next row's base: a mixed-radix counter over the outer axes
        while a >= 0:
            digits[a] += 1
            base += stride[a]
            if digits[a] < shape[a]:
                break
            base -= digits[a] * stride[a]
            digits[a] = 0
            a -= 1
    if mask:
        for c in range(cells):
            out[c] = (sums[c] + sums[cells + c]) + (sums[2 * cells + c] + sums[3 * cells + c])


def broadcast_factor(shape: tuple[int, ...], axes: Sequence[int], factor: FloatArray) -> FloatArray:
    """A view of a clique table (axes in ``axes`` order) broadcastable to ``shape``."""
    axes = tuple(axes)
    order = np.argsort(axes)
    table = np.asarray(factor).transpose(order)
    expanded = [1] * len(shape)
    for a in sorted(axes):
        expanded[a] = shape[a]
    return table.reshape(expanded)


@dataclass(frozen=True)
class _ScalePlan:
    """How :func:`scale_by_clique` multiplies: the array viewed as rows of
    ``width`` cells, each multiplied by one row of a small factor table.

    A clique that ends before the domain's last ``>= _SCALE_ROW`` cells has a factor
    constant along that trailing run: each row is multiplied by one value, and
    ``index`` holds one cell per factor value. Otherwise the factor varies along
    the innermost axes and is expanded over the last axes of the domain until its
    rows have ``>= _SCALE_ROW`` cells (a table of at most ``_SCALE_ROW x cells(C)``
    values, gathered by ``index`` from the clique table in one ``take``). Rows,
    not cells, then carry the clique's other axes, so the compiled multiply
    (:func:`_scale_rows`) runs at about a copy's speed whatever the clique.
    NumPy's broadcasting multiply did not: a short broadcast row ran at half a
    copy's speed, and a trailing clique axis of 2 cells at a tenth.
    """

    #: The cells of one row: the array is viewed as ``(rows, width)``.
    width: int
    #: The factor table's cells in the clique table, shape ``(table rows, 1 or width)``.
    index: NDArray[np.intp]
    #: For each row of the array, the row of the gathered factor table it takes.
    rows: NDArray[np.intp]


#: The shortest row :func:`_scale_rows` multiplies (cells): a constant factor along a
#: trailing run at least this long is not expanded over it, a varying one is expanded
#: over the last axes until its rows are this long (measured on 2^10 to 2^20 binary
#: domains by benchmarks/histogram.py: shorter rows cost a loop turn each, longer
#: ones a larger gathered table).
_SCALE_ROW = 256
#: The largest factor table a scale plan keeps (cells); beyond it the plain broadcast runs.
_MAX_SCALE_TABLE = 2**18


@functools.lru_cache(maxsize=256)
def _scale_plan(shape: tuple[int, ...], axes: tuple[int, ...]) -> _ScalePlan | None:
    kept = frozenset(axes)
    after_clique = max(axes, default=-1) + 1
    constant_tail = math.prod(shape[after_clique:]) >= _SCALE_ROW
    if constant_tail:  # the factor does not vary along the last run: no expansion
        cut, tail = after_clique, math.prod(shape[after_clique:])
    else:
        cut, tail = len(shape), 1
        while cut > 0 and tail < _SCALE_ROW:
            cut -= 1
            tail *= shape[cut]
    expanded = tuple(shape[a] if a in kept else 1 for a in range(len(shape)))
    # The factor table's rows: the clique's cells among the axes before the row.
    head = expanded[:cut]
    inner = 1 if constant_tail else tail
    if math.prod(head) * inner > _MAX_SCALE_TABLE:
        return None
    # Each factor cell's position in the clique table (axes in ``axes`` order, C order).
    cells = np.arange(math.prod(shape[a] for a in axes), dtype=np.intp)
    ids = cells.reshape([shape[a] for a in axes]).transpose(np.argsort(axes)).reshape(expanded)
    # A varying factor is repeated over the dropped axes of its row; a constant one
    # (no clique axis from ``cut`` on: those axes of ``ids`` are 1) has one cell a row.
    wide = ids if constant_tail else np.broadcast_to(ids, head + shape[cut:])
    index = np.ascontiguousarray(wide).reshape(math.prod(head), inner)
    index.flags.writeable = False
    table_rows = np.arange(math.prod(head), dtype=np.intp).reshape(head)
    rows = np.ascontiguousarray(np.broadcast_to(table_rows, shape[:cut])).reshape(-1)
    rows.flags.writeable = False
    return _ScalePlan(width=tail, index=index, rows=rows)


@njit(cache=True, nogil=True)
def _scale_rows(values: FloatArray, rows: NDArray[np.intp], table: FloatArray) -> None:
    """``values[h, j] *= table[rows[h], j]`` (``j`` ranging over one column when
    ``table`` has one: a constant per row). One multiply per cell, as NumPy's, so the
    same bits; compiled because NumPy's broadcast of a short row over many rows runs
    at about half the speed of a copy."""
    width = values.shape[1]
    if table.shape[1] == 1:
        for h in range(values.shape[0]):
            scale = table[rows[h], 0]
            for j in range(width):
                values[h, j] *= scale
    else:
        for h in range(values.shape[0]):
            row = table[rows[h]]
            for j in range(width):
                values[h, j] *= row[j]


def scale_by_clique(array: FloatArray, axes: Sequence[int], factor: FloatArray) -> None:
    """In place ``array[x] *= factor[x_axes]`` (``factor``'s axes in ``axes`` order).

    Each cell is multiplied by exactly the factor value ``np.multiply`` with
    :func:`broadcast_factor` would use, so the result is the same bit for bit;
    only the loop layout differs (:class:`_ScalePlan`).
    """
    plan = _scale_plan(array.shape, tuple(axes)) if array.flags.c_contiguous else None
    if plan is None:
        np.multiply(array, broadcast_factor(array.shape, axes, factor), out=array)
        return
    table = np.take(np.asarray(factor, dtype=np.float64).reshape(-1), plan.index)
    _scale_rows(array.reshape(-1, plan.width), plan.rows, table)


#: The largest marginal a :class:`MarginalCache` keeps (cells), and the most it keeps
#: in all by default (8 MiB): on a small universe every small marginal of a long
#: stream stays (the 6,370 cliques of 3 to 6 of Adult's 14 binary attributes hold
#: about 2^18 cells), where a budget of the histogram's own size (2^14 cells) kept a
#: few hundred and the rounds recomputed the rest (issue 18).
CACHED_MARGINAL_CELLS = 4096
CACHED_MARGINAL_TOTAL = 2**20


class MarginalCache:
    """Marginals of one array of values, by clique, while the values stay as they are.

    Kept in sorted-axis order: the marginal of a clique in any order is the sorted
    one transposed, bit for bit (:func:`_planned_marginal` depends on the set of
    kept axes only). Only tables of at most :data:`CACHED_MARGINAL_CELLS` cells are
    kept, at most ``budget`` cells in all (the oldest go first). The owner clears it
    whenever it changes its values in place.
    """

    def __init__(self, budget: int = CACHED_MARGINAL_TOTAL) -> None:
        budget = min(max(budget, CACHED_MARGINAL_CELLS), CACHED_MARGINAL_TOTAL)
        self._tables: CellBudgetCache[tuple[int, ...], FloatArray] = CellBudgetCache(budget)

    def clear(self) -> None:
        """Forgets every table (the owner's values have changed)."""
        self._tables.clear()

    def marginal(self, values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
        """The marginal of ``values`` (C-contiguous float64) on distinct ``axes``, in
        their order: a fresh array, bit for bit :func:`_planned_marginal`'s for the
        sorted axes, transposed."""
        table = self.table(values, axes)
        return table if table.flags.writeable else table.copy()

    def table(self, values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
        """:meth:`marginal`, without its copy where it can be spared: read-only (and
        then possibly the cache's own table) or fresh and writeable. For readers that
        only read it, such as a round's clique table."""
        key = tuple(sorted(axes))
        table = self._tables.get(key)
        if table is None:
            table = _planned_marginal(values, key)
            if table.size <= CACHED_MARGINAL_CELLS:
                table.flags.writeable = False
                self._tables.put(key, table, table.size)
        if key == axes:
            return table
        # As _planned_marginal transposes (a 0-d table never gets here: key == axes).
        # A copy, also when the transpose is already contiguous (size-1 axes).
        return np.array(table.transpose(tuple(key.index(a) for a in axes)), order="C")


def _checked_total(domain: Domain, values: FloatArray) -> float:
    """The total of histogram ``values`` of ``domain``'s shape, finite, non-negative, positive."""
    if values.shape != domain.shape:
        raise ValueError(
            f"Histogram values have shape {values.shape}, the domain needs {domain.shape}."
        )
    # A NaN, an infinity or a negative value shows in the sum or the minimum;
    # unlike isfinite(values), neither makes a temporary array of |X| cells.
    total = float(values.sum())
    if not (math.isfinite(total) and float(values.min()) >= 0):
        raise ValueError("Histogram values must be finite and non-negative.")
    if total <= 0:
        raise ValueError(f"Histogram must have positive mass, got total={total}.")
    return total


class DenseHistogram:
    """A dense float64 histogram: one cell per element of the universe.

    Memory is ``8 |X|`` bytes; suitable up to ``|X|`` of a few times ``10^8`` cells.
    """

    def __init__(self, domain: Domain, values: FloatArray) -> None:
        values = np.asarray(values, dtype=np.float64)
        self._hold(domain, values / _checked_total(domain, values))

    def _hold(self, domain: Domain, values: FloatArray) -> None:
        self.domain = domain
        self._values = values
        self._axes_cache: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._marginals = MarginalCache()

    @classmethod
    def from_normalized(
        cls, domain: Domain, values: FloatArray, *, copy: bool = True
    ) -> DenseHistogram:
        """A histogram holding ``values`` exactly, for values already summing to one.

        The constructor divides by the total, which can move the last bit of a
        histogram that was normalised before (a snapshot read back from JSON), and
        with it every later answer. This keeps the values as they are; they are
        still checked, and must sum to one within float64 rounding. With
        ``copy=False`` the histogram takes ``values`` over (a float64 array the
        caller no longer uses, such as a fit's buffer), so no second array is made.
        """
        exact = np.array(values, dtype=np.float64) if copy else np.asarray(values, np.float64)
        total = _checked_total(domain, exact)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"values must sum to one, got {total}.")
        histogram = cls.__new__(cls)
        histogram._hold(domain, exact)
        return histogram

    @classmethod
    def uniform(cls, domain: Domain) -> DenseHistogram:
        """The uniform histogram, the paper's ``Dhat_1``."""
        return cls(domain, np.full(domain.shape, 1.0 / domain.size))

    @classmethod
    def from_records(
        cls, domain: Domain, records: NDArray[np.integer], *, weights: FloatArray | None = None
    ) -> DenseHistogram:
        """The empirical histogram of integer-coded ``records`` (shape ``(n, m)``)."""
        records = np.asarray(records)
        if records.ndim != 2 or records.shape[1] != len(domain):
            raise ValueError(f"records must have shape (n, {len(domain)}), got {records.shape}.")
        if records.shape[0] == 0:
            raise ValueError("Cannot build a histogram from zero records.")
        flat = np.ravel_multi_index(tuple(records.T), domain.shape)
        counts = np.bincount(flat, weights=weights, minlength=domain.size).astype(np.float64)
        return cls(domain, counts.reshape(domain.shape))

    def _axes(self, attrs: Sequence[str]) -> tuple[int, ...]:
        """``domain.axes(attrs)``, checked distinct and cached per clique (the engine
        repeats cliques)."""
        key = tuple(attrs)
        axes = self._axes_cache.get(key)
        if axes is None:
            axes = self.domain.axes(key)
            if len(set(axes)) != len(axes):
                raise ValueError(f"Marginal axes must be distinct, got {axes}.")
            if len(self._axes_cache) > 4096:
                self._axes_cache.clear()
            self._axes_cache[key] = axes
        return axes

    def marginal(self, attrs: Sequence[str]) -> FloatArray:
        """The marginal on ``attrs`` (axes in ``attrs`` order; a fresh array).

        Small marginals are kept per clique until the values change
        (:class:`MarginalCache`): below-threshold rounds leave the hypothesis as it
        is and ask for the same cliques again.
        """
        return self._marginals.marginal(self._values, self._axes(attrs))

    def reweight(
        self, attrs: Sequence[str], log_factor: FloatArray, *, marginal: FloatArray | None = None
    ) -> None:
        """In place ``D(x) <- D(x) exp(log_factor[x_C]) / Z``.

        ``Z = sum_{x_C} D_C(x_C) exp(log_factor(x_C))`` is computed on the clique
        from ``marginal`` (the current marginal on ``attrs``, if the caller has it)
        so that the update is a single pass. ``log Z`` is a ``logsumexp`` over the
        cells that carry mass, so ``exp`` never overflows there and ``Z`` never
        underflows to zero (a zero-mass cell holding the global maximum would
        otherwise flush every other factor to zero).
        """
        axes = self._axes(attrs)
        log_factor = np.asarray(log_factor, dtype=np.float64)
        expected = tuple([self.domain.shape[a] for a in axes])
        if log_factor.shape != expected:
            raise ValueError(f"log_factor has shape {log_factor.shape}, expected {expected}.")
        if not np.isfinite(log_factor).all():
            raise ValueError("log_factor must be finite.")
        if marginal is None:
            marginal = self.marginal(attrs)
        marginal = np.asarray(marginal, dtype=np.float64)
        if marginal.shape != expected:
            raise ValueError(f"marginal has shape {marginal.shape}, expected {expected}.")
        support = marginal > 0
        carried = bool(support.any())
        if carried:
            # log Z = logsumexp(log D_C + log_factor) over the cells with mass: the
            # factor exp(log_factor - log Z) is normalised in log space, so neither a
            # tiny Z (dividing by it overflows) nor a product below float64's normal
            # range (it loses digits) occurs on a cell that carries mass.
            log_z = logsumexp(np.log(marginal[support]) + log_factor[support])
        else:
            log_z = float(log_factor.max())
        exponent = log_factor - log_z
        # A cell's new mass is its mass times exp(exponent) <= 1, so on a cell with mass
        # the exponent exceeds MAX_LOG_SCALE only when that mass is below e^-700 (it is
        # taking nearly all of it): then the scale is applied in two steps, the second
        # a constant. Cells without mass may hold any factor: capped, it cannot overflow.
        top = float(exponent[support].max()) if carried else 0.0
        head = max(0.0, top - MAX_LOG_SCALE)
        self._marginals.clear()  # the values change in place below
        scale_by_clique(self._values, axes, np.exp(np.minimum(exponent - head, MAX_LOG_SCALE)))
        if head > 0.0:
            self._values *= math.exp(head)

    def clique_table(self, attrs: Sequence[str]) -> CliqueTable:
        """The marginal in its clique's form (:meth:`CliqueTable.of_marginal`), read-only:
        its mass may be the marginal cache's own table (no copy)."""
        table = self._marginals.table(self._values, self._axes(attrs))
        table.flags.writeable = False
        return CliqueTable.of_marginal(table)

    def reweight_table(
        self, attrs: Sequence[str], table: CliqueTable, log_factor: FloatArray
    ) -> None:
        """:meth:`reweight` by a factor on ``table``'s cells; a sparse table's absent
        cells carry no mass, so their factor (0) changes nothing."""
        factor = np.zeros(table.shape)
        factor.reshape(-1)[slice(None) if table.codes is None else table.codes] = np.ravel(
            log_factor
        )
        self.reweight(attrs, factor, marginal=table.table())

    def normalize(self) -> None:
        """Re-normalises to total mass one (removes accumulated rounding)."""
        self._marginals.clear()
        self._values /= self._values.sum()

    def sample(self, n: int, *, rng: np.random.Generator) -> NDArray[np.int64]:
        if n < 0:
            raise ValueError(f"n must be non-negative, got n={n}.")
        cdf = np.cumsum(self._values.reshape(-1))
        idx = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        idx = np.minimum(idx, cdf.size - 1)
        return np.stack(np.unravel_index(idx, self.domain.shape), axis=1).astype(np.int64)

    def to_array(self) -> FloatArray:
        return self._values.copy()

    def copy(self) -> DenseHistogram:
        """An independent copy, normalised as the constructor does (``values / total``).

        The values are already checked, so only the two passes that define the
        copy's numbers remain: the sum and the division into a new array.
        """
        copied = DenseHistogram.__new__(DenseHistogram)
        copied.domain = self.domain
        copied._axes_cache = self._axes_cache  # same domain: shared
        copied._values = self._values / float(self._values.sum())
        copied._marginals = MarginalCache()  # other values: none carry over
        return copied
