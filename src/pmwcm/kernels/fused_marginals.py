"""Many cliques' marginals of one dense table in one compiled call, and the adjoint.

The dense entropic fit (:func:`pmwcm.mechanisms.priors.marginals.fit_histogram`)
takes every measured clique's marginal ``D_{C_k}`` at each step and multiplies
the histogram by ``exp(-s g)``, ``g(x) = sum_k w_k r_k(x_{C_k})`` (the weighted
residuals broadcast back); the workload start's selection
(:mod:`pmwcm.mechanisms.priors.workload`) takes every candidate clique's
marginal once a round.

**Why.** One clique at a time, these passes took 20 of the 24 CPU seconds of
``pmwcm run`` on 10,000 binary-Adult queries at ``eps = 1``
(``benchmarks/throughput.py --cli-only --e2e 10000``; nonprivate 2.4 s). On 2^14
cells a clique's marginal cost about 11 us of compiled pass and 17 us of Python
and NumPy around it, a fit step on 147 cliques (pairs and 3- to 5-way ones)
7.4 ms with its 147 broadcast adds, and a selection round over 2,930 candidates
68 ms. Fused: 0.53 ms a step and 2.4 ms a round (one call each way, about
210,000 and 1.1 million cell reads instead of 2.4 and 48 million), and the
run takes about 6.5 s.

**One plan, one call** (:class:`FusedMarginals`). Every clique's marginal is
summed from a *small* table computed before it, rather than from the histogram:

* another clique's marginal whose attributes contain its own (cliques go
  largest first; a pair inside a measured 5-way clique reads 32 cells);
* or its **window** ``[lo..hi]``, the marginal on the contiguous attributes
  ``min C .. max C``, summed from ``[lo-1..hi]`` (or, for ``lo = 0``, from
  ``[0..hi+1]``, or the histogram): each link of that chain drops one end
  attribute, so all windows together cost a few histogram reads;
* or a **narrowing** of its window: while some attribute of a table is outside
  ``n_a`` of the cliques it serves with ``n_a (1 - 1/|a|) > 1``, the table without
  it (one read of the table) serves those cliques more cheaply, and is narrowed in
  turn (:func:`_narrowed`).

Each step sums one table onto some of its axes, all of them in one compiled call
(:mod:`pmwcm.kernels.fused_passes`). The adjoint, ``g = sum_k B_k t_k`` with
``B_k`` the broadcast of clique ``k``'s table over the domain, runs the same steps
backwards, each adding a table's values to every cell of its source that sums into
them. Only the summation order differs from the per-clique passes (relative
differences of about ``1e-15``); the plan depends on the shape and the cliques
alone, never on values.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from pmwcm.kernels.clique_table import FloatArray
from pmwcm.kernels.fused_passes import (
    LEADING,
    SPREAD,
    TRAILING,
    IntArray,
    adjoint_pass,
    forward_pass,
)

__all__ = ["FUSED_MAX_CELLS", "FusedMarginals", "fused_marginals"]

#: Dense tables of at most this many cells take their many-clique passes here (the
#: fit's steps, the selection's rounds); larger ones take them one clique at a time
#: (:func:`~pmwcm.kernels.dense_marginal.dense_marginal`'s planned passes).
FUSED_MAX_CELLS = 2**16

#: Cliques of at most this many attributes offer their subsets as sources to the
#: smaller cliques after them (``2^|C|`` subsets each, registered once per plan).
_SUBSET_SOURCE_MAX_ATTRIBUTES = 8


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
        forward_pass(flat, out, *self._steps())
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
        adjoint_pass(flat, out, *self._steps())
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
            self.kind.append(LEADING)
        elif keep == tuple(range(ndim - len(keep), ndim)):
            self.kind.append(TRAILING)
        else:
            self.kind.append(SPREAD)

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
