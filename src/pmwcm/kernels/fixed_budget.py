"""Fixed-budget convex minimisation with an a-priori error bound: the real-data solve.

Whatever reads the private data must not fail, stop early or branch visibly on
it (docs/design.md section 3, "The real-data side of a round"). The certified solvers
of :mod:`pmwcm.kernels.solvers` stop when *their* certificate is met, so both their
running time and their success depend on the data. This module runs a method
whose iteration count is fixed **before** the data is read, from public
constants only, and whose worst-case optimality gap after that many iterations
is known in closed form. The engine charges that a-priori gap ``tau`` in the
sparse vector's sensitivity ``c S / n + tau``, exactly as a certified gap would
be charged, and the solve can never raise.

Two methods; :func:`plan_solve` picks whichever costs less for the requested gap
(iterations weighted by what one costs, :data:`ELLIPSOID_ITERATION_COST`):

* **FISTA with the constant step ``1/L``** (Beck, Teboulle 2009, Theorem 4.4),
  for losses with a declared smoothness: from ``theta_0 = 0``,
  ``F(theta_k) - F* <= 2 L ||theta_0 - theta*||^2 / (k + 1)^2 <= 2 L R^2 / (k + 1)^2``,
  where ``L = beta + lambda`` bounds the curvature of ``F = sum_c w_c l_c +
  (lambda/2)||.||^2`` for cell weights summing to one (``beta`` the per-record
  bound). Projection onto the ball is the proximal step of its indicator.
* **The central-cut ellipsoid method** (Shor; Yudin, Nemirovski 1976; the
  bound as in Bubeck 2015, "Convex Optimization: Algorithms and Complexity",
  Theorem 2.4), for every loss, smooth or not. Starting from the ball itself
  (so ``R/r = 1`` in that theorem), after ``k`` iterations in dimension
  ``d >= 2`` the best feasible centre satisfies
  ``F(theta_best) - F* <= V exp(-k / (2 d^2))``, where ``V >= max_Theta F - F*``.
  In one dimension the method is bisection and the factor is ``2^-k``. Here
  ``V = S + lambda R^2 / 2``: every per-record loss varies by at most ``S``
  over the ball (``|l_x(theta) - l_x(theta')| <= |<theta - theta', grad
  l_x>| <= S`` by convexity and the scaling condition), the weights sum to
  one, and the regulariser varies by ``lambda R^2 / 2``.

Both bounds are for exact arithmetic. In float64 the iterates carry rounding
errors of order ``1e-16`` relative, many orders below the gaps planned here
(``plan_solve`` refuses ``V / tau > 1e10``), and the ellipsoid count gets one
extra ``e``-fold margin (``ln(V / tau) + 1``) against the slow drift of its
shape. ``tests/test_fixed_budget.py`` checks the bound against a
high-accuracy reference on hypothesis-generated, near-degenerate weights.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from pmwcm.errors import Refused
from pmwcm.kernels.design import DenseDesign
from pmwcm.kernels.ellipsoid import bisection, ellipsoid
from pmwcm.kernels.evaluator import (
    CompiledGLMEvaluator,
    compiled_objective,
    evaluator,
    is_signed_logistic,
)
from pmwcm.kernels.fista import VECTOR_EXP_MIN_ROWS
from pmwcm.kernels.glm import LOGISTIC
from pmwcm.kernels.paired_logistic import (
    fixed_fista_paired_logistic,
    fixed_fista_paired_logistic_value,
    paired_logistic_rows,
)
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem

__all__ = [
    "FixedSolve",
    "SolveRefused",
    "fixed_budget_minimize",
    "fixed_budget_minimum",
    "plan_solve",
]

#: The largest ``V / tau`` planned: beyond it float64 objective values cannot
#: resolve the gap the privacy argument charges.
MAX_RESOLUTION = 1e10

Method = Literal["fista", "ellipsoid"]

#: What one ellipsoid iteration costs, in FISTA iterations on the same table. An
#: ellipsoid step evaluates the objective as well as the gradient (a ``log1p(exp)``
#: per cell besides the slope) and updates a ``d x d`` shape; a FISTA step takes
#: the gradient only. Measured on Adult's binary cliques (compiled logistic, 4 to
#: 128 cells, ``benchmarks/throughput.py``): 3.0x at 4 cells, 3.3x at 8, 3.9x at 16
#: and 5-6x beyond. The lowest is used, so the ellipsoid is never chosen where it
#: is slower; at ``d = 3`` FISTA's 247 iterations then beat its 242 (18 us against
#: 59 us). Public: a constant of the method, never of the data.
ELLIPSOID_ITERATION_COST = 3.0


class SolveRefused(Refused, ValueError):
    """The query's public constants make a bounded real-data solve too costly.

    Raised by :func:`plan_solve` from public inputs only (the spec, the domain,
    ``n``), before any data is read; the message says which constant and why.
    """


@dataclass(frozen=True, kw_only=True)
class FixedSolve:
    """A real-data solve planned from public constants.

    Attributes:
        method: ``"fista"`` or ``"ellipsoid"``.
        iterations: the fixed iteration count (the same for every dataset).
        gap: the a-priori bound on ``F(theta) - min F`` of the returned point.
        smoothness: ``L`` used for FISTA's constant step (``None`` for the ellipsoid).
    """

    method: Method
    iterations: int
    gap: float
    smoothness: float | None = None


def oscillation_bound(problem: ConvexProblem) -> float:
    """``V = S + lambda R^2 / 2 >= max_Theta F - min_Theta F`` for weights summing to one."""
    return problem.scale + 0.5 * problem.l2 * problem.radius**2


def _ellipsoid_iterations(dim: int, ratio: float) -> int:
    """Iterations after which ``V exp(-k / (2 d^2))`` (or ``V 2^-k`` in 1-D) is ``<= V / ratio``.

    One extra ``e``-fold (``ln ratio + 1``) is a margin for rounding.
    """
    if dim == 1:
        return math.ceil(math.log2(ratio) + 1.0)
    return math.ceil(2.0 * dim * dim * (math.log(ratio) + 1.0))


def _fista_iterations(smoothness: float, radius: float, gap: float) -> int:
    """The smallest ``k`` with ``2 L R^2 / (k + 1)^2 <= gap``."""
    return max(1, math.ceil(math.sqrt(2.0 * smoothness * radius * radius / gap)) - 1)


def plan_solve(problem: ConvexProblem, *, gap: float, max_iterations: int) -> FixedSolve:
    """Chooses the method and iteration count that guarantee ``gap``, from public constants.

    Args:
        problem: the query on its clique (its constants are public).
        gap: the a-priori bound wanted on ``F(theta) - min F``.
        max_iterations: the most iterations a query may cost.

    Returns:
        The cheaper of FISTA (smooth losses) and the ellipsoid method within
        ``max_iterations``: iterations weighted by :data:`ELLIPSOID_ITERATION_COST`.

    Raises:
        SolveRefused: if both methods need more than ``max_iterations``, or
            ``V / gap`` exceeds float64's resolution.
        ValueError: for a non-positive ``gap`` or ``max_iterations``.

    >>> from pmwcm.kernels.domain import Domain
    >>> from pmwcm.kernels.queries import CMQuery
    >>> d = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
    >>> p = CMQuery(loss="hinge", target="y", features=("a", "b")).compile(d)
    >>> plan = plan_solve(p, gap=1e-5, max_iterations=100_000)
    >>> plan.method, plan.iterations
    ('ellipsoid', 238)
    """
    if not (math.isfinite(gap) and gap > 0):
        raise ValueError(f"gap must be positive and finite, got gap={gap}.")
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}.")
    return _cheapest_plan(
        oscillation_bound(problem), problem.dim, problem.smoothness, float(problem.l2),
        float(problem.radius), gap, max_iterations,
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _cheapest_plan(
    volume: float,
    dim: int,
    beta: float | None,
    l2: float,
    radius: float,
    gap: float,
    max_iterations: int,
) -> FixedSolve:
    """:func:`plan_solve` from the problem's constants alone (cached: the queries of a
    stream share a few sets of constants, and the plan is a function of them)."""
    ratio = max(volume / gap, 1.0)
    if ratio > MAX_RESOLUTION:
        raise SolveRefused(
            f"The query's objective can vary by {volume:.3g} over its ball (radius "
            f"{radius:g}), {ratio:.2g} times the accuracy {gap:.3g} the privacy "
            f"argument needs; float64 cannot resolve more than {MAX_RESOLUTION:.0e}. "
            "Use a smaller radius."
        )
    options: list[FixedSolve] = [
        FixedSolve(method="ellipsoid", iterations=_ellipsoid_iterations(dim, ratio), gap=gap)
    ]
    if beta is not None and beta + l2 > 0:
        smoothness = beta + l2
        options.append(
            FixedSolve(
                method="fista",
                iterations=_fista_iterations(smoothness, radius, gap),
                gap=gap,
                smoothness=smoothness,
            )
        )
    affordable = [plan for plan in options if plan.iterations <= max_iterations]
    if affordable:
        return min(affordable, key=_relative_cost)
    best = min(options, key=lambda plan: plan.iterations)
    # A non-smooth loss has only the ellipsoid, whose count grows with the dimension
    # squared: its smooth twin, or fewer coordinates, is what usually gets it answered.
    smooth = (
        "; or its smooth form (smoothed_hinge for hinge, huber for absolute), solved in "
        "far fewer iterations"
        if beta is None
        else ""
    )
    raise SolveRefused(
        f"A bounded solve of this query (dimension {dim}, radius "
        f"{radius:g}) to the accuracy {gap:.3g} its privacy argument needs takes "
        f"{best.iterations} iterations, over the limit of {max_iterations}. "
        "Use fewer features, an ordinal encoding for a many-valued feature (one "
        f"coordinate instead of one per value) or a smaller radius{smooth}."
    )


def _relative_cost(plan: FixedSolve) -> float:
    """A plan's work in FISTA iterations (:data:`ELLIPSOID_ITERATION_COST`)."""
    return plan.iterations * (ELLIPSOID_ITERATION_COST if plan.method == "ellipsoid" else 1.0)


