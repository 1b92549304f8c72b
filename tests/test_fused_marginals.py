"""The fused marginal passes (:mod:`pmwcm.kernels.fused_marginals`) against NumPy.

* every clique's table from :meth:`FusedMarginals.marginals` equals NumPy's sum over
  the clique's dropped axes, transposed to the clique's order, to 1e-12 relative:
  random dense tables, 1- to 5-way cliques, the same attribute set in several
  orders, a clique inside another (read from its table), cliques at the domain's
  ends, the whole domain and the empty clique;
* :meth:`FusedMarginals.spread` equals the sum of the tables broadcast over the
  domain (NumPy's broadcasting add), and is the adjoint:
  ``<marginals(p), t> = <p, spread(t)>``;
* a clique that repeats an axis, or arrays of the wrong size, are refused.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pmwcm.kernels.dense_marginal import _ROW_CELLS, dense_marginal, row_layout
from pmwcm.kernels.fused_marginals import fused_marginals

SHAPES = [
    (2,) * 10,
    (2,) * 14,
    (3, 5, 2, 4, 7, 2, 3),
    (1, 4, 1, 3, 2, 2),
    (6,),
    (2, 40, 3),
    (2, 2, 2, 2, 600),  # an innermost attribute longer than a row's code table
    (3, 300, 2),
]


def _numpy_marginal(values: np.ndarray, clique: tuple[int, ...]) -> np.ndarray:
    """The reference: NumPy's sum over the other axes, then the clique's axis order."""
    dropped = tuple(a for a in range(values.ndim) if a not in clique)
    summed = values.sum(axis=dropped)
    kept = sorted(clique)
    return np.transpose(summed, [kept.index(a) for a in clique])


def _numpy_spread(shape: tuple[int, ...], clique: tuple[int, ...], table: np.ndarray) -> np.ndarray:
    """The reference adjoint: ``table`` broadcast over ``shape`` (axes in ``clique`` order)."""
    kept = sorted(clique)
    sorted_table = np.transpose(table, [clique.index(a) for a in kept])
    expanded = [shape[a] if a in clique else 1 for a in range(len(shape))]
    return np.broadcast_to(sorted_table.reshape(expanded), shape)


def _random_cliques(rng: np.random.Generator, ndim: int) -> list[tuple[int, ...]]:
    """1- to 5-way cliques in random orders, some repeated in another order, the ends,
    the whole domain and the empty clique."""
    cliques: list[tuple[int, ...]] = [(), tuple(range(ndim)), (0,), (ndim - 1,)]
    for _ in range(30):
        k = int(rng.integers(1, min(5, ndim) + 1))
        cliques.append(tuple(int(a) for a in rng.permutation(ndim)[:k]))
    for clique in list(cliques[4:14]):  # the same attributes in another order
        cliques.append(tuple(int(a) for a in rng.permutation(clique)))
    cliques.extend(itertools.combinations(range(min(ndim, 4)), 2))
    return cliques


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_cliques_marginal_equals_numpys(shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.gamma(0.5, 1.0, shape)
    cliques = _random_cliques(rng, len(shape))
    plan = fused_marginals(shape, tuple(cliques))
    flat = plan.marginals(values)
    assert flat.shape == (plan.offsets[-1],)
    for k, clique in enumerate(cliques):
        got = flat[plan.offsets[k] : plan.offsets[k + 1]]
        expected = _numpy_marginal(values, clique).ravel()
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
        # the per-clique kernel agrees as well
        np.testing.assert_allclose(got, dense_marginal(values, clique).ravel(), rtol=1e-12)
    # the plan reads no more cells than a pass per clique over the table
    assert plan.cost <= len(cliques) * values.size


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_spread_is_the_broadcast_sum_and_the_adjoint(shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    cliques = _random_cliques(rng, len(shape))
    plan = fused_marginals(shape, tuple(cliques))
    tables = rng.normal(size=int(plan.offsets[-1]))
    expected = np.zeros(shape)
    for k, clique in enumerate(cliques):
        table = tables[plan.offsets[k] : plan.offsets[k + 1]]
        expected = expected + _numpy_spread(
            shape, clique, table.reshape([shape[a] for a in clique])
        )
    got = plan.spread(tables)
    assert got.shape == shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    values = rng.gamma(0.5, 1.0, shape)
    left = float(np.dot(plan.marginals(values), tables))
    right = float(np.sum(values * got))
    assert left == pytest.approx(right, rel=1e-12, abs=1e-12 * np.abs(values).sum())


def test_a_clique_inside_a_measured_one_is_read_from_its_table() -> None:
    """A pair inside a 5-way clique on a 2^12 table: its marginal is read from the 5-way
    table (32 cells), not from its window, and is still NumPy's."""
    shape = (2,) * 12
    big, pair = (0, 3, 6, 9, 11), (11, 0)
    plan = fused_marginals(shape, (big, pair))
    alone = fused_marginals(shape, (big,))
    assert plan.cost == alone.cost + 2**5
    values = np.random.default_rng(0).random(shape)
    got = plan.marginals(values)[plan.offsets[1] :]
    np.testing.assert_allclose(got, _numpy_marginal(values, pair).ravel(), rtol=1e-12)


def test_bad_cliques_and_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        fused_marginals((2, 3), ((0, 0),))
    with pytest.raises(ValueError, match="distinct"):
        fused_marginals((2, 3), ((2,),))
    plan = fused_marginals((2, 3), ((1,), (0, 1)))
    with pytest.raises(ValueError, match="cells"):
        plan.marginals(np.ones(5))
    with pytest.raises(ValueError, match="cells"):
        plan.spread(np.ones(3))


@pytest.mark.parametrize(("axes", "row"), [((0, 4, 1), 600), ((4,), 600), ((0, 1, 2), 8)])
def test_a_row_holds_at_least_the_innermost_kept_axis(axes: tuple[int, ...], row: int) -> None:
    """A 600-value attribute is longer than a row's code table (:data:`_ROW_CELLS`); its
    marginal's rows still hold its 600 values, not one cell each (a counter step per
    cell made that marginal 25x slower, and the measured-update audits' refits with it)."""
    shape = np.array([2, 2, 2, 2, 600])
    _, _, post, _, got, rows, codes = row_layout(shape, np.array(axes))
    assert _ROW_CELLS < 600 and (got, rows * got * post) == (row, 9600)
    assert codes.shape == (row,)
