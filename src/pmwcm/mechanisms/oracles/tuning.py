"""Noisy gradient descent configured by its per-call budget (issue 15 item 3).

Noisy GD's guarantee does not depend on its steps ``N`` or its step size
``h``: ``N`` Gaussian steps at multiplier ``m sqrt(N)`` compose to exactly one
Gaussian mechanism at ``m`` (Dong, Roth, Su 2022, Cor. 3.3;
:mod:`pmwcm.mechanisms.oracles.noisy_gd`). So both may be chosen from public
values for each call, and the best choice depends strongly on the noise: each
step's noise grows like ``sqrt(N)``, so a noisy call wants few, long steps and
a quiet one many. The one dimensionless quantity that sets the noise is
``r = n / m`` (records per unit of noise multiplier: the gradient noise per
step is ``2 G B m sqrt(N) / n``), and the rule is::

    N(r) = clip(round(2 (r / 100)^0.7), 1, 50),    h = 2 / (beta + lambda)

(non-smooth losses keep noisy GD's ``R / (G B sqrt(N))``).

**Where it comes from.** ``benchmarks/accuracy/oracle_tuning.py`` measured the
mean excess risk of noisy GD over ``N in {1, ..., 200}`` and ``h in {1, 2, 4} /
beta`` at ``r`` from 30 to 10^5, on a synthetic chain-structured binary table
drawn from a public seed (no real data, no benchmark stream), 20 random
logistic queries of 2-4 features and 2 noise seeds each. The best ``N`` was 1,
2, 5, 10, 20, 50, 50 at ``r`` = 30, 100, 300, 1,000, 3,000, 10^4, 10^5, mostly
at ``h = 2 / beta``; the power law above passes through them, and against the
old fixed ``N = 100, h = 1 / beta`` it lowered the mean excess risk 10x at
``r = 100``, 3.5x at ``r = 1,000`` and 2x at ``r = 3,000``
(docs/design.md, "Budget rules").

**Privacy.** Unchanged: one call is the event ``GaussianDpEvent(m)`` whatever
``N`` and ``h``, and they are computed from ``n``, ``m`` and the query's public
constants before the data is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting

from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import OracleInput, check_noise_level
from pmwcm.mechanisms.oracles.noisy_gd import NoisyGradientDescent, check_gradient_constants

#: The rule's constants (module docstring): ``N = A (r / R0)^P``, capped at ``MAX_STEPS``.
_STEPS_AT_R0 = 2.0
_R0 = 100.0
_POWER = 0.7
MAX_STEPS = 50
#: ``h = STEP_FACTOR / (beta + lambda)`` for smooth losses.
STEP_FACTOR = 2.0


def steps_for_budget(n: int, noise_level: float) -> int:
    """``N(n / m)``: noisy GD's steps for ``n`` records at noise multiplier ``m`` (public).

    >>> [steps_for_budget(39_073, m) for m in (1300.0, 39.0, 1.0)]
    [1, 10, 50]
    """
    check_noise_level(noise_level)
    ratio = n / noise_level
    steps = _STEPS_AT_R0 * (ratio / _R0) ** _POWER
    return int(min(MAX_STEPS, max(1, round(steps))))


def noisy_gd_for_budget(
    problem: ConvexProblem, *, n: int, noise_level: float
) -> NoisyGradientDescent:
    """Noisy GD for one call: :func:`steps_for_budget` steps of ``2 / (beta + lambda)``."""
    steps = steps_for_budget(n, noise_level)
    curvature = (problem.smoothness or 0.0) + problem.l2
    if problem.smoothness is not None and curvature > 0 and math.isfinite(curvature):
        return NoisyGradientDescent(steps=steps, step_size=STEP_FACTOR / curvature)
    return NoisyGradientDescent(steps=steps)


@dataclass(frozen=True, kw_only=True)
class BudgetTunedGradientDescent:
    """Noisy gradient descent whose steps and step size follow the call's budget.

    The same mechanism as :class:`~pmwcm.mechanisms.oracles.NoisyGradientDescent`
    (same guarantee, same event ``GaussianDpEvent(m)``), configured per call by
    :func:`noisy_gd_for_budget` from ``n``, the noise level and the query's
    constants. The engine's default oracle and the composition baseline's, so the
    baseline is the strongest honest one for its (smaller) per-call budget.
    """

    name: str = "noisy_gd"

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        check_noise_level(noise_level)
        return dp_accounting.GaussianDpEvent(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        check_gradient_constants(problem)

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        oracle = noisy_gd_for_budget(data.problem, n=data.n, noise_level=noise_level)
        return oracle.answer(data, noise_level=noise_level, noise=noise)