def fixed_budget_minimize(
    problem: ConvexProblem, weights: FloatArray, plan: FixedSolve
) -> FloatArray:
    """Runs ``plan`` on ``weights``; ``F(theta) - min F <= plan.gap`` whatever the weights.

    Never raises and never stops early: the work is ``plan.iterations``
    gradient evaluations for every dataset.

    Args:
        problem: the query on its clique.
        weights: non-negative cell weights summing to one (a marginal table).
        plan: from :func:`plan_solve`.

    Returns:
        A point of the ball ``||theta|| <= R``.
    """
    weights = np.ascontiguousarray(weights, dtype=np.float64).ravel()
    if plan.method == "fista":
        assert plan.smoothness is not None
        return _fista(problem, weights, plan.iterations, plan.smoothness)
    if problem.dim == 1:
        return bisection(problem, weights, plan.iterations)
    return ellipsoid(problem, weights, plan.iterations)


def fixed_budget_minimum(
    problem: ConvexProblem, weights: FloatArray, plan: FixedSolve
) -> tuple[float, Callable[[FloatArray], float]]:
    """``(F(theta), F)``: the objective on ``weights`` at :func:`fixed_budget_minimize`'s
    point, and the objective itself, both as ``evaluator(problem, weights).objective``
    computes them (:mod:`pmwcm.kernels.evaluator`), bit for bit.

    A small dense logistic table (:func:`_paired_form`) runs the solve and the value
    in one compiled call, and ``F`` is the evaluator's own arithmetic
    (:func:`~pmwcm.kernels.evaluator.compiled_objective`) on the same arrays, without
    building an evaluator; anything else is the solve, then the evaluator.
    The path is chosen by the query's compile, never by the weights.
    """
    paired = _paired_form(problem) if plan.method == "fista" else None
    if paired is None:
        evaluate = evaluator(problem, weights).objective
        return evaluate(fixed_budget_minimize(problem, weights, plan)), evaluate
    assert plan.smoothness is not None
    columns, values, labels = paired
    weights = np.ascontiguousarray(weights, dtype=np.float64).ravel()
    l2 = float(problem.l2)
    _, value = fixed_fista_paired_logistic_value(
        columns, values, labels, weights, problem.dim, l2, problem.radius,
        1.0 / plan.smoothness, plan.iterations,
    )  # fmt: skip

    def objective(theta: FloatArray) -> float:
        return compiled_objective(columns, values, labels, weights, theta, l2, LOGISTIC, 0.0)

    return float(value), objective


