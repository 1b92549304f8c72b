"""A catalogue query compiled on its clique's cells: :class:`GLMProblem`.

``l(theta; x_C) = f(<theta, phi(x_C)>, y(x_C))`` on the rows of a design
(:mod:`pmwcm.kernels.encoding`), its arithmetic :mod:`pmwcm.kernels.glm`'s NumPy
form (the solvers take the compiled form through :mod:`pmwcm.kernels.evaluator`).
The constants the privacy proofs use are derived from the spec, never typed
in: ``G = f.derivative_bound(R B)``, gradient bound ``G B`` of the data term,
scale ``S = 2 R G B``, strong convexity ``lambda``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels import glm
from pmwcm.kernels.design import DenseDesign, Design
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.encoding import Layout, dense_layout
from pmwcm.kernels.losses import GLMLoss
from pmwcm.kernels.problem import ConvexProblem, FloatArray

if TYPE_CHECKING:
    from pmwcm.kernels.queries import CMQuery

__all__ = ["GLMProblem", "dense_problem"]


@dataclass(frozen=True, kw_only=True, eq=False)
class GLMProblem(ConvexProblem):
    """A catalogue query on its clique: ``l(theta; x_C) = f(<theta, phi(x_C)>, y(x_C))``.

    The per-cell terms are the data term only; :meth:`objective` and
    :meth:`gradient` add ``(lambda/2)||theta||^2`` (:mod:`pmwcm.kernels.glm`).
    ``features`` and ``labels`` are given for some cells of the clique (all of
    them for a dense table, the occupied ones for a sparse
    :class:`~pmwcm.kernels.clique_table.CliqueTable`); ``feature_norm_bound``
    bounds ``||phi||`` on *every* cell, so the constants the privacy proofs use
    never depend on which cells a table happens to hold.
    """

    query: CMQuery | None
    clique: tuple[str, ...]
    loss: GLMLoss
    design: Design
    labels: FloatArray
    radius: float
    l2: float
    sizes: tuple[int, ...] = ()
    feature_norm_bound: float | None = None

    @property
    def features(self) -> FloatArray:
        """``Phi`` as a dense ``(cells, d)`` array (the solvers use :attr:`design`)."""
        return self.design.dense()

    @property
    def dim(self) -> int:
        return self.design.dim

    @functools.cached_property
    def feature_bound(self) -> float:
        """``B``: the largest ``||phi(x)||_2`` over the clique (at most 1 by construction).

        Cached: every constant (``G``, ``S``, the smoothness) reads it, and the
        design never changes (a problem on other cells is a new object).
        """
        if self.feature_norm_bound is not None:
            # It bounds every cell of the clique, these included (the encoding's
            # construction, checked by tests/test_queries.py), so no scan is needed.
            return self.feature_norm_bound
        return float(self.design.row_norms().max()) if self.design.rows else 0.0

    def for_query(self, query: CMQuery) -> GLMProblem:
        """This problem as ``query``'s: the same fields and cached constants, with
        ``query`` and its clique. For :func:`dense_problem`'s shared problems, whose
        fields are the query's by construction; a copy of the instance's ``__dict__``,
        since the dataclass's constructor would compute the constants again."""
        copy = object.__new__(GLMProblem)
        copy.__dict__.update(self.__dict__)
        copy.__dict__["query"] = query
        copy.__dict__["clique"] = query.clique
        return copy

    def on_cells(self, cells: NDArray[np.integer]) -> GLMProblem:
        """The same problem (same constants) evaluated on other cells of the clique.

        Raises:
            ValueError: the problem was not compiled from a query.
        """
        if self.query is None or not self.sizes:
            raise ValueError("on_cells needs a problem compiled from a CMQuery.")
        sub = Domain.from_sizes(dict(zip(self.clique, self.sizes, strict=True)))
        design, labels = self.query._features(sub, cells, block_form=True)
        return dataclasses.replace(self, design=design, labels=labels)

    # The constants below are cached like feature_bound: a round reads them about
    # ten times (the plan, tau, the oracle's check, the sensitivity, the solver's
    # choice), and the loss, radius and design they come from never change.

    @functools.cached_property
    def derivative_bound(self) -> float:
        """``G``: bound on ``|df/dz|`` for ``|z| <= R B``."""
        return self.loss.derivative_bound(self.radius * self.feature_bound)

    @functools.cached_property
    def lipschitz(self) -> float:
        return self.derivative_bound * self.feature_bound

    @functools.cached_property
    def scale(self) -> float:
        return 2.0 * self.radius * self.lipschitz

    @functools.cached_property
    def smoothness(self) -> float | None:
        beta = self.loss.smoothness
        return None if beta is None else beta * self.feature_bound**2

    # The arithmetic is pmwcm.kernels.glm's NumPy form; gradient() is the inherited
    # data_gradient(...) + lambda theta, so a subclass that wraps data_gradient (a
    # test's counting problem) sees every evaluation.

    def cell_losses(self, theta: FloatArray) -> FloatArray:
        return glm.cell_losses(self.loss, self.design, self.labels, theta)

    def cell_gradients(self, theta: FloatArray) -> FloatArray:
        return glm.cell_slopes(self.loss, self.design, self.labels, theta)[:, None] * self.features

    def cell_directional(self, theta: FloatArray, direction: FloatArray) -> FloatArray:
        if isinstance(self.design, DenseDesign):  # the dense arithmetic, bit for bit as before
            return self.cell_gradients(theta) @ direction
        slopes = glm.cell_slopes(self.loss, self.design, self.labels, theta)
        return slopes * self.design.matvec(direction)

    def objective(self, theta: FloatArray, weights: FloatArray) -> float:
        return glm.objective(self.loss, self.design, self.labels, weights, theta, self.l2)

    def data_gradient(self, theta: FloatArray, weights: FloatArray) -> FloatArray:
        return glm.data_gradient(self.loss, self.design, self.labels, weights, theta)

    def data_hessian(self, theta: FloatArray, weights: FloatArray) -> FloatArray | None:
        return glm.data_hessian(self.loss, self.design, self.labels, weights, theta)

    def smoothed(self, mu: float) -> tuple[GLMProblem, float]:
        if self.loss.smoothness is not None:
            return self, 0.0
        g = self.derivative_bound
        surrogate = dataclasses.replace(self, loss=self.loss.moreau(mu))
        return surrogate, mu * g * g / 2.0


@functools.lru_cache(maxsize=256)
def dense_problem(layout: Layout, loss: GLMLoss, radius: float, l2: float) -> GLMProblem:
    """The problem on every cell of a clique of ``layout`` (C order), for no query.

    :meth:`~pmwcm.kernels.queries.CMQuery.compile` hands each query a copy with its
    own query and clique (:meth:`GLMProblem.for_query`). Everything else a problem holds, and every
    constant it computes (``B``, ``G``, ``S``, the smoothness, computed here once),
    is a function of these four arguments: on Adult's binary schema the queries of
    a stream share a few dozen of them.
    """
    design, labels, bound = dense_layout(layout)
    problem = GLMProblem(
        query=None,
        clique=(),
        sizes=layout.sizes,
        loss=loss,
        design=design,
        labels=labels,
        radius=radius,
        l2=l2,
        feature_norm_bound=bound,
    )
    for constant in ("feature_bound", "derivative_bound", "lipschitz", "scale", "smoothness"):
        getattr(problem, constant)  # cached on the problem, so on every copy
    return problem
