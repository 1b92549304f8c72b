"""Contract tests for the certified ball solver :func:`pmwcm.kernels.solvers.minimize`.

The reference optimum comes from ``scipy.optimize`` (SLSQP with the ball
constraint ``||theta||^2 <= R^2``, several starts, ``ftol = 1e-14``). Smooth
problems are handed to SLSQP as they are; the non-smooth ones (hinge, quantile,
absolute: a maximum of affine pieces per cell) in their smooth epigraph form
``min sum_c w_c t_c + (lambda/2)||theta||^2`` s.t. ``t_c >= a_k <theta, phi_c> +
b_k``, which SLSQP solves to full precision. Problems are the query registry of
``test_queries.py`` with Dirichlet weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import minimize as scipy_minimize

from pmwcm.kernels.losses import Absolute, Hinge, Quantile
from pmwcm.kernels.problem import CallableProblem, ConvexProblem
from pmwcm.kernels.queries import CMQuery, GLMProblem
from pmwcm.kernels.solvers import Solution, frank_wolfe_gap, minimize, minimizer, project_ball
from test_queries import DOMAIN, SPECS

FloatArray = NDArray[np.float64]

PROBLEMS = {name: spec.compile(DOMAIN) for name, spec in SPECS.items()}
SMOOTH_IDS = [k for k, p in PROBLEMS.items() if p.smoothness is not None]
NON_SMOOTH_IDS = [k for k, p in PROBLEMS.items() if p.smoothness is None]


def _ball_constraint(dim: int, radius: float, extra: int = 0) -> dict[str, Any]:
    """SLSQP form of ``R^2 - ||theta||^2 >= 0`` on the first ``dim`` of ``dim + extra`` vars."""

    def fun(v: FloatArray) -> float:
        return radius**2 - float(v[:dim] @ v[:dim])

    def jac(v: FloatArray) -> FloatArray:
        return np.concatenate([-2.0 * v[:dim], np.zeros(extra)])

    return {"type": "ineq", "fun": fun, "jac": jac}


def _starts(p: ConvexProblem, rng: np.random.Generator, count: int) -> list[FloatArray]:
    """The origin, then random points inside the ball and on its boundary."""
    out = [np.zeros(p.dim)]
    for k in range(1, count):
        v = rng.standard_normal(p.dim)
        out.append(v / np.linalg.norm(v) * p.radius * (1.0 if k % 2 else 0.5))
    return out


def scipy_best_smooth(p: ConvexProblem, w: FloatArray, rng: np.random.Generator) -> float:
    """``min_ball F`` by SLSQP from three starts, each result projected onto the ball."""
    best = np.inf
    for x0 in _starts(p, rng, 3):
        res = scipy_minimize(
            p.objective,
            x0,
            args=(w,),
            jac=p.gradient,
            method="SLSQP",
            constraints=[_ball_constraint(p.dim, p.radius)],
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        best = min(best, p.objective(project_ball(res.x, p.radius), w))
    return best


def affine_pieces(p: GLMProblem) -> tuple[FloatArray, FloatArray]:
    """``(a, b)`` with ``f(z, y_c) = max_k a[c, k] z + b[c, k]`` for the piecewise-linear losses."""
    y = p.labels
    one, zero = np.ones_like(y), np.zeros_like(y)
    loss = p.loss
    if isinstance(loss, Hinge):
        return np.stack([zero, -y], 1), np.stack([zero, one], 1)
    if isinstance(loss, Absolute):
        return np.stack([one, -one], 1), np.stack([-y, y], 1)
    if isinstance(loss, Quantile):
        tau = loss.tau
        return np.stack([-tau * one, (1 - tau) * one], 1), np.stack([tau * y, (tau - 1) * y], 1)
    raise AssertionError(f"{loss.name} is not piecewise linear")


def scipy_best_piecewise(p: GLMProblem, w: FloatArray, rng: np.random.Generator) -> float:
    """``min_ball F`` for a piecewise-linear loss, via SLSQP on the epigraph form (2 starts)."""
    a, b = affine_pieces(p)
    d, n = p.dim, p.labels.size

    def fun(v: FloatArray) -> float:
        return float(w @ v[d:]) + 0.5 * p.l2 * float(v[:d] @ v[:d])

    def jac(v: FloatArray) -> FloatArray:
        return np.concatenate([p.l2 * v[:d], w])

    # t_c - a[c, k] <theta, phi_c> - b[c, k] >= 0 for every piece k, stacked.
    mat = np.vstack([np.hstack([-a[:, [k]] * p.features, np.eye(n)]) for k in range(a.shape[1])])
    rhs = b.T.ravel()
    constraints = [
        _ball_constraint(d, p.radius, n),
        {"type": "ineq", "fun": lambda v: mat @ v - rhs, "jac": lambda v: mat},
    ]
    best = np.inf
    for x0 in _starts(p, rng, 2):  # the epigraph form is convex: two starts are plenty
        t0 = (a * (p.features @ x0)[:, None] + b).max(axis=1) + 0.1
        res = scipy_minimize(
            fun,
            np.concatenate([x0, t0]),
            jac=jac,
            method="SLSQP",
            constraints=constraints,
            options={"ftol": 1e-14, "maxiter": 2000},
        )
        best = min(best, p.objective(project_ball(res.x[:d], p.radius), w))
    return best


def assert_solution_sound(p: ConvexProblem, w: FloatArray, sol: Solution, tol: float) -> None:
    """The fields every :class:`Solution` must satisfy, whatever the problem."""
    assert np.linalg.norm(sol.theta) <= p.radius * (1 + 1e-12)
    assert sol.value == pytest.approx(p.objective(sol.theta, w), rel=1e-14, abs=1e-300)
    assert sol.gap >= 0.0
    assert sol.converged == (sol.gap <= tol)


@pytest.mark.parametrize("batch", range(10))
def test_matches_scipy_on_200_random_smooth_problems(batch: int, seed: int) -> None:
    """20 problems per batch: a random smooth registry spec, Dirichlet(alpha) weights."""
    rng = np.random.default_rng([seed, batch])
    for _ in range(20):
        name = str(rng.choice(SMOOTH_IDS))
        p = PROBLEMS[name]
        w = rng.dirichlet(np.full(p.labels.size, rng.choice([0.1, 1.0, 10.0])))
        sol = minimize(p, w, tol=1e-10)
        assert_solution_sound(p, w, sol, 1e-10)
        assert sol.converged, name
        best = scipy_best_smooth(p, w, rng)
        assert abs(sol.value - best) <= 1e-7, name
        # SLSQP's point is feasible, so it can never beat the certified lower bound.
        assert best >= sol.value - sol.gap - 1e-12, name


@pytest.mark.parametrize("name", NON_SMOOTH_IDS)
def test_non_smooth_certificate_bounds_the_gap_to_scipy(name: str, seed: int) -> None:
    p = PROBLEMS[name]
    rng = np.random.default_rng(seed)
    for alpha in (0.3, 3.0):
        w = rng.dirichlet(np.full(p.labels.size, alpha))
        best = scipy_best_piecewise(p, w, rng)
        for tol in (1e-3, 1e-5):
            sol = minimize(p, w, tol=tol, max_iter=200)
            assert_solution_sound(p, w, sol, tol)
            assert sol.converged, (name, alpha, tol, sol.gap)
            assert -1e-9 <= sol.value - best <= sol.gap + 1e-9, (name, alpha, tol)


def _separable_weights() -> tuple[GLMProblem, FloatArray]:
    """Logistic weights on cells with ``y = sign(b1)``: the optimum lies on the sphere."""
    p = CMQuery(loss="logistic", target="y", features=("b1", "t3")).compile(DOMAIN)
    b1_sign = np.sign(p.features[:, 0])
    w = np.where(b1_sign == p.labels, 1.0, 0.0)
    return p, w / w.sum()


def _interior_weights(rng: np.random.Generator) -> tuple[GLMProblem, FloatArray]:
    """Squared loss with a large ball: the unconstrained optimum is inside it."""
    p = CMQuery(loss="squared", target="r5", features=("b1", "t3"), radius=10.0).compile(DOMAIN)
    return p, rng.dirichlet(np.ones(p.labels.size))


@pytest.mark.parametrize("where", ["boundary", "interior"])
@pytest.mark.parametrize("method", ["newton", "fista"])
def test_certificate_bounds_the_true_gap_at_every_iterate(
    where: str, method: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    p, w = _separable_weights() if where == "boundary" else _interior_weights(rng)
    f_star = min(scipy_best_smooth(p, w, rng), minimize(p, w, tol=1e-13).value)
    final = minimize(p, w, tol=1e-12, method=method)
    on_sphere = np.linalg.norm(final.theta) >= p.radius * (1 - 1e-9)
    assert on_sphere == (where == "boundary")
    # Truncated runs stop at arbitrary iterates; their certificates must still hold.
    for max_iter in (1, 2, 3, 5):
        sol = minimize(p, w, tol=1e-12, max_iter=max_iter, method=method)
        assert sol.value - f_star <= sol.gap + 1e-12
    # So must the gap at any point of the ball, optimal or not.
    for theta in rng.standard_normal((200, p.dim)):
        theta = project_ball(theta * p.radius, p.radius) * rng.random()
        gap = frank_wolfe_gap(p.gradient(theta, w), theta, p.radius)
        assert p.objective(theta, w) - f_star <= gap + 1e-12


@pytest.mark.parametrize("name", SMOOTH_IDS)
def test_newton_and_fista_agree(name: str, seed: int) -> None:
    p = PROBLEMS[name]
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(p.labels.size))
    newton = minimize(p, w, tol=1e-10, method="newton")
    fista = minimize(p, w, tol=1e-10, method="fista")
    assert (newton.method, fista.method) == ("newton", "fista")
    assert newton.converged and fista.converged
    assert abs(newton.value - fista.value) <= 1e-10 + 1e-13
    assert minimize(p, w, tol=1e-10).method == "newton"


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_minimizer_is_minimize_theta_bit_for_bit(name: str, seed: int) -> None:
    """The point-only solve the hypothesis's answer takes is :func:`minimize`'s point
    exactly, for every loss (compiled or not, smooth or not), when Newton converges
    and when it runs out of steps and FISTA finishes (``max_iter=1``), on a
    one-point table too."""
    p = PROBLEMS[name]
    rng = np.random.default_rng(seed)
    for w in (rng.dirichlet(np.full(p.labels.size, 0.3)), np.eye(p.labels.size)[-1]):
        for tol, max_iter in ((1e-10, 50), (1e-12, 1)):
            expected = minimize(p, w, tol=tol, max_iter=max_iter).theta
            np.testing.assert_array_equal(minimizer(p, w, tol=tol, max_iter=max_iter), expected)


def test_warm_start(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = PROBLEMS["logistic_wide"]
    w = rng.dirichlet(np.ones(p.labels.size))
    cold = minimize(p, w, tol=1e-10)
    at_optimum = minimize(p, w, tol=1e-10, theta0=cold.theta)
    assert at_optimum.iterations == 0
    # the same point, up to re-projecting a boundary point onto the ball (one rounding)
    np.testing.assert_allclose(at_optimum.theta, cold.theta, rtol=1e-14, atol=0)
    for method in ("newton", "fista"):
        far = minimize(p, w, tol=1e-10, theta0=100.0 * p.radius * np.ones(p.dim), method=method)
        assert far.converged and abs(far.value - cold.value) <= 1e-10
        assert np.linalg.norm(far.theta) <= p.radius * (1 + 1e-12)
    # Starting near the optimum of a slightly different table is cheaper than a cold start.
    w2 = 0.99 * w + 0.01 * rng.dirichlet(np.ones(p.labels.size))
    assert (
        minimize(p, w2, tol=1e-10, theta0=cold.theta, method="fista").iterations
        <= minimize(p, w2, tol=1e-10, method="fista").iterations
    )


@pytest.mark.parametrize("tol", [0.0, -1e-6, float("nan")])
def test_non_positive_tol_raises(tol: float) -> None:
    p = PROBLEMS["logistic_bin"]
    with pytest.raises(ValueError, match=f"tol={tol}"):
        minimize(p, np.ones(p.labels.size) / p.labels.size, tol=tol)


def test_bad_method_raises() -> None:
    p = PROBLEMS["logistic_bin"]
    w = np.ones(p.labels.size) / p.labels.size
    with pytest.raises(ValueError, match="'bfgs'"):
        minimize(p, w, method="bfgs")
    with pytest.raises(ValueError, match="Hessian"):
        minimize(_as_callable(PROBLEMS["logistic_bin"]), w, method="newton")


def test_feature_bound_below_one_still_converges(seed: int) -> None:
    """Regression: with ``B < 1`` the Moreau slack used to eat the whole tolerance
    (``converged`` stayed False), and ``B = 0`` raised ZeroDivisionError."""
    rng = np.random.default_rng(seed)
    for name in ("absolute_const_feature", "hinge_zero_features"):
        p = PROBLEMS[name]
        assert p.feature_bound < 1.0
        w = rng.dirichlet(np.ones(p.labels.size))
        for tol in (1e-2, 1e-4):
            sol = minimize(p, w, tol=tol)
            assert sol.converged, (name, tol, sol.gap)


def _as_callable(p: GLMProblem) -> CallableProblem:
    """The GLM ``p`` re-declared as a user callable on integer cell codes (same constants)."""
    sizes = tuple(DOMAIN.size_of(a) for a in p.clique)
    n_cells = int(np.prod(sizes))

    def index(cells: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.ravel_multi_index(tuple(cells.T), sizes).astype(np.int64)

    loss: Callable[[FloatArray, NDArray[np.int64]], FloatArray] = lambda th, cells: (  # noqa: E731
        p.cell_losses(th)[index(cells)]
    )
    grad: Callable[[FloatArray, NDArray[np.int64]], FloatArray] = lambda th, cells: (  # noqa: E731
        p.cell_gradients(th)[index(cells)]
    )
    assert n_cells == p.labels.size
    return CallableProblem(
        clique=p.clique,
        sizes=sizes,
        dimension=p.dim,
        radius=p.radius,
        l2=p.l2,
        lipschitz_bound=p.lipschitz,
        loss=loss,
        grad=grad,
        smoothness_bound=p.smoothness,
    )


@pytest.mark.parametrize("name", ["logistic_wide", "logistic_onehot_ord_l2"])
def test_callable_problem_solves_with_fista(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = PROBLEMS[name]
    user = _as_callable(p)
    w = rng.dirichlet(np.ones(p.labels.size))
    sol = minimize(user, w, tol=1e-9)
    assert sol.method == "fista"
    assert_solution_sound(user, w, sol, 1e-9)
    assert sol.converged
    assert abs(sol.value - minimize(p, w, tol=1e-12).value) <= 1e-9


def test_non_smooth_callable_keeps_a_sound_certificate(seed: int) -> None:
    """Without a surrogate, FISTA runs on subgradients; the certificate stays sound."""
    rng = np.random.default_rng(seed)
    p = PROBLEMS["absolute"]
    user = _as_callable(p)  # the absolute loss: no smoothness declared
    assert user.smoothness is None
    w = rng.dirichlet(np.ones(p.labels.size))
    sol = minimize(user, w, tol=1e-6, max_iter=20)
    assert_solution_sound(user, w, sol, 1e-6)
    # F* >= value - gap of the GLM solve (itself checked against SLSQP above).
    ref = minimize(p, w, tol=1e-6)
    assert ref.converged
    assert sol.value - (ref.value - ref.gap) <= sol.gap + ref.gap