def _fista(
    problem: ConvexProblem, weights: FloatArray, iterations: int, smoothness: float
) -> FloatArray:
    """FISTA with the constant step ``1 / L`` from ``0`` (Beck, Teboulle 2009, eq. 4.1-4.3).

    The iterates live in three buffers that trade roles (``theta``, ``y`` and the
    next point); each update is the reference arithmetic, operation for
    operation, written with ``out=`` (``y - step g``, its projection
    ``x (R / ||x||)``, ``y' = x + c (x - theta)``).
    """
    radius, step = problem.radius, 1.0 / smoothness
    paired = _paired_form(problem)
    if paired is not None:
        # A small dense table of a +-1-label logistic query, every cell in C order:
        # one exp per (x, -1), (x, +1) pair (public form: see _paired_form).
        columns, values, _ = paired
        return fixed_fista_paired_logistic(
            columns, values, np.ascontiguousarray(weights, dtype=np.float64), problem.dim,
            float(problem.l2), radius, step, iterations,
        )  # fmt: skip
    fast = evaluator(problem, weights)
    if isinstance(fast, CompiledGLMEvaluator):  # the same loop, compiled: one call
        return fast.fixed_fista(radius=radius, step=step, iterations=iterations)
    gradient = fast.gradient
    theta, y, spare = np.zeros(problem.dim), np.zeros(problem.dim), np.empty(problem.dim)
    momentum = 1.0
    for _ in range(iterations):
        nxt = spare
        np.multiply(gradient(y), step, out=nxt)
        np.subtract(y, nxt, out=nxt)
        norm = math.sqrt(float(np.dot(nxt, nxt)))  # project_ball's norm, bit for bit
        if norm > radius:
            np.multiply(nxt, radius / norm, out=nxt)
        following = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum))
        np.subtract(nxt, theta, out=y)  # y is consumed: it becomes the next y
        np.multiply(y, (momentum - 1.0) / following, out=y)
        np.add(nxt, y, out=y)
        spare, theta, momentum = theta, nxt, following
    return theta


