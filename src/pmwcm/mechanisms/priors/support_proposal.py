"""The support prior's proposal: ``M`` records drawn from a Chow-Liu tree of the released tables.

The first of the support prior's two post-processing steps
(:mod:`pmwcm.mechanisms.priors.support`). A Chow-Liu tree (Chow, Liu 1968) over
the attributes, with edge weights estimated from the released pair tables, and
``M`` records drawn from the tree model whose conditionals are the released
(clipped, renormalised) pair tables. Edge weights: for the pair ``(a, b)`` the
released table ``y_ab`` estimates ``D_ab`` with independent ``N(0, sigma^2)``
noise per cell, so ``||y_ab - y_a y_b^T||^2 - |a||b| sigma^2`` estimates
``||D_ab - D_a D_b^T||^2`` (the noise's expected squared norm removed; ``y_a``,
``y_b`` are the averaged one-way projections, whose own noise is far smaller).
Without the correction, larger tables would look more dependent from noise
alone. Every conditional is mixed with the child's one-way marginal (weight
:data:`CONDITIONAL_MIXING`) and every one-way marginal with the uniform one
(:data:`UNIFORM_MIXING`), so that every value of every attribute keeps some
records: multiplicative-weights updates only rescale records, they never create
one.

Reads only the release and a generator seeded from the engine's noise source
(post-processing, Dwork, Roth 2014, Prop. 2.1). Cost ``O(M m)`` for ``m``
attributes, in chunks of :data:`DRAW_CHUNK` records drawn on the support passes' threads.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
from numpy.typing import NDArray
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from pmwcm.kernels.clique_table import FloatArray
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support import smallest_code_dtype
from pmwcm.kernels.support_passes import ChildDraws, pass_pool
from pmwcm.mechanisms.priors.marginals import Measurement

__all__ = [
    "CONDITIONAL_MIXING",
    "UNIFORM_MIXING",
    "one_way_estimates",
    "tree_edges",
    "tree_proposal",
]

#: Share of the child's one-way marginal mixed into every tree conditional.
CONDITIONAL_MIXING = 0.1
#: Share of the uniform distribution mixed into every one-way marginal.
UNIFORM_MIXING = 0.01


def _normalised(values: FloatArray) -> FloatArray:
    clipped = np.clip(np.asarray(values, dtype=np.float64), 0.0, None)
    total = float(clipped.sum())
    return clipped / total if total > 0 else np.full(clipped.shape, 1.0 / clipped.size)


def one_way_estimates(domain: Domain, measurements: Sequence[Measurement]) -> list[FloatArray]:
    """Each attribute's marginal: the average of the released tables' projections onto it.

    Averaging the ``K_a`` tables that contain attribute ``a`` divides the noise
    variance by ``K_a``. Clipped at zero, renormalised and mixed with the
    uniform distribution (:data:`UNIFORM_MIXING`). An attribute no measurement
    covers gets the uniform distribution.
    """
    sums = [np.zeros(s) for s in domain.sizes]
    counts = [0] * len(domain)
    for m in measurements:
        values = np.asarray(m.values, dtype=np.float64)
        for position, name in enumerate(m.clique):
            axis = domain.index(name)
            others = tuple(i for i in range(values.ndim) if i != position)
            sums[axis] += values.sum(axis=others)
            counts[axis] += 1
    out = []
    for size, total, count in zip(domain.sizes, sums, counts, strict=True):
        estimate = _normalised(total / count) if count else np.full(size, 1.0 / size)
        out.append((1 - UNIFORM_MIXING) * estimate + UNIFORM_MIXING / size)
    return out


def _pair_tables(
    domain: Domain, measurements: Sequence[Measurement]
) -> dict[tuple[int, int], tuple[FloatArray, float]]:
    """The released 2-way tables by axis pair ``(i, j)``, ``i < j``, axes in that order."""
    pairs: dict[tuple[int, int], tuple[FloatArray, float]] = {}
    for m in measurements:
        if len(m.clique) != 2:
            continue
        i, j = domain.axes(m.clique)
        values = np.asarray(m.values, dtype=np.float64)
        if i > j:
            i, j, values = j, i, values.T
        pairs[(i, j)] = (values, m.sigma)
    return pairs


def tree_edges(domain: Domain, measurements: Sequence[Measurement]) -> list[tuple[int, int]]:
    """The Chow-Liu tree's edges ``(parent, child)`` in breadth-first order from axis 0.

    A maximum spanning tree of the debiased dependence weights (module
    docstring); attributes no released pair connects start their own tree.
    """
    one_way = one_way_estimates(domain, measurements)
    return _tree_edges(len(domain), one_way, _pair_tables(domain, measurements))


def _tree_edges(
    m: int, one_way: list[FloatArray], pairs: dict[tuple[int, int], tuple[FloatArray, float]]
) -> list[tuple[int, int]]:
    """:func:`tree_edges` from the one-way estimates and pair tables already computed."""
    # minimum_spanning_tree drops zero entries: every released pair is shifted below
    # zero, by its debiased weight, so an independent pair is still an edge.
    graph = np.zeros((m, m))
    for (i, j), (table, sigma) in pairs.items():
        excess = table - np.outer(one_way[i], one_way[j])
        weight = max(float((excess * excess).sum()) - table.size * sigma**2, 0.0)
        graph[i, j] = -(weight + 1e-300) - 1e-12
    tree = minimum_spanning_tree(graph)
    tree = tree + tree.T
    edges: list[tuple[int, int]] = []
    seen = np.zeros(m, dtype=bool)
    for root in range(m):
        if seen[root]:
            continue
        order, parents = breadth_first_order(tree, root, directed=False)
        seen[order] = True
        edges.extend((int(parents[c]), int(c)) for c in order[1:])
    return edges


def _conditionals(table: FloatArray, sigma: float, child: FloatArray) -> FloatArray:
    """``P(child | parent)`` from a released pair table (rows: parent values).

    Each row is shrunk towards the child's one-way estimate with a pseudo-mass of
    ``s_child sigma`` (about the mass that clipped noise adds to a row), so a
    row whose released mass is mostly noise falls back to the one-way marginal;
    then mixed with it (:data:`CONDITIONAL_MIXING`) so every value stays reachable.
    """
    clipped = np.clip(table, 0.0, None)
    prior_mass = child.size * sigma
    rows = (clipped + prior_mass * child) / (clipped.sum(axis=1, keepdims=True) + prior_mass)
    return (1 - CONDITIONAL_MIXING) * rows + CONDITIONAL_MIXING * child


def tree_proposal(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    size: int,
    rng: np.random.Generator,
) -> NDArray[np.integer]:
    """``size`` records drawn from the Chow-Liu tree model of the released tables.

    Roots are drawn from their one-way estimates; each child given its parent
    from the released pair table's row (:func:`_conditionals`). The records come
    back column-major (shape ``(size, m)``, Fortran order) in the domain's smallest
    code type, drawn :data:`DRAW_CHUNK` at a time: the proposal's memory is the
    records' own, ``size * m`` bytes for byte codes.
    """
    if size < 1:
        raise ValueError(f"size must be positive, got size={size}.")
    one_way = one_way_estimates(domain, measurements)
    pairs = _pair_tables(domain, measurements)
    columns = np.zeros((len(domain), size), dtype=smallest_code_dtype(domain))
    edges = _tree_edges(len(domain), one_way, pairs)
    children = {child for _, child in edges}
    roots = np.zeros(1, dtype=columns.dtype)  # every root's draws read parent code 0
    for axis in range(len(domain)):
        if axis not in children:
            cdf = np.cumsum(one_way[axis])[None, :]
            _draw_column(np.broadcast_to(roots, (size,)), cdf, columns[axis], rng)
    for parent, child in edges:
        table, sigma = pairs[(parent, child)] if parent < child else pairs[(child, parent)]
        if parent > child:
            table = table.T
        cdf = np.cumsum(_conditionals(table, sigma, one_way[child]), axis=1)
        _draw_column(columns[parent], cdf, columns[child], rng)
    return columns.T


#: Records drawn per batch of uniforms (8 bytes each) in :func:`tree_proposal`.
DRAW_CHUNK = 2**20
#: Batches of uniforms made ahead of the threads drawing from them (their memory:
#: ``DRAW_AHEAD * DRAW_CHUNK * 8`` bytes).
DRAW_AHEAD = 8


def _draw_column(
    parents: NDArray[np.integer],
    cdf: FloatArray,
    out: NDArray[np.integer],
    rng: np.random.Generator,
) -> None:
    """Inverse-CDF draws of one column from the rows of ``cdf`` its parents pick.

    The uniforms come from ``rng`` in order, :data:`DRAW_CHUNK` at a time (the
    generator's stream is the same as one ``rng.random(size)``), and each chunk is
    drawn on the support passes' threads while the next is made: the records do not
    depend on the number of threads.
    """
    draws = ChildDraws(cdf)
    pending: collections.deque[Future[None]] = collections.deque()
    for begin in range(0, out.size, DRAW_CHUNK):
        end = min(out.size, begin + DRAW_CHUNK)
        uniforms = rng.random(end - begin)
        pending.append(pass_pool().submit(draws.draw, parents[begin:end], uniforms, out[begin:end]))
        if len(pending) > DRAW_AHEAD:
            pending.popleft().result()
    for chunk in pending:
        chunk.result()
