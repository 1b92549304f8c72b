"""Output perturbation for strongly convex losses (Chaudhuri, Monteleoni, Sarwate 2011).

**Algorithm.** Compute ``theta_D``, an approximate minimiser of ``L_D``
(``lambda``-strongly convex because ``lambda > 0``) by a **fixed-budget** solve
whose distance to the exact minimiser ``theta*_D`` is bounded a priori by ``r``,
then release ``Proj_Theta(theta_D + Z)``, ``Z ~ N(0, (Delta m)^2 I)``.

**Guarantee: ``(1/m)``-GDP** (Dong, Roth, Su 2022, Thm. 2.7), for replace-one
neighbours. The exact minimisers satisfy ``||theta*_D - theta*_D'|| <= 2 G B / (n
lambda)`` (CMS11, Corollary 8, with the ``2`` for replacing rather than adding a
record), so by the triangle inequality the released pre-noise vector has
sensitivity ``Delta = 2 G B / (n lambda) + 2 r``. The Gaussian mechanism with
``sigma = Delta m`` on it is ``(1/m)``-GDP; projection is post-processing. The
noise is added by :func:`~pmwcm.mechanisms.noise.add_gaussian` (floating-point safe with
OpenDP).

**The solve** is planned from public constants only (the query's ``G B``,
``lambda``, ``R``, its smoothness, and ``n``), so it never reads the data to
decide how long to run, never stops early and never raises:

* the distance wanted is ``r = f G B / (n lambda)`` with ``f = distance_fraction``
  (default ``0.01``): the distance term ``2 r`` is then ``f`` times the main term,
  and the noise is ``1 + f`` times what an exact minimiser would need;
* smooth losses: projected gradient descent or V-FISTA, whose linear rates bound
  the distance directly (:mod:`pmwcm.mechanisms.oracles.strongly_convex`; ``L = beta +
  lambda``, ``mu = lambda``, from ``0``: ``D_0 = R``, ``V_0 = S + lambda R^2 / 2``);
* every loss: :func:`pmwcm.kernels.fixed_budget.plan_solve` (FISTA or the ellipsoid
  method) with the a-priori gap ``tau = lambda r^2 / 2``, since strong convexity
  gives ``||theta - theta*|| <= sqrt(2 tau / lambda) = r``;
* whichever needs fewest iterations runs. If none reaches ``r`` within
  ``max_iterations`` (or ``tau`` is below what float64 resolves), the plan takes
  the smallest distance it can guarantee within that budget and the sensitivity
  charges *that* distance: privacy never depends on reaching the target, only
  the noise grows (:meth:`OutputPerturbation.plan` reports both, from public
  inputs, before anything is spent).

The only refusals are of the query itself, by :meth:`OutputPerturbation.check`
(``lambda = 0``; constants that overflow float64; a non-smooth query too large
for any bounded solve within ``max_iterations``): they depend on the spec alone,
so the engine hears them before the ledger is debited. Plans are computed in log
space, and a ``sigma`` beyond float64's reach (public: ``Delta m >
MAX_NOISE_SCALE``) releases the ``sigma -> infinity`` limit of the mechanism,
which reads no data (:func:`~pmwcm.mechanisms.oracles.base.release_in_ball`), so no
accepted call raises.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import dp_accounting
import numpy as np

from pmwcm.kernels.fixed_budget import (
    MAX_RESOLUTION,
    FixedSolve,
    SolveRefused,
    fixed_budget_minimize,
    oscillation_bound,
    plan_solve,
)
from pmwcm.kernels.problem import ConvexProblem, FloatArray
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

#: Gap doublings tried when a plan at the wanted gap is refused (public constants only).
_MAX_DOUBLINGS = 200


@dataclass(frozen=True, kw_only=True)
class OutputPlan:
    """The real-data solve of one output-perturbation call, planned from public inputs.

    Attributes:
        target: the distance wanted, ``f G B / (n lambda)``.
        distance: the distance guaranteed and charged (``>= target`` only when the
            iteration budget or float64 resolution binds).
        solve: the solve that guarantees it.
    """

    target: float
    distance: float
    solve: DistancePlan | FixedSolve

    @property
    def iterations(self) -> int:
        """Gradient evaluations (or ellipsoid steps) of the solve."""
        return self.solve.iterations


@dataclass(frozen=True, kw_only=True)
class OutputPerturbation:
    """Gaussian output perturbation with a fixed-budget solve; needs ``l2 > 0``.

    Attributes:
        distance_fraction: ``f``: the solve's distance term ``2 r`` is planned at
            ``f`` times the minimiser's sensitivity ``2 G B / (n lambda)``.
        max_iterations: the most iterations one solve may take.
    """

    distance_fraction: float = 0.01
    max_iterations: int = 100_000
    name: str = "output_perturbation"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.distance_fraction) and self.distance_fraction > 0):
            raise ValueError(
                f"distance_fraction must be positive and finite, got "
                f"distance_fraction={self.distance_fraction}."
            )
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(
                f"max_iterations must be a positive integer, got "
                f"max_iterations={self.max_iterations!r}."
            )

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        check_noise_level(noise_level)
        return dp_accounting.GaussianDpEvent(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        """Refuses, from the spec alone, a query no bounded solve can serve.

        Raises:
            ValueError: for ``l2 = 0``, or a non-smooth query whose cheapest
                bounded solve needs more than ``max_iterations`` at any accuracy.
        """
        if not problem.l2 > 0:
            raise OracleRefused(
                f"output_perturbation needs a strongly convex query (l2 > 0), got l2={problem.l2}."
            )
        constants = {
            "G B": problem.lipschitz,
            "S + lambda R^2 / 2": oscillation_bound(problem),
            "beta + lambda": (problem.smoothness or 0.0) + problem.l2,
        }
        for label, value in constants.items():
            if not math.isfinite(value):
                raise OracleRefused(
                    f"output_perturbation needs finite constants, got {label} = {value} "
                    f"(radius {problem.radius:g}, l2 {problem.l2:g}); use a smaller radius."
                )
        if problem.smoothness is None:
            try:
                plan_solve(
                    problem, gap=oscillation_bound(problem), max_iterations=self.max_iterations
                )
            except SolveRefused as exc:
                raise OracleRefused(f"output_perturbation cannot bound its solve: {exc}") from exc

    def plan(self, problem: ConvexProblem, n: int) -> OutputPlan:
        """The solve for ``problem`` on ``n`` records and the distance it guarantees.

        Public inputs only; never refuses a query :meth:`check` accepts.

        Raises:
            ValueError: if :meth:`check` refuses ``problem``, or ``n < 1``.
        """
        self.check(problem)
        if not (isinstance(n, int | np.integer) and n >= 1):
            raise ValueError(f"n must be a positive number of records, got n={n!r}.")
        lam = problem.l2
        # Both points lie in the ball, so no distance above R is worth planning; and a
        # zero (or underflowing) G B / (n lambda) still gets a positive target.
        wanted = self.distance_fraction * problem.lipschitz / (n * lam)
        target = min(max(wanted, sys.float_info.min), problem.radius)
        options: list[OutputPlan] = []
        beta = problem.smoothness
        if beta is not None:
            smooth = plan_distance(
                smoothness=beta + lam,
                strong_convexity=lam,
                start_distance=problem.radius,
                start_gap=oscillation_bound(problem),
                distance=target,
                max_iterations=self.max_iterations,
            )
            options.append(OutputPlan(target=target, distance=smooth.distance, solve=smooth))
        gapped = self._gap_plan(problem, target)
        if gapped is not None:
            options.append(gapped)
        # check() guarantees at least one option: a smooth plan, or an ellipsoid at gap V.
        reaching = [o for o in options if o.distance <= target]
        if reaching:
            return min(reaching, key=lambda o: o.iterations)
        return min(options, key=lambda o: o.distance)

    def _gap_plan(self, problem: ConvexProblem, target: float) -> OutputPlan | None:
        """``plan_solve`` at ``tau = lambda r^2 / 2``, doubling ``tau`` until it is accepted.

        ``tau`` starts no lower than float64 resolves (``V / MAX_RESOLUTION``).
        """
        lam = problem.l2
        resolved = oscillation_bound(problem) / MAX_RESOLUTION * (1.0 + 1e-9)
        gap = max(0.5 * lam * target * target, resolved)
        for _ in range(_MAX_DOUBLINGS):
            try:
                solve = plan_solve(problem, gap=gap, max_iterations=self.max_iterations)
            except SolveRefused:
                gap *= 2.0
                continue
            return OutputPlan(target=target, distance=math.sqrt(2.0 * gap / lam), solve=solve)
        return None

    def sensitivity(self, problem: ConvexProblem, n: int) -> float:
        """``Delta = 2 G B / (n lambda) + 2 r``, ``r`` the planned solve's distance."""
        plan = self.plan(problem, n)
        return 2.0 * problem.lipschitz / (n * problem.l2) + 2.0 * plan.distance

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        """``Proj(theta_D + N(0, (Delta m)^2 I))``; never raises once the query is accepted."""
        check_noise_level(noise_level)
        problem = data.problem
        plan = self.plan(problem, data.n)
        sigma = self.sensitivity(problem, data.n) * noise_level
        if not sigma <= MAX_NOISE_SCALE:  # public: decided before the data is read
            return data_free_answer(problem.dim, problem.radius, noise)
        theta = solve_output(problem, data.weights, plan)
        return release_in_ball(theta, sigma, radius=problem.radius, noise=noise)


def solve_output(problem: ConvexProblem, weights: FloatArray, plan: OutputPlan) -> FloatArray:
    """Runs ``plan`` on ``weights``: ``||theta - theta*|| <= plan.distance``, a fixed budget."""
    weights = np.asarray(weights, dtype=np.float64).ravel()
    if isinstance(plan.solve, FixedSolve):
        return fixed_budget_minimize(problem, weights, plan.solve)
    return run_distance_plan(
        plan.solve,
        lambda theta: problem.gradient(theta, weights),
        np.zeros(problem.dim),
        radius=problem.radius,
    )
