"""The projected Newton method, compiled: the hypothesis's solve in one call.

:func:`newton_solve` is :func:`pmwcm.kernels.solvers._newton` for a GLM with a
compiled loss: each step minimises the second-order model over the ball exactly
(:func:`pmwcm.kernels.ball.ball_quadratic_min`), the objective, gradient and
Hessian by :mod:`pmwcm.kernels.glm`. Used on the public hypothesis (and exact
baselines) only: its iteration count depends on the weights.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.ball import ball_quadratic_min, dot
from pmwcm.kernels.glm import glm_objective, glm_value_gradient_hessian

FloatArray = NDArray[np.float64]

__all__ = ["newton_solve"]


@njit(cache=True, nogil=True)
def newton_solve(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    l2: float,
    kind: int,
    param: float,
    radius: float,
    theta: FloatArray,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, int, bool]:
    """:func:`pmwcm.kernels.solvers._newton` for a compiled GLM, in one call.

    Projected Newton from ``theta``: each step minimises the second-order model
    over the ball exactly (:func:`ball_quadratic_min`), then Armijo backtracking
    along the segment; stops at the Frank-Wolfe gap ``<g, theta> + R ||g|| <= tol``.
    The same branches as the NumPy loop (the full model step when the predicted
    decrease is below float64's resolution of the values, the give-ups that hand
    over to FISTA), so it returns ``(theta, iterations, converged)`` equal to it up
    to rounding. Used on the public hypothesis (and exact baselines) only: its
    iteration count depends on the weights.

    Every point the solve moves to gets its value, gradient and Hessian in one pass
    over the rows (:func:`glm_value_gradient_hessian`, bit for bit the three passes
    it replaces): the first candidate of a step is taken that way, since the full
    step is the one Armijo usually accepts, and a later candidate by its value
    alone, the pass then made at the point accepted. On a support clique of a
    million occupied cells a step costs one pass of about the Hessian's price where
    it cost three (``benchmarks/README.md``, "Newton's passes fused"); the last
    point's Hessian is the one pass too many.
    """
    dim = theta.size
    grad = np.zeros(dim)
    hess = np.zeros((dim, dim))
    cand_grad = np.zeros(dim)
    cand_hess = np.zeros((dim, dim))
    theta = theta.copy()
    value = glm_value_gradient_hessian(
        columns, values, labels, weights, theta, l2, kind, param, grad, hess
    )
    full_step_gap = math.inf
    for it in range(1, max_iter + 1):
        gap = max(0.0, dot(grad, theta) + radius * math.sqrt(dot(grad, grad)))
        if gap <= tol:
            return theta, it - 1, True
        for j in range(dim):
            hess[j, j] += l2 + 1e-12
        target = ball_quadratic_min(hess, grad - hess @ theta, radius)
        direction = target - theta
        slope = dot(grad, direction)
        if slope >= 0.0:
            return theta, it, False
        if -slope <= 1e-12 * max(1.0, abs(value)):
            if gap >= full_step_gap:
                return theta, it, False
            full_step_gap = gap
            theta = target
            value = glm_value_gradient_hessian(
                columns, values, labels, weights, theta, l2, kind, param, grad, hess
            )
            continue
        candidate = theta + direction
        cand_value = glm_value_gradient_hessian(
            columns, values, labels, weights, candidate, l2, kind, param, cand_grad, cand_hess
        )
        if cand_value <= value + 1e-4 * slope:
            theta, value = candidate, cand_value
            grad, cand_grad = cand_grad, grad
            hess, cand_hess = cand_hess, hess
            continue
        step = 0.5
        accepted = False
        while step > 1e-10:
            candidate = theta + step * direction
            cand_value = glm_objective(columns, values, labels, weights, candidate, l2, kind, param)
            if cand_value <= value + 1e-4 * step * slope:
                accepted = True
                break
            step *= 0.5
        if not accepted:
            return theta, it, False
        theta = candidate
        value = glm_value_gradient_hessian(
            columns, values, labels, weights, theta, l2, kind, param, grad, hess
        )
    gap = max(0.0, dot(grad, theta) + radius * math.sqrt(dot(grad, grad)))
    return theta, max_iter, gap <= tol
