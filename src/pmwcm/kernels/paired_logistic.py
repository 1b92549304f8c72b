"""The logistic fixed-budget FISTA on paired rows: one ``exp`` per pair of cells, compiled.

On every cell of a clique whose last axis is a two-valued target, in C order,
the rows come in pairs ``(x, -1), (x, +1)`` with the same features ``phi_x``
(the target is not a feature). With ``u = <phi_x, y>`` the pair's logistic
gradient is ``(w_- expit(u) - w_+ expit(-u)) phi_x``
(:func:`pmwcm.kernels.glm.paired_logistic_slope`): half the exponentials, the
products and the scatter of the row-by-row loop of
:func:`pmwcm.kernels.fista.fixed_fista`, with the same step
(:func:`pmwcm.kernels.fista.fista_step`), equal to it up to rounding.
:func:`paired_logistic_rows` recognises the form from the design and labels
only (public), never from the weights.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pmwcm.kernels.fista import fista_step
from pmwcm.kernels.glm import LOGISTIC, glm_objective, paired_logistic_slope, row_dot

FloatArray = NDArray[np.float64]

__all__ = [
    "fixed_fista_paired_logistic",
    "fixed_fista_paired_logistic_value",
    "paired_logistic_rows",
]


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
    """:func:`~pmwcm.kernels.fista.fixed_fista` for the logistic loss on every cell of
    a clique whose last axis is a two-valued target (the module's paired rows).

    Each iteration first takes every pair's slope (independent of one another, so
    the ``exp`` calls overlap), then scatters. When every row touches most of
    ``theta`` (binary and ordinal features), the pairs' features are held as a
    dense ``dim x pairs`` matrix, so the products run along the pairs without the
    column look-ups; one-hot blocks keep the row-major form (a dense matrix would
    be mostly zeros). The two loops are written out separately so that each
    compiles to its own tight loop. ``columns``/``values`` are the row-major design
    of all the rows; the labels are implied by the row order. No early exit: the
    work is the same for every ``weights`` (the layout is the query's, public).
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
    """:func:`fixed_fista_paired_logistic` and :func:`~pmwcm.kernels.glm.glm_objective`
    at its point, in one call: the same two computations on the same arrays, so the
    same numbers as calling them one after the other (the logistic kind has no
    parameter)."""
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
            slopes[p] = paired_logistic_slope(margins[p], weights[2 * p], weights[2 * p + 1])
        for j in range(dim):
            total = l2 * y[j]
            for p in range(pairs):
                total += slopes[p] * features[j, p]
            nxt[j] = total
        momentum = fista_step(nxt, y, theta, nxt, step, radius, momentum)
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
            slopes[p] = paired_logistic_slope(
                row_dot(columns, values, p, y), weights[2 * p], weights[2 * p + 1]
            )
        for j in range(dim):
            nxt[j] = l2 * y[j]
        for p in range(pairs):
            c = slopes[p]
            for b in range(blocks):
                nxt[columns[p, b]] += c * values[p, b]
        momentum = fista_step(nxt, y, theta, nxt, step, radius, momentum)
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
