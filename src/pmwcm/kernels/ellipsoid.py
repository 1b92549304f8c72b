"""The central-cut ellipsoid method on the ball ``||theta|| <= R``, run for a fixed
number of iterations: the real-data solve for losses without a declared smoothness
(its a-priori bound and the plan that fixes the count: :mod:`pmwcm.kernels.fixed_budget`).

Every iteration evaluates the objective and a (sub)gradient at the centre,
feasible or not, so the work never depends on the data-driven trajectory. Both
forms of the loop are here side by side: a compiled catalogue loss runs it in one
numba call (:func:`fixed_ellipsoid`, the value and gradient at each centre by
:func:`pmwcm.kernels.glm.glm_objective_and_gradient`); anything else runs the
NumPy loop (:func:`_ellipsoid_reference`), equal up to rounding
(``tests/test_round_fast_paths.py``). :func:`ellipsoid` chooses by the problem's
type, never by the weights. In one dimension the method is bisection.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.evaluator import COMPILED_DESIGNS, compiled_kind, evaluator
from pmwcm.kernels.glm import glm_objective, glm_objective_and_gradient
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem

__all__ = ["bisection", "ellipsoid", "fixed_ellipsoid"]


@njit(cache=True, nogil=True)
def fixed_ellipsoid(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    dim: int,
    l2: float,
    kind: int,
    param: float,
    radius: float,
    iterations: int,
) -> FloatArray:
    """``iterations`` central cuts of the ellipsoid method on the ball; the best feasible centre.

    The loop of :func:`_ellipsoid_reference` (the
    square-root form ``{c + B v : ||v|| <= 1}``, Grötschel, Lovász, Schrijver 1988,
    section 3.2), operation for operation, with its small matrix products written
    as loops: ``a = B' cut``, ``p = a / ||a||``, ``c <- c - B p / (d + 1)``,
    ``B <- d / sqrt(d^2 - 1) (B - (1 - sqrt((d - 1) / (d + 1))) (B p) p')``. The
    cut is the objective's gradient at a feasible centre and the ball's normal
    ``c`` at an infeasible one; the gradient is evaluated at every centre, so the
    work is the same for every ``weights`` (``dim >= 2``).
    """
    centre = np.zeros(dim)
    best = np.zeros(dim)
    root = np.zeros((dim, dim))
    for j in range(dim):
        root[j, j] = radius
    grad = np.zeros(dim)
    along = np.zeros(dim)
    step = np.zeros(dim)
    best_value = glm_objective(columns, values, labels, weights, centre, l2, kind, param)
    dilation = dim / math.sqrt(dim * dim - 1.0)
    squeeze = 1.0 - math.sqrt((dim - 1.0) / (dim + 1.0))
    for _ in range(iterations):
        # The value and the gradient at the centre in one pass (the gradient is
        # evaluated at every centre, feasible or not: the same work every time).
        value = glm_objective_and_gradient(
            columns, values, labels, weights, centre, l2, kind, param, grad
        )
        norm2 = 0.0
        for j in range(dim):
            norm2 += centre[j] * centre[j]
        feasible = norm2 <= radius * radius
        if feasible and value < best_value:
            best_value = value
            for j in range(dim):
                best[j] = centre[j]
        cut = grad if feasible else centre
        width2 = 0.0
        for k in range(dim):
            a = 0.0
            for j in range(dim):
                a += root[j, k] * cut[j]
            along[k] = a
            width2 += a * a
        width = math.sqrt(width2)
        if not width > 0.0:
            # A zero subgradient at a feasible centre: it is a minimiser, already kept.
            continue
        for k in range(dim):
            along[k] /= width  # now the unit direction p
        for j in range(dim):
            s = 0.0
            for k in range(dim):
                s += root[j, k] * along[k]
            step[j] = s
        for j in range(dim):
            centre[j] -= step[j] / (dim + 1.0)
            for k in range(dim):
                root[j, k] = (root[j, k] - step[j] * along[k] * squeeze) * dilation
    return best


def ellipsoid(problem: ConvexProblem, weights: FloatArray, iterations: int) -> FloatArray:
    """The ellipsoid method: one compiled call for a compiled catalogue loss
    (:func:`fixed_ellipsoid`, the same loop; equal to
    :func:`_ellipsoid_reference` up to rounding, ``tests/test_fast_paths.py``), else
    the NumPy loop. The choice reads the problem's type only, never the weights."""
    kind = compiled_kind(problem)
    if kind is not None:
        # compiled_kind admits exactly these: a catalogue GLM loss, dense or block design.
        assert isinstance(problem, GLMProblem)
        assert isinstance(problem.design, COMPILED_DESIGNS)
        columns, values = problem.design.row_major
        return fixed_ellipsoid(
            columns, values, np.ascontiguousarray(problem.labels, dtype=np.float64), weights,
            problem.dim, float(problem.l2), kind[0], kind[1], float(problem.radius), iterations,
        )  # fmt: skip
    return _ellipsoid_reference(problem, weights, iterations)


def _ellipsoid_reference(
    problem: ConvexProblem, weights: FloatArray, iterations: int
) -> FloatArray:
    """Central-cut ellipsoid method on the ball; returns the best feasible centre.

    The ellipsoid is ``{c + B v : ||v|| <= 1}``, starting as the ball (``B = R I``).
    A feasible centre is cut by the objective's (sub)gradient ``g``, an infeasible
    one by the ball's normal ``c``; both keep every point that could beat the best
    feasible centre seen so far. With ``a = B' g`` and ``p = a / ||a||`` the update
    is ``c <- c - B p / (d + 1)`` and ``B <- d / sqrt(d^2 - 1) (B - (1 - sqrt((d - 1)
    / (d + 1))) (B p) p')``, which is the textbook update of ``H = B B'`` written
    for its square root (Grötschel, Lovász, Schrijver 1988, section 3.2). The
    square-root form matters: the textbook form stores squared widths, which
    cancel to zero after a few dozen cuts along one direction (a linear piece of
    a hinge loss) and stall the method above its planned gap; ``B`` stores the
    widths themselves, which the planned gap (``V / tau <= 1e10``) keeps far
    above float64's resolution.
    """
    dim, radius = problem.dim, problem.radius
    fast = evaluator(problem, weights)
    centre = np.zeros(dim)
    root = np.eye(dim) * radius
    rank_one = np.empty((dim, dim))
    best, best_value = centre, fast.objective(centre)
    dilation = dim / math.sqrt(dim * dim - 1.0)
    squeeze = 1.0 - math.sqrt((dim - 1.0) / (dim + 1.0))
    for _ in range(iterations):
        value = fast.objective(centre)
        feasible = float(centre @ centre) <= radius * radius
        if feasible and value < best_value:
            best, best_value = centre, value
        # The gradient is evaluated at every centre, feasible or not, so that the
        # work per iteration does not depend on the (data-driven) trajectory.
        gradient = fast.gradient(centre)  # a reused buffer, consumed by the cut below
        cut = gradient if feasible else centre
        along = root.T @ cut
        width = float(np.linalg.norm(along))
        if not width > 0.0:
            # A zero subgradient at a feasible centre: it is a minimiser, already kept.
            continue
        direction = along / width
        step = root @ direction
        centre = centre - step / (dim + 1.0)
        # root = dilation (root - squeeze outer(step, direction)), in place.
        np.outer(step, direction, out=rank_one)
        np.multiply(rank_one, squeeze, out=rank_one)
        np.subtract(root, rank_one, out=root)
        np.multiply(root, dilation, out=root)
    return best


def bisection(problem: ConvexProblem, weights: FloatArray, iterations: int) -> FloatArray:
    """The one-dimensional ellipsoid method: halve ``[-R, R]`` by the derivative's sign."""
    low, high = -problem.radius, problem.radius
    fast = evaluator(problem, weights)
    centre = np.zeros(1)
    best, best_value = centre, fast.objective(centre)
    for _ in range(iterations):
        centre = np.array([0.5 * (low + high)])
        value = fast.objective(centre)
        if value < best_value:
            best, best_value = centre, value
        if float(fast.gradient(centre)[0]) > 0.0:
            high = float(centre[0])
        else:
            low = float(centre[0])
    return best
