"""The below-threshold round's fast paths give the reference numbers (issue 18).

* the compiled ellipsoid method (:func:`~pmwcm.kernels.compiled.fixed_ellipsoid`)
  is the NumPy loop (:func:`~pmwcm.kernels.fixed_budget._ellipsoid_reference`) up
  to rounding: the objective values of the two returned points agree to ``1e-4``
  of the planned gap (the ellipsoid's cuts amplify the last bits of its small
  matrix products into different but equally good centres), and both lie within
  the planned gap of the minimum (a certified Newton solve to ``1e-12``).

No timing here: ``benchmarks/throughput.py`` measures the speed.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fixed_budget import (
    _ellipsoid,
    _ellipsoid_iterations,
    _ellipsoid_reference,
    fixed_budget_minimize,
    oscillation_bound,
    plan_solve,
)
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.solvers import minimize

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "d": 2, "y": 2, "z": 4})
N = 48_842


@pytest.mark.parametrize(
    ("loss", "target", "features", "l2"),
    [
        ("logistic", "y", ("a", "b"), 0.0),
        ("logistic", "y", ("a", "c", "d"), 0.0),
        ("logistic", "y", ("c",), 0.05),
        ("squared", "z", ("a", "b", "d"), 0.0),
        ("huber", "z", ("c", "y"), 0.01),
    ],
)
def test_compiled_ellipsoid_is_the_numpy_loop_up_to_rounding(
    loss: str, target: str, features: tuple[str, ...], l2: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    query = CMQuery(loss=loss, target=target, features=features, l2=l2, radius=1.5)
    problem = query.compile(DOMAIN)
    gap = 0.2 * problem.scale / N  # the engine's tau at its defaults
    iterations = _ellipsoid_iterations(problem.dim, oscillation_bound(problem) / gap)
    assert problem.dim >= 2
    for concentration in (0.05, 0.5, 5.0):
        weights = rng.gamma(concentration, 1.0, problem.design.rows)
        weights /= weights.sum()
        fast = _ellipsoid(problem, weights, iterations)
        reference = _ellipsoid_reference(problem, weights, iterations)
        fast_value = problem.objective(fast, weights)
        reference_value = problem.objective(reference, weights)
        assert abs(fast_value - reference_value) <= 1e-4 * gap
        best = minimize(problem, weights, tol=1e-12, max_iter=200).value
        assert fast_value - best <= gap
        assert np.linalg.norm(fast) <= problem.radius * (1 + 1e-12)


def test_the_engine_solve_takes_the_compiled_ellipsoid_for_a_compiled_loss(seed: int) -> None:
    """fixed_budget_minimize runs the compiled loop: bit for bit what _ellipsoid returns."""
    rng = np.random.default_rng(seed)
    problem = CMQuery(loss="logistic", target="y", features=("a", "b")).compile(DOMAIN)
    plan = plan_solve(problem, gap=0.2 * problem.scale / N, max_iterations=100_000)
    assert plan.method == "ellipsoid"
    weights = rng.dirichlet(np.ones(problem.design.rows))
    np.testing.assert_array_equal(
        fixed_budget_minimize(problem, weights, plan), _ellipsoid(problem, weights, plan.iterations)
    )
