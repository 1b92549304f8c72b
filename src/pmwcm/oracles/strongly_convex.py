"""Fixed-budget solves of smooth, strongly convex problems with an a-priori *distance* bound.

Output and objective perturbation charge, in their sensitivity, how far the
point they compute may lie from the exact minimiser ``x*``. Whatever reads the
private data must not stop early or fail on it (``docs/design.md``, "The
real-data side of a round"), so that distance must be known **before** the data
is read. For ``F`` ``mu``-strongly convex with an ``L``-Lipschitz gradient on all
of ``R^d`` (``kappa = L / mu``), minimised over a closed convex set ``C`` (a
ball, or ``R^d``) from a start ``x_0`` with ``||x_0 - x*|| <= D_0`` and ``F(x_0) -
F* <= V_0``, two methods have closed-form rates; :func:`plan_distance` picks
whichever needs fewer iterations:

* **Projected gradient descent, step** ``h = 2 / (L + mu)``:
  ``x_{k+1} = P_C(x_k - h grad F(x_k))`` satisfies ``||x_k - x*|| <= q^k D_0``,
  ``q = (kappa - 1) / (kappa + 1)``. Proof: ``x -> x - h grad F(x)`` is a
  ``q``-contraction (Nesterov 2004, "Introductory Lectures on Convex
  Optimization", Theorem 2.1.15, from the co-coercivity bound of his Theorem
  2.1.12); ``x*`` is a fixed point of ``x -> P_C(x - h grad F(x))`` for every
  ``h > 0`` (first-order optimality) and ``P_C`` is non-expansive.
* **V-FISTA** (Beck 2017, "First-Order Methods in Optimization", Sec. 10.7.7,
  Theorem 10.42), the constant-momentum accelerated method: ``y_0 = x_0``,
  ``x_{k+1} = P_C(y_k - grad F(y_k) / L)``, ``y_{k+1} = x_{k+1} + c (x_{k+1} - x_k)``
  with ``c = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)``, has ``F(x_k) - F* <= (1 -
  1/sqrt(kappa))^k (V_0 + mu D_0^2 / 2)``; strong convexity of ``F`` plus the
  indicator of ``C`` gives ``F(x) - F* >= (mu/2) ||x - x*||^2``, so ``||x_k -
  x*||^2 <= (2 V_0 / mu + D_0^2) (1 - 1/sqrt(kappa))^k``.

The iteration count is computed from ``(L, mu, D_0, V_0)`` and the distance
wanted, all public, so the work is the same for every dataset; the methods never
compare objective values, branch or stop early. **Rounding.** Both bounds are for
exact arithmetic. A plan makes the exact-arithmetic bound at most *half* the
distance it reports (:attr:`DistancePlan.distance`, the one the oracles charge);
the other half covers float64 rounding, which perturbs each iterate by
``~1e-16`` relative: projected gradient descent damps such errors by ``q`` per
step (they add at most ``delta / (1 - q) = delta (kappa + 1) / 2`` for an error
``delta`` per step), and the oracles only plan distances many orders above
``1e-16 kappa`` times the iterates' norm. ``tests/test_oracle_budgets.py`` checks
the reported distance against a high-accuracy reference on hypothesis-generated,
near-degenerate weights.

**Budget.** If the distance wanted needs more than ``max_iterations``, the plan
runs ``max_iterations`` and reports the (larger) distance those guarantee: the
oracles charge what is guaranteed, so privacy never depends on reaching a target,
only accuracy does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pmwcm.problem import FloatArray

__all__ = ["DistancePlan", "plan_distance", "project_rows", "run_distance_plan"]

Method = Literal["gradient", "accelerated"]


@dataclass(frozen=True, kw_only=True)
class DistancePlan:
    """A fixed-budget solve with an a-priori distance to the exact minimiser.

    Attributes:
        method: ``"gradient"`` (projected gradient descent) or ``"accelerated"`` (V-FISTA).
        iterations: the fixed number of gradient evaluations.
        step: the constant step (``2 / (L + mu)`` or ``1 / L``).
        momentum: V-FISTA's ``c`` (0 for gradient descent).
        distance: the charged bound on ``||x - x*||``: twice the exact-arithmetic bound.
    """

    method: Method
    iterations: int
    step: float
    momentum: float
    distance: float


def _check_positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {name}={value}.")


def _gradient_bound(contraction: float, start: float, iterations: int) -> float:
    """``q^k D_0``."""
    if contraction == 0.0:
        return 0.0 if iterations >= 1 else start
    return start * math.exp(iterations * math.log(contraction))


def _accelerated_bound(rate: float, spread: float, iterations: int) -> float:
    """``sqrt(spread (1 - 1/sqrt(kappa))^k)`` with ``rate = -ln(1 - 1/sqrt(kappa))``."""
    if math.isinf(rate):
        return 0.0 if iterations >= 1 else math.sqrt(spread)
    return math.sqrt(spread) * math.exp(-0.5 * iterations * rate)


def _iterations_for(ratio: float, per_step: float) -> int:
    """The smallest ``k >= 0`` with ``exp(-k per_step) <= 1 / ratio``."""
    if ratio <= 1.0:
        return 0
    if math.isinf(per_step):
        return 1
    return max(1, math.ceil(math.log(ratio) / per_step))


def plan_distance(
    *,
    smoothness: float,
    strong_convexity: float,
    start_distance: float,
    start_gap: float,
    distance: float,
    max_iterations: int,
) -> DistancePlan:
    """The cheaper method whose charged distance is at most ``distance``, within the budget.

    Args:
        smoothness: ``L``, a Lipschitz constant of ``grad F`` on ``R^d``.
        strong_convexity: ``mu > 0`` (``mu <= L``).
        start_distance: ``D_0 >= ||x_0 - x*||``.
        start_gap: ``V_0 >= F(x_0) - F*``.
        distance: the charged distance wanted (the exact-arithmetic bound is half of it).
        max_iterations: the most gradient evaluations allowed.

    Returns:
        The plan with fewer iterations reaching ``distance``; if neither fits in
        ``max_iterations``, the one with the smaller distance after
        ``max_iterations`` (its ``distance`` then exceeds the one wanted).

    Raises:
        ValueError: for a non-positive or non-finite constant (public inputs only).

    >>> plan = plan_distance(smoothness=0.35, strong_convexity=0.1, start_distance=1.0,
    ...                      start_gap=2.05, distance=1e-6, max_iterations=1000)
    >>> plan.method, plan.iterations, plan.distance <= 1e-6
    ('gradient', 25, True)
    """
    for name, value in (
        ("smoothness", smoothness),
        ("strong_convexity", strong_convexity),
        ("start_distance", start_distance),
        ("distance", distance),
    ):
        _check_positive(name, value)
    if not (math.isfinite(start_gap) and start_gap >= 0):
        raise ValueError(f"start_gap must be non-negative and finite, got start_gap={start_gap}.")
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}.")
    mu = strong_convexity
    lipschitz = max(smoothness, mu)
    kappa = lipschitz / mu
    exact = distance / 2.0
    # Projected gradient descent: q^k D_0 <= exact.
    contraction = (kappa - 1.0) / (kappa + 1.0)
    per_gd = math.inf if contraction == 0.0 else -math.log(contraction)
    gd_steps = _iterations_for(start_distance / exact, per_gd)
    # V-FISTA: spread (1 - 1/sqrt(kappa))^k <= exact^2.
    spread = 2.0 * start_gap / mu + start_distance**2
    inv_sqrt = 1.0 / math.sqrt(kappa)
    per_acc = math.inf if inv_sqrt >= 1.0 else -math.log1p(-inv_sqrt)
    acc_steps = _iterations_for(spread / (exact * exact), per_acc)
    gd = DistancePlan(
        method="gradient",
        iterations=gd_steps,
        step=2.0 / (lipschitz + mu),
        momentum=0.0,
        distance=distance,
    )
    acc = DistancePlan(
        method="accelerated",
        iterations=acc_steps,
        step=1.0 / lipschitz,
        momentum=(1.0 - inv_sqrt) / (1.0 + inv_sqrt),
        distance=distance,
    )
    best = gd if gd.iterations <= acc.iterations else acc
    if best.iterations <= max_iterations:
        return best
    k = max_iterations
    capped_gd = 2.0 * _gradient_bound(contraction, start_distance, k)
    capped_acc = 2.0 * _accelerated_bound(per_acc, spread, k)
    if capped_gd <= capped_acc:
        return DistancePlan(
            method="gradient", iterations=k, step=gd.step, momentum=0.0, distance=capped_gd
        )
    return DistancePlan(
        method="accelerated",
        iterations=k,
        step=acc.step,
        momentum=acc.momentum,
        distance=capped_acc,
    )


def project_rows(x: FloatArray, radius: float | None) -> FloatArray:
    """Projects ``x`` (one point, or one per row) onto ``||.|| <= radius``; ``None``: identity.

    Branch-free: every row is scaled by ``min(1, radius / ||row||)``.
    """
    if radius is None:
        return x
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x * np.minimum(1.0, radius / np.maximum(norms, 1e-300))


def run_distance_plan(
    plan: DistancePlan,
    gradient: Callable[[FloatArray], FloatArray],
    start: FloatArray,
    *,
    radius: float | None,
) -> FloatArray:
    """Runs ``plan`` from ``start``: exactly ``plan.iterations`` gradient evaluations.

    Never raises or stops early. ``start`` may hold one point or one per row
    (the audit's vectorised trials); ``gradient`` must map that shape to itself.

    Args:
        plan: from :func:`plan_distance`.
        gradient: ``x -> grad F(x)``.
        start: ``x_0`` (inside ``C``).
        radius: ``C`` is the ball of this radius, or ``R^d`` for ``None``.

    Returns:
        ``x_k`` with ``||x_k - x*|| <= plan.distance``.
    """
    x = np.array(start, dtype=np.float64)
    if plan.method == "gradient":
        for _ in range(plan.iterations):
            x = project_rows(x - plan.step * gradient(x), radius)
        return x
    y = x
    for _ in range(plan.iterations):
        nxt = project_rows(y - plan.step * gradient(y), radius)
        y = nxt + plan.momentum * (nxt - x)
        x = nxt
    return x
