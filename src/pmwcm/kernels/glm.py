"""The GLM arithmetic: objective, gradient and Hessian of a catalogue query, in two forms.

Every catalogue query is a generalised linear model on the cells of its clique's
marginal table (docs/design.md section 2). This module is the one place its
arithmetic is written; solvers, oracles and evaluators call it.

**Conventions.**

* *Rows.* Row ``r`` is a cell ``x_C`` of the clique with features
  ``phi_r = phi(x_C)`` (``||phi_r|| <= B <= 1``: :mod:`pmwcm.kernels.encoding`),
  label ``y_r`` and weight ``w_r``. ``z_r = <phi_r, theta>`` is the linear predictor.
* *Labels.* A classification loss (logistic, smoothed hinge, hinge) reads
  ``y in {-1, +1}``: the target's first value is ``-1``, its second ``+1``. A
  regression loss reads the target's code scaled onto ``[-1, 1]``.
* *Weights, and the 1/n.* ``w`` is a (possibly noisy) marginal of the
  *normalised* histogram: ``w_r = D_C(x_C) / n`` on the data, summing to 1. The
  ``1/n`` is in the weights; nothing here divides by ``n`` or by ``sum w``
  (scikit-learn's ``LinearModelLoss`` divides by ``sum_i s_i``; we do not).
* *Regulariser.* ``(lambda/2) ||theta||^2`` with ``lambda = l2 >= 0``; it is
  the same for every record, so the per-cell terms and the data Hessian leave it
  out and the objective and gradient add it.
* *Radius.* ``Theta = {||theta|| <= R}``. The arithmetic here is total on every
  finite ``theta``; the solvers project onto the ball.

**The formulas**, with ``Phi`` the ``(rows, d)`` design::

    F(theta)      = sum_r w_r f(z_r, y_r) + (lambda/2) ||theta||^2
    grad F(theta) = Phi' (w * f'(z, y)) + lambda theta
    H(theta)      = Phi' diag(w * f''(z, y)) Phi            (the data term only)

and, per loss (``f'`` a subgradient at a kink; ``p = expit(y z)``, ``r = z - y``):

=========  =================================  =======================  ==================
loss       ``f(z, y)``                        ``f'(z, y)``             ``f''(z, y)``
=========  =================================  =======================  ==================
logistic   ``log(1 + exp(-y z))``             ``-y expit(-y z)``       ``p (1 - p)``
squared    ``r^2 / 2``                        ``r``                    ``1``
Huber      ``r^2/2`` or ``h|r| - h^2/2``      ``clip(r, -h, h)``       ``[|r| <= h]``
=========  =================================  =======================  ==================

The other catalogue losses (smoothed hinge, hinge, quantile, absolute and the
Moreau envelopes of the non-smooth ones) are written once, vectorised, in
:mod:`pmwcm.kernels.losses`.

**Two forms, side by side.** The *NumPy form* (:func:`objective`,
:func:`gradient`, :func:`data_hessian`, ...) takes a
:class:`~pmwcm.kernels.design.Design` and a :class:`~pmwcm.kernels.losses.GLMLoss`
and serves every loss: :class:`~pmwcm.kernels.queries.GLMProblem` and the
audit's oracle models are written with it. The *compiled form*
(:func:`glm_objective`, :func:`glm_gradient`, :func:`glm_hessian`) serves the
losses of :data:`LOSS_KINDS` by kind code, on a design's row-major entries
(``columns``, ``values`` of shape ``(rows, B)``, ``B`` entries per row): one
Numba pass over the rows per call (``nogil``: the real-data solve runs on a
worker thread beside the hypothesis's) where NumPy makes a dozen. The compiled
solver loops (:mod:`pmwcm.kernels.fista`, :mod:`pmwcm.kernels.paired_logistic`,
:mod:`pmwcm.kernels.newton`, :mod:`pmwcm.kernels.ellipsoid`) take their loss
arithmetic from the per-row terms here and nowhere else.

The same mathematics, not the same bits: the compiled sums run row by row, so
the forms differ by rounding, about ``1e-16`` relative (``tests/test_glm.py``
checks them against each other and against finite differences). The engine
takes the compiled form for every design, dense or block, whose loss has a
kind code. Numba's on-disk cache (``cache=True``) is keyed by the file that
defines a function, not by the files it calls: after editing the per-row terms
here, delete ``__pycache__/*.nbi`` so that the loops in the other modules are
compiled again.

**Totality.** ``exp`` of a large argument overflows to ``inf``; the formulas
are arranged so that it never meets ``inf / inf`` or ``inf - inf``, so no
evaluation on the private data raises or turns finite input into a NaN.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.design import Design
from pmwcm.kernels.losses import GLMLoss, Huber, Logistic, Squared

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

# The NumPy form, the compiled form, and the kinds (the per-row terms are public too:
# the compiled loops of the solver modules inline them).
__all__ = ["batch_data_gradient", "cell_losses", "cell_slopes", "data_gradient", "data_hessian"]
__all__ += ["gradient", "objective"]
__all__ += ["glm_gradient", "glm_hessian", "glm_objective", "glm_value_gradient_hessian"]
__all__ += ["glm_objective_and_gradient", "paired_logistic_slope", "signed_logistic_slopes"]
__all__ += ["HUBER", "LOGISTIC", "LOSS_KINDS", "SQUARED", "loss_kind"]

LOGISTIC, SQUARED, HUBER = 0, 1, 2
#: The losses with a compiled form, by type: their kind code.
LOSS_KINDS: dict[type[GLMLoss], int] = {Logistic: LOGISTIC, Squared: SQUARED, Huber: HUBER}


def loss_kind(loss: GLMLoss) -> tuple[int, float] | None:
    """``(kind, parameter)`` of a loss with a compiled form (Huber's ``delta``), or ``None``."""
    kind = LOSS_KINDS.get(type(loss))
    if kind is None:
        return None
    return kind, float(loss.delta) if isinstance(loss, Huber) else 0.0


# --- The NumPy form: any catalogue loss, any design ----------------------------------


def cell_losses(loss: GLMLoss, design: Design, labels: FloatArray, theta: FloatArray) -> FloatArray:
    """``f(z_r, y_r)`` of every row, shape ``(rows,)``."""
    return loss.value(design.matvec(theta), labels)


def cell_slopes(loss: GLMLoss, design: Design, labels: FloatArray, theta: FloatArray) -> FloatArray:
    """``f'(z_r, y_r)`` of every row: row ``r``'s gradient is this times ``phi_r``."""
    return loss.derivative(design.matvec(theta), labels)


def objective(
    loss: GLMLoss,
    design: Design,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
) -> float:
    """``F(theta) = sum_r w_r f(z_r, y_r) + (lambda/2) ||theta||^2``."""
    return float(weights @ cell_losses(loss, design, labels, theta) + 0.5 * l2 * (theta @ theta))


def data_gradient(
    loss: GLMLoss, design: Design, labels: FloatArray, weights: FloatArray, theta: FloatArray
) -> FloatArray:
    """The data term's gradient ``Phi' (w * f'(z, y))``."""
    return design.rmatvec(weights * cell_slopes(loss, design, labels, theta))


def gradient(
    loss: GLMLoss,
    design: Design,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
) -> FloatArray:
    """``grad F(theta) = Phi' (w * f'(z, y)) + lambda theta``."""
    return data_gradient(loss, design, labels, weights, theta) + l2 * theta


def data_hessian(
    loss: GLMLoss, design: Design, labels: FloatArray, weights: FloatArray, theta: FloatArray
) -> FloatArray | None:
    """The data term's Hessian ``Phi' diag(w * f''(z, y)) Phi``; ``None`` for a
    loss without a second derivative (the non-smooth ones: use their envelope)."""
    try:
        curvature = loss.second_derivative(design.matvec(theta), labels)
    except NotImplementedError:
        return None
    return design.gram(weights * curvature)


def batch_data_gradient(
    loss: GLMLoss, features: FloatArray, labels: FloatArray, weights: FloatArray, thetas: FloatArray
) -> FloatArray:
    """:func:`data_gradient` at every row of ``thetas`` ``(k, d)`` at once, shape ``(k, d)``
    (a dense ``(rows, d)`` ``features`` matrix): the audit's models of an oracle run
    thousands of trials side by side."""
    slopes = loss.derivative(thetas @ features.T, labels[None, :])
    return (slopes * weights) @ features


def signed_logistic_slopes(
    margins: FloatArray, signed_weights: FloatArray, out: FloatArray
) -> FloatArray:
    """``w_r f'(z_r, y_r)`` of the logistic loss with labels exactly ``+-1``, vectorised.

    With ``m_r = y_r z_r`` the slope is ``-y_r expit(-m_r) = -y_r / (1 + exp(m_r))``,
    so given ``signed_weights = -y * w`` it is one vectorised (SIMD) ``exp``, an
    addition and a division. ``margins`` is overwritten. ``exp(m)`` overflowing to
    ``inf`` gives a slope of ``0``, never a NaN; the overflow is expected (a row far
    on the wrong side), and the caller runs its loop under
    ``np.errstate(over="ignore")`` (once: entering it costs about a microsecond) so
    that nothing about the data is printed.
    """
    np.exp(margins, out=margins)
    margins += 1.0
    return np.divide(signed_weights, margins, out=out)


# --- The compiled form: the losses of LOSS_KINDS, row-major entries -------------------


@njit(cache=True, nogil=True, inline="always")
def expit(t: float) -> float:
    """``1 / (1 + exp(-t))`` without overflow into ``inf / inf``."""
    if t >= 0.0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


@njit(cache=True, nogil=True, inline="always")
def row_value(kind: int, param: float, z: float, y: float) -> float:
    """``f(z, y)`` of the loss ``kind`` (``param``: Huber's ``delta``)."""
    if kind == LOGISTIC:  # log(1 + exp(-y z)), as logaddexp(0, t)
        t = -y * z
        return max(t, 0.0) + math.log1p(math.exp(-abs(t)))
    r = z - y
    if kind == SQUARED:
        return 0.5 * r * r
    a = abs(r)  # Huber
    return 0.5 * a * a if a <= param else param * a - 0.5 * param * param


@njit(cache=True, nogil=True, inline="always")
def row_slope(kind: int, param: float, z: float, y: float) -> float:
    """``f'(z, y)`` of the loss ``kind``."""
    if kind == LOGISTIC:  # -y expit(-y z)
        return -y * expit(-y * z)
    r = z - y
    if kind == SQUARED:
        return r
    return min(max(r, -param), param)  # Huber


@njit(cache=True, nogil=True, inline="always")
def row_curvature(kind: int, param: float, z: float, y: float) -> float:
    """``f''(z, y)`` of the loss ``kind``."""
    if kind == LOGISTIC:  # p (1 - p), p = expit(y z)
        p = expit(y * z)
        return p * (1.0 - p)
    if kind == SQUARED:
        return 1.0
    return 1.0 if abs(z - y) <= param else 0.0  # Huber


@njit(cache=True, nogil=True, inline="always")
def row_value_and_slope(kind: int, param: float, z: float, y: float) -> tuple[float, float]:
    """``(f(z, y), f'(z, y))``, bit for bit :func:`row_value` and :func:`row_slope`.

    For the logistic loss one ``exp(-|t|)``, ``t = -y z``, serves both the value
    ``max(t, 0) + log1p(exp(-|t|))`` and the slope ``-y expit(t)`` (:func:`expit`
    takes the same ``exp`` on either side of 0).
    """
    if kind == LOGISTIC:
        t = -y * z
        e = math.exp(-abs(t))
        return max(t, 0.0) + math.log1p(e), -y * (1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e))
    return row_value(kind, param, z, y), row_slope(kind, param, z, y)


