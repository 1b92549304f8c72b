"""Output perturbation for strongly convex losses (Chaudhuri, Monteleoni, Sarwate 2011).

**Algorithm.** Compute ``theta_D`` minimising ``L_D`` (``lambda``-strongly convex
because ``lambda > 0``) to a certified gap ``tau``, release
``Proj_Theta(theta_D + Z)``, ``Z ~ N(0, (Delta m)^2 I)``.

**Guarantee.** For replace-one neighbours the exact minimisers satisfy
``||theta*_D - theta*_D'|| <= 2 G B / (n lambda)`` (CMS11, Corollary 8, with the
``2`` for replacing rather than adding a record). The solver returns a point
with ``L_D(theta_D) - L_D* <= tau``, and strong convexity gives ``||theta_D -
theta*_D|| <= sqrt(2 tau / lambda)``, so the released pre-noise vector has
sensitivity ``Delta = 2 G B / (n lambda) + 2 sqrt(2 tau / lambda)``. The
Gaussian mechanism with ``sigma = Delta m`` is ``(1/m)``-GDP; projection is
post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting

from pmwcm.noise import NoiseSource, add_gaussian
from pmwcm.oracles.base import OracleInput, check_noise_level
from pmwcm.problem import ConvexProblem, FloatArray
from pmwcm.solvers import SolverError, minimize, project_ball


@dataclass(frozen=True, kw_only=True)
class OutputPerturbation:
    """Gaussian output perturbation; needs ``l2 > 0``.

    Attributes:
        tol: the certified solver gap ``tau`` (it enters the sensitivity).
    """

    tol: float = 1e-10
    name: str = "output_perturbation"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol must be positive, got tol={self.tol}.")

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        check_noise_level(noise_level)
        return dp_accounting.GaussianDpEvent(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        if not problem.l2 > 0:
            raise ValueError(
                f"output_perturbation needs a strongly convex query (l2 > 0), got l2={problem.l2}."
            )

    def sensitivity(self, problem: ConvexProblem, n: int) -> float:
        """``2 G B / (n lambda) + 2 sqrt(2 tau / lambda)``."""
        self.check(problem)
        return 2.0 * problem.lipschitz / (n * problem.l2) + 2.0 * math.sqrt(
            2.0 * self.tol / problem.l2
        )

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        check_noise_level(noise_level)
        problem = data.problem
        delta = self.sensitivity(problem, data.n)
        solution = minimize(problem, data.weights, tol=self.tol, max_iter=2000)
        if not solution.converged:
            # Not certifying would void the sensitivity bound: refuse rather than leak.
            raise SolverError(f"output_perturbation could not certify gap {self.tol}.")
        # add_gaussian, not theta + noise.gaussian(...): the float sum leaks (Mironov 2012).
        noisy = add_gaussian(solution.theta, delta * noise_level, noise=noise)
        return project_ball(noisy, problem.radius)
