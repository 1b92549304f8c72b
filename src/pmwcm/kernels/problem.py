"""The contract every convex loss satisfies, on the marginal table of its clique.

A CM query's loss ``l(theta; x)`` depends on a record ``x`` only through the
attributes of its *clique* ``C``, so ``L_D(theta) = sum_{x_C} D_C(x_C)
l(theta; x_C) + (lambda/2) ||theta||^2`` where ``D_C`` is the marginal of ``D``
on ``C`` (docs/design.md section 2). A :class:`ConvexProblem` evaluates the data term
per cell of that table (cells in C-order of ``np.indices`` over the clique) and
declares the constants the privacy proofs depend on:

* ``lipschitz``: ``G B >= ||grad_theta l_x(theta)||`` for every cell and every
  ``theta`` in ``Theta = {||theta|| <= R}``;
* ``scale``: ``S >= max |<theta - theta', grad l_x(theta)>|`` (the paper's
  scaling condition), ``S = 2 R G B`` for GLMs;
* ``l2``: the strong convexity ``sigma = lambda`` of the regularised objective.

The regulariser is the same for every record, so it is *not* part of the
per-cell terms: it cancels in every difference between neighbouring datasets.

:class:`CallableProblem` wraps arbitrary user callables with declared
constants (trusted local use only; the service accepts catalogue specs only).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


class ConvexProblem(ABC):
    """A convex loss on a clique's marginal table, with its declared constants."""

    clique: tuple[str, ...]
    radius: float
    l2: float

    @property
    @abstractmethod
    def dim(self) -> int:
        """``d``, the dimension of ``theta``."""

    @property
    @abstractmethod
    def lipschitz(self) -> float:
        """``G B``: bound on the per-record gradient norm over ``Theta``."""

    @property
    @abstractmethod
    def scale(self) -> float:
        """``S``: the paper's scaling constant."""

    @property
    def smoothness(self) -> float | None:
        """Bound on the per-record Hessian norm, or ``None`` if not smooth."""
        return None

    @abstractmethod
    def cell_losses(self, theta: FloatArray) -> FloatArray:
        """The data term ``l(theta; x_C)`` of every cell, shape ``(cells,)``."""

    @abstractmethod
    def cell_gradients(self, theta: FloatArray) -> FloatArray:
        """``grad_theta l(theta; x_C)`` of every cell, shape ``(cells, d)``."""

    def on_cells(self, cells: NDArray[np.integer]) -> ConvexProblem:
        """The same problem (same constants) on other cells of the clique, as
        per-attribute codes ``(cells, |C|)`` (for sparse clique tables).

        Raises:
            NotImplementedError: a problem that cannot be re-evaluated on cells.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot be evaluated on a sparse table.")

    def cell_directional(self, theta: FloatArray, direction: FloatArray) -> FloatArray:
        """``<grad_theta l(theta; x_C), direction>`` of every cell, shape ``(cells,)``."""
        return self.cell_gradients(theta) @ direction

    def data_gradient(self, theta: FloatArray, weights: FloatArray) -> FloatArray:
        """``sum_c w_c grad l(theta; c)``."""
        return weights @ self.cell_gradients(theta)

    def data_hessian(self, theta: FloatArray, weights: FloatArray) -> FloatArray | None:
        """``sum_c w_c hess l(theta; c)`` where available, else ``None``."""
        return None

    def objective(self, theta: FloatArray, weights: FloatArray) -> float:
        """``L_w(theta) = sum_c w_c l(theta; c) + (lambda/2) ||theta||^2``."""
        return float(weights @ self.cell_losses(theta) + 0.5 * self.l2 * (theta @ theta))

    def gradient(self, theta: FloatArray, weights: FloatArray) -> FloatArray:
        """``grad L_w(theta)``."""
        return self.data_gradient(theta, weights) + self.l2 * theta

    def smoothed(self, mu: float) -> tuple[ConvexProblem, float]:
        """A smooth surrogate and ``c`` with ``F - c <= F_surr <= F`` (weights summing to 1).

        Smooth problems return ``(self, 0.0)``.

        Raises:
            NotImplementedError: for a non-smooth problem without a surrogate.
        """
        if self.smoothness is not None:
            return self, 0.0
        raise NotImplementedError(f"{type(self).__name__} declares no smooth surrogate.")


@dataclass(frozen=True, kw_only=True, eq=False)
class CallableProblem(ConvexProblem):
    """A user-supplied convex loss with declared constants (library use only).

    ``loss(theta, cells)`` and ``grad(theta, cells)`` receive the clique's cells as
    integer codes, shape ``(cells, |C|)``, and return shapes ``(cells,)`` and
    ``(cells, d)``. The declared ``lipschitz`` bound must hold on the whole ball;
    ``scale`` defaults to ``2 R lipschitz``, which then holds by Cauchy-Schwarz.
    A wrong declaration voids the privacy guarantee: that is why the HTTP service
    never accepts callables.

    >>> import numpy as np
    >>> p = CallableProblem(
    ...     clique=("a",), sizes=(2,), dimension=1, radius=1.0, l2=0.0, lipschitz_bound=1.0,
    ...     loss=lambda th, c: np.abs(th[0] - (2 * c[:, 0] - 1)),
    ...     grad=lambda th, c: np.sign(th[0] - (2 * c[:, 0] - 1))[:, None])
    >>> p.scale
    2.0
    """

    clique: tuple[str, ...]
    sizes: tuple[int, ...]
    dimension: int
    radius: float
    l2: float
    lipschitz_bound: float
    loss: Callable[[FloatArray, NDArray[np.int64]], FloatArray]
    grad: Callable[[FloatArray, NDArray[np.int64]], FloatArray]
    smoothness_bound: float | None = None

    def __post_init__(self) -> None:
        for name in ("radius", "lipschitz_bound"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {name}={value}.")
        if not (math.isfinite(self.l2) and self.l2 >= 0):
            raise ValueError(f"l2 must be non-negative and finite, got l2={self.l2}.")
        if len(self.sizes) != len(self.clique):
            raise ValueError(
                f"sizes {self.sizes} must give one size per clique attribute {self.clique}."
            )

    @property
    def cells(self) -> NDArray[np.int64]:
        """The clique's cells as codes, shape ``(cells, |C|)``, C-order."""
        return np.indices(self.sizes).reshape(len(self.sizes), -1).T

    @property
    def dim(self) -> int:
        return self.dimension

    @property
    def lipschitz(self) -> float:
        return self.lipschitz_bound

    @property
    def scale(self) -> float:
        return 2.0 * self.radius * self.lipschitz_bound

    @property
    def smoothness(self) -> float | None:
        return self.smoothness_bound

    def cell_losses(self, theta: FloatArray) -> FloatArray:
        return np.asarray(self.loss(theta, self.cells), dtype=np.float64)

    def cell_gradients(self, theta: FloatArray) -> FloatArray:
        return np.asarray(self.grad(theta, self.cells), dtype=np.float64)