@njit(cache=True, nogil=True, inline="always")
def paired_logistic_slope(u: float, w_minus: float, w_plus: float) -> float:
    """``w_- f'(u, -1) + w_+ f'(u, +1) = w_- expit(u) - w_+ expit(-u)``: the logistic
    slope of a pair of rows with the same features and labels ``-1``, ``+1``.

    One ``exp(-|u|) <= 1`` and one division (never an overflow, never
    ``inf / inf``): with ``s = 1 / (1 + e)`` the two sigmoids are ``s`` and
    ``e s``, in the order the sign of ``u`` gives.
    """
    e = math.exp(-abs(u))
    s = 1.0 / (1.0 + e)
    if u >= 0.0:
        return w_minus * s - w_plus * (e * s)
    return w_minus * (e * s) - w_plus * s


@njit(cache=True, nogil=True, inline="always")
def row_dot(columns: IntArray, values: FloatArray, r: int, theta: FloatArray) -> float:
    """``z_r = <phi_r, theta>``: row ``r``'s ``B`` entries against ``theta``."""
    z = 0.0
    for b in range(columns.shape[1]):
        z += values[r, b] * theta[columns[r, b]]
    return z


@njit(cache=True, nogil=True)
def glm_objective(
    columns: IntArray,
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
) -> float:
    """``F(theta)``, compiled."""
    total = 0.0
    for r in range(columns.shape[0]):
        z = row_dot(columns, values, r, theta)
        total += weights[r] * row_value(kind, param, z, labels[r])
    return total + 0.5 * l2 * np.dot(theta, theta)


