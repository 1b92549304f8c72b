"""Multiplying a dense C-ordered table by a factor that depends on one clique:
``D(x) <- D(x) f(x_C)``, the multiplicative-weights update's inner loop.

:func:`scale_by_clique` multiplies each cell by exactly the value NumPy's
broadcasting multiply with :func:`broadcast_factor` would use (the same bits),
with a loop layout that runs at about a copy's speed whatever the clique
(:class:`_ScalePlan`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import FloatArray


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
