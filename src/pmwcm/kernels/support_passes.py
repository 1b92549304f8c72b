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

:class:`ChildDraws` is the proposal's inverse-CDF draw of a child attribute
given its parent's codes, again without an ``M x |child|`` temporary.
Sums run in record order, so a pass gives the same floats on every machine
up to the order NumPy's ``bincount`` would have used (the same order).
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain

__all__ = [
    "ChildDraws",
    "CliqueLayout",
    "clique_marginals",
    "columns_of",
    "descent_step",
    "map_chunks",
    "pass_chunks",
    "pass_pool",
]

FloatArray = NDArray[np.float64]
Columns = NDArray[np.integer]
Result = TypeVar("Result")


class CliqueLayout:
    """``K`` cliques laid out for the passes: their axes and sizes, flattened, and where
    each clique's table starts in one flat array of all the tables.

    Args:
        domain: the universe.
        cliques: each a tuple of attribute names (any length).
    """

    def __init__(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> None:
        self.attributes = len(domain)
        axes = [domain.axes(c) for c in cliques]
        self.shapes = [tuple(domain.shape[a] for a in ax) for ax in axes]
        self.axes = np.array([a for ax in axes for a in ax], dtype=np.int64)
        self.sizes = np.array([s for shape in self.shapes for s in shape], dtype=np.int64)
        self.starts = np.cumsum([0] + [len(ax) for ax in axes]).astype(np.int64)
        cells = [int(np.prod(shape, dtype=np.int64)) for shape in self.shapes]
        self.offsets = np.cumsum([0, *cells]).astype(np.int64)

    @property
    def width(self) -> int:
        """Attributes of the widest clique (0 without cliques)."""
        return max((len(shape) for shape in self.shapes), default=0)

    def pairs(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Each clique as ``(first axis, second axis, second's size)``: its cell code is
        ``x[first] * size + x[second]``, a one-way clique's second axis being the zero
        slot ``m`` (the pair passes: the priors measure one- and two-way cliques).

        Raises:
            ValueError: a clique of three or more attributes (:meth:`horner` takes it).
        """
        if self.width > 2:
            raise ValueError("the pair passes take cliques of one or two attributes.")
        first, second, stride = [], [], []
        for k in range(len(self.shapes)):
            axes = self.axes[self.starts[k] : self.starts[k + 1]]
            sizes = self.sizes[self.starts[k] : self.starts[k + 1]]
            first.append(int(axes[0]))
            second.append(int(axes[1]) if len(axes) == 2 else self.attributes)
            stride.append(int(sizes[1]) if len(axes) == 2 else 1)
        return tuple(np.array(v, dtype=np.int64) for v in (first, second, stride))  # type: ignore[return-value]

    def horner(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Every clique as ``(axes, sizes)`` rows of :attr:`width` entries, for cliques of any
        length: its cell code is Horner's ``c = c * sizes[j] + x[axes[j]]`` over the row, a
        shorter clique padded in front with the zero slot ``m`` and size 1 (which leave
        ``c`` at 0)."""
        width = max(self.width, 1)
        axes = np.full((len(self.shapes), width), self.attributes, dtype=np.int64)
        sizes = np.ones((len(self.shapes), width), dtype=np.int64)
        for k in range(len(self.shapes)):
            begin, end = int(self.starts[k]), int(self.starts[k + 1])
            axes[k, width - (end - begin) :] = self.axes[begin:end]
            sizes[k, width - (end - begin) :] = self.sizes[begin:end]
        return axes, sizes

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
    first: NDArray[np.int64],
    second: NDArray[np.int64],
    stride: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: FloatArray,
    begin: int,
    end: int,
) -> float:
    total = 0.0
    m = columns.shape[0]
    record = np.zeros(m + 1, dtype=np.int64)  # slot m stays 0: a one-way clique's partner
    for i in range(begin, end):
        p = np.exp(log_w[i] - shift)
        total += p
        for a in range(m):
            record[a] = columns[a, i]
        for k in range(first.size):
            out[offsets[k] + record[first[k]] * stride[k] + record[second[k]]] += p
    return total


@njit(cache=True, nogil=True)
def _step(
    columns: Columns,
    log_w: FloatArray,
    residuals: FloatArray,
    step: float,
    shift: float,
    first: NDArray[np.int64],
    second: NDArray[np.int64],
    stride: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: FloatArray,
    tables: FloatArray,
    begin: int,
    end: int,
) -> tuple[float, float]:
    top = -np.inf
    total = 0.0
    m = columns.shape[0]
    record = np.zeros(m + 1, dtype=np.int64)
    cells = np.empty(first.size, dtype=np.int64)
    for i in range(begin, end):
        for a in range(m):
            record[a] = columns[a, i]
        g = 0.0
        for k in range(first.size):
            cells[k] = offsets[k] + record[first[k]] * stride[k] + record[second[k]]
            g += residuals[cells[k]]
        value = log_w[i] - step * g
        out[i] = value
        if value > top:
            top = value
        p = np.exp(value - shift)
        total += p
        for k in range(first.size):
            tables[cells[k]] += p
    return top, total


@njit(cache=True, nogil=True)
def _marginals_wide(
    columns: Columns,
    log_w: FloatArray,
    shift: float,
    axes: NDArray[np.int64],
    sizes: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: FloatArray,
    begin: int,
    end: int,
) -> float:
    total = 0.0
    m = columns.shape[0]
    record = np.zeros(m + 1, dtype=np.int64)  # slot m stays 0: the padding's axis
    cliques, width = axes.shape
    for i in range(begin, end):
        p = np.exp(log_w[i] - shift)
        total += p
        for a in range(m):
            record[a] = columns[a, i]
        for k in range(cliques):
            code = 0
            for j in range(width):
                code = code * sizes[k, j] + record[axes[k, j]]
            out[offsets[k] + code] += p
    return total


@njit(cache=True, nogil=True)
def _step_wide(
    columns: Columns,
    log_w: FloatArray,
    residuals: FloatArray,
    step: float,
    shift: float,
    axes: NDArray[np.int64],
    sizes: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: FloatArray,
    tables: FloatArray,
    begin: int,
    end: int,
) -> tuple[float, float]:
    top = -np.inf
    total = 0.0
    m = columns.shape[0]
    record = np.zeros(m + 1, dtype=np.int64)
    cliques, width = axes.shape
    cells = np.empty(cliques, dtype=np.int64)
    for i in range(begin, end):
        for a in range(m):
            record[a] = columns[a, i]
        g = 0.0
        for k in range(cliques):
            code = 0
            for j in range(width):
                code = code * sizes[k, j] + record[axes[k, j]]
            cells[k] = offsets[k] + code
            g += residuals[cells[k]]
        value = log_w[i] - step * g
        out[i] = value
        if value > top:
            top = value
        p = np.exp(value - shift)
        total += p
        for k in range(cliques):
            tables[cells[k]] += p
    return top, total


def _kernels(layout: CliqueLayout) -> tuple[Any, Any, tuple[NDArray[np.int64], ...]]:
    """The marginal and step kernels for ``layout`` and their clique arguments: the pair
    kernels where every clique has one or two attributes (the priors' cliques; a
    cell code of one multiply-add), the Horner kernels otherwise (measured updates'
    and announced cliques: 1.3-1.5x slower per record-clique visit on pairs)."""
    if layout.width <= 2:
        return _marginals, _step, (*layout.pairs(), layout.offsets)
    return _marginals_wide, _step_wide, (*layout.horner(), layout.offsets)


#: Records below which a pass runs as one chunk (measured at ``M = 2^16`` on a quiet
#: machine: four chunks there build 1.4x faster and answer as fast as one;
#: benchmarks/README.md, issue 37 item 3).
CHUNK_MIN_RECORDS = 2**16
#: Chunks a larger pass is cut into (fixed, so that its sums do not depend on the machine).
PASS_CHUNKS = 4


def pass_chunks(size: int) -> list[tuple[int, int]]:
    """``[begin, end)`` ranges cutting ``size`` records into the passes' fixed chunks."""
    count = 1 if size < CHUNK_MIN_RECORDS else PASS_CHUNKS
    edges = [size * c // count for c in range(count + 1)]
    return list(itertools.pairwise(edges))


@functools.cache
def pass_pool() -> ThreadPoolExecutor:
    """Threads for the chunks (the kernels release the GIL)."""
    return ThreadPoolExecutor(max_workers=min(PASS_CHUNKS, os.cpu_count() or 1))


def map_chunks(
    run: Callable[[tuple[int, int]], Result], chunks: list[tuple[int, int]]
) -> list[Result]:
    """``run`` of every chunk, in chunk order: on the passes' threads where there are
    several, in this thread where there is one (a small support's pass takes
    microseconds; the hop to a pool thread and back cost more than the pass, and made
    the support audits' fits three quarters waiting)."""
    if len(chunks) == 1:
        return [run(chunks[0])]
    return list(pass_pool().map(run, chunks))


def clique_marginals(
    columns: Columns, log_w: FloatArray, layout: CliqueLayout, *, shift: float = 0.0
) -> tuple[FloatArray, float]:
    """Every clique's table of ``exp(w - shift)`` (flat, :class:`CliqueLayout`) and their total.

    With ``w`` normalised and ``shift = 0`` these are the marginals themselves. A large
    support is cut into :data:`PASS_CHUNKS` chunks, each summed into its own tables on
    its own thread, then added in chunk order.
    """
    marginals, _, cliques = _kernels(layout)

    def run(chunk: tuple[int, int]) -> tuple[FloatArray, float]:
        out = np.zeros(layout.cells)
        total = marginals(columns, log_w, shift, *cliques, out, *chunk)
        return out, float(total)

    parts = map_chunks(run, pass_chunks(log_w.size))
    out, total = parts[0]
    for more, subtotal in parts[1:]:
        out += more
        total += subtotal
    return out, total


def descent_step(
    columns: Columns,
    log_w: FloatArray,
    residuals: FloatArray,
    layout: CliqueLayout,
    step: float,
    *,
    shift: float,
) -> tuple[FloatArray, float, FloatArray, float]:
    """One pass: ``w' = w - step * g`` (a new array) with ``g_i = sum_k r_k(x_{i,C_k})``
    for the flat residual tables ``residuals``, its maximum, and every clique's table of
    ``exp(w' - shift)`` with their total (:func:`clique_marginals` of ``w'``, in the same
    pass). ``shift`` must bound ``w'`` from above (no ``exp`` overflows); a bound far
    above the maximum underflows the tables, which the caller sees from the maximum."""
    out = np.empty_like(log_w)
    _, step_kernel, cliques = _kernels(layout)

    def run(chunk: tuple[int, int]) -> tuple[float, FloatArray, float]:
        tables = np.zeros(layout.cells)
        top, total = step_kernel(
            columns, log_w, residuals, float(step), float(shift), *cliques, out, tables, *chunk
        )
        return float(top), tables, float(total)

    parts = map_chunks(run, pass_chunks(log_w.size))
    top, tables, total = parts[0]
    for more_top, more, subtotal in parts[1:]:
        top = max(top, more_top)
        tables += more
        total += subtotal
    return out, top, tables, total


@njit(cache=True, nogil=True)
def _guides(cdf: FloatArray) -> NDArray[np.int64]:
    """``guide[r, j]``: the first value ``v < last`` with ``cdf[r, v] >= j / G`` (``last``
    if none), for the ``G`` values of a row (Chen, Asau 1974)."""
    rows, values = cdf.shape
    last = values - 1
    guide = np.empty((rows, values), dtype=np.int64)
    for r in range(rows):
        v = 0
        for j in range(values):
            while v < last and cdf[r, v] < j / values:
                v += 1
            guide[r, j] = v
    return guide


@njit(cache=True, nogil=True)
def _draw(
    parents: Columns, cdf: FloatArray, guide: NDArray[np.int64], uniforms: FloatArray, out: Columns
) -> None:
    # The guide table sends u to the first value whose CDF reaches the bucket's lower
    # edge j / G <= u, at or before the value sought; the scan from there takes about
    # two steps (a binary search takes log2 G dependent loads).
    values = cdf.shape[1]
    last = values - 1
    for i in range(uniforms.size):
        row = parents[i]
        u = uniforms[i]
        j = min(int(u * values), last)
        if j / values > u:  # u * G rounded up past the bucket u lies in
            j -= 1
        v = guide[row, j]
        # The first value whose CDF reaches u (side="left"), the last one for rounding.
        while v < last and cdf[row, v] < u:
            v += 1
        out[i] = v


class ChildDraws:
    """Inverse-CDF draws from the rows of one conditional table ``cdf`` (shape
    ``(parent values, child values)``, each row nondecreasing): its guide table is
    built once, then :meth:`draw` serves any number of chunks, on any thread."""

    def __init__(self, cdf: FloatArray) -> None:
        self.cdf = np.ascontiguousarray(cdf, dtype=np.float64)
        self.guide = _guides(self.cdf)

    def draw(self, parents: Columns, uniforms: FloatArray, out: Columns) -> None:
        """``out[i]``: the first value ``v`` with ``cdf[parents[i], v] >= uniforms[i]``
        (the last value if none), in place; releases the GIL."""
        _draw(parents, self.cdf, self.guide, uniforms, out)
