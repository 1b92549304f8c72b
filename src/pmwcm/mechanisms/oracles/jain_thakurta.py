"""Output perturbation for unconstrained GLMs (Jain, Thakurta 2014), the Table 1 "UGLM" oracle.

**Where it sits in the paper.** Ullman 2015 (Section "Applications",
"Generalized Linear Models", Theorem "oneglm") cites Jain and Thakurta, "(Near)
Dimension Independent Risk Bounds for Differentially Private Learning", ICML 2014,
for an ``(eps0, delta0)``-DP oracle that is ``(alpha0, beta0)``-accurate for one
Lipschitz GLM ``l(theta; x) = f(<theta, phi(x)>, y)`` once ``n = O(1 / (alpha0^2
eps0)) polylog(1/delta0, 1/beta0)``: no ``sqrt(d)``, unlike noisy gradient
descent (BST14). Plugged into Theorem "putittogetheronline" at ``eps0 = eps /
sqrt(8 T log(4/delta))``, ``delta0 = delta / (4T)``, ``alpha0 = alpha / 4``,
``beta0 = beta / (2T)``, it gives Table 1's UGLM row, ``n = O~(sqrt(log|X|) max{1
/ alpha^3, log k / alpha^2})``: the oracle's ``1/alpha0^2`` times the
``sqrt(T) ~ 1/alpha`` of the composition.

**Algorithm** (JT14's output-perturbation variant for GLMs: CMS11's output
perturbation with the ridge weight tuned to the GLM risk bound, not to a
strong-convexity assumption of the query; the constants and the bound below
are derived here, not copied from JT14). From public inputs only, choose
``lambda >= 0`` (below); let ``J(theta) = L_D(theta) + (l2/2) ||theta||^2`` be
the query's objective and ``theta*_lambda``
the minimiser over ``Theta = {||theta|| <= R}`` of ``J + (lambda/2)
||theta||^2``, which is ``(l2 + lambda)``-strongly convex; compute ``theta_D``
within a distance ``r`` of it by a fixed-budget solve planned from public
constants (:class:`~pmwcm.mechanisms.oracles.output_perturbation.OutputPerturbation`'s
plan, run on the regularised problem), and release ``Proj_Theta(theta_D + b)``,
``b ~ N(0, sigma^2 I)``, ``sigma = Delta m``.

**Guarantee: ``(1/m)``-GDP** for replace-one neighbours, event
``GaussianDpEvent(m)``. ``lambda`` depends on public inputs only (``n``, ``m``,
the query's constants), so it is the same on neighbours; the minimisers then
satisfy ``||theta*_lambda(D) - theta*_lambda(D')|| <= 2 G B / (n (l2 +
lambda))`` (CMS11, Corollary 8, whose first-order argument holds on any convex
``Theta``), and with the solve's ``r`` the pre-noise vector has sensitivity
``Delta = 2 G B / (n (l2 + lambda)) + 2 r``; the Gaussian mechanism on it is
``(1/m)``-GDP (Dong, Roth, Su 2022, Thm. 2.7) and the projection is
post-processing. The noise is added by :func:`~pmwcm.mechanisms.noise.add_gaussian`.

**Accuracy.** With probability ``>= 1 - beta`` (``beta`` an attribute), the
released ``theta`` satisfies

    J(theta) - min_Theta J <= lambda R^2 / 2 + (G B + l2 R) (r + sigma q),
    q = sqrt(d) + sqrt(2 log(1/beta)).

Proof: ``J(theta*_lambda) - J(theta*) <= (lambda/2)(||theta*||^2 -
||theta*_lambda||^2) <= lambda R^2 / 2`` by optimality of ``theta*_lambda``;
``J`` is ``(G B + l2 R)``-Lipschitz on ``Theta``; projection onto ``Theta`` is
non-expansive and fixes ``theta*_lambda``, so ``||theta - theta*_lambda|| <= r
+ ||b||``; and ``||b|| <= sigma (sqrt(d) + t)`` with probability ``>= 1 -
exp(-t^2/2)`` (Gaussian concentration of the 1-Lipschitz norm, ``E||Z|| <=
sqrt(d)``). Writing ``c = (G B + l2 R) G B (2 (1 + f) m q + f) / n``, ``f``
the solve's distance fraction (so ``r = f G B / (n (l2 + lambda))`` when the
plan reaches it), the bound is ``lambda R^2 / 2 + c / (l2 + lambda)``,
minimised by ``l2 + lambda = sqrt(2 c) / R`` (or ``lambda = 0`` when the
query's own ``l2`` is larger); there it equals ``R sqrt(2 c)``, i.e. ``alpha0 =
O(R sqrt(G B (G B + l2 R) m q / n))`` and ``n' = O(m q / alpha0^2)``: Table 1's
``1 / alpha^2``.

**What is not JT14's bound.** JT14 release ``theta_D + b`` unprojected over
``R^p`` and use that a GLM sees ``b`` only through the one-dimensional ``<b,
phi(x)> ~ N(0, sigma^2 ||phi(x)||^2)``: their ``q`` is ``sqrt(2/pi)`` (in
expectation), not ``sqrt(d)``. The paper's Figure needs every oracle answer in
``Theta`` (its update vector ``u^t`` must lie in ``[-S, S]``, and the "potential
drop" claim uses first-order optimality over ``Theta``), and the paper itself
states UGLMs on the unit ball. Projecting ``theta_D + b`` may move it by
``||b||``, so the released answer carries ``sqrt(d)``: the dependence on ``n``
(``alpha0 ~ n^{-1/2}``) is JT14's, the dimension-independence is not. Query
cliques are a few attributes (``d`` about 2 to 20), so ``sqrt(d)`` is a small
constant here.

**Never raising.** :meth:`JainThakurtaGLM.check` refuses, from the spec, a query
that is not a GLM, has a zero gradient bound, or whose regularised solve output
perturbation cannot bound (at the largest ``lambda`` ever used, which leaves
every refusal condition unchanged for smaller ones). ``lambda`` is capped at
``2 S / R^2`` (beyond it the bias term alone exceeds the trivial bound ``S``) and
floored so that ``l2 + lambda > 0``; a ``sigma`` beyond float64's reach releases
the data-free limit (:func:`~pmwcm.mechanisms.oracles.base.release_in_ball`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field

import dp_accounting

from pmwcm.kernels.fixed_budget import oscillation_bound
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import GLMProblem
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import (
    MAX_NOISE_SCALE,
    OracleInput,
    OracleRefused,
    check_noise_level,
    data_free_answer,
    release_in_ball,
)
from pmwcm.mechanisms.oracles.output_perturbation import OutputPerturbation, solve_output

__all__ = ["JainThakurtaGLM"]


@dataclass(frozen=True, kw_only=True)
class JainThakurtaGLM:
    """Gaussian output perturbation of a GLM with the ridge weight tuned to its risk bound.

    Attributes:
        beta: the failure probability of the accuracy bound the ridge weight is
            tuned to (theory mode passes the paper's ``beta0 = beta / (2T)``).
        solve: the output-perturbation machinery (its fixed-budget solve plan and
            distance fraction) run on the regularised problem.

    >>> from pmwcm.kernels.domain import Domain
    >>> from pmwcm.kernels.queries import CMQuery
    >>> d = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
    >>> p = CMQuery(loss="logistic", target="y", features=("a", "b")).compile(d)
    >>> oracle = JainThakurtaGLM()
    >>> b1 = oracle.excess_risk_bound(p, 10_000, 1.0)
    >>> b4 = oracle.excess_risk_bound(p, 40_000, 1.0)
    >>> round(b1 / b4, 2)  # alpha0 ~ n^(-1/2): four times the data halves the bound
    2.0
    """

    beta: float = 0.05
    solve: OutputPerturbation = field(default_factory=OutputPerturbation)
    name: str = "jain_thakurta"

    def __post_init__(self) -> None:
        if not 0 < self.beta < 1:
            raise ValueError(f"beta must lie in (0, 1), got beta={self.beta}.")

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        check_noise_level(noise_level)
        return dp_accounting.GaussianDpEvent(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        """Refuses, from the spec alone, a query this oracle cannot serve.

        Raises:
            OracleRefused: not a GLM, a zero or non-finite gradient bound, or a
                regularised solve output perturbation refuses.
        """
        if not isinstance(problem, GLMProblem):
            raise OracleRefused(
                "jain_thakurta serves generalised linear models only, got "
                f"{type(problem).__name__}."
            )
        if not (math.isfinite(problem.lipschitz) and problem.lipschitz > 0):
            raise OracleRefused(
                f"jain_thakurta needs a positive finite gradient bound, got {problem.lipschitz}."
            )
        # Output perturbation's refusals depend on lambda only through finiteness of
        # lambda R^2 / 2 and beta + lambda, so the largest lambda decides for all.
        self.solve.check(self._regularised(problem, self._max_ridge(problem)))

    def _max_ridge(self, problem: GLMProblem) -> float:
        """``2 S / R^2``: above it the bias ``lambda R^2 / 2`` alone exceeds ``S``."""
        return 2.0 * problem.scale / problem.radius**2

    @staticmethod
    def _regularised(problem: GLMProblem, ridge: float) -> GLMProblem:
        total = problem.l2 + ridge
        return dataclasses.replace(problem, l2=max(total, sys.float_info.min))

    def ridge(self, problem: ConvexProblem, n: int, noise_level: float) -> float:
        """``lambda``: minimises the accuracy bound over ``lambda >= 0`` (public inputs only).

        Raises:
            OracleRefused: if :meth:`check` refuses ``problem``.
        """
        self.check(problem)
        assert isinstance(problem, GLMProblem)  # check() refused everything else
        check_noise_level(noise_level)
        gb = problem.lipschitz
        lip = gb + problem.l2 * problem.radius
        fraction = self.solve.distance_fraction
        c = lip * gb * (2.0 * (1.0 + fraction) * noise_level * self._spread(problem) + fraction)
        best_total = math.sqrt(2.0 * c / n) / problem.radius
        return min(max(best_total - problem.l2, 0.0), self._max_ridge(problem))

    def _spread(self, problem: GLMProblem) -> float:
        """``q = sqrt(d) + sqrt(2 log(1/beta))``: ``||Z|| <= q`` with probability ``1 - beta``."""
        return math.sqrt(problem.dim) + math.sqrt(2.0 * math.log(1.0 / self.beta))

    def regularised(self, problem: ConvexProblem, n: int, noise_level: float) -> GLMProblem:
        """The problem the solve runs on: ``l2 + lambda``."""
        ridge = self.ridge(problem, n, noise_level)
        assert isinstance(problem, GLMProblem)
        return self._regularised(problem, ridge)

    def sensitivity(self, problem: ConvexProblem, n: int, noise_level: float) -> float:
        """``Delta = 2 G B / (n (l2 + lambda)) + 2 r`` for the planned solve's ``r``."""
        return self.solve.sensitivity(self.regularised(problem, n, noise_level), n)

    def excess_risk_bound(self, problem: ConvexProblem, n: int, noise_level: float) -> float:
        """The bound of the module docstring, holding with probability ``>= 1 - beta``.

        Computed from public inputs (the planned solve's distance included), and
        never above ``V = S + l2 R^2 / 2``, which bounds the excess risk of any point
        of ``Theta``.
        """
        reg = self.regularised(problem, n, noise_level)
        plan = self.solve.plan(reg, n)
        sigma = self.sensitivity(problem, n, noise_level) * noise_level
        assert isinstance(problem, GLMProblem)
        lip = problem.lipschitz + problem.l2 * problem.radius
        ridge = reg.l2 - problem.l2
        bound = 0.5 * ridge * problem.radius**2 + lip * (
            plan.distance + sigma * self._spread(problem)
        )
        return min(bound, oscillation_bound(problem))

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        """``Proj(theta_D + N(0, (Delta m)^2 I))`` on the regularised problem; never raises
        once the query is accepted."""
        check_noise_level(noise_level)
        problem = self.regularised(data.problem, data.n, noise_level)
        plan = self.solve.plan(problem, data.n)
        sigma = self.sensitivity(data.problem, data.n, noise_level) * noise_level
        if not sigma <= MAX_NOISE_SCALE:  # public: decided before the data is read
            return data_free_answer(problem.dim, problem.radius, noise)
        theta = solve_output(problem, data.weights, plan)
        return release_in_ball(theta, sigma, radius=problem.radius, noise=noise)
