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

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pmwcm.kernels.problem import FloatArray

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


def _steps(need: float, max_iterations: int) -> int | None:
    """``ceil(need)`` (at least 0), or ``None`` if it exceeds ``max_iterations`` (or is inf/nan)."""
    if need <= 0.0:
        return 0
    if not need <= max_iterations:
        return None
    return max(1, math.ceil(need))


def plan_distance(
    *,
    smoothness: float,
    strong_convexity: float,
    start_distance: float,
    start_gap: float | None,
    distance: float,
    max_iterations: int,
) -> DistancePlan:
    """The cheaper method whose charged distance is at most ``distance``, within the
    budget; computed in log space, so no finite positive input overflows.

    Args:
        smoothness: ``L``, a Lipschitz constant of ``grad F`` on ``R^d``.
        strong_convexity: ``mu > 0`` (``L`` is raised to ``mu`` if below).
        start_distance: ``D_0 >= ||x_0 - x*||``.
        start_gap: ``V_0 >= F(x_0) - F*``; ``None`` for an unconstrained problem,
            where ``V_0 = L D_0^2 / 2`` (smoothness and ``grad F(x*) = 0``).
        distance: the charged distance wanted (the exact-arithmetic bound is half of it).
        max_iterations: the most gradient evaluations allowed.

    Returns:
        The plan with fewer iterations reaching ``distance``; if neither fits in
        ``max_iterations``, the one with the smaller distance after
        ``max_iterations`` (its ``distance`` then exceeds the one wanted, and is at
        most ``2 D_0``).

    Raises:
        ValueError: for a non-positive or non-finite constant (public inputs only).

    >>> plan = plan_distance(smoothness=0.35, strong_convexity=0.1, start_distance=1.0,
    ...                      start_gap=2.05, distance=1e-6, max_iterations=1000)
    >>> plan.method, plan.iterations, plan.distance <= 1e-6
    ('gradient', 25, True)
    """
    _check_plan_inputs(
        smoothness, strong_convexity, start_distance, start_gap, distance, max_iterations
    )
    mu = strong_convexity
    lipschitz = max(smoothness, mu)
    log_start = math.log(start_distance)
    log_exact = math.log(distance) - math.log(2.0)
    # Projected gradient descent: q^k D_0 <= exact, -ln q = ln(1 + 2 mu / (L - mu)).
    per_gd = math.inf if lipschitz == mu else math.log1p(2.0 * mu / (lipschitz - mu))
    # V-FISTA: spread (1 - 1/sqrt(kappa))^k <= exact^2, spread = 2 V_0 / mu + D_0^2.
    root = math.sqrt(mu / lipschitz)
    per_acc = math.inf if root >= 1.0 else -math.log1p(-root)
    log_spread = _log_spread(lipschitz, mu, log_start, start_gap)
    gd = DistancePlan(
        method="gradient", iterations=0, step=2.0 / (lipschitz + mu), momentum=0.0,
        distance=distance,
    )  # fmt: skip
    acc = DistancePlan(
        method="accelerated",
        iterations=0,
        step=1.0 / lipschitz,
        momentum=(1.0 - root) / (1.0 + root),
        distance=distance,
    )
    fits: list[DistancePlan] = []
    gd_steps = _steps(_need(log_start - log_exact, per_gd), max_iterations)
    if gd_steps is not None:
        fits.append(dataclasses.replace(gd, iterations=gd_steps))
    acc_steps = _steps(_need(log_spread - 2.0 * log_exact, per_acc), max_iterations)
    if acc_steps is not None:
        fits.append(dataclasses.replace(acc, iterations=acc_steps))
    if fits:
        return min(fits, key=lambda plan: plan.iterations)
    k = max_iterations
    capped_gd = 2.0 * math.exp(log_start - k * per_gd)
    capped_acc = 2.0 * math.exp(0.5 * (log_spread - k * per_acc))
    if min(capped_gd, capped_acc) >= 2.0 * start_distance * (1.0 - 1e-9):
        # The budget buys nothing over the start itself (within D_0 of x*): do not run.
        return dataclasses.replace(gd, distance=2.0 * start_distance)
    if capped_gd <= capped_acc:
        return dataclasses.replace(gd, iterations=k, distance=capped_gd)
    return dataclasses.replace(acc, iterations=k, distance=capped_acc)


def _check_plan_inputs(
    smoothness: float,
    strong_convexity: float,
    start_distance: float,
    start_gap: float | None,
    distance: float,
    max_iterations: int,
) -> None:
    """:func:`plan_distance`'s argument checks (public inputs only)."""
    for name, value in (
        ("smoothness", smoothness),
        ("strong_convexity", strong_convexity),
        ("start_distance", start_distance),
        ("distance", distance),
    ):
        _check_positive(name, value)
    if start_gap is not None and not (math.isfinite(start_gap) and start_gap >= 0):
        raise ValueError(f"start_gap must be non-negative and finite, got start_gap={start_gap}.")
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}.")


def _log_spread(lipschitz: float, mu: float, log_start: float, start_gap: float | None) -> float:
    """``ln(2 V_0 / mu + D_0^2)``, V-FISTA's initial potential over ``mu / 2``, in log
    space; ``V_0 = L D_0^2 / 2`` when ``start_gap`` is ``None`` (unconstrained)."""
    log_spread = 2.0 * log_start
    if start_gap is None:  # 2 V_0 / mu + D_0^2 = (kappa + 1) D_0^2
        kappa = lipschitz / mu
        return log_spread + (
            math.log1p(kappa) if kappa < math.inf else math.log(lipschitz) - math.log(mu)
        )
    if start_gap > 0:
        return float(np.logaddexp(math.log(2.0 * start_gap) - math.log(mu), log_spread))
    return log_spread


def _need(log_ratio: float, per_step: float) -> float:
    """Real-valued iterations for a ratio ``exp(log_ratio)`` at ``per_step`` per iteration."""
    if log_ratio <= 0.0:
        return 0.0
    if math.isinf(per_step):
        return 1.0
    if per_step <= 0.0:
        return math.inf
    return log_ratio / per_step


def project_rows(x: FloatArray, radius: float | None) -> FloatArray:
    """Projects ``x`` (one point, or one per row) onto ``||.|| <= radius``; ``None``: identity.

    Branch-free (the factor is ``radius / max(||x||, radius)``), and safe for
    entries near the float64 limit: one point's norm is :func:`math.hypot`'s,
    which scales internally; rows are normalised by ``max|x|`` first.
    """
    if radius is None:
        return x
    if x.ndim == 1:
        return np.asarray(x * (radius / max(math.hypot(*x.tolist()), radius)), dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        scale = np.max(np.abs(x), axis=-1, keepdims=True)
        unit = np.divide(x, scale, out=np.zeros_like(x), where=scale > 0)
        norms = scale * np.linalg.norm(unit, axis=-1, keepdims=True)
        factor = radius / np.maximum(norms, radius)
    return np.asarray(x * factor, dtype=np.float64)


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
