"""A problem's objective, gradient and Hessian at fixed weights, without per-call overhead.

The solvers evaluate ``F(theta) = sum_c w_c l(theta; c) + (lambda/2) ||theta||^2``
and its gradient hundreds of times per query (a fixed-budget FISTA on Adult
runs about 250 iterations), on tables of a few dozen cells (small cliques) to
tens of thousands (the occupied cells of a large one). :func:`evaluator` binds a
problem to its weights once and picks one of three paths; the GLM arithmetic of
the first two is :mod:`pmwcm.kernels.glm`'s:

* :class:`CompiledGLMEvaluator`: a catalogue GLM whose loss has a compiled form
  (:data:`~pmwcm.kernels.glm.LOSS_KINDS`: logistic, squared, Huber), on a dense
  or a block design: one compiled pass over the rows per call, equal to the
  NumPy form up to rounding (about ``1e-16`` relative; ``tests/test_glm.py``,
  ``tests/test_compiled.py``);
* :class:`NumpyGLMEvaluator`: another catalogue GLM: the NumPy form, the very
  functions :class:`~pmwcm.kernels.queries.GLMProblem` is written with, so bit
  for bit the problem's own methods (``tests/test_fast_paths.py``);
* :class:`Evaluator`: any other problem, through its own methods.

The compiled evaluator's gradient is a buffer reused by the next call: consume it first.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels import glm
from pmwcm.kernels.design import BlockDesign, DenseDesign
from pmwcm.kernels.fista import VECTOR_EXP_MIN_ROWS, fixed_fista, fixed_fista_signed_logistic
from pmwcm.kernels.glm import LOGISTIC, glm_gradient, glm_hessian, glm_objective, loss_kind
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem

__all__ = [
    "COMPILED_DESIGNS",
    "CompiledGLMEvaluator",
    "Evaluator",
    "NumpyGLMEvaluator",
    "compiled_kind",
    "compiled_objective",
    "evaluator",
    "is_signed_logistic",
]

#: The designs the compiled kernels read (row-major entries). A tuple, not
#: ``BlockDesign | DenseDesign``: ``isinstance`` against a union object costs about
#: 0.4 us, against a tuple 0.06, and the round asks several times per query.
COMPILED_DESIGNS = (BlockDesign, DenseDesign)


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

    def hessian(self, theta: FloatArray) -> FloatArray | None:
        """The data term's Hessian, as :meth:`ConvexProblem.data_hessian` (``None``: none)."""
        return self.problem.data_hessian(theta, self.weights)


class NumpyGLMEvaluator(Evaluator):
    """A catalogue GLM by :mod:`pmwcm.kernels.glm`'s NumPy form, its fields bound once
    (the problem's methods reach the same functions through a few more look-ups)."""

    def __init__(self, problem: GLMProblem, weights: FloatArray) -> None:
        super().__init__(problem, weights)
        self._loss, self._design = problem.loss, problem.design
        self._labels, self._l2 = problem.labels, problem.l2

    def objective(self, theta: FloatArray) -> float:
        return glm.objective(self._loss, self._design, self._labels, self.weights, theta, self._l2)

    def gradient(self, theta: FloatArray) -> FloatArray:
        return glm.gradient(self._loss, self._design, self._labels, self.weights, theta, self._l2)

    def hessian(self, theta: FloatArray) -> FloatArray | None:
        return glm.data_hessian(self._loss, self._design, self._labels, self.weights, theta)


