"""The ellipsoid method with a fixed number of cuts, compiled.

The fixed-budget real-data solve of a problem of small dimension
(:mod:`pmwcm.kernels.fixed_budget`) may run central cuts of the ellipsoid method
instead of FISTA; :func:`fixed_ellipsoid` is that loop in one call, the value
and gradient at each centre by
:func:`pmwcm.kernels.glm.glm_objective_and_gradient`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.glm import glm_objective, glm_objective_and_gradient

FloatArray = NDArray[np.float64]

__all__ = ["fixed_ellipsoid"]


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

    The loop of :func:`pmwcm.kernels.fixed_budget._ellipsoid_reference` (the
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
