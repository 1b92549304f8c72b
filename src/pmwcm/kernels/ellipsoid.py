"""The central-cut ellipsoid method on the ball ``||theta|| <= R``, run for a fixed
number of iterations: the real-data solve for losses without a declared smoothness
(its a-priori bound and the plan that fixes the count: :mod:`pmwcm.kernels.fixed_budget`).

Every iteration evaluates the objective and a (sub)gradient at the centre,
feasible or not, so the work never depends on the data-driven trajectory. A
compiled catalogue loss runs the loop in one numba call
(:func:`~pmwcm.kernels.compiled.fixed_ellipsoid`); anything else runs the NumPy
loop (:func:`_ellipsoid_reference`), equal up to rounding
(``tests/test_round_fast_paths.py``). In one dimension the method is bisection.
"""

from __future__ import annotations

import math

import numpy as np

from pmwcm.kernels.compiled import fixed_ellipsoid
from pmwcm.kernels.evaluator import COMPILED_DESIGNS, compiled_kind, evaluator
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem


def ellipsoid(problem: ConvexProblem, weights: FloatArray, iterations: int) -> FloatArray:
    """The ellipsoid method: one compiled call for a compiled catalogue loss
    (:func:`~pmwcm.kernels.compiled.fixed_ellipsoid`, the same loop; equal to
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