class CompiledGLMEvaluator(Evaluator):
    """A catalogue GLM by :mod:`pmwcm.kernels.glm`'s compiled form: one pass over the rows per call.

    Equal to the reference path up to rounding (about ``1e-16`` relative), not
    bit for bit. The design is read as its row-major entries, so a dense design
    and a block design take the same kernels.

    The form of the fixed-budget FISTA (:attr:`vector_exp`) is chosen from the
    query's public shape only, never from the table it is given: on the private
    data a sparse clique table holds the data's occupied cells, and a choice by
    their count would branch on the data. Logistic labels are ``+-1`` by
    construction when the target has two values (:func:`~pmwcm.kernels.encoding.scaled` maps
    codes onto ``[-1, 1]``), and a clique of at least
    :data:`~pmwcm.kernels.fista.VECTOR_EXP_MIN_ROWS` cells takes the
    vectorised ``exp`` whatever number of them a table holds; every sparse
    clique (more than ``2^12`` cells) is such a clique.
    """

    def __init__(self, problem: GLMProblem, weights: FloatArray, kind: tuple[int, float]) -> None:
        super().__init__(problem, weights)
        assert isinstance(problem.design, COMPILED_DESIGNS)
        # Its row-major entries (a transposed copy, cached on the design) are made
        # only when a method reads them: the vectorised FISTA reads the block-major form.
        self._design = problem.design
        self._labels = np.ascontiguousarray(problem.labels, dtype=np.float64)
        self._l2 = float(problem.l2)
        self._kind, self._param = kind

    @functools.cached_property
    def _gradient(self) -> FloatArray:
        """The buffer :meth:`gradient` writes (made on first use: a round's error
        evaluates only the objective)."""
        return np.empty(self._design.dim)

    @functools.cached_property
    def vector_exp(self) -> bool:
        """Whether :meth:`fixed_fista` takes the vectorised ``exp`` (public: see above)."""
        problem = self.problem
        assert isinstance(problem, GLMProblem)
        return is_signed_logistic(problem) and math.prod(problem.sizes) >= VECTOR_EXP_MIN_ROWS

    def objective(self, theta: FloatArray) -> float:
        return compiled_objective(
            *self._design.row_major, self._labels, self.weights, theta,
            self._l2, self._kind, self._param,
        )  # fmt: skip

    def gradient(self, theta: FloatArray) -> FloatArray:
        return glm_gradient(
            *self._design.row_major, self._labels, self.weights,
            np.ascontiguousarray(theta, dtype=np.float64), self._l2, self._kind, self._param,
            self._gradient,
        )  # fmt: skip

    def hessian(self, theta: FloatArray) -> FloatArray | None:
        return glm_hessian(
            *self._design.row_major, self._labels, self.weights,
            np.ascontiguousarray(theta, dtype=np.float64), self._kind, self._param,
        )  # fmt: skip

    def fixed_fista(self, *, radius: float, step: float, iterations: int) -> FloatArray:
        """The fixed-budget FISTA of :mod:`pmwcm.kernels.fixed_budget`, compiled."""
        if self.vector_exp:
            columns, values, fixed, constants = self._design.block_major
            return fixed_fista_signed_logistic(
                columns, values, fixed, constants, self._labels, self.weights, self.problem.dim,
                self._l2, radius, step, iterations,
            )  # fmt: skip
        return fixed_fista(
            *self._design.row_major, self._labels, self.weights, self.problem.dim,
            self._l2, self._kind, self._param, radius, step, iterations,
        )  # fmt: skip


def compiled_objective(
    columns: NDArray[np.int64],
    values: FloatArray,
    labels: FloatArray,
    weights: FloatArray,
    theta: FloatArray,
    l2: float,
    kind: int,
    param: float,
) -> float:
    """``F(theta)`` by :func:`~pmwcm.kernels.glm.glm_objective` on a row-major design,
    ``theta`` made a contiguous float64 vector first: :meth:`CompiledGLMEvaluator.objective`'s
    arithmetic, for callers that hold the arrays already
    (:func:`~pmwcm.kernels.fixed_budget.fixed_budget_minimum`)."""
    point = np.ascontiguousarray(theta, dtype=np.float64)
    return float(glm_objective(columns, values, labels, weights, point, l2, kind, param))


def is_signed_logistic(problem: ConvexProblem) -> bool:
    """A logistic query on a two-valued target: its labels are exactly ``+-1`` by
    construction (:func:`~pmwcm.kernels.encoding.scaled` maps the codes onto ``[-1, 1]``). Reads
    the compiled query only, never the table it is evaluated on."""
    return (
        isinstance(problem, GLMProblem)
        and loss_kind(problem.loss) == (LOGISTIC, 0.0)
        and len(problem.sizes) > 0
        and problem.sizes[-1] == 2
    )


def compiled_kind(problem: ConvexProblem) -> tuple[int, float] | None:
    """The compiled loss kind :func:`evaluator` binds ``problem`` with, or ``None``
    when it takes a NumPy path: a catalogue GLM on a dense or block design whose
    loss is compiled (:func:`~pmwcm.kernels.glm.loss_kind`)."""
    if type(problem) is GLMProblem and isinstance(problem.design, COMPILED_DESIGNS):
        return loss_kind(problem.loss)
    return None


def evaluator(problem: ConvexProblem, weights: FloatArray) -> Evaluator:
    """``problem`` bound to ``weights`` (float64, flat), on its fastest path.

    A catalogue GLM whose loss is compiled (:data:`~pmwcm.kernels.glm.LOSS_KINDS`)
    takes the compiled form; another catalogue GLM the NumPy form (bit for bit
    the reference); anything else, a subclass of :class:`GLMProblem` included, the
    reference methods.
    """
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    kind = compiled_kind(problem)
    if kind is not None:
        assert isinstance(problem, GLMProblem)
        return CompiledGLMEvaluator(problem, weights, kind)
    if type(problem) is GLMProblem:
        return NumpyGLMEvaluator(problem, weights)
    return Evaluator(problem, weights)
