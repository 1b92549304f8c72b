"""The ball ``Theta = {||theta|| <= R}``: projection onto it, and a quadratic's minimum on it.

The projected Newton step minimises its second-order model over the ball
exactly (Moré, Sorensen 1983): an eigen-decomposition and the secular equation.
:func:`numpy_ball_quadratic_min` is the NumPy form (the solvers' NumPy loop),
:func:`ball_quadratic_min` the compiled one (:mod:`pmwcm.kernels.newton`), with
the eigen-decomposition by :func:`symmetric_eigen`; the hypothesis's problems
have 2-6 parameters, so its small matrix products are written out as loops (a
BLAS call costs more than the sums). :func:`project_ball` and
:func:`ball_project` are the projection in the two forms.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

__all__ = ["JACOBI_MAX_DIM", "ball_project", "ball_quadratic_min", "dot", "symmetric_eigen"]
__all__ += ["numpy_ball_quadratic_min", "project_ball"]


def project_ball(theta: FloatArray, radius: float) -> FloatArray:
    """Euclidean projection onto ``{||theta|| <= radius}``."""
    # sqrt(<theta, theta>) is what np.linalg.norm computes for a vector, bit for bit,
    # without its per-call checks (this runs once per solver iteration).
    norm = math.sqrt(float(np.dot(theta, theta)))
    return theta if norm <= radius else theta * (radius / norm)


def numpy_ball_quadratic_min(hess: FloatArray, lin: FloatArray, radius: float) -> FloatArray:
    """``argmin_{||v|| <= R} v'Hv/2 + lin'v`` for symmetric PSD ``H`` (Moré-Sorensen 1983),
    in NumPy: :func:`ball_quadratic_min`'s reference."""
    evals, evecs = np.linalg.eigh(hess)
    b = evecs.T @ lin
    lam_min = float(evals[0])
    if lam_min > 1e-12 * max(1.0, float(evals[-1])):
        v = -b / evals
        if float(v @ v) <= radius * radius:
            return evecs @ v
    # Boundary solution: find nu > max(0, -lam_min) with ||(H + nu I)^{-1} b|| = R.
    lo = max(0.0, -lam_min)
    nu = lo + max(1e-12, float(np.linalg.norm(b)) / radius)
    for _ in range(100):
        denom = evals + nu
        if denom[0] <= 0.0:
            # nu has reached lo to machine precision: the "hard case", where b has no
            # component along the bottom eigenvector(s) (b_i = 0 over lam_i + nu = 0).
            break
        v = -b / denom
        norm = math.sqrt(float(v @ v))
        if norm == 0.0 or abs(norm - radius) <= 1e-13 * radius:
            break
        dnorm = -float((b * b / denom**3).sum()) / norm  # d||v||/dnu
        # Newton on 1/||v|| - 1/R, which is nearly linear in nu.
        step = (1.0 / norm - 1.0 / radius) / (dnorm / norm**2)
        nu = max(lo + 0.5 * (nu - lo), nu + step)
    denom = evals + nu
    # Hard case: those components of v are 0 (b_i = 0 there); never 0/0.
    v = evecs @ np.divide(-b, denom, out=np.zeros_like(b), where=denom > 0.0)
    return project_ball(v, radius)


@njit(cache=True, nogil=True)
def dot(a: FloatArray, b: FloatArray) -> float:
    """``<a, b>``, summed in index order."""
    total = 0.0
    for j in range(a.size):
        total += a[j] * b[j]
    return total


@njit(cache=True, nogil=True)
def ball_project(v: FloatArray, radius: float) -> FloatArray:
    """``v`` projected onto the ball of ``radius`` (``v`` itself when inside)."""
    norm = math.sqrt(dot(v, v))
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

    :func:`numpy_ball_quadratic_min`, step for step (the
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
        if dot(v, v) <= radius * radius:
            return _rotate_back(evecs, v)
    lo = max(0.0, -lam_min)
    nu = lo + max(1e-12, math.sqrt(dot(b, b)) / radius)
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
    return ball_project(_rotate_back(evecs, v), radius)


@njit(cache=True, nogil=True, inline="always")
def _rotate_back(evecs: FloatArray, v: FloatArray) -> FloatArray:
    """``evecs @ v``, written out (a few rows: BLAS's call costs more than the sums)."""
    dim = v.size
    out = np.zeros(dim)
    for i in range(dim):
        for j in range(dim):
            out[i] += evecs[i, j] * v[j]
    return out