@njit(cache=True, nogil=True)
def glm_gradient(
    columns: IntArray,
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
    out: FloatArray,
) -> FloatArray:
    """``grad F(theta)``, compiled, into ``out`` (returned)."""
    rows, blocks = columns.shape
    for j in range(out.size):
        out[j] = l2 * theta[j]
    for r in range(rows):
        z = row_dot(columns, values, r, theta)
        s = weights[r] * row_slope(kind, param, z, labels[r])
        for b in range(blocks):
            out[columns[r, b]] += s * values[r, b]
    return out


@njit(cache=True, nogil=True)
def glm_objective_and_gradient(
    columns: IntArray,
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
    out: FloatArray,
) -> float:
    """:func:`glm_objective` (returned) and :func:`glm_gradient` (into ``out``) in one
    pass: the same per-row terms in the same order (:func:`row_value_and_slope`), so
    both are bit for bit those functions' results."""
    rows, blocks = columns.shape
    for j in range(out.size):
        out[j] = l2 * theta[j]
    total = 0.0
    for r in range(rows):
        z = row_dot(columns, values, r, theta)
        value, slope = row_value_and_slope(kind, param, z, labels[r])
        total += weights[r] * value
        s = weights[r] * slope
        for b in range(blocks):
            out[columns[r, b]] += s * values[r, b]
    return total + 0.5 * l2 * np.dot(theta, theta)


