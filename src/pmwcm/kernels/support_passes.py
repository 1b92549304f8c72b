"""Streaming passes over a support's column-major codes: the prior fit and proposal at scale.

A support of ``M`` records on ``m`` attributes is kept as ``m`` code columns of
``M`` bytes each (:func:`columns_of`). The prior's fit
(:func:`pmwcm.mechanisms.priors.support.fit_support`) needs, per iteration,
every measured clique's marginal ``Dhat_{C_k} = sum_i p_i [x_{i,C_k} = c]`` and
every record's gradient ``g_i = sum_k r_k(x_{i,C_k})``. Done one clique at a
time with NumPy, each needs an ``M``-long code array and an ``M``-long gather
(``K`` of them, or a cache of codes as large as the hypothesis itself). Here
each is **one pass over the records** that reads the ``m`` code columns and
the log-weights once and touches all ``K`` small tables per record:

* :func:`clique_marginals`: ``out[off_k + c_k(i)] += exp(w_i - shift)`` for
  every clique ``k``, and the total ``sum_i exp(w_i - shift)``;
* :func:`descent_step`: ``w'_i = w_i - s g_i`` and ``max_i w'_i``.

A record's cell code on a clique is computed on the fly by Horner's rule from
its columns (the same C-order code as :func:`~pmwcm.kernels.clique_table.cell_codes`),
so no pass allocates anything proportional to ``M``: the working memory of a
fit is the weights it keeps (``w`` and one trial ``w'``) and the columns.

:func:`draw_children` is the proposal's inverse-CDF draw of a child attribute
given its parent's codes, again without an ``M x |child|`` temporary.
Sums run in record order, so a pass gives the same floats on every machine
up to the order NumPy's ``bincount`` would have used (the same order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain

__all__ = [
    "CliqueLayout",
    "clique_marginals",
    "columns_of",
    "descent_step",
    "draw_children",
]

FloatArray = NDArray[np.float64]
Columns = NDArray[np.integer]


class CliqueLayout:
    """``K`` cliques laid out for the passes: their axes and sizes, flattened, and where
    each clique's table starts in one flat array of all the tables.

    Args:
        domain: the universe.
        cliques: each a tuple of attribute names (any length).
    """

    def __init__(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> None:
        axes = [domain.axes(c) for c in cliques]
        self.shapes = [tuple(domain.shape[a] for a in ax) for ax in axes]
        self.axes = np.array([a for ax in axes for a in ax], dtype=np.int64)
        self.sizes = np.array([s for shape in self.shapes for s in shape], dtype=np.int64)
        self.starts = np.cumsum([0] + [len(ax) for ax in axes]).astype(np.int64)
        cells = [int(np.prod(shape, dtype=np.int64)) for shape in self.shapes]
        self.offsets = np.cumsum([0, *cells]).astype(np.int64)

    @property
    def cells(self) -> int:
        """Cells of all the tables together."""
        return int(self.offsets[-1])

    def split(self, flat: FloatArray) -> list[FloatArray]:
        """The flat tables as one array per clique, in its shape (views)."""
        return [
            flat[self.offsets[k] : self.offsets[k + 1]].reshape(shape)
            for k, shape in enumerate(self.shapes)
        ]

    def join(self, tables: Sequence[FloatArray]) -> FloatArray:
        """The tables as one flat array (the inverse of :meth:`split`)."""
        return np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in tables])


def columns_of(records: NDArray[np.integer]) -> Columns:
    """``records`` (shape ``(M, m)``) as ``m`` contiguous code columns, shape ``(m, M)``:
    a view when the records are column-major already (as the proposal makes them),
    else one copy."""
    return np.asarray(records).T if np.isfortran(records) else np.ascontiguousarray(records.T)


@njit(cache=True, nogil=True)
def _marginals(
    columns: Columns,
    log_w: FloatArray,
    shift: float,
    axes: NDArray[np.int64],
    sizes: NDArray[np.int64],
    starts: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: FloatArray,
) -> float:
    total = 0.0
    cliques = starts.size - 1
    record = np.empty(columns.shape[0], dtype=np.int64)
    for i in range(log_w.size):
        p = np.exp(log_w[i] - shift)
        total += p
        for a in range(columns.shape[0]):
            record[a] = columns[a, i]
        for k in range(cliques):
            code = 0
            for j in range(starts[k], starts[k + 1]):
                code = code * sizes[j] + record[axes[j]]
            out[offsets[k] + code] += p
    return total


@njit(cache=True, nogil=True)
def _step(
    columns: Columns,
    log_w: FloatArray,
    residuals: FloatArray,
    step: float,
    axes: NDArray[np.int64],
    sizes: NDArray[np.int64],
    starts: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: FloatArray,
) -> float:
    top = -np.inf
    cliques = starts.size - 1
    record = np.empty(columns.shape[0], dtype=np.int64)
    for i in range(log_w.size):
        g = 0.0
        for a in range(columns.shape[0]):
            record[a] = columns[a, i]
        for k in range(cliques):
            code = 0
            for j in range(starts[k], starts[k + 1]):
                code = code * sizes[j] + record[axes[j]]
            g += residuals[offsets[k] + code]
        value = log_w[i] - step * g
        out[i] = value
        if value > top:
            top = value
    return top


def clique_marginals(
    columns: Columns, log_w: FloatArray, layout: CliqueLayout, *, shift: float = 0.0
) -> tuple[FloatArray, float]:
    """Every clique's table of ``exp(w - shift)`` (flat, :class:`CliqueLayout`) and their total.

    With ``w`` normalised and ``shift = 0`` these are the marginals themselves.
    """
    out = np.zeros(layout.cells)
    total = _marginals(
        columns, log_w, shift, layout.axes, layout.sizes, layout.starts, layout.offsets, out
    )
    return out, float(total)


def descent_step(
    columns: Columns,
    log_w: FloatArray,
    residuals: FloatArray,
    layout: CliqueLayout,
    step: float,
) -> tuple[FloatArray, float]:
    """``w - step * g`` (unnormalised, a new array) with ``g_i = sum_k r_k(x_{i,C_k})``
    for the flat residual tables ``residuals``, and its maximum."""
    out = np.empty_like(log_w)
    top = _step(
        columns,
        log_w,
        residuals,
        float(step),
        layout.axes,
        layout.sizes,
        layout.starts,
        layout.offsets,
        out,
    )
    return out, float(top)


@njit(cache=True, nogil=True)
def _draw(parents: Columns, cdf: FloatArray, uniforms: FloatArray, out: Columns) -> None:
    last = cdf.shape[1] - 1
    for i in range(uniforms.size):
        row = parents[i]
        u = uniforms[i]
        # The first value whose CDF reaches u (side="left"), the last one for rounding.
        low, high = 0, last
        while low < high:
            mid = (low + high) // 2
            if cdf[row, mid] < u:
                low = mid + 1
            else:
                high = mid
        out[i] = low


def draw_children(
    parents: Columns, cdf: FloatArray, uniforms: FloatArray, out: Columns
) -> None:
    """``out[i]``: the first value ``v`` with ``cdf[parents[i], v] >= uniforms[i]``
    (the last value if none): inverse-CDF draws from the rows of ``cdf``, in place."""
    _draw(parents, np.ascontiguousarray(cdf, dtype=np.float64), uniforms, out)
