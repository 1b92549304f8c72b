"""The fixed-budget FISTA, compiled: a whole solve of the real-data problem in one call.

The fixed-budget real-data solve (:mod:`pmwcm.kernels.fixed_budget`) runs a
number of FISTA iterations fixed from public inputs (Beck, Teboulle 2009,
eq. 4.1-4.3) on the ball ``||theta|| <= R``, with no early exit, so that the
work is the same for every dataset. Here that loop is one Numba call (``nogil``:
it runs on the engine's worker thread beside the hypothesis's solve), in two
forms:

* :func:`fixed_fista`, for any loss with a compiled form, on a row-major design
  (the gradient by :func:`pmwcm.kernels.glm.glm_gradient`);
* :func:`fixed_fista_signed_logistic`, for the logistic loss with labels exactly
  ``+-1`` on a large clique, on a block-major design: each iteration's
  exponentials by NumPy's vectorised ``exp``
  (:func:`pmwcm.kernels.glm.signed_logistic_slopes`).

Both take the step :func:`fista_step`. The loss arithmetic is
:mod:`pmwcm.kernels.glm`'s; the paired-rows logistic fast path is
:mod:`pmwcm.kernels.paired_logistic`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.glm import glm_gradient, signed_logistic_slopes

FloatArray = NDArray[np.float64]

__all__ = ["VECTOR_EXP_MIN_ROWS", "fista_step", "fixed_fista", "fixed_fista_signed_logistic"]

#: From a clique of this many cells the logistic fixed-budget FISTA takes its
#: exponentials with NumPy's vectorised ``exp`` (:func:`fixed_fista_signed_logistic`):
#: below it, the three calls per iteration cost more than the scalar ``exp`` they
#: save. It is compared with the clique's size, never with the rows a table holds
#: (see :class:`~pmwcm.kernels.evaluator.CompiledGLMEvaluator`).
VECTOR_EXP_MIN_ROWS = 1024


@njit(cache=True, nogil=True, inline="always")
def fista_step(
    grad: FloatArray,
    y: FloatArray,
    theta: FloatArray,
    nxt: FloatArray,
    step: float,
    radius: float,
    momentum: float,
) -> float:
    """FISTA's step from ``y`` given ``grad F(y)`` (which may be ``nxt`` itself).

    ``x = P(y - step g)`` (projection onto the ball of ``radius``), then
    ``y' = x + ((t - 1) / t') (x - theta)`` and ``theta = x``, in place; returns ``t'``.
    """
    dim = theta.size
    norm2 = 0.0
    for j in range(dim):
        nxt[j] = y[j] - step * grad[j]
        norm2 += nxt[j] * nxt[j]
    norm = math.sqrt(norm2)
    if norm > radius:
        shrink = radius / norm
        for j in range(dim):
            nxt[j] *= shrink
    following = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum))
    carry = (momentum - 1.0) / following
    for j in range(dim):
        y[j] = nxt[j] + carry * (nxt[j] - theta[j])
        theta[j] = nxt[j]
    return following


@njit(cache=True, nogil=True)
def fixed_fista(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    dim: int,
    l2: float,
    kind: int,
    param: float,
    radius: float,
    step: float,
    iterations: int,
) -> FloatArray:
    """``iterations`` steps of FISTA with the constant step from ``0`` on the ball.

    The loop of :func:`pmwcm.kernels.fixed_budget._fista` (Beck, Teboulle 2009,
    eq. 4.1-4.3), operation for operation: ``x = P(y - step grad F(y))``, then
    ``y' = x + ((t - 1) / t') (x - theta)``. No early exit: the work is the same
    for every ``weights``.
    """
    theta = np.zeros(dim)
    y = np.zeros(dim)
    nxt = np.zeros(dim)
    grad = np.zeros(dim)
    momentum = 1.0
    for _ in range(iterations):
        glm_gradient(columns, values, labels, weights, y, l2, kind, param, grad)
        momentum = fista_step(grad, y, theta, nxt, step, radius, momentum)
    return theta


#: Partial sums per column in :func:`_block_logistic_step`'s scatter: rows sorted by
#: cell code repeat a column run after run, and one accumulator would make every
#: addition wait for the one before it; four independent chains do not (a power
#: of two: the chain is the row's low bits).
_CHAINS = 4


@njit(cache=True, nogil=True)
def _block_margins(
    columns: NDArray[np.int64],
    values: FloatArray,
    fixed: NDArray[np.int64],
    constants: FloatArray,
    labels: FloatArray,
    theta: FloatArray,
    out: FloatArray,
) -> None:
    """``out = y * (Phi theta)`` for a block-major design (``(B, rows)`` entries).

    A block of one column (``fixed[b] >= 0``: an ordinal, binary or intercept
    block) adds ``theta[fixed[b]] values[b]``, a contiguous multiply-add; any
    other block gathers ``theta`` at its columns, times its constant value where it
    has one (``constants[b] != 0``: a one-hot block, whose values need not be read).
    """
    blocks, rows = columns.shape
    for r in range(rows):
        out[r] = 0.0
    for b in range(blocks):
        if fixed[b] >= 0:
            coefficient = theta[fixed[b]]
            for r in range(rows):
                out[r] += coefficient * values[b, r]
        elif constants[b] != 0.0:
            constant = constants[b]
            for r in range(rows):
                out[r] += theta[columns[b, r]] * constant
        else:
            for r in range(rows):
                out[r] += theta[columns[b, r]] * values[b, r]
    for r in range(rows):
        out[r] *= labels[r]


@njit(cache=True, nogil=True)
def _block_logistic_step(
    columns: NDArray[np.int64],
    values: FloatArray,
    fixed: NDArray[np.int64],
    constants: FloatArray,
    slopes: FloatArray,
    l2: float,
    radius: float,
    step: float,
    momentum: float,
    theta: FloatArray,
    y: FloatArray,
    nxt: FloatArray,
    partial: FloatArray,
) -> float:
    """One FISTA step at ``y`` given each row's ``slopes[r] = w_r f'(z_r, y_r)``; returns
    the momentum.

    The gradient ``Phi^T slopes + lambda y``, block by block: a one-column block
    is a dot product (four running sums), any other a scatter into
    :data:`_CHAINS` partial gradients summed at the end (of ``slopes`` times the
    block's constant value, where it has one). Then
    ``x = P(y - step g)``, ``y' = x + ((t - 1) / t') (x - theta)``, ``theta = x``.
    """
    blocks, rows = columns.shape
    dim = theta.size
    for j in range(dim):
        nxt[j] = l2 * y[j]
    whole = rows - rows % _CHAINS
    for b in range(blocks):
        if fixed[b] >= 0:
            s0 = s1 = s2 = s3 = 0.0
            for r in range(0, whole, _CHAINS):
                s0 += slopes[r] * values[b, r]
                s1 += slopes[r + 1] * values[b, r + 1]
                s2 += slopes[r + 2] * values[b, r + 2]
                s3 += slopes[r + 3] * values[b, r + 3]
            for r in range(whole, rows):
                s0 += slopes[r] * values[b, r]
            nxt[fixed[b]] += (s0 + s1) + (s2 + s3)
        else:
            partial[:, :] = 0.0
            if constants[b] != 0.0:
                constant = constants[b]
                for r in range(rows):
                    partial[r & (_CHAINS - 1), columns[b, r]] += slopes[r] * constant
            else:
                for r in range(rows):
                    partial[r & (_CHAINS - 1), columns[b, r]] += slopes[r] * values[b, r]
            for j in range(dim):
                nxt[j] += (partial[0, j] + partial[1, j]) + (partial[2, j] + partial[3, j])
    return fista_step(nxt, y, theta, nxt, step, radius, momentum)


def fixed_fista_signed_logistic(
    columns: NDArray[np.int64],
    values: FloatArray,
    fixed: NDArray[np.int64],
    constants: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    dim: int,
    l2: float,
    radius: float,
    step: float,
    iterations: int,
) -> FloatArray:
    """:func:`fixed_fista` for the logistic loss with labels exactly ``+-1``, on a
    block-major design (``columns``, ``values`` of shape ``(B, rows)``; ``fixed[b]``
    the column of a one-column block, ``-1`` for another; ``constants[b]`` the value
    every row of a block has, ``0`` where they differ: ``BlockDesign.block_major``).
    A constant multiplies exactly as the stored values would (they are the same
    float), so the iterates do not depend on it; it saves reading ``values`` for the
    one-hot blocks, about a sixth of the time on a 20,000-row table of three one-hot
    features.

    The same iteration, each in two compiled passes (:func:`_block_margins`,
    :func:`_block_logistic_step`) with the slopes between them taken by NumPy's
    vectorised (SIMD) ``exp`` and division
    (:func:`~pmwcm.kernels.glm.signed_logistic_slopes`), several times faster than
    one scalar ``exp`` and division per row, which were most of an iteration's
    cost. The sums run in a fixed order (the same on every machine: no
    reassociation by the compiler), so results are reproducible.
    """
    rows = columns.shape[1]
    signed_weights = -labels * weights
    margins, slopes = np.empty(rows), np.empty(rows)
    theta, y, nxt = np.zeros(dim), np.zeros(dim), np.zeros(dim)
    partial = np.zeros((_CHAINS, dim))
    momentum = 1.0
    with np.errstate(over="ignore"):
        for _ in range(iterations):
            _block_margins(columns, values, fixed, constants, labels, y, margins)
            signed_logistic_slopes(margins, signed_weights, slopes)
            momentum = _block_logistic_step(
                columns,
                values,
                fixed,
                constants,
                slopes,
                l2,
                radius,
                step,
                momentum,
                theta,
                y,
                nxt,
                partial,
            )
    return theta
