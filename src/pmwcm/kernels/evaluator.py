"""A problem's objective and gradient at fixed weights, with NumPy's per-call overhead cut.

The solvers evaluate ``F(theta) = sum_c w_c l(theta; c) + (lambda/2) ||theta||^2``
and its gradient hundreds of times per query on tables of a few dozen cells
(a fixed-budget FISTA on Adult runs about 250 iterations). The arithmetic is
a few hundred flops; the time is NumPy's per-call overhead: allocations,
property look-ups, dispatch. :func:`evaluator` binds a problem to its weights
once and, for a catalogue GLM on a dense design, evaluates both with ``out=``
buffers allocated once and the labels' negation precomputed.

**Bit for bit.** Every fast path performs the same floating-point operations,
in the same order, as :meth:`ConvexProblem.objective` and
:meth:`ConvexProblem.gradient` (the same ufuncs, writing into buffers instead
of fresh arrays; the matrix-vector products through ``np.dot``, the same BLAS
gemv as ``@`` at half its call overhead), so solver iterates, and the
engine's transcripts, are unchanged. ``tests/test_fast_paths.py`` checks it.

The returned arrays are buffers reused by the next call: consume them first.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

from pmwcm.kernels.design import DenseDesign
from pmwcm.kernels.losses import Huber, Logistic, Squared
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem

__all__ = ["Evaluator", "evaluator"]


class Evaluator:
    """``F`` and ``grad F`` of ``problem`` at fixed ``weights`` (the reference path)."""

    def __init__(self, problem: ConvexProblem, weights: FloatArray) -> None:
        self.problem = problem
        self.weights = weights

    def objective(self, theta: FloatArray) -> float:
        """``F(theta)``, as :meth:`ConvexProblem.objective`."""
        return self.problem.objective(theta, self.weights)

    def gradient(self, theta: FloatArray) -> FloatArray:
        """``grad F(theta)``, as :meth:`ConvexProblem.gradient`."""
        return self.problem.gradient(theta, self.weights)


class _DenseGLMEvaluator(Evaluator):
    """A GLM on a dense design: ``z = Phi theta``, ``g = Phi' (w f'(z, y)) + lambda theta``."""

    def __init__(self, problem: GLMProblem, weights: FloatArray) -> None:
        super().__init__(problem, weights)
        assert isinstance(problem.design, DenseDesign)
        self._matrix = problem.design.matrix
        self._transpose = self._matrix.T
        self._labels = problem.labels
        self._neg_labels = -problem.labels
        self._l2 = problem.l2
        cells, dim = self._matrix.shape
        self._z = np.empty(cells)
        self._cell = np.empty(cells)
        self._gradient = np.empty(dim)
        self._regulariser = np.empty(dim)
        self._derivative = self._derivative_function(problem)
        self._value = self._value_function(problem)

    def _derivative_function(self, problem: GLMProblem) -> Callable[[FloatArray], FloatArray]:
        """``f'(z, y)`` into ``self._cell``, the loss's own operations in order."""
        loss, out, labels, neg = problem.loss, self._cell, self._labels, self._neg_labels
        if type(loss) is Logistic:  # -y * expit(-y * z)

            def logistic(z: FloatArray) -> FloatArray:
                np.multiply(neg, z, out=out)
                expit(out, out=out)
                return np.multiply(neg, out, out=out)

            return logistic
        if type(loss) is Squared:  # z - y
            return lambda z: np.subtract(z, labels, out=out)
        if type(loss) is Huber:  # clip(z - y, -delta, delta)
            delta = loss.delta

            def huber(z: FloatArray) -> FloatArray:
                np.subtract(z, labels, out=out)
                return np.clip(out, -delta, delta, out=out)

            return huber
        return lambda z: loss.derivative(z, labels)

    def _value_function(self, problem: GLMProblem) -> Callable[[FloatArray], FloatArray]:
        """``f(z, y)`` into ``self._cell``, the loss's own operations in order."""
        loss, out, labels, neg = problem.loss, self._cell, self._labels, self._neg_labels
        if type(loss) is Logistic:  # logaddexp(0, -y * z)

            def logistic(z: FloatArray) -> FloatArray:
                np.multiply(neg, z, out=out)
                return np.logaddexp(0.0, out, out=out)

            return logistic
        return lambda z: loss.value(z, labels)

    def objective(self, theta: FloatArray) -> float:
        np.dot(self._matrix, theta, out=self._z)
        losses = self._value(self._z)
        return float(self.weights @ losses + 0.5 * self._l2 * (theta @ theta))

    def gradient(self, theta: FloatArray) -> FloatArray:
        np.dot(self._matrix, theta, out=self._z)
        slopes = self._derivative(self._z)
        np.multiply(self.weights, slopes, out=self._cell)
        np.dot(self._transpose, self._cell, out=self._gradient)
        np.multiply(self._l2, theta, out=self._regulariser)
        return np.add(self._gradient, self._regulariser, out=self._gradient)


class _SignedLogisticEvaluator(_DenseGLMEvaluator):
    """The logistic loss with labels exactly ``+-1``: the signs folded into the data.

    With ``B = diag(-y) Phi`` and ``c = w (-y)``, ``B theta`` is ``-y z`` and
    ``c expit(.)`` is ``w (-y expit(.))`` bit for bit (multiplying by ``-1`` is
    exact and rounding is symmetric in sign, so a row's negated products sum
    to the negated sum), which saves two operations per evaluation.
    """

    def __init__(self, problem: GLMProblem, weights: FloatArray) -> None:
        super().__init__(problem, weights)
        self._signed = np.ascontiguousarray(self._neg_labels[:, None] * self._matrix)
        self._signed_weights = weights * self._neg_labels

    def objective(self, theta: FloatArray) -> float:
        np.dot(self._signed, theta, out=self._z)
        np.logaddexp(0.0, self._z, out=self._z)
        return float(self.weights @ self._z + 0.5 * self._l2 * (theta @ theta))

    def gradient(self, theta: FloatArray) -> FloatArray:
        np.dot(self._signed, theta, out=self._z)
        expit(self._z, out=self._z)
        np.multiply(self._signed_weights, self._z, out=self._cell)
        np.dot(self._transpose, self._cell, out=self._gradient)
        np.multiply(self._l2, theta, out=self._regulariser)
        return np.add(self._gradient, self._regulariser, out=self._gradient)


def evaluator(problem: ConvexProblem, weights: FloatArray) -> Evaluator:
    """``problem`` bound to ``weights`` (float64, flat), on its fastest exact path."""
    if (
        type(problem) is GLMProblem
        and isinstance(problem.design, DenseDesign)
        and problem.design.matrix.flags.c_contiguous
        and weights.flags.c_contiguous
    ):
        if type(problem.loss) is Logistic and bool(np.all(np.abs(problem.labels) == 1.0)):
            return _SignedLogisticEvaluator(problem, weights)
        return _DenseGLMEvaluator(problem, weights)
    return Evaluator(problem, weights)
