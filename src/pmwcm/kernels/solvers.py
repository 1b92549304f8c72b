"""Certified convex minimisation on the L2 ball ``Theta = {||theta|| <= R}``.

Minimises ``F(theta) = sum_c w_c l(theta; c) + (lambda/2) ||theta||^2`` over the
ball and returns a *certificate*: an upper bound on ``F(theta) - min F`` that
holds whatever the solver did. The engine adds this bound to the sensitivity of
the sparse vector's query (docs/design.md section 3, step 2), so it must be sound.

**Certificate (Frank-Wolfe duality gap).** For convex ``F`` and any
(sub)gradient ``g`` of ``F`` at ``theta``, convexity gives, for every ``v`` in
the ball, ``F(v) >= F(theta) + <g, v - theta> >= F(theta) - <g, theta> - R ||g||``.
Hence ``gap(theta) = <g, theta> + R ||g|| >= F(theta) - F*`` (Jaggi 2013, eq. 2).

**Non-smooth losses.** For ``G``-Lipschitz per-cell losses the solver minimises
the Moreau envelope ``F_mu`` (``F - mu G^2/2 <= F_mu <= F`` when the weights sum
to one), so ``F(theta) - F* <= F_mu(theta) + mu G^2/2 - F_mu* <= gap_mu(theta) +
mu G^2 / 2``; it also evaluates the true subgradient gap and keeps the smaller.

**Methods.** ``"newton"`` (default where a Hessian exists): each step minimises
the second-order model over the ball exactly (a trust-region subproblem solved
by eigen-decomposition and the Moré-Sorensen secular equation), then an Armijo
backtracking along the feasible segment; locally quadratic. ``"fista"``:
accelerated projected gradient (Beck-Teboulle 2009) with backtracking on the
Lipschitz constant and O'Donoghue-Candès adaptive restarts.

For a loss the compiled kernels implement (logistic, squared, Huber) the Newton
loop runs as one compiled call (:func:`~pmwcm.kernels.newton.newton_solve`):
the same steps, equal to the NumPy loop up to rounding, without NumPy's per-call
cost on a table of a few dozen cells (about 90 us to 25 us per solve on Adult).
The certificate is computed here either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from pmwcm.kernels.ball import numpy_ball_quadratic_min, project_ball
from pmwcm.kernels.design import BlockDesign, DenseDesign
from pmwcm.kernels.evaluator import CompiledGLMEvaluator, Evaluator, compiled_kind, evaluator
from pmwcm.kernels.glm import loss_kind
from pmwcm.kernels.newton import newton_solve
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem


@dataclass(frozen=True)
class SolverBudget:
    """A named request to :func:`minimize`: the certified gap and the iteration cap.

    Attributes:
        tol: the certified gap asked for (``F(theta) - F* <= tol``).
        max_iter: the most outer iterations (FISTA gets ``200 x`` that).
    """

    tol: float
    max_iter: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol must be positive and finite, got tol={self.tol}.")
        if not (isinstance(self.max_iter, int) and self.max_iter >= 1):
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}.")


#: :func:`minimize`'s own defaults.
DEFAULT_SOLVE = SolverBudget(tol=1e-9, max_iter=500)
#: The exact (non-private) minimum every excess risk is measured from
#: (:mod:`pmwcm.engine.baselines`).
EXACT_BASELINE_SOLVE = SolverBudget(tol=1e-10, max_iter=2000)


class SolverError(RuntimeError):
    """The solver could not certify the requested gap within its iteration budget."""


@dataclass(frozen=True, kw_only=True)
class Solution:
    """A point of the ball, its objective value and a certified optimality gap.

    Attributes:
        theta: the solution, ``||theta|| <= R``.
        value: ``F(theta)``.
        gap: certified bound ``F(theta) - min F <= gap``.
        iterations: iterations taken.
        converged: whether ``gap <= tol``.
        method: ``"newton"`` or ``"fista"``.
    """

    theta: FloatArray
    value: float
    gap: float
    iterations: int
    converged: bool
    method: str


def frank_wolfe_gap(grad: FloatArray, theta: FloatArray, radius: float) -> float:
    """``<g, theta> + R ||g||``, an upper bound on ``F(theta) - min_ball F``."""
    return max(0.0, float(grad @ theta) + radius * math.sqrt(float(np.dot(grad, grad))))


def minimize(
    problem: ConvexProblem,
    weights: FloatArray,
    *,
    tol: float = DEFAULT_SOLVE.tol,
    max_iter: int = DEFAULT_SOLVE.max_iter,
    theta0: FloatArray | None = None,
    method: str = "auto",
) -> Solution:
    """Minimises ``problem`` weighted by ``weights`` over its ball, to a certified gap.

    Args:
        problem: the loss on its clique.
        weights: non-negative cell weights (a marginal table, flattened in C order).
        tol: requested bound on ``F(theta) - F*``.
        max_iter: iteration budget (Newton steps, or 200x this for FISTA).
        theta0: warm start (projected onto the ball).
        method: ``"auto"``, ``"newton"`` or ``"fista"``.

    Returns:
        A :class:`Solution`; ``converged`` says whether ``gap <= tol``.

    Raises:
        ValueError: for a non-positive ``tol`` or an unknown method.
    """
    if not tol > 0:
        raise ValueError(f"tol must be positive, got tol={tol}.")
    if method not in ("auto", "newton", "fista"):
        raise ValueError(f"Unknown method {method!r}; use 'auto', 'newton' or 'fista'.")
    weights = np.ascontiguousarray(weights, dtype=np.float64).ravel()
    start = np.zeros(problem.dim) if theta0 is None else project_ball(theta0, problem.radius)
    slack = 0.0
    surrogate = problem
    if problem.smoothness is None:
        total = float(weights.sum())
        try:
            # The surrogate's slack c(mu) = mu G^2 / 2 is linear in mu, with G the loss's own
            # derivative bound (not ``problem.lipschitz = G B``): probe c(1), then pick mu with
            # c(mu) total = tol / 2, leaving half the tolerance for the smooth solve.
            surrogate, unit_slack = problem.smoothed(1.0)
            if unit_slack > 0:
                mu = tol / (2.0 * unit_slack * max(total, 1e-300))
                surrogate, unit_slack = problem.smoothed(mu)
            slack = unit_slack * total
        except NotImplementedError:
            surrogate = problem
    # The Hessian at the start answers "is there one?" and is Newton's first one too.
    fast = evaluator(surrogate, weights)
    start_hessian = fast.hessian(start)
    has_hessian = start_hessian is not None
    use_newton = method == "newton" or (method == "auto" and has_hessian)
    if use_newton and not has_hessian:
        raise ValueError(f"method='newton' needs a Hessian; {type(problem).__name__} has none.")
    inner_tol = max(tol - slack, tol / 2)
    if use_newton:
        if isinstance(fast, CompiledGLMEvaluator):
            theta, iters, ok = _compiled_newton(surrogate, weights, start, inner_tol, max_iter)
        else:
            theta, iters, ok = _newton(
                surrogate, fast, start, inner_tol, max_iter, start_hessian=start_hessian
            )
        if not ok:
            theta, more, _ = _fista(surrogate, weights, theta, inner_tol, 200 * max_iter)
            iters += more
    else:
        theta, iters, _ = _fista(surrogate, weights, start, inner_tol, 200 * max_iter)
    gap = frank_wolfe_gap(fast.gradient(theta), theta, problem.radius) + slack
    exact = fast if surrogate is problem else evaluator(problem, weights)
    if surrogate is not problem:
        gap = min(gap, frank_wolfe_gap(exact.gradient(theta), theta, problem.radius))
    return Solution(
        theta=theta,
        value=exact.objective(theta),
        gap=gap,
        iterations=iters,
        converged=gap <= tol,
        method="newton" if use_newton else "fista",
    )


def minimizer(
    problem: ConvexProblem,
    weights: FloatArray,
    *,
    tol: float = DEFAULT_SOLVE.tol,
    max_iter: int = DEFAULT_SOLVE.max_iter,
) -> FloatArray:
    """``minimize(problem, weights, tol=tol, max_iter=max_iter).theta``, bit for bit.

    For the caller that needs the point only (the hypothesis's answer in every
    round). A compiled catalogue GLM with a smooth loss, which :func:`minimize`
    solves by the compiled Newton from ``0`` (then FISTA, should Newton not
    converge), skips what only the certificate reads: the Hessian at the start
    (:func:`minimize`'s "is there one?") and the closing gradient and objective.
    Any other problem goes through :func:`minimize`.
    """
    kind = compiled_kind(problem) if tol > 0 and problem.smoothness is not None else None
    if kind is not None:
        weights = np.ascontiguousarray(weights, dtype=np.float64).ravel()
        theta, _, converged = _compiled_newton(
            problem, weights, np.zeros(problem.dim), tol, max_iter, kind=kind
        )
        if not converged:
            theta, _, _ = _fista(problem, weights, theta, tol, 200 * max_iter)
        return theta
    return minimize(problem, weights, tol=tol, max_iter=max_iter).theta


def _compiled_newton(
    problem: ConvexProblem,
    weights: FloatArray,
    theta: FloatArray,
    tol: float,
    max_iter: int,
    *,
    kind: tuple[int, float] | None = None,
) -> tuple[FloatArray, int, bool]:
    """:func:`_newton` in one compiled call (:func:`~pmwcm.kernels.newton.newton_solve`),
    for a problem :func:`~pmwcm.kernels.evaluator.evaluator` compiles: the same
    steps, equal up to rounding (``tests/test_round_fast_paths.py``), without
    NumPy's per-call cost on a table of a few dozen cells."""
    assert isinstance(problem, GLMProblem)
    design = cast("BlockDesign | DenseDesign", problem.design)  # what the evaluator compiles
    if kind is None:
        kind = loss_kind(problem.loss)
    assert kind is not None
    columns, values = design.row_major
    theta, iterations, converged = newton_solve(
        columns, values, np.ascontiguousarray(problem.labels, dtype=np.float64), weights,
        float(problem.l2), kind[0], kind[1], float(problem.radius),
        np.array(theta, dtype=np.float64), tol, max_iter,
    )  # fmt: skip
    return theta, int(iterations), bool(converged)


def _newton(
    problem: ConvexProblem,
    fast: Evaluator,
    theta: FloatArray,
    tol: float,
    max_iter: int,
    *,
    start_hessian: FloatArray | None = None,
) -> tuple[FloatArray, int, bool]:
    """Projected Newton with exact ball-constrained model steps and Armijo backtracking.

    ``fast`` is ``problem`` bound to its weights (:func:`~pmwcm.kernels.evaluator.evaluator`);
    ``start_hessian``, if given, is the data Hessian at ``theta`` (the caller had it).
    """
    radius, eye = problem.radius, np.eye(problem.dim)
    value = fast.objective(theta)
    full_step_gap = math.inf
    for it in range(1, max_iter + 1):
        grad = fast.gradient(theta)  # a reused buffer: no other gradient call until the next loop
        gap = frank_wolfe_gap(grad, theta, radius)
        if gap <= tol:
            return theta, it - 1, True
        hess = start_hessian if it == 1 and start_hessian is not None else None
        if hess is None:
            hess = fast.hessian(theta)
        assert hess is not None
        hess = hess + (problem.l2 + 1e-12) * eye
        target = numpy_ball_quadratic_min(hess, grad - hess @ theta, radius)
        direction = target - theta
        slope = float(grad @ direction)
        if slope >= 0.0:
            return theta, it, False
        if -slope <= 1e-12 * max(1.0, abs(value)):
            # The predicted decrease is below what float64 objective values resolve, so
            # Armijo cannot confirm it: take the full model step while it keeps shrinking
            # the gap (the certificate is the gradient's gap, not the values').
            if gap >= full_step_gap:
                return theta, it, False
            full_step_gap = gap
            theta = target
            value = fast.objective(theta)
            continue
        step, candidate, cand_value = 1.0, theta, value
        while step > 1e-10:
            candidate = theta + step * direction
            cand_value = fast.objective(candidate)
            if cand_value <= value + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            return theta, it, False
        theta, value = candidate, cand_value
    grad = fast.gradient(theta)
    return theta, max_iter, frank_wolfe_gap(grad, theta, radius) <= tol


def _fista(
    problem: ConvexProblem, weights: FloatArray, theta: FloatArray, tol: float, max_iter: int
) -> tuple[FloatArray, int, bool]:
    """Accelerated projected gradient with backtracking and adaptive restart."""
    radius = problem.radius
    beta = problem.smoothness
    lip = max(1e-8, (beta if beta is not None else 1.0) * float(weights.sum()) + problem.l2)
    fast = evaluator(problem, weights)
    y, momentum, prev = theta.copy(), 1.0, theta.copy()
    for it in range(1, max_iter + 1):
        if it % 10 == 1 and frank_wolfe_gap(fast.gradient(theta), theta, radius) <= tol:
            return theta, it - 1, True
        f_y = fast.objective(y)
        g_y = fast.gradient(y).copy()
        while True:
            cand = project_ball(y - g_y / lip, radius)
            diff = cand - y
            if fast.objective(cand) <= f_y + g_y @ diff + 0.5 * lip * (diff @ diff) + 1e-15:
                break
            lip *= 2.0
        prev, theta = theta, cand
        if float((y - theta) @ (theta - prev)) > 0.0:  # restart when momentum goes uphill
            momentum, y = 1.0, theta.copy()
            continue
        nxt = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum))
        y = theta + ((momentum - 1.0) / nxt) * (theta - prev)
        momentum = nxt
    ok = frank_wolfe_gap(fast.gradient(theta), theta, radius) <= tol
    return theta, max_iter, ok