@njit(cache=True, nogil=True, inline="always")
def row_value_slope_curvature(
    kind: int, param: float, z: float, y: float
) -> tuple[float, float, float]:
    """``(f, f', f'')(z, y)``, bit for bit :func:`row_value`, :func:`row_slope` and
    :func:`row_curvature`.

    For the logistic loss one ``e = exp(-|y z|)`` serves all three: the value and
    slope as in :func:`row_value_and_slope`, and ``p = expit(y z)``, which
    :func:`expit` takes from the same ``exp`` (``1 / (1 + e)`` for ``y z >= 0``,
    ``e / (1 + e)`` below), so the curvature ``p (1 - p)`` is its own bits too.
    """
    if kind == LOGISTIC:
        t = -y * z
        e = math.exp(-abs(t))
        value = max(t, 0.0) + math.log1p(e)
        slope = -y * (1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e))
        p = 1.0 / (1.0 + e) if y * z >= 0.0 else e / (1.0 + e)
        return value, slope, p * (1.0 - p)
    return (
        row_value(kind, param, z, y),
        row_slope(kind, param, z, y),
        row_curvature(kind, param, z, y),
    )


@njit(cache=True, nogil=True)
def glm_value_gradient_hessian(
    columns: IntArray,
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
    gradient_out: FloatArray,
    hessian_out: FloatArray,
) -> float:
    """:func:`glm_objective` (returned), :func:`glm_gradient` (into ``gradient_out``)
    and :func:`glm_hessian` (into ``hessian_out``) in one pass over the rows.

    Each row's ``z`` and loss terms are taken once (:func:`row_value_slope_curvature`)
    and each sum is accumulated in the same order as in its own function, so all
    three are bit for bit those functions' results. On a design of millions of rows
    the pass costs about what the Hessian's alone does: the Newton solve's step on a
    wide support clique (:func:`pmwcm.kernels.newton.newton_solve`).
    """
    rows, blocks = columns.shape
    for j in range(theta.size):
        gradient_out[j] = l2 * theta[j]
    hessian_out[:] = 0.0
    total = 0.0
    for r in range(rows):
        z = row_dot(columns, values, r, theta)
        value, slope, curvature = row_value_slope_curvature(kind, param, z, labels[r])
        total += weights[r] * value
        s = weights[r] * slope
        c = weights[r] * curvature
        # The gradient's and the Hessian's scatters in one loop over the row's blocks:
        # apart (glm_hessian's row loop after the gradient's) the pass was 17% slower.
        for a in range(blocks):
            ca, va = columns[r, a], values[r, a]
            gradient_out[ca] += s * va
            cva = c * va
            hessian_out[ca, ca] += cva * va
            for b in range(a + 1, blocks):
                hessian_out[ca, columns[r, b]] += cva * values[r, b]
    mirror_pairs(hessian_out)
    return total + 0.5 * l2 * np.dot(theta, theta)


