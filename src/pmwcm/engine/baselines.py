"""Baselines the engine is measured against, on the same data and accountant.

* :class:`CompositionBaseline` -- every query answered by the oracle, the
  budget split over the ``k`` queries the caller declares up front: the
  noise multiplier is the smallest for which ``k`` oracle calls compose to
  ``(epsilon, delta)`` under the same tight accountant the engine uses. This is
  the "sqrt(k)" route the paper improves on. Its default oracle is the
  engine's, noisy gradient descent configured by the per-call budget
  (:mod:`pmwcm.mechanisms.oracles.tuning`), so at its much smaller per-call
  budget it takes the few long steps that budget wants: the strongest honest
  composition, not one handicapped by a fixed 100 steps.
* :class:`NonPrivateBaseline` -- the exact minimiser on the real data (no
  privacy; the reference every excess risk is measured from).

:func:`excess_risk` is ``err_l(D, theta) = L_D(theta) - min L_D`` (Ullman 2015,
Definition "Error of an Answer").
"""

from __future__ import annotations

import dp_accounting

from pmwcm.engine.practical import make_accountant
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.solvers import EXACT_BASELINE_SOLVE, SolverError, minimize, minimizer
from pmwcm.mechanisms.accounting import PrivacyLedger, calibrate_gaussian_multiplier
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles import BudgetTunedGradientDescent, Oracle, OracleInput
from pmwcm.mechanisms.private_data import PrivateData


def exact_minimum(
    problem: ConvexProblem, weights: FloatArray, *, tol: float = EXACT_BASELINE_SOLVE.tol
) -> float:
    """``min L_w`` to a certified ``tol`` (raises :class:`SolverError` otherwise).

    The iteration cap is :data:`~pmwcm.kernels.solvers.EXACT_BASELINE_SOLVE`'s.
    """
    solution = minimize(problem, weights, tol=tol, max_iter=EXACT_BASELINE_SOLVE.max_iter)
    if not solution.converged:
        raise SolverError(f"could not certify gap {tol} (reached {solution.gap:.3g})")
    return solution.value - solution.gap if solution.gap > 0 else solution.value


def excess_risk(problem: ConvexProblem, weights: FloatArray, theta: FloatArray) -> float:
    """``L_D(theta) - min L_D``; never negative (the minimum is certified from below)."""
    minimum = exact_minimum(problem, weights.ravel())
    return max(0.0, problem.objective(theta, weights.ravel()) - minimum)


class NonPrivateBaseline:
    """Exact answers on the real data: no privacy at all."""

    source = "nonprivate"

    def __init__(self, data: PrivateData) -> None:
        self.data = data

    def answer(self, query: CMQuery) -> FloatArray:
        """``argmin_{theta in Theta} L_D(theta)``."""
        problem = query.compile(self.data.domain)
        weights = self.data.marginal(problem.clique).ravel()
        budget = EXACT_BASELINE_SOLVE
        return minimizer(problem, weights, tol=budget.tol, max_iter=budget.max_iter)


class CompositionBaseline:
    """Each of ``k`` declared queries answered by the oracle at budget ``~(epsilon, delta)/k``.

    Guarantee: ``k`` adaptively composed oracle calls, each the event
    ``oracle.privacy_event(m)``, with ``m`` calibrated so that the
    composition is ``(epsilon, delta)``-DP under the accountant (PLD by default).
    The ledger refuses a ``(k+1)``-th query.
    """

    source = "composition"

    def __init__(
        self,
        data: PrivateData,
        *,
        epsilon: float,
        delta: float,
        queries: int,
        noise: NoiseSource,
        oracle: Oracle | None = None,
        accountant: str = "pld",
    ) -> None:
        if not (isinstance(queries, int) and queries >= 1):
            raise ValueError(f"queries must be a positive integer, got queries={queries!r}.")
        self.data = data
        # The engine's default oracle and its budget rule, so the baseline is as strong
        # as the engine's own oracle calls would be at this per-call budget.
        self.oracle = oracle if oracle is not None else BudgetTunedGradientDescent()
        self.noise = noise
        acc = make_accountant(accountant)
        self.ledger = PrivacyLedger(epsilon=epsilon, delta=delta, accountant=acc)
        self.noise_level = calibrate_gaussian_multiplier(
            fixed=None, gaussian_count=queries, epsilon=epsilon, delta=delta, accountant=acc
        )
        event = self.oracle.privacy_event(self.noise_level)
        if not isinstance(event, dp_accounting.GaussianDpEvent):
            raise ValueError(f"CompositionBaseline calibrates Gaussian oracles, got {event}.")

    def answer(self, query: CMQuery) -> FloatArray:
        """One oracle call, paid for before any noise is drawn; compiled in the canonical
        coordinate order (as the engine's are, so that composition mode is this baseline
        answer for answer) and returned in ``query``'s."""
        domain = self.data.domain
        order = query.coordinate_order(domain)
        if order is not None:
            return self.answer(query.canonical(domain))[list(order)]
        problem = query.compile(domain)
        self.oracle.check(problem)
        self.ledger.spend(self.oracle.privacy_event(self.noise_level), label="composition call")
        weights = self.data.marginal(problem.clique).ravel()
        data = OracleInput(problem=problem, weights=weights, n=self.data.n)
        return self.oracle.answer(data, noise_level=self.noise_level, noise=self.noise)
