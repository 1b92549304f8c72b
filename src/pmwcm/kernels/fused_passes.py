"""The compiled passes of :class:`~pmwcm.kernels.fused_marginals.FusedMarginals`.

A plan is a list of steps, each summing one table of a work buffer onto some of
its axes into another table of it (:mod:`pmwcm.kernels.fused_marginals` says
which and why). :func:`forward_pass` runs them in order from the histogram to
the clique tables; :func:`adjoint_pass` runs their adjoints in reverse, each
adding a table's values to every cell of its source that sums into them. A step
whose kept axes lead (or trail) its source's is a sum of contiguous runs (or
rows); any other goes through the cell codes of
:func:`~pmwcm.kernels.dense_marginal.sum_into_cells` (:func:`spread_from_cells`
for its adjoint). Loop bounds depend on the plan alone, never on the values.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import FloatArray
from pmwcm.kernels.dense_marginal import next_row_base, row_layout, sum_into_cells

# numba's cache keys a kernel on its own file only: after an edit to these helpers in
# dense_marginal.py, a working tree's cached forward/adjoint passes keep the old ones
# until its __pycache__/*.nbi and *.nbc are deleted (fresh installs are unaffected).

__all__ = ["LEADING", "SPREAD", "TRAILING", "adjoint_pass", "forward_pass", "spread_from_cells"]

IntArray = NDArray[np.int64]

#: How a step sums its source: onto its leading axes (contiguous runs of cells summed),
#: onto its trailing axes (contiguous rows added), or onto any axes
#: (:func:`~pmwcm.kernels.dense_marginal.sum_into_cells`).
LEADING, TRAILING, SPREAD = 0, 1, 2


@njit(cache=True, nogil=True)
def forward_pass(
    flat: FloatArray,
    out: FloatArray,
    work_cells: int,
    source: IntArray,
    source_cells: IntArray,
    target: IntArray,
    target_cells: IntArray,
    dims: IntArray,
    dims_at: IntArray,
    kept: IntArray,
    kept_at: IntArray,
    kind: IntArray,
) -> None:
    """Runs every step in order on a work buffer holding ``flat`` first; the clique
    tables (the ``out.shape[0]`` cells after ``flat``'s) go to ``out``."""
    cells = flat.shape[0]
    # np.empty, each target written or zeroed by its step: a zeroed buffer of this
    # size comes as fresh pages from the system on every call.
    work = np.empty(work_cells)
    work[:cells] = flat
    for i in range(source.shape[0]):
        src = work[source[i] : source[i] + source_cells[i]]
        dst = work[target[i] : target[i] + target_cells[i]]
        if kind[i] == LEADING:
            _sum_runs(src, dst)
        elif kind[i] == TRAILING:
            _sum_rows(src, dst)
        else:
            dst[:] = 0.0
            sum_into_cells(
                src, dims[dims_at[i] : dims_at[i + 1]], kept[kept_at[i] : kept_at[i + 1]], dst
            )
    out[:] = work[cells : cells + out.shape[0]]


@njit(cache=True, nogil=True)
def adjoint_pass(
    tables: FloatArray,
    out: FloatArray,
    work_cells: int,
    source: IntArray,
    source_cells: IntArray,
    target: IntArray,
    target_cells: IntArray,
    dims: IntArray,
    dims_at: IntArray,
    kept: IntArray,
    kept_at: IntArray,
    kind: IntArray,
) -> None:
    """The steps backwards: each target's values are added to every source cell that
    sums into them, from the clique tables (``tables``) back to the histogram (``out``)."""
    work = np.empty(work_cells)
    cells = out.shape[0]
    work[:cells] = 0.0
    work[cells : cells + tables.shape[0]] = tables
    work[cells + tables.shape[0] :] = 0.0
    for i in range(source.shape[0] - 1, -1, -1):
        src = work[source[i] : source[i] + source_cells[i]]
        dst = work[target[i] : target[i] + target_cells[i]]
        if kind[i] == LEADING:
            _spread_runs(src, dst)
        elif kind[i] == TRAILING:
            _spread_rows(src, dst)
        else:
            spread_from_cells(
                src, dims[dims_at[i] : dims_at[i + 1]], kept[kept_at[i] : kept_at[i + 1]], dst
            )
    out[:] = work[: out.shape[0]]


@njit(cache=True, nogil=True)
def _sum_runs(src: FloatArray, dst: FloatArray) -> None:
    """``dst[r]`` = the sum of the ``r``-th run of ``len(src) / len(dst)`` cells of ``src``
    (the trailing axes summed out), runs of two added directly (vectorised) and longer
    ones in four interleaved sums."""
    run = src.shape[0] // dst.shape[0]
    if run == 2:
        for r in range(dst.shape[0]):
            dst[r] = src[2 * r] + src[2 * r + 1]
        return
    for r in range(dst.shape[0]):
        cells = src[r * run : (r + 1) * run]
        a0 = a1 = a2 = a3 = 0.0
        k = 0
        while k + 4 <= run:
            a0 += cells[k]
            a1 += cells[k + 1]
            a2 += cells[k + 2]
            a3 += cells[k + 3]
            k += 4
        while k < run:
            a0 += cells[k]
            k += 1
        dst[r] = (a0 + a1) + (a2 + a3)


@njit(cache=True, nogil=True)
def _sum_rows(src: FloatArray, dst: FloatArray) -> None:
    """``dst`` = the sum of the rows of ``len(dst)`` cells of ``src`` (the leading axes
    summed out), one row slice at a time (a slice, not ``src[r * w + j]``, lets the
    compiler vectorise the add: 2-3 us for 2^14 cells against 8)."""
    width = dst.shape[0]
    dst[:] = src[:width]
    for r in range(1, src.shape[0] // width):
        row = src[r * width : (r + 1) * width]
        for j in range(width):
            dst[j] += row[j]


@njit(cache=True, nogil=True)
def _spread_runs(src: FloatArray, dst: FloatArray) -> None:
    """The adjoint of :func:`_sum_runs`: ``dst[r]`` added to every cell of run ``r``."""
    run = src.shape[0] // dst.shape[0]
    if run == 2:
        for r in range(dst.shape[0]):
            src[2 * r] += dst[r]
            src[2 * r + 1] += dst[r]
        return
    for r in range(dst.shape[0]):
        cells = src[r * run : (r + 1) * run]
        value = dst[r]
        for k in range(run):
            cells[k] += value


@njit(cache=True, nogil=True)
def _spread_rows(src: FloatArray, dst: FloatArray) -> None:
    """The adjoint of :func:`_sum_rows`: ``dst`` added to every row of ``src``."""
    width = dst.shape[0]
    for r in range(src.shape[0] // width):
        row = src[r * width : (r + 1) * width]
        for j in range(width):
            row[j] += dst[j]


@njit(cache=True, nogil=True)
def spread_from_cells(flat: FloatArray, shape: IntArray, axes: IntArray, table: FloatArray) -> None:
    """``flat[x] += table[code(x)]`` for every cell ``x`` of a C-ordered ``shape``: the
    adjoint of :func:`~pmwcm.kernels.dense_marginal.sum_into_cells` (``code`` as there:
    ``code(x) = sum_a x_a stride_a``, ``stride_a = 0`` for an axis not in ``axes``).

    Laid out as that pass is (:func:`~pmwcm.kernels.dense_marginal.row_layout`): the
    trailing run of axes outside ``axes`` (``post`` contiguous cells) takes one value;
    the innermost axes up to ``_ROW_CELLS`` cells before it go through a table of their
    codes, and a mixed-radix counter over the outer axes gives each row's base code.
    """
    stride, _, post, cut, row, rows, codes = row_layout(shape, axes)
    digits = np.zeros(max(cut, 1), dtype=np.int64)
    base = 0
    width = row * post
    for r in range(rows):
        start = r * width
        if post == 1:
            for j in range(row):
                flat[start + j] += table[base + codes[j]]
        else:
            for j in range(row):
                value = table[base + codes[j]]
                first = start + j * post
                for k in range(post):
                    flat[first + k] += value
        base = next_row_base(digits, shape, stride, base, cut)
