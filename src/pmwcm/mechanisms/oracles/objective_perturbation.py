"""Approximate-minima perturbation for smooth GLMs (Iyengar et al. 2019, after CMS11 and KST12).

**Algorithm** (Iyengar, Near, Song, Thakkar, Thakurta, Wang, "Towards Practical
Differentially Private Convex Optimization", IEEE S&P 2019, Algorithm 1, "AMP").
Draw ``b`` with density ``∝ exp(-eps_b ||b|| / (2 zeta))`` (a uniform direction
times a ``Gamma(d, 2 zeta / eps_b)`` norm); let ``theta_b`` be the exact,
*unconstrained* minimiser over ``R^d`` of

    J(theta) = sum_i l(theta; x_i) + ((n lambda + Gamma) / 2) ||theta||^2 + <b, theta>;

compute ``theta_approx`` with ``||theta_approx - theta_b|| <= r`` by a fixed-budget
solve (below), and release ``Proj_Theta(theta_approx + N(0, sigma^2 I))``,
``sigma = 2 r m_G``.

**Guarantee: the composition of pure ``eps``-DP and ``(1/m_G)``-GDP** (the
``ComposedDpEvent`` of :meth:`ObjectivePerturbation.privacy_event`), for
replace-one neighbours, when every per-record loss is convex, twice
differentiable almost everywhere, has a gradient bounded by ``zeta = G B`` on all
of ``R^d`` and a rank-one Hessian ``f''(z) phi phi^T`` with eigenvalue at most
``beta = f_smooth B^2``. Proof.

1. *Objective perturbation* (CMS11 Theorem 9, adapted to replace-one): releasing
   ``theta_b`` is ``eps``-DP with ``eps = eps_b + log(1 + beta / Gamma)``. ``J`` is
   strongly convex, so ``b -> theta_b`` is a bijection with inverse ``b(theta; D) =
   -sum_i grad l(theta; x_i) - (n lambda + Gamma) theta``; the density of
   ``theta_b`` is ``nu(b(theta; D)) |det grad_theta b(theta; D)|``. For ``D' = D - x +
   x'``: (i) ``||b(theta; D) - b(theta; D')|| <= 2 zeta``, so the ``nu`` ratio is at
   most ``exp(eps_b)``; (ii) with ``A = sum_{i != x} H_i + (n lambda + Gamma) I >=
   Gamma I``, ``det(A + H_x) / det(A + H_x') <= 1 + f'' phi^T A^{-1} phi <= 1 +
   beta / Gamma`` (matrix determinant lemma). We split ``eps`` evenly: ``eps_b =
   eps / 2``, ``Gamma = beta / (exp(eps / 2) - 1)``.
2. *The Gaussian step* (Iyengar et al. 2019, Theorem 1): release ``theta_b`` and
   then ``theta_approx + N(0, sigma^2 I)``. Given ``theta_b = t``, the noise is
   ``b = b(t; D)``, so ``theta_approx`` is a deterministic function ``q_t(D)`` of the
   data, within ``r`` of ``t`` for *every* dataset (``r`` is a priori, below);
   hence ``||q_t(D) - q_t(D')|| <= 2 r`` and the Gaussian mechanism with ``sigma =
   2 r m_G`` is ``(1/m_G)``-GDP (Dong, Roth, Su 2022, Thm. 2.7). The two compose
   adaptively; dropping ``theta_b`` and projecting are post-processing. Iyengar et
   al. stop their solver when ``||grad J|| <= gamma``, a data-dependent stopping
   rule; here a fixed budget gives the distance ``r`` a priori instead.

**The solve** works on ``J / n = L_w(theta) + (mu/2) ||theta - c||^2 + const``, with
``mu = lambda + Gamma / n`` and the centre ``c = -b / (n mu)``, from ``theta_0 = c``.
At the minimiser ``grad L_w(theta_b) + mu (theta_b - c) = 0``, so ``||theta_b - c||
= ||grad L_w(theta_b)|| / mu <= zeta / mu`` **whatever b is**: the start distance
``D_0 = zeta / mu`` is public, and so is the iteration count that
:func:`~pmwcm.mechanisms.oracles.strongly_convex.plan_distance` derives from ``L = beta +
mu``, ``mu``, ``D_0`` and ``V_0 = L D_0^2 / 2`` (projected gradient descent or
V-FISTA, both with linear rates; the count depends on ``n``, ``lambda``, ``eps``
and the loss constants, never on the data or on ``b``, so even the running time
reveals nothing beyond the release). The solve never stops early and never
raises. The count grows like ``sqrt(kappa)``, ``kappa = 1 + beta / mu ~ n (e^{eps/2}
- 1)`` for ``lambda = 0``; if ``r`` needs more than ``max_iterations`` (default
20,000), the plan raises ``Gamma`` above ``beta / (e^{eps/2} - 1)`` (a public
search) until it fits: a larger ``Gamma`` only lowers ``log(1 + beta / Gamma)``, so
the part stays ``eps``-DP, and the price is a slightly stronger ridge ``Gamma / n``
(on Adult, ``n = 48,842``, ``d = 17``, ``lambda = 0``: ``eps = 1`` needs 12,050
iterations and keeps ``Gamma``; ``eps = 10`` raises it). Extreme levels stay in
float64: the exponent of ``e^{eps/2}`` is capped (again a larger ``Gamma``), plans
are computed in log space, and noise scales beyond float64's reach (public)
release the data-free limit of the mechanism
(:func:`~pmwcm.mechanisms.oracles.base.data_free_answer`), so no accepted call raises.

**Rounding.** ``r`` is an exact-arithmetic bound, charged twice over
(:mod:`pmwcm.mechanisms.oracles.strongly_convex`). In float64 the computed point can only
be as close to ``theta_b`` as ``delta_g / mu``, ``delta_g`` the rounding of one
gradient (``~1e-15`` relative to ``zeta + beta ||theta||``); since ``mu ~ Gamma /
n``, this floor grows with ``n`` while ``r`` shrinks, and the iteration budget,
by raising ``Gamma`` when ``sqrt(kappa)`` gets too large, also bounds it.
Measured against a Newton reference on Adult logistic queries (``lambda = 0``,
``eps`` = 0.1 and 1): errors ``<= 7e-11`` for ``n`` up to ``10^7``, where ``r >=
4e-10`` (``8e-8`` at ``n = 48,842``); ``tests/test_objective_perturbation.py`` and
``tests/test_oracle_budgets.py`` check ``r`` on near-degenerate weights, with
``||b||`` up to five times its mean. The floor grows with ``||theta_b||``, hence
with ``||b||``: it would reach ``r / 2`` only for ``||b||`` some hundreds of times
its mean ``d norm_scale`` (a ``Gamma(d)`` tail, probability far below
``1e-100``), an event this event does not account for.

**The split of the one noise level** ``m`` (what the engine calibrates; larger is
more private, as :func:`pmwcm.engine.practical.calibrate_noise_level` needs): the
objective-perturbation part keeps all of ``eps = 1 / m``, as before AMP; the
Gaussian step runs at ``m_G = K m``, ``K = gaussian_factor = 100``. Why: ``r`` is
ours to choose and costs only ``log(1/r)`` iterations, so the Gaussian step can
be made nearly free in *both* privacy and noise. ``(1/(100 m))``-GDP adds 3-5% to
``eps`` under PLD composition at ``delta`` in ``[1e-9, 1e-6]`` (``eps = 1`` becomes
1.033 at ``delta = 1e-6``, 1.048 at ``1e-9``; ``eps = 0.1`` becomes 0.103 and
0.105); and with ``r = f zeta / (K n (beta + mu))``, ``f = distance_fraction =
0.1``, the Gaussian noise ``sigma = 2 f zeta m / (n (beta + mu))`` has a norm at
most ``f / (2 sqrt d)`` of the least displacement objective perturbation itself
causes in expectation (``E||b|| / (n (beta + mu))``, ``E||b|| = 4 d zeta m``).

It serves only losses whose derivative is bounded on all of ``R`` (logistic,
Huber, smoothed hinge), not the squared loss. The mechanism minimises over
``R^d`` and projects, so when the constrained optimum lies on the boundary of
``Theta`` the projected answer is biased (measured on Adult at eps = 10:
excess risk ~5e-4 for unit-ball logistic queries, where noisy gradient descent
reaches the constrained optimum); prefer it for queries whose optimum is inside
the ball (small ``||theta*||`` or ``l2 > 0``). AMP changes the accuracy by nothing
measurable: on 8 random unit-ball logistic queries on binary Adult, 5 seeds,
mean excess risk 0.0183 before and after at ``eps = 1`` (0.0185 at ``eps =
0.1``, 0.0181 at ``eps = 10``), all of it the projection's bias.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import dp_accounting
import numpy as np

from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem
from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import (
    MAX_NOISE_SCALE,
    OracleInput,
    OracleRefused,
    check_noise_level,
    data_free_answer,
    release_in_ball,
)
from pmwcm.mechanisms.oracles.strongly_convex import DistancePlan, plan_distance, run_distance_plan

#: Jumps and bisection steps of the search for a Gamma that fits the budget.
_MAX_SEARCH = 200
_JUMP = 1e3
#: ``Gamma >= beta / (e^x - 1)`` with ``x = min(eps / 2, _MAX_EXPONENT)``: no overflow.
_MAX_EXPONENT = 300.0
_TINY = sys.float_info.min


@dataclass(frozen=True, kw_only=True)
class ObjectivePlan:
    """One call's constants, all public (the query, ``n`` and the noise level).

    Attributes:
        epsilon: the objective-perturbation part's pure ``eps = 1 / m``.
        gamma: ``Gamma = beta / (exp(eps / 2) - 1)``.
        strong_convexity: ``mu = lambda + Gamma / n``.
        zeta: ``G B``, the data gradient's bound on all of ``R^d``.
        beta: the per-record curvature bound ``f_smooth B^2``.
        norm_scale: ``4 zeta / eps``: ``||b||`` is a sum of ``d`` draws ``|Lap(norm_scale)|``.
        target: the distance ``r`` wanted, ``f zeta / (K n (beta + mu))``.
        solve: the fixed-budget solve; ``solve.distance`` is the ``r`` charged.
        sigma: the Gaussian step's standard deviation ``2 r K m``.
    """

    epsilon: float
    gamma: float
    strong_convexity: float
    zeta: float
    beta: float
    norm_scale: float
    target: float
    solve: DistancePlan
    sigma: float

    @property
    def distance(self) -> float:
        """``r``: the a-priori bound on ``||theta_approx - theta_b||`` that ``sigma`` covers."""
        return self.solve.distance


@dataclass(frozen=True, kw_only=True)
class ObjectivePerturbation:
    """Approximate-minima perturbation (AMP) for smooth, globally Lipschitz GLMs.

    Attributes:
        gaussian_factor: ``K``: the Gaussian step's noise multiplier is ``K m``.
        distance_fraction: ``f`` in ``r = f zeta / (K n (beta + mu))``.
        max_iterations: the most gradient evaluations one solve may take.
    """

    gaussian_factor: float = 100.0
    distance_fraction: float = 0.1
    max_iterations: int = 20_000
    name: str = "objective_perturbation"

    def __post_init__(self) -> None:
        for field in ("gaussian_factor", "distance_fraction"):
            value = getattr(self, field)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{field} must be positive and finite, got {field}={value}.")
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(
                f"max_iterations must be a positive integer, got "
                f"max_iterations={self.max_iterations!r}."
            )

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        """Pure ``1/m``-DP composed with a ``(1/(K m))``-GDP Gaussian step."""
        check_noise_level(noise_level)
        return dp_accounting.ComposedDpEvent(
            [
                EpsilonDeltaDpEvent(epsilon=1.0 / noise_level),
                dp_accounting.GaussianDpEvent(self.gaussian_factor * noise_level),
            ]
        )

    def check(self, problem: ConvexProblem) -> None:
        if not isinstance(problem, GLMProblem):
            raise OracleRefused("objective_perturbation serves catalogue GLM queries only.")
        if problem.loss.smoothness is None:
            raise OracleRefused(
                f"objective_perturbation needs a smooth loss, got {problem.loss.name!r}."
            )
        if not math.isfinite(problem.loss.derivative_bound(math.inf)):
            raise OracleRefused(
                f"objective_perturbation needs a loss with a bounded derivative on all of R, "
                f"got {problem.loss.name!r}."
            )

    def plan(self, problem: ConvexProblem, n: int, noise_level: float) -> ObjectivePlan:
        """Every constant of one call, from public inputs; refuses only what :meth:`check` does.

        Raises:
            ValueError: if :meth:`check` refuses ``problem``, for ``n < 1`` or a bad level.
        """
        check_noise_level(noise_level)
        self.check(problem)
        assert isinstance(problem, GLMProblem)
        if not (isinstance(n, int | np.integer) and n >= 1):
            raise ValueError(f"n must be a positive number of records, got n={n!r}.")
        epsilon = 1.0 / noise_level
        zeta = problem.loss.derivative_bound(math.inf) * problem.feature_bound
        beta = problem.loss.smoothness * problem.feature_bound**2  # type: ignore[operator]
        # beta / (e^{eps/2} - 1), its exponent capped and Gamma / n kept a normal float
        # (a larger Gamma is still eps-DP).
        least = max(beta / math.expm1(min(epsilon / 2, _MAX_EXPONENT)), 2.0 * n * _TINY)
        gamma, solve, target = least, *self._solve_plan(problem, n, zeta, beta, least)
        if solve.distance > target:
            # Over budget: raise Gamma (public) until the wanted distance fits; a larger
            # Gamma only lowers log(1 + beta / Gamma), so eps-DP still holds.
            low, high = least, _JUMP * least
            for _ in range(_MAX_SEARCH):
                fits = self._solve_plan(problem, n, zeta, beta, high)
                if fits[0].distance <= fits[1]:
                    break
                low, high = high, _JUMP * high
            for _ in range(_MAX_SEARCH):
                if high <= low * (1.0 + 1e-6):
                    break
                mid = math.sqrt(low * high)
                fits = self._solve_plan(problem, n, zeta, beta, mid)
                if fits[0].distance <= fits[1]:
                    high = mid
                else:
                    low = mid
            candidate, wanted = self._solve_plan(problem, n, zeta, beta, high)
            if candidate.distance <= wanted:
                gamma, solve, target = high, candidate, wanted
        return ObjectivePlan(
            epsilon=epsilon,
            gamma=gamma,
            strong_convexity=problem.l2 + gamma / n,
            zeta=zeta,
            beta=beta,
            norm_scale=4.0 * zeta / epsilon,
            target=target,
            solve=solve,
            sigma=2.0 * solve.distance * self.gaussian_factor * noise_level,
        )

    def _solve_plan(
        self, problem: GLMProblem, n: int, zeta: float, beta: float, gamma: float
    ) -> tuple[DistancePlan, float]:
        """The solve for ``Gamma`` and the distance ``r`` wanted at it."""
        mu = problem.l2 + gamma / n
        smooth = beta + mu
        target = self.distance_fraction * zeta / (self.gaussian_factor * n * smooth)
        start = zeta / mu
        if not (start > 0 and math.isfinite(start)):
            # zeta = 0 (every dataset has the same minimiser) or mu below float64's range.
            start = 1.0 if start == 0 else sys.float_info.max
        target = min(max(target, _TINY), start)
        solve = plan_distance(
            smoothness=smooth,
            strong_convexity=mu,
            start_distance=start,
            start_gap=None,  # unconstrained: L D_0^2 / 2
            distance=target,
            max_iterations=self.max_iterations,
        )
        return solve, target

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        """``Proj(theta_approx + N(0, sigma^2 I))``; never raises once the query is accepted."""
        problem = data.problem
        plan = self.plan(problem, data.n, noise_level)
        d = problem.dim
        if not (plan.sigma <= MAX_NOISE_SCALE and plan.norm_scale <= MAX_NOISE_SCALE):
            # Public: more noise than float64 carries; decided before the data is read.
            return data_free_answer(d, problem.radius, noise)
        # |b| ~ Gamma(d, 2 zeta / eps_b): a sum of d exponentials, each |Laplace|.
        norm = float(np.abs(noise.laplace(plan.norm_scale, d)).sum())
        direction = noise.gaussian(1.0, d)
        b = norm * direction / max(float(np.linalg.norm(direction)), 1e-300)
        theta = solve_perturbed(problem, data.weights, plan, b / data.n)
        return release_in_ball(theta, plan.sigma, radius=problem.radius, noise=noise)


def solve_perturbed(
    problem: ConvexProblem, weights: FloatArray, plan: ObjectivePlan, linear: FloatArray
) -> FloatArray:
    """``theta_approx``: within ``plan.distance`` of ``argmin L_w + (mu/2)||.||^2 + <linear, .>``.

    Runs ``plan.solve`` on ``L_w(theta) + (mu/2)||theta - c||^2``, ``c = -linear / mu``,
    from ``c``: exactly ``plan.solve.iterations`` gradient evaluations, for every
    dataset and every ``linear = b / n``.
    """
    weights = np.asarray(weights, dtype=np.float64).ravel()
    mu = plan.strong_convexity
    centre = -np.asarray(linear, dtype=np.float64) / mu
    return run_distance_plan(
        plan.solve,
        lambda theta: problem.data_gradient(theta, weights) + mu * (theta - centre),
        centre,
        radius=None,
    )
