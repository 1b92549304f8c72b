"""The rules a user's total budget must meet, and the zCDP it converts to: one place.

The command line, the library (:func:`pmwcm.engine.plan.plan_budget`, which
:func:`pmwcm.engine.practical.build_engine` calls) and the HTTP service accept
and refuse the same budgets, with the same messages, because they all call
:func:`check_total_budget`. Every rule reads public numbers only.

* ``epsilon`` in :data:`EPSILON_RANGE` = ``[1e-3, 1e3]``. Below, the noise of every
  answer swamps any signal and the accountant cannot calibrate the oracle calls
  at common deltas; above, the guarantee (a likelihood ratio of ``e^epsilon``)
  means nothing and the accountant's discretised privacy-loss distributions grow
  without bound.
* ``delta`` in ``[DELTA_FLOOR, 1/n)``. An ``(epsilon, delta)``-DP mechanism may
  publish one whole record, chosen at random, with probability ``delta``; at
  ``delta >= 1/n`` that is about one record per run, which is no privacy. Below
  :data:`DELTA_FLOOR` (``1e-15``) the privacy-loss-distribution accountant's
  tail bounds leave float64's resolution and its calibration succeeds or fails
  erratically (measured: ``1e-30`` refused and ``1e-300`` accepted at
  ``epsilon = 1``).

The message of a refusal names the field (``epsilon`` or ``delta``) and the
value; the command line prefixes its option dashes (``--epsilon``).

>>> check_total_budget(1, 1e-6, n=10_000)
(1.0, 1e-06)
>>> try:
...     check_total_budget(5e-324, 1e-6)
... except BudgetRefused as refused:
...     print(refused.field, str(refused).split(':')[0])
epsilon epsilon must lie in [0.001, 1000], got epsilon=4.94066e-324
"""

from __future__ import annotations

import math

from pmwcm.errors import Refused

#: The epsilons accepted (module docstring).
EPSILON_RANGE = (1e-3, 1e3)
#: The smallest delta accepted (module docstring).
DELTA_FLOOR = 1e-15


class BudgetRefused(Refused, ValueError):
    """A total budget outside the rules; ``field`` is ``"epsilon"`` or ``"delta"``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_budget(epsilon: float, delta: float) -> tuple[float, float]:
    """A budget as floats: ``epsilon`` positive and finite, ``delta`` in ``(0, 1)``.

    The shape of any budget, a share included (a prior's part of the total); a
    user's total also meets the ranges of
    :func:`~pmwcm.mechanisms.accounting.budget_rules.check_total_budget`. The message
    names the bad value (:class:`~pmwcm.mechanisms.accounting.budget_rules.BudgetRefused`,
    a ``ValueError``, with the field).

    >>> check_budget(1, 1e-6)
    (1.0, 1e-06)
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
        raise BudgetRefused("epsilon", f"epsilon must be a number, got epsilon={epsilon!r}.")
    if isinstance(delta, bool) or not isinstance(delta, int | float):
        raise BudgetRefused("delta", f"delta must be a number, got delta={delta!r}.")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise BudgetRefused(
            "epsilon", f"epsilon must be positive and finite, got epsilon={epsilon}."
        )
    if not 0 < delta < 1:
        raise BudgetRefused("delta", f"delta must lie in (0, 1), got delta={delta}.")
    return float(epsilon), float(delta)


def check_total_budget(
    epsilon: float, delta: float, *, n: int | None = None
) -> tuple[float, float]:
    """``(epsilon, delta)`` as floats if they meet every rule (module docstring);
    ``n``, the public number of records, adds the rule ``delta < 1/n``.

    Raises:
        BudgetRefused: naming the field, the value and why.
    """
    epsilon, delta = check_budget(epsilon, delta)  # numbers, epsilon > 0 finite, 0 < delta < 1
    lo, hi = EPSILON_RANGE
    if not lo <= epsilon <= hi:
        why = (
            "the noise would swamp every answer and cannot be calibrated"
            if epsilon < lo
            else "a likelihood ratio of e^epsilon guarantees nothing, and the accountant's "
            "memory grows without bound"
        )
        raise BudgetRefused(
            "epsilon", f"epsilon must lie in [{lo:g}, {hi:g}], got epsilon={epsilon:g}: {why}."
        )
    if not DELTA_FLOOR <= delta < 1:
        raise BudgetRefused(
            "delta",
            f"delta must lie in [{DELTA_FLOOR:g}, 1/n), got delta={delta:g}: below "
            f"{DELTA_FLOOR:g} the accountant cannot calibrate the noise reliably.",
        )
    if n is not None and delta * n >= 1:
        raise BudgetRefused(
            "delta",
            f"delta must be below 1/n = 1/{n:,}, got delta={delta:g}: a mechanism may then "
            "publish about one whole record per run and still meet its guarantee. Choose "
            f"delta well below 1/n (e.g. {delta_below(n):g}).",
        )
    return epsilon, delta


def delta_below(n: int) -> float:
    """A round delta at most ``1 / (100 n)``, at most 1e-6 (what a refusal suggests).

    >>> delta_below(48_842)
    1e-07
    """
    return min(1e-6, 10.0 ** math.floor(math.log10(1.0 / (100.0 * n))))


def zcdp_for(epsilon: float, delta: float) -> float:
    """``rho*``: the largest ``rho`` with ``rho + 2 sqrt(rho ln(1/delta)) <= epsilon``
    (Bun and Steinke 2016, Prop. 1.3), so ``rho*``-zCDP implies ``(epsilon, delta)``-DP:
    ``rho* = (sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2``.

    The one place this conversion is written: the Gaussian calibration's first
    guess, the composition-mode rule and the AIM/MST prior's bracket read it.
    ``delta = 0`` is taken as ``ln(1/delta) = 1000`` (a finite stand-in for a
    first guess only).

    >>> round(zcdp_for(1.0, 1e-6), 5)
    0.01747
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be positive and finite, got epsilon={epsilon}.")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got delta={delta}.")
    log_inv = -math.log(delta) if delta > 0 else 1e3
    return (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2
