"""The compiled GLM kernels (:mod:`pmwcm.kernels.glm`, :mod:`pmwcm.kernels.fista`) compute
the reference mathematics.

* objective, gradient and Hessian equal the NumPy reference
  (:class:`~pmwcm.kernels.queries.GLMProblem`) to 1e-12, on dense and block
  designs, for every compiled loss, with and without ``l2``;
* the compiled fixed-budget FISTA (both forms: the fused loop and the one with
  NumPy's vectorised ``exp``) follows the Python loop's iterates to 1e-12,
  so its a-priori gap (``tests/test_fixed_budget.py``) is the same;
* far outside the data (``|z|`` in the thousands) nothing overflows into a NaN,
  raises or warns: an evaluation on the private data must never do either.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from pmwcm.kernels import fixed_budget
from pmwcm.kernels.design import BlockDesign, DenseDesign, design_for
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.evaluator import CompiledGLMEvaluator, Evaluator, evaluator
from pmwcm.kernels.fista import VECTOR_EXP_MIN_ROWS
from pmwcm.kernels.fixed_budget import fixed_budget_minimize, plan_solve
from pmwcm.kernels.queries import CMQuery, GLMProblem

DOMAIN = Domain.from_sizes({"a": 5, "b": 30, "c": 7, "d": 40, "y": 2, "r": 9})
LOSSES = {"logistic": "y", "squared": "r", "huber": "r"}


WIDE = ("a", "b", "c", "d")  # 84,000 cells with the target: the vectorised exp
NARROW = ("a", "c")  # 70 cells with the target: the fused loop


def _problem(
    loss: str,
    l2: float,
    *,
    design: str = "block",
    rng: np.random.Generator,
    features: tuple[str, ...] = WIDE,
) -> GLMProblem:
    """The query on random occupied cells of its clique, with the ``design`` asked for:
    ``"block"``, ``"dense"`` (the matrix with its block entries, as
    :func:`~pmwcm.kernels.design.design_for` builds it) or ``"matrix"`` (a bare matrix)."""
    encodings = {"d": "ordinal"} if "d" in features else {}  # a one-column block
    query = CMQuery(loss=loss, target=LOSSES[loss], features=features, l2=l2, encodings=encodings)
    compiled = query.compile(DOMAIN, cells=np.zeros((0, 5), dtype=np.int64))
    sizes = compiled.sizes
    cells = np.unique(np.stack([rng.integers(0, s, 3000) for s in sizes], axis=1), axis=0)
    problem = compiled.on_cells(cells)
    assert isinstance(problem.design, BlockDesign)
    if design == "block":
        return problem
    matrix = problem.design.dense()
    entries = (problem.design.columns, problem.design.values) if design == "dense" else None
    return dataclasses.replace(problem, design=DenseDesign(matrix, entries=entries))


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("l2", [0.0, 0.25])
@pytest.mark.parametrize("design", ["block", "dense", "matrix"])
def test_objective_gradient_hessian_equal_the_reference(
    loss: str, l2: float, design: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    problem = _problem(loss, l2, design=design, rng=rng)
    weights = rng.dirichlet(np.ones(problem.design.rows))
    fast = evaluator(problem, weights)
    assert isinstance(fast, CompiledGLMEvaluator)
    for _ in range(4):
        theta = rng.normal(size=problem.dim) * problem.radius / math.sqrt(problem.dim)
        assert math.isclose(fast.objective(theta), problem.objective(theta, weights), rel_tol=1e-12)
        np.testing.assert_allclose(
            fast.gradient(theta), problem.gradient(theta, weights), rtol=1e-11, atol=1e-15
        )
        reference, hessian = problem.data_hessian(theta, weights), fast.hessian(theta)
        assert reference is not None and hessian is not None
        np.testing.assert_allclose(hessian, reference, rtol=1e-11, atol=1e-15)


def _python_fista(problem: GLMProblem, weights: np.ndarray, iterations: int) -> np.ndarray:
    """The fixed-budget FISTA loop with the reference evaluator (never compiled)."""
    assert problem.smoothness is not None
    smoothness = problem.smoothness + problem.l2
    original = fixed_budget.evaluator
    fixed_budget.evaluator = Evaluator
    try:
        return fixed_budget._fista(problem, weights, iterations, smoothness)
    finally:
        fixed_budget.evaluator = original


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize(
    ("features", "rows", "widths"),
    [(NARROW, 40, True), (WIDE, 40, True), (WIDE, 4000, True), (WIDE, 4000, False)],
    ids=["narrow", "wide", "rows", "widths-unknown"],
)
def test_compiled_fixed_fista_follows_the_python_loop(
    loss: str, features: tuple[str, ...], rows: int, widths: bool, seed: int
) -> None:
    """Both forms, and the vectorised one with its one-column blocks summed as dot
    products (widths known, ordinal features and the intercept) or scattered."""
    rng = np.random.default_rng(seed)
    problem = _problem(loss, 0.0, rng=rng, features=features)
    keep = rng.permutation(problem.design.rows)[: min(rows, problem.design.rows)]
    assert isinstance(problem.design, BlockDesign)
    columns, values = problem.design.row_major
    block_widths = problem.design.block_widths if widths else ()
    problem = dataclasses.replace(
        problem,
        design=design_for(columns[keep].T, values[keep].T, problem.dim, block_widths=block_widths),
        labels=problem.labels[keep],
        radius=3.0,
    )
    weights = rng.dirichlet(np.full(len(keep), 0.3))
    plan = plan_solve(problem, gap=1e-5, max_iterations=100_000)
    assert plan.method == "fista"
    got = fixed_budget_minimize(problem, weights, plan)
    expected = _python_fista(problem, weights, plan.iterations)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    assert np.linalg.norm(got) <= problem.radius * (1 + 1e-12)


@pytest.mark.parametrize("rows", [1, 40, 4 * VECTOR_EXP_MIN_ROWS])
def test_the_solve_form_follows_the_clique_never_the_rows_a_table_holds(
    rows: int, seed: int
) -> None:
    """On the private data a sparse clique table holds the data's occupied cells:
    the form of the real-data solve must not depend on how many there are."""
    rng = np.random.default_rng(seed)
    forms = {}
    for name, features in (("wide", WIDE), ("narrow", NARROW)):
        problem = _problem("logistic", 0.0, rng=rng, features=features)
        assert isinstance(problem.design, BlockDesign)
        keep = np.arange(min(rows, problem.design.rows))
        columns, values = problem.design.row_major
        problem = dataclasses.replace(
            problem,
            design=design_for(columns[keep].T, values[keep].T, problem.dim, blocks=True),
            labels=problem.labels[keep],
        )
        fast = evaluator(problem, np.full(len(keep), 1.0 / len(keep)))
        assert isinstance(fast, CompiledGLMEvaluator)
        forms[name] = fast.vector_exp
    assert forms == {"wide": True, "narrow": False}
    # One-column blocks come from the encodings, not from the rows: a table whose
    # rows all share one value of a one-hot feature still scatters that block.
    problem = _problem("logistic", 0.0, rng=rng)
    assert isinstance(problem.design, BlockDesign)
    cells = np.zeros((3, 5), dtype=np.int64)
    cells[:, 3] = np.arange(3)  # a, b and c at value 0 on every row; d varies
    one_value = problem.on_cells(cells)
    assert isinstance(one_value.design, BlockDesign)
    _, _, fixed, _ = one_value.design.block_major
    # Blocks a, b, c one-hot; d ordinal (column 5 + 30 + 7 = 42); the intercept last.
    assert fixed.tolist() == [-1, -1, -1, 42, 43]
    wide_squared = _problem("squared", 0.0, rng=rng)
    squared = evaluator(wide_squared, np.full(wide_squared.design.rows, 1.0))
    assert isinstance(squared, CompiledGLMEvaluator) and not squared.vector_exp


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_far_from_the_data_nothing_overflows_raises_or_warns(loss: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    problem = _problem(loss, 0.0, rng=rng)
    weights = rng.dirichlet(np.ones(problem.design.rows))
    fast = evaluator(problem, weights)
    theta = np.full(problem.dim, 4000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hessian = fast.hessian(theta)
        assert hessian is not None
        values = [fast.objective(theta), *fast.gradient(theta), *hessian.ravel()]
        far = dataclasses.replace(problem, radius=5000.0)
        plan = plan_solve(far, gap=10.0, max_iterations=100_000)
        values += list(fixed_budget_minimize(far, weights, plan))
    assert np.all(np.isfinite(values))