def _paired_form(
    problem: ConvexProblem,
) -> tuple[NDArray[np.int64], FloatArray, FloatArray] | None:
    """The row-major design :func:`fixed_fista_paired_logistic` reads and the labels
    (float64, contiguous: as the compiled evaluator reads them), or ``None``.

    Only for a logistic query on a two-valued target whose clique is below
    :data:`~pmwcm.kernels.fista.VECTOR_EXP_MIN_ROWS` cells (the evaluator's
    ``vector_exp`` takes the larger ones) and whose problem is dense, that is
    compiled on every cell in C order, so its rows pair up as ``(x, -1), (x, +1)``
    (checked on the design and labels, :func:`paired_logistic_rows`). All of it
    reads the query's compile, never the weights: a sparse table's problem (its
    occupied cells, so the data's) has a block design and a large clique. Kept per
    design and labels (the compile shares them between queries of one layout).
    """
    if not (
        type(problem) is GLMProblem  # what the evaluator compiles
        and is_signed_logistic(problem)
        and type(problem.design) is DenseDesign
        and math.prod(problem.sizes) < VECTOR_EXP_MIN_ROWS
    ):
        return None
    key = (id(problem.design), id(problem.labels))
    known = _PAIRED.get(key)
    if known is not None and known[0] is problem.design and known[1] is problem.labels:
        return known[2]
    columns, values = problem.design.row_major
    labels = np.ascontiguousarray(problem.labels, dtype=np.float64)
    form = (columns, values, labels) if paired_logistic_rows(columns, values, labels) else None
    if len(_PAIRED) >= 256:
        _PAIRED.clear()
    _PAIRED[key] = (problem.design, problem.labels, form)
    return form


#: :func:`_paired_form`'s answers by (design, labels) identity; each entry keeps its
#: two objects, so an id is never read for another object.
_PAIRED: dict[tuple[int, int], tuple[object, object, Any]] = {}