@njit(cache=True, nogil=True)
def glm_hessian(
    columns: IntArray,
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    kind: int,
    param: float,
) -> FloatArray:
    """The data term's Hessian ``sum_r w_r f''(z_r, y_r) phi_r phi_r'``, compiled."""
    rows, blocks = columns.shape
    dim = theta.size
    out = np.zeros((dim, dim))
    for r in range(rows):
        z = row_dot(columns, values, r, theta)
        c = weights[r] * row_curvature(kind, param, z, labels[r])
        for a in range(blocks):
            ca, va = columns[r, a], c * values[r, a]
            out[ca, ca] += va * values[r, a]
            # Two blocks never share a column (design.BlockDesign), so each pair
            # of a row's entries is one off-diagonal entry: added once, at
            # (earlier block's column, later block's column), and mirrored below.
            for b in range(a + 1, blocks):
                out[ca, columns[r, b]] += va * values[r, b]
    mirror_pairs(out)
    return out


@njit(cache=True, nogil=True, inline="always")
def mirror_pairs(out: FloatArray) -> None:
    """The Hessian from its rows' sums with each off-diagonal pair added on one side
    only (:func:`glm_hessian`, :func:`glm_value_gradient_hessian`): each off-diagonal
    entry is the sum of its two sides (``(i, j)`` with ``i < j`` when blocks are in
    column order), written on both."""
    dim = out.shape[0]
    for i in range(dim):
        for j in range(i + 1, dim):
            total = out[i, j] + out[j, i]
            out[i, j] = total
            out[j, i] = total
