"""Compiled GLM kernels on a block design: one call per evaluation, or per whole solve.

A catalogue query on a large clique is solved on the table's occupied cells
(thousands to tens of thousands of rows) with a :class:`~pmwcm.kernels.design.BlockDesign`:
every row has exactly ``B`` entries (one per feature block). Each evaluation of

* ``F(theta) = sum_r w_r f(<phi_r, theta>, y_r) + (lambda/2) ||theta||^2``,
* ``grad F(theta) = sum_r w_r f'(<phi_r, theta>, y_r) phi_r + lambda theta``,
* ``H(theta) = sum_r w_r f''(<phi_r, theta>, y_r) phi_r phi_r'`` (the data term),

is ``O(rows B)`` arithmetic (``O(rows B^2)`` for ``H``), but in NumPy it is a
dozen array passes, each with its own temporary and call overhead, and the
fixed-budget real-data solve (:mod:`pmwcm.kernels.fixed_budget`) makes about
250 of them per query. Here each is one pass over the rows, compiled by Numba
(``nogil``: the engine's real-data solve on its worker thread runs on the
second core while the hypothesis is solved on the first), and the whole
fixed-budget FISTA loop is one call.

**The same mathematics, not the same bits.** The sums run row by row in a
different order from NumPy's, so results differ from the reference path
(:meth:`~pmwcm.kernels.queries.GLMProblem.objective` and friends) by rounding,
about ``1e-16`` relative; ``tests/test_compiled.py`` checks them to ``1e-12``.
The engine uses these kernels only on block designs, so the dense designs of
small cliques, which the fixed-seed engine transcripts pin bit for bit, keep
their NumPy arithmetic.

**Losses.** The smooth catalogue losses whose per-row terms are written out
below (:data:`LOSS_KINDS`: logistic, squared, Huber); any other loss uses the
reference path. Every function is total on finite input: ``exp`` of a large
argument overflows to ``inf`` and the formulas below are arranged so that it
never meets ``inf / inf`` or ``inf - inf``, so no evaluation on the private
data can raise or produce a NaN from a finite one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.losses import GLMLoss, Huber, Logistic, Squared

FloatArray = NDArray[np.float64]

__all__ = [
    "LOSS_KINDS",
    "VECTOR_EXP_MIN_ROWS",
    "fixed_fista",
    "fixed_fista_signed_logistic",
    "glm_gradient",
    "glm_hessian",
    "glm_objective",
    "loss_kind",
]

LOGISTIC, SQUARED, HUBER = 0, 1, 2
#: From a clique of this many cells the logistic fixed-budget FISTA takes its
#: exponentials with NumPy's vectorised ``exp`` (:func:`fixed_fista_signed_logistic`):
#: below it, the three calls per iteration cost more than the scalar ``exp`` they
#: save. It is compared with the clique's size, never with the rows a table holds
#: (see :class:`~pmwcm.kernels.evaluator.CompiledGLMEvaluator`).
VECTOR_EXP_MIN_ROWS = 1024
#: The losses compiled here, by type: their kind code.
LOSS_KINDS: dict[type[GLMLoss], int] = {Logistic: LOGISTIC, Squared: SQUARED, Huber: HUBER}


def loss_kind(loss: GLMLoss) -> tuple[int, float] | None:
    """``(kind, parameter)`` of a compiled loss (Huber's ``delta``), or ``None``."""
    kind = LOSS_KINDS.get(type(loss))
    if kind is None:
        return None
    return kind, float(loss.delta) if isinstance(loss, Huber) else 0.0


@njit(cache=True, nogil=True, inline="always")
def _expit(t: float) -> float:
    """``1 / (1 + exp(-t))`` without overflow into ``inf / inf``."""
    if t >= 0.0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


@njit(cache=True, nogil=True, inline="always")
def _value(kind: int, param: float, z: float, y: float) -> float:
    if kind == LOGISTIC:  # log(1 + exp(-y z)), as logaddexp(0, t)
        t = -y * z
        return max(t, 0.0) + math.log1p(math.exp(-abs(t)))
    r = z - y
    if kind == SQUARED:
        return 0.5 * r * r
    a = abs(r)  # Huber
    return 0.5 * a * a if a <= param else param * a - 0.5 * param * param


@njit(cache=True, nogil=True, inline="always")
def _slope(kind: int, param: float, z: float, y: float) -> float:
    if kind == LOGISTIC:  # -y expit(-y z)
        return -y * _expit(-y * z)
    r = z - y
    if kind == SQUARED:
        return r
    return min(max(r, -param), param)  # Huber


@njit(cache=True, nogil=True, inline="always")
def _curvature(kind: int, param: float, z: float, y: float) -> float:
    if kind == LOGISTIC:  # p (1 - p), p = expit(y z)
        p = _expit(y * z)
        return p * (1.0 - p)
    if kind == SQUARED:
        return 1.0
    return 1.0 if abs(z - y) <= param else 0.0  # Huber


@njit(cache=True, nogil=True, inline="always")
def _row_dot(columns: NDArray[np.int64], values: FloatArray, r: int, theta: FloatArray) -> float:
    """``<phi_r, theta>``: the row's ``B`` entries against ``theta``."""
    z = 0.0
    for b in range(columns.shape[1]):
        z += values[r, b] * theta[columns[r, b]]
    return z


@njit(cache=True, nogil=True)
def glm_objective(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
) -> float:
    """``F(theta)``; ``columns``/``values`` are row-major ``(rows, B)``."""
    total = 0.0
    for r in range(columns.shape[0]):
        z = _row_dot(columns, values, r, theta)
        total += weights[r] * _value(kind, param, z, labels[r])
    return total + 0.5 * l2 * np.dot(theta, theta)


@njit(cache=True, nogil=True)
def glm_gradient(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
    out: FloatArray,
) -> FloatArray:
    """``grad F(theta)`` into ``out`` (returned)."""
    rows, blocks = columns.shape
    for j in range(out.size):
        out[j] = l2 * theta[j]
    for r in range(rows):
        z = _row_dot(columns, values, r, theta)
        s = weights[r] * _slope(kind, param, z, labels[r])
        for b in range(blocks):
            out[columns[r, b]] += s * values[r, b]
    return out


@njit(cache=True, nogil=True)
def glm_hessian(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    kind: int,
    param: float,
) -> FloatArray:
    """The data term's Hessian ``sum_r w_r f''(z_r, y_r) phi_r phi_r'`` (no ``lambda``)."""
    rows, blocks = columns.shape
    dim = theta.size
    out = np.zeros((dim, dim))
    for r in range(rows):
        z = _row_dot(columns, values, r, theta)
        c = weights[r] * _curvature(kind, param, z, labels[r])
        for a in range(blocks):
            ca, va = columns[r, a], c * values[r, a]
            out[ca, ca] += va * values[r, a]
            # Two blocks never share a column (design.BlockDesign), so each pair
            # of a row's entries is one off-diagonal entry: added once, at
            # (earlier block's column, later block's column), and mirrored below.
            for b in range(a + 1, blocks):
                out[ca, columns[r, b]] += va * values[r, b]
    # The Hessian is this plus its transpose off the diagonal (a pair landed on
    # one side only: (i, j) with i < j when blocks are in column order).
    for i in range(dim):
        for j in range(i + 1, dim):
            total = out[i, j] + out[j, i]
            out[i, j] = total
            out[j, i] = total
    return out


@njit(cache=True, nogil=True, inline="always")
def _fista_update(
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
        momentum = _fista_update(grad, y, theta, nxt, step, radius, momentum)
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
    labels: FloatArray,
    theta: FloatArray,
    out: FloatArray,
) -> None:
    """``out = y * (Phi theta)`` for a block-major design (``(B, rows)`` entries).

    A block of one column (``fixed[b] >= 0``: an ordinal, binary or intercept
    block) adds ``theta[fixed[b]] values[b]``, a contiguous multiply-add; any
    other block gathers ``theta`` at its columns.
    """
    blocks, rows = columns.shape
    for r in range(rows):
        out[r] = 0.0
    for b in range(blocks):
        if fixed[b] >= 0:
            coefficient = theta[fixed[b]]
            for r in range(rows):
                out[r] += coefficient * values[b, r]
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
    :data:`_CHAINS` partial gradients summed at the end. Then
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
            for r in range(rows):
                partial[r & (_CHAINS - 1), columns[b, r]] += slopes[r] * values[b, r]
            for j in range(dim):
                nxt[j] += (partial[0, j] + partial[1, j]) + (partial[2, j] + partial[3, j])
    return _fista_update(nxt, y, theta, nxt, step, radius, momentum)


def fixed_fista_signed_logistic(
    columns: NDArray[np.int64],
    values: FloatArray,
    fixed: NDArray[np.int64],
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
    the column of a one-column block, ``-1`` for another).

    The same iteration: with ``m_r = y_r <phi_r, y>`` the logistic slope is
    ``f'(z_r, y_r) = -y_r / (1 + exp(m_r))``, and the gradient
    ``sum_r w_r f'(z_r, y_r) phi_r + lambda y``. Each iteration is two compiled
    passes (:func:`_block_margins`, :func:`_block_logistic_step`) with the
    slopes between them taken by NumPy's vectorised (SIMD) ``exp`` and
    division, several times faster than one scalar ``exp`` and division per
    row, which were most of an iteration's cost. ``exp`` overflowing to ``inf``
    gives a slope of ``0``, never a NaN; the overflow is expected (a row far
    on the wrong side) and silenced so that nothing about the data is printed.
    The sums run in a fixed order (the same on every machine: no
    reassociation by the compiler), so results are reproducible.
    """
    rows = columns.shape[1]
    signed_weights = -labels * weights  # slope_r = -y_r w_r / (1 + exp(m_r))
    margins, slopes = np.empty(rows), np.empty(rows)
    theta, y, nxt = np.zeros(dim), np.zeros(dim), np.zeros(dim)
    partial = np.zeros((_CHAINS, dim))
    momentum = 1.0
    with np.errstate(over="ignore"):
        for _ in range(iterations):
            _block_margins(columns, values, fixed, labels, y, margins)
            np.exp(margins, out=margins)
            margins += 1.0
            np.divide(signed_weights, margins, out=slopes)
            momentum = _block_logistic_step(
                columns, values, fixed, slopes, l2, radius, step, momentum, theta, y, nxt, partial
            )
    return theta


@njit(cache=True, nogil=True)
def _objective_and_gradient(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
    out: FloatArray,
) -> float:
    """:func:`glm_objective` (returned) and :func:`glm_gradient` (into ``out``) in one pass.

    The same per-row terms in the same order, so both are bit for bit those
    functions' results; for the logistic loss the one ``exp(-|t|)``, ``t = -y z``,
    serves both the value ``max(t, 0) + log1p(exp(-|t|))`` and the slope
    ``-y expit(t)`` (:func:`_expit` takes the same ``exp`` on either side of 0).
    """
    rows, blocks = columns.shape
    for j in range(out.size):
        out[j] = l2 * theta[j]
    total = 0.0
    for r in range(rows):
        z = _row_dot(columns, values, r, theta)
        y = labels[r]
        if kind == LOGISTIC:
            t = -y * z
            e = math.exp(-abs(t))
            total += weights[r] * (max(t, 0.0) + math.log1p(e))
            slope = -y * (1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e))
        else:
            total += weights[r] * _value(kind, param, z, y)
            slope = _slope(kind, param, z, y)
        s = weights[r] * slope
        for b in range(blocks):
            out[columns[r, b]] += s * values[r, b]
    return total + 0.5 * l2 * np.dot(theta, theta)


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
        value = _objective_and_gradient(
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


@njit(cache=True, nogil=True)
def _dot(a: FloatArray, b: FloatArray) -> float:
    total = 0.0
    for j in range(a.size):
        total += a[j] * b[j]
    return total


@njit(cache=True, nogil=True)
def _ball_project(v: FloatArray, radius: float) -> FloatArray:
    norm = math.sqrt(_dot(v, v))
    return v if norm <= radius else v * (radius / norm)


#: Up to this dimension :func:`symmetric_eigen` runs Jacobi's method in the compiled
#: code; above it, LAPACK. On the hypothesis's 2-6 parameter solves LAPACK's call
#: (workspace queries, allocations, checks) costs about 6 us for a 4 x 4 matrix,
#: most of a Newton step; the Jacobi sweeps take well under a microsecond there.
JACOBI_MAX_DIM = 12
#: Jacobi sweeps at most (each halves the off-diagonal mass's exponent or better:
#: quadratic convergence, about 6-10 sweeps to rounding level at these sizes).
JACOBI_MAX_SWEEPS = 50


@njit(cache=True, nogil=True)
def symmetric_eigen(matrix: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(eigenvalues ascending, eigenvectors as columns)`` of a symmetric matrix, as
    ``np.linalg.eigh`` returns them.

    For ``d <= JACOBI_MAX_DIM`` by the cyclic Jacobi method (Golub, Van Loan,
    "Matrix Computations", 4th ed., Algorithms 8.5.2-8.5.3: each rotation zeroes one
    off-diagonal entry, the rotation angle from the stable ``t = sign(tau) /
    (|tau| + sqrt(1 + tau^2))``), sweeping until the off-diagonal mass is below
    ``1e-32`` of the matrix's (or :data:`JACOBI_MAX_SWEEPS`); Jacobi's eigenvalues
    are accurate to rounding relative to ``||A||`` (op. cit., section 8.5.5), as
    LAPACK's are. Above that size, LAPACK's ``dsyevd``. Always returns: a bounded
    loop, no early exit that could fail.
    """
    dim = matrix.shape[0]
    if dim > JACOBI_MAX_DIM:
        values, vectors = np.linalg.eigh(matrix)
        return values, np.ascontiguousarray(vectors)
    a = matrix.copy()
    vectors = np.eye(dim)
    scale = 0.0
    for i in range(dim):
        for j in range(dim):
            scale += a[i, j] * a[i, j]
    for _ in range(JACOBI_MAX_SWEEPS):
        off = 0.0
        for p in range(dim - 1):
            for q in range(p + 1, dim):
                off += a[p, q] * a[p, q]
        if off <= 1e-32 * scale:
            break
        for p in range(dim - 1):
            for q in range(p + 1, dim):
                apq = a[p, q]
                if apq == 0.0:
                    continue
                tau = (a[q, q] - a[p, p]) / (2.0 * apq)
                size = abs(tau)
                # sqrt(1 + tau^2) overflows beyond 1e154; there t = 1 / (2 |tau|) to rounding.
                t = 0.5 / size if size > 1e150 else 1.0 / (size + math.sqrt(1.0 + size * size))
                if tau < 0.0:
                    t = -t
                c = 1.0 / math.sqrt(1.0 + t * t)  # |t| <= 1
                s = t * c
                for k in range(dim):  # A <- A J (columns p, q)
                    akp, akq = a[k, p], a[k, q]
                    a[k, p] = c * akp - s * akq
                    a[k, q] = s * akp + c * akq
                for k in range(dim):  # A <- J' A (rows p, q)
                    apk, aqk = a[p, k], a[q, k]
                    a[p, k] = c * apk - s * aqk
                    a[q, k] = s * apk + c * aqk
                for k in range(dim):  # V <- V J
                    vkp, vkq = vectors[k, p], vectors[k, q]
                    vectors[k, p] = c * vkp - s * vkq
                    vectors[k, q] = s * vkp + c * vkq
    values = np.empty(dim)
    for i in range(dim):
        values[i] = a[i, i]
    order = np.argsort(values)
    return values[order], np.ascontiguousarray(vectors[:, order])


@njit(cache=True, nogil=True)
def ball_quadratic_min(hess: FloatArray, lin: FloatArray, radius: float) -> FloatArray:
    """``argmin_{||v|| <= R} v'Hv/2 + lin'v`` for symmetric PSD ``H`` (Moré-Sorensen 1983).

    :func:`pmwcm.kernels.solvers._ball_quadratic_min`, step for step (the
    eigen-decomposition by :func:`symmetric_eigen`; the secular equation by Newton
    on ``1/||v|| - 1/R``), compiled: equal up to rounding.
    """
    evals, evecs = symmetric_eigen(hess)
    dim = lin.size
    b = np.zeros(dim)  # evecs' lin, written out: the matrices are a few rows
    for i in range(dim):
        for j in range(dim):
            b[j] += evecs[i, j] * lin[i]
    lam_min = evals[0]
    v = np.empty(dim)
    if lam_min > 1e-12 * max(1.0, evals[-1]):
        for j in range(dim):
            v[j] = -b[j] / evals[j]
        if _dot(v, v) <= radius * radius:
            return _rotate_back(evecs, v)
    lo = max(0.0, -lam_min)
    nu = lo + max(1e-12, math.sqrt(_dot(b, b)) / radius)
    for _ in range(100):
        if evals[0] + nu <= 0.0:
            break  # the hard case (see the NumPy version)
        squared, dnorm = 0.0, 0.0
        for j in range(dim):  # ||v||^2 and its slope, v = -b / (evals + nu)
            denom = evals[j] + nu
            squared += (b[j] / denom) ** 2
            dnorm += b[j] * b[j] / (denom * denom * denom)
        norm = math.sqrt(squared)
        if norm == 0.0 or abs(norm - radius) <= 1e-13 * radius:
            break
        dnorm = -dnorm / norm
        step = (1.0 / norm - 1.0 / radius) / (dnorm / (norm * norm))
        nu = max(lo + 0.5 * (nu - lo), nu + step)
    for j in range(dim):
        denom = evals[j] + nu
        v[j] = -b[j] / denom if denom > 0.0 else 0.0
    return _ball_project(_rotate_back(evecs, v), radius)


@njit(cache=True, nogil=True, inline="always")
def _rotate_back(evecs: FloatArray, v: FloatArray) -> FloatArray:
    """``evecs @ v``, written out (a few rows: BLAS's call costs more than the sums)."""
    dim = v.size
    out = np.zeros(dim)
    for i in range(dim):
        for j in range(dim):
            out[i] += evecs[i, j] * v[j]
    return out


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
    """
    dim = theta.size
    grad = np.zeros(dim)
    theta = theta.copy()
    value = glm_objective(columns, values, labels, weights, theta, l2, kind, param)
    full_step_gap = math.inf
    for it in range(1, max_iter + 1):
        glm_gradient(columns, values, labels, weights, theta, l2, kind, param, grad)
        gap = max(0.0, _dot(grad, theta) + radius * math.sqrt(_dot(grad, grad)))
        if gap <= tol:
            return theta, it - 1, True
        hess = glm_hessian(columns, values, labels, weights, theta, kind, param)
        for j in range(dim):
            hess[j, j] += l2 + 1e-12
        target = ball_quadratic_min(hess, grad - hess @ theta, radius)
        direction = target - theta
        slope = _dot(grad, direction)
        if slope >= 0.0:
            return theta, it, False
        if -slope <= 1e-12 * max(1.0, abs(value)):
            if gap >= full_step_gap:
                return theta, it, False
            full_step_gap = gap
            theta = target
            value = glm_objective(columns, values, labels, weights, theta, l2, kind, param)
            continue
        step = 1.0
        accepted = False
        candidate = theta
        cand_value = value
        while step > 1e-10:
            candidate = theta + step * direction
            cand_value = glm_objective(columns, values, labels, weights, candidate, l2, kind, param)
            if cand_value <= value + 1e-4 * step * slope:
                accepted = True
                break
            step *= 0.5
        if not accepted:
            return theta, it, False
        theta, value = candidate, cand_value
    glm_gradient(columns, values, labels, weights, theta, l2, kind, param, grad)
    gap = max(0.0, _dot(grad, theta) + radius * math.sqrt(_dot(grad, grad)))
    return theta, max_iter, gap <= tol


@njit(cache=True, nogil=True, inline="always")
def _paired_slope(u: float, w_minus: float, w_plus: float) -> float:
    """``w_- expit(u) - w_+ expit(-u)`` from one ``exp(-|u|) <= 1`` and one division
    (never an overflow, never ``inf / inf``): with ``s = 1 / (1 + e)``, the two
    sigmoids are ``s`` and ``e s``, in the order the sign of ``u`` gives."""
    e = math.exp(-abs(u))
    s = 1.0 / (1.0 + e)
    if u >= 0.0:
        return w_minus * s - w_plus * (e * s)
    return w_minus * (e * s) - w_plus * s


@njit(cache=True, nogil=True)
def fixed_fista_paired_logistic(
    columns: NDArray[np.int64],
    values: FloatArray,
    weights: FloatArray,
    dim: int,
    l2: float,
    radius: float,
    step: float,
    iterations: int,
) -> FloatArray:
    """:func:`fixed_fista` for the logistic loss on every cell of a clique whose last
    axis is a two-valued target, one ``exp`` per pair of cells.

    In C order such a table's rows come in pairs ``(x, -1), (x, +1)`` with the same
    features ``phi_x`` (the target is not a feature). With ``u = <phi_x, y>`` the
    pair's gradient is ``(w_- expit(u) - w_+ expit(-u)) phi_x`` (:func:`_paired_slope`):
    half the exponentials, the products and the scatter of the row-by-row loop, the
    same FISTA step (:func:`_fista_update`). Each iteration first takes every pair's
    slope (independent of one another, so the ``exp`` calls overlap), then scatters.
    When every row touches most of ``theta`` (binary and ordinal features), the
    pairs' features are held as a dense ``dim x pairs`` matrix, so the products run
    along the pairs without the column look-ups; one-hot blocks keep the row-major
    form (a dense matrix would be mostly zeros). The two loops are written out
    separately so that each compiles to its own tight loop. Equal to
    :func:`fixed_fista` up to rounding. ``columns``/``values`` are the row-major
    design of all the rows; the labels are implied by the row order. No early exit:
    the work is the same for every ``weights`` (the layout is the query's, public).
    """
    rows, blocks = columns.shape
    pairs = rows // 2
    if dim <= 2 * blocks:
        features = np.zeros((dim, pairs))
        for p in range(pairs):
            for b in range(blocks):
                features[columns[2 * p, b], p] += values[2 * p, b]
        return _paired_fista_dense(features, weights, l2, radius, step, iterations)
    return _paired_fista_sparse(
        np.ascontiguousarray(columns[::2]), np.ascontiguousarray(values[::2]), weights,
        dim, l2, radius, step, iterations,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def fixed_fista_paired_logistic_value(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    dim: int,
    l2: float,
    radius: float,
    step: float,
    iterations: int,
) -> tuple[FloatArray, float]:
    """:func:`fixed_fista_paired_logistic` and :func:`glm_objective` at its point, in
    one call: the same two computations on the same arrays, so the same numbers as
    calling them one after the other (the logistic kind has no parameter)."""
    theta = fixed_fista_paired_logistic(columns, values, weights, dim, l2, radius, step, iterations)
    return theta, glm_objective(columns, values, labels, weights, theta, l2, LOGISTIC, 0.0)


@njit(cache=True, nogil=True)
def _paired_fista_dense(
    features: FloatArray, weights: FloatArray, l2: float, radius: float, step: float,
    iterations: int,
) -> FloatArray:  # fmt: skip
    """:func:`fixed_fista_paired_logistic`'s loop on the pairs' dense features, held
    ``dim x pairs`` so that the products and sums run along the pairs (contiguous,
    independent: the compiler vectorises them); each sum is taken in the same order
    as row by row."""
    dim, pairs = features.shape
    margins = np.empty(pairs)
    slopes = np.empty(pairs)
    theta = np.zeros(dim)
    y = np.zeros(dim)
    nxt = np.zeros(dim)
    momentum = 1.0
    for _ in range(iterations):
        margins[:] = 0.0
        for j in range(dim):
            coordinate = y[j]
            for p in range(pairs):
                margins[p] += features[j, p] * coordinate
        for p in range(pairs):
            slopes[p] = _paired_slope(margins[p], weights[2 * p], weights[2 * p + 1])
        for j in range(dim):
            total = l2 * y[j]
            for p in range(pairs):
                total += slopes[p] * features[j, p]
            nxt[j] = total
        momentum = _fista_update(nxt, y, theta, nxt, step, radius, momentum)
    return theta


@njit(cache=True, nogil=True)
def _paired_fista_sparse(
    columns: NDArray[np.int64], values: FloatArray, weights: FloatArray, dim: int, l2: float,
    radius: float, step: float, iterations: int,
) -> FloatArray:  # fmt: skip
    """:func:`fixed_fista_paired_logistic`'s loop on one row-major design row per pair."""
    pairs, blocks = columns.shape
    slopes = np.empty(pairs)
    theta = np.zeros(dim)
    y = np.zeros(dim)
    nxt = np.zeros(dim)
    momentum = 1.0
    for _ in range(iterations):
        for p in range(pairs):
            slopes[p] = _paired_slope(
                _row_dot(columns, values, p, y), weights[2 * p], weights[2 * p + 1]
            )
        for j in range(dim):
            nxt[j] = l2 * y[j]
        for p in range(pairs):
            c = slopes[p]
            for b in range(blocks):
                nxt[columns[p, b]] += c * values[p, b]
        momentum = _fista_update(nxt, y, theta, nxt, step, radius, momentum)
    return theta


@njit(cache=True, nogil=True)
def paired_logistic_rows(
    columns: NDArray[np.int64], values: FloatArray, labels: FloatArray
) -> bool:
    """Whether the rows come in pairs ``(x, -1), (x, +1)`` with equal features, the form
    :func:`fixed_fista_paired_logistic` reads. Looks at the design and labels only
    (public: the query's compile), never at weights."""
    rows, blocks = columns.shape
    if rows % 2 != 0:
        return False
    for r in range(0, rows, 2):
        if labels[r] != -1.0 or labels[r + 1] != 1.0:
            return False
        for b in range(blocks):
            if columns[r, b] != columns[r + 1, b] or values[r, b] != values[r + 1, b]:
                return False
    return True
