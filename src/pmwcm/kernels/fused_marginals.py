"""Many cliques' marginals of one dense table in one compiled call, and the adjoint.

The dense entropic fit (:func:`pmwcm.mechanisms.priors.marginals.fit_histogram`)
takes every measured clique's marginal ``D_{C_k}`` at each step and multiplies
the histogram by ``exp(-s g)``, ``g(x) = sum_k r_k(x_{C_k})`` (the residuals
broadcast back); the workload start's selection
(:mod:`pmwcm.mechanisms.priors.workload`) takes every candidate clique's
marginal once a round. Taken one clique at a time on binary Adult (2^14 cells,
about 147 cliques a fit, about 2,900 candidates a round), these passes cost 20 s
of ``pmwcm run``'s 22 s at ``eps = 1`` on 10,000 queries: per clique about 11 us
of compiled pass over the 2^14 cells plus 17 us of Python and NumPy around it,
and the broadcast sum of ``g`` (1,900 steps of 147 broadcast adds) another 7 s.

**One plan, one call** (:class:`FusedMarginals`). Every clique's marginal is
summed from the *smallest* table already computed that holds its attributes,
rather than from the histogram:

* a **window** ``[lo..hi]``, the marginal on the contiguous attributes
  ``lo..hi`` of the domain (``min C`` to ``max C``), itself summed from
  ``[lo..hi+1]`` (or ``[lo-1..d-1]``, or the histogram): each step of that
  chain drops one end attribute, so all windows of one start cost at most
  twice the largest of them, and all windows at most ``4 |X|`` cell reads on
  a binary domain;
* or another clique's marginal computed before it (cliques go largest first),
  whose attributes contain its own (a pair inside a measured 5-way clique: 32
  reads instead of its window's).

Each step is :func:`~pmwcm.kernels.dense_marginal.sum_into_cells` from its
source table, all of them in one compiled call (:func:`_forward`). The
adjoint (:func:`_adjoint`), ``g = sum_k B_k r_k`` with ``B_k`` the broadcast of
a clique table over the domain, runs the same steps backwards: each table's
accumulated values are added to every cell of its source that sums into them
(:func:`_spread_from_cells`), from the cliques back to the histogram. Only
the summation order differs from the per-clique passes (relative differences
of about ``1e-15``); the plan depends on the shape and the cliques alone.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import FloatArray
from pmwcm.kernels.dense_marginal import ROW_CELLS, row_codes, sum_into_cells

__all__ = ["FUSED_MAX_CELLS", "FusedMarginals", "fused_marginals"]

#: Dense tables of at most this many cells take their many-clique passes here (the
#: fit's steps, the selection's rounds); larger ones take them one clique at a time
#: (:func:`~pmwcm.kernels.dense_marginal.dense_marginal`'s planned passes).
FUSED_MAX_CELLS = 2**16

IntArray = NDArray[np.int64]

#: Cliques of at most this many attributes offer their subsets as sources to the
#: smaller cliques after them (``2^|C|`` subsets each, registered once per plan).
_SUBSET_SOURCE_MAX_ATTRIBUTES = 8
#: How a step sums its source: onto its leading axes (contiguous runs of cells summed),
#: onto its trailing axes (contiguous rows added), or onto any axes
#: (:func:`~pmwcm.kernels.dense_marginal.sum_into_cells`).
_LEADING, _TRAILING, _SPREAD = 0, 1, 2


@dataclass(frozen=True)
class FusedMarginals:
    """A plan for the marginals of a list of cliques of one dense C-ordered ``shape``.

    The work buffer holds the histogram (cells ``0 .. |X|-1``), then every window
    a clique reads, then the clique tables in the order given, each C-ordered in
    its own axis order (:attr:`offsets`). Step ``i`` sums the table at
    ``source[i]`` (of shape ``dims[dims_at[i]:dims_at[i+1]]``) onto the axes
    ``kept[kept_at[i]:kept_at[i+1]]`` of that shape, into the table at
    ``target[i]``; a step's source comes before it.

    Attributes:
        shape: the histogram's shape.
        offsets: where each clique's table starts in :meth:`marginals`'s vector
            (one more entry: the vector's length).
        cost: cell reads a call makes (the steps' source sizes), for the record.
    """

    shape: tuple[int, ...]
    offsets: IntArray
    cost: int
    _work_cells: int
    _source: IntArray
    _source_cells: IntArray
    _target: IntArray
    _target_cells: IntArray
    _dims: IntArray
    _dims_at: IntArray
    _kept: IntArray
    _kept_at: IntArray
    _kind: IntArray

    def marginals(self, values: FloatArray) -> FloatArray:
        """Every clique's marginal of ``values`` (``shape``, float64), concatenated in
        order: ``out[offsets[k]:offsets[k+1]]`` is clique ``k``'s table, flattened."""
        flat = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        if flat.shape[0] != math.prod(self.shape):
            raise ValueError(f"values have {flat.shape[0]} cells, the plan's shape {self.shape}.")
        out = np.empty(int(self.offsets[-1]))
        _forward(flat, out, *self._steps())
        return out

    def spread(self, tables: FloatArray) -> FloatArray:
        """The adjoint of :meth:`marginals`: ``g(x) = sum_k t_k(x_{C_k})`` for the clique
        tables ``t_k`` concatenated as :meth:`marginals` gives them; shape ``shape``."""
        flat = np.ascontiguousarray(tables, dtype=np.float64).reshape(-1)
        if flat.shape[0] != int(self.offsets[-1]):
            raise ValueError(
                f"tables have {flat.shape[0]} cells, the plan's cliques {int(self.offsets[-1])}."
            )
        out = np.empty(math.prod(self.shape))
        _adjoint(flat, out, *self._steps())
        return out.reshape(self.shape)

    def _steps(
        self,
    ) -> tuple[
        int,
        IntArray,
        IntArray,
        IntArray,
        IntArray,
        IntArray,
        IntArray,
        IntArray,
        IntArray,
        IntArray,
    ]:
        return (
            self._work_cells,
            self._source,
            self._source_cells,
            self._target,
            self._target_cells,
            self._dims,
            self._dims_at,
            self._kept,
            self._kept_at,
            self._kind,
        )


class _Builder:
    """Collects :class:`FusedMarginals`'s tables and steps (see the module docstring)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        cells = math.prod(shape)
        # every table: (offset in the work buffer, its domain axes in its own order, cells)
        self.tables: list[tuple[int, tuple[int, ...], int]] = [(0, tuple(range(len(shape))), cells)]
        self.end = cells
        self.windows: dict[tuple[int, int], int] = {(0, len(shape) - 1): 0}
        # the steps, as the compiled calls take them (FusedMarginals' attributes)
        self.source: list[int] = []
        self.source_cells: list[int] = []
        self.target: list[int] = []
        self.target_cells: list[int] = []
        self.dims: list[int] = []
        self.dims_at = [0]
        self.kept: list[int] = []
        self.kept_at = [0]
        self.kind: list[int] = []

    def add_table(self, axes: tuple[int, ...], offset: int | None = None) -> int:
        cells = math.prod(self.shape[a] for a in axes)
        if offset is None:
            offset, self.end = self.end, self.end + cells
        self.tables.append((offset, axes, cells))
        return len(self.tables) - 1

    def add_step(self, source: int, target: int) -> None:
        s_offset, s_axes, s_cells = self.tables[source]
        t_offset, t_axes, t_cells = self.tables[target]
        keep = tuple(s_axes.index(a) for a in t_axes)
        self.source.append(s_offset)
        self.source_cells.append(s_cells)
        self.target.append(t_offset)
        self.target_cells.append(t_cells)
        self.dims.extend(self.shape[a] for a in s_axes)
        self.dims_at.append(len(self.dims))
        self.kept.extend(keep)
        self.kept_at.append(len(self.kept))
        ndim = len(s_axes)
        if keep == tuple(range(len(keep))):
            self.kind.append(_LEADING)
        elif keep == tuple(range(ndim - len(keep), ndim)):
            self.kind.append(_TRAILING)
        else:
            self.kind.append(_SPREAD)

    def window(self, lo: int, hi: int) -> int:
        """The table of window ``[lo..hi]``, made (with the chain above it) on first use."""
        found = self.windows.get((lo, hi))
        if found is not None:
            return found
        # From the window one attribute wider on the left (its leading attribute summed
        # out: rows added, the faster pass), or for a prefix from one wider on the right.
        parent = self.window(lo - 1, hi) if lo > 0 else self.window(lo, hi + 1)
        table = self.add_table(tuple(range(lo, hi + 1)))
        self.add_step(parent, table)
        self.windows[(lo, hi)] = table
        return table

    def plan(self, offsets: IntArray) -> FusedMarginals:
        """The steps as read-only integer arrays for the compiled calls."""

        def packed(values: list[int]) -> IntArray:
            array = np.array(values, dtype=np.int64)
            array.flags.writeable = False
            return array

        offsets.flags.writeable = False
        return FusedMarginals(
            shape=self.shape,
            offsets=offsets,
            cost=sum(self.source_cells),
            _work_cells=self.end,
            _source=packed(self.source),
            _source_cells=packed(self.source_cells),
            _target=packed(self.target),
            _target_cells=packed(self.target_cells),
            _dims=packed(self.dims),
            _dims_at=packed(self.dims_at),
            _kept=packed(self.kept),
            _kept_at=packed(self.kept_at),
            _kind=packed(self.kind),
        )


@functools.lru_cache(maxsize=64)
def fused_marginals(shape: tuple[int, ...], cliques: tuple[tuple[int, ...], ...]) -> FusedMarginals:
    """The plan for the marginals on ``cliques`` (each a tuple of distinct axes of
    ``shape``, in the order its table's axes should have), cached per argument.

    Raises:
        ValueError: a clique repeats an axis or names one ``shape`` lacks.
    """
    d = len(shape)
    for clique in cliques:
        if len(set(clique)) != len(clique) or not all(0 <= a < d for a in clique):
            raise ValueError(f"clique axes must be distinct axes of {d}, got {clique}.")
    if d == 0:
        raise ValueError("the fused marginals need a shape of at least one axis.")
    build = _Builder(shape)
    sizes = [math.prod(shape[a] for a in c) for c in cliques]
    offsets = np.zeros(len(cliques) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes, dtype=np.int64)
    clique_start = build.end
    build.end += int(offsets[-1])
    # The smallest clique table computed so far that holds each attribute set (a bit
    # mask); windows are found by their bounds.
    holders: dict[int, tuple[int, int]] = {}
    order = sorted(range(len(cliques)), key=lambda i: (-sizes[i], i))
    source: dict[int, int] = {}  # each clique's source table: another clique's ...
    in_window: dict[int, list[int]] = {}  # ... or a window's (the cliques each serves)
    tables: dict[int, int] = {}
    for k in order:
        clique, cells = cliques[k], sizes[k]
        mask = sum(1 << a for a in clique)
        lo, hi = (min(clique), max(clique)) if clique else (0, d - 1)
        held = holders.get(mask)
        if held is not None and held[0] < math.prod(shape[lo : hi + 1]):
            source[k] = held[1]  # that clique's table (made earlier in this order)
        else:
            in_window.setdefault(build.window(lo, hi), []).append(k)
        tables[k] = build.add_table(clique, clique_start + int(offsets[k]))
        if len(clique) <= _SUBSET_SOURCE_MAX_ATTRIBUTES:
            subset = mask
            while subset:  # every non-empty subset of the clique's attributes
                known = holders.get(subset)
                if known is None or known[0] > cells:
                    holders[subset] = (cells, tables[k])
                subset = (subset - 1) & mask
    for window, served in in_window.items():
        for k, table in _narrowed(build, window, [(k, frozenset(cliques[k])) for k in served]):
            source[k] = table
    for k in order:  # every source comes first: windows, their narrowings, larger cliques
        build.add_step(source[k], tables[k])
    return build.plan(offsets)


def _narrowed(
    build: _Builder, table: int, served: list[tuple[int, frozenset[int]]]
) -> list[tuple[int, int]]:
    """Each served clique's source among ``table`` and tables narrowed from it.

    While some attribute ``a`` of the table is outside ``n_a`` of the cliques it
    serves with ``n_a (1 - 1/|a|) > 1``, the table without ``a`` (made once, a read of
    the table) is cheaper for those ``n_a`` than the table itself: it is made, serves
    them, and is narrowed in turn (the attribute outside most cliques first).
    """
    axes = build.tables[table][1]
    out: list[tuple[int, int]] = []
    while len(served) > 1:
        gain, drop = max(
            (sum(a not in attrs for _, attrs in served) * (1 - 1 / build.shape[a]), a) for a in axes
        )
        if gain <= 1:
            break
        narrower = build.add_table(tuple(a for a in axes if a != drop))
        build.add_step(table, narrower)
        out.extend(_narrowed(build, narrower, [c for c in served if drop not in c[1]]))
        served = [c for c in served if drop in c[1]]
    out.extend((k, table) for k, _ in served)
    return out


@njit(cache=True, nogil=True)
def _forward(
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
    # np.empty, each target zeroed as its step starts: a zeroed buffer of this size
    # comes as fresh pages from the system on every call.
    work = np.empty(work_cells)
    work[:cells] = flat
    for i in range(source.shape[0]):
        src = work[source[i] : source[i] + source_cells[i]]
        dst = work[target[i] : target[i] + target_cells[i]]
        if kind[i] != _LEADING:
            dst[:] = 0.0
        if kind[i] == _LEADING:  # dst[r] = sum of run r of src
            run = src.shape[0] // dst.shape[0]
            for r in range(dst.shape[0]):
                total = 0.0
                for j in range(r * run, (r + 1) * run):
                    total += src[j]
                dst[r] = total
        elif kind[i] == _TRAILING:  # dst = sum of the rows of src
            width = dst.shape[0]
            for r in range(src.shape[0] // width):
                for j in range(width):
                    dst[j] += src[r * width + j]
        else:
            sum_into_cells(
                src, dims[dims_at[i] : dims_at[i + 1]], kept[kept_at[i] : kept_at[i + 1]], dst
            )
    out[:] = work[cells : cells + out.shape[0]]


@njit(cache=True, nogil=True)
def _adjoint(
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
        if kind[i] == _LEADING:
            run = src.shape[0] // dst.shape[0]
            for r in range(dst.shape[0]):
                value = dst[r]
                for j in range(r * run, (r + 1) * run):
                    src[j] += value
        elif kind[i] == _TRAILING:
            width = dst.shape[0]
            for r in range(src.shape[0] // width):
                for j in range(width):
                    src[r * width + j] += dst[j]
        else:
            _spread_from_cells(
                src, dims[dims_at[i] : dims_at[i + 1]], kept[kept_at[i] : kept_at[i + 1]], dst
            )
    out[:] = work[: out.shape[0]]


@njit(cache=True, nogil=True)
def _spread_from_cells(
    flat: FloatArray, shape: IntArray, axes: IntArray, table: FloatArray
) -> None:
    """``flat[x] += table[code(x)]`` for every cell ``x`` of a C-ordered ``shape``: the
    adjoint of :func:`~pmwcm.kernels.dense_marginal.sum_into_cells` (``code`` as there:
    ``code(x) = sum_a x_a stride_a``, ``stride_a = 0`` for an axis not in ``axes``).

    Laid out as that pass is: the trailing run of axes outside ``axes`` (``post``
    contiguous cells) takes one value; the innermost axes up to :data:`ROW_CELLS`
    cells before it go through a table of their codes, and a mixed-radix counter over
    the outer axes gives each row's base code.
    """
    ndim = shape.shape[0]
    stride = np.zeros(ndim, dtype=np.int64)
    step = 1
    for i in range(axes.shape[0] - 1, -1, -1):
        stride[axes[i]] = step
        step *= shape[axes[i]]
    last, post = ndim, 1
    while last > 0 and stride[last - 1] == 0:
        last -= 1
        post *= int(shape[last])
    cut, row = last, 1
    while cut > 0 and row * shape[cut - 1] <= ROW_CELLS:
        cut -= 1
        row *= int(shape[cut])
    codes = row_codes(shape, stride, cut, last, row)
    rows = 1
    for a in range(cut):
        rows *= int(shape[a])
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
        a = cut - 1
        while a >= 0:
            digits[a] += 1
            base += stride[a]
            if digits[a] < shape[a]:
                break
            base -= digits[a] * stride[a]
            digits[a] = 0
            a -= 1
