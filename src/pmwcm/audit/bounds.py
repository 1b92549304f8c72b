"""Confidence bounds that turn event counts into lower bounds on privacy loss.

An audit runs a mechanism ``M`` on neighbouring inputs ``D0`` and ``D1``,
``n0`` and ``n1`` times, and counts how often an output event ``E`` occurs:
``k0`` and ``k1`` times. If ``M`` is ``(eps, delta)``-DP then

    p0 = P[M(D0) in E] <= e^eps p1 + delta,      p1 = P[M(D1) in E].

**Clopper-Pearson** (1934): with ``B(a; s, t)`` the ``a``-quantile of the
Beta(s, t) law, the exact one-sided bounds at level ``1 - a`` are

    p_lb(k, n) = B(a; k, n - k + 1)    (0 if k = 0),
    p_ub(k, n) = B(1 - a; k + 1, n - k)  (1 if k = n).

Taking ``a = alpha / 2`` for ``p0_lb`` and for ``p1_ub`` (a union bound), both
hold together with probability ``>= 1 - alpha``, and then every ``(eps, delta)``
guarantee of ``M`` must satisfy ``p0_lb <= e^eps p1_ub + delta``. Hence, with
confidence ``1 - alpha``:

* **epsilon at delta**: ``eps >= log((p0_lb - delta) / p1_ub)``
  (:func:`epsilon_lower_bound`; ``delta = 0`` gives pure DP);
* **hockey-stick divergence**: ``delta >= H_{e^eps}(M(D0) || M(D1)) >= p0_lb -
  e^eps p1_ub`` (:func:`hockey_stick_lower_bound`).

Both bounds are clamped at 0 (a trivially valid bound).

>>> round(epsilon_lower_bound(k0=900, n0=1000, k1=100, n1=1000, alpha=0.05), 3)
1.99
>>> hockey_stick_lower_bound(k0=0, n0=10, k1=0, n1=10, epsilon=1.0, alpha=0.05)
0.0
"""

from __future__ import annotations

import math
import operator

from scipy import stats

__all__ = [
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "hockey_stick_lower_bound",
]


def _counts(k: int, n: int) -> tuple[int, int]:
    k, n = operator.index(k), operator.index(n)
    if n < 1:
        raise ValueError(f"n must be a positive number of trials, got n={n}.")
    if not 0 <= k <= n:
        raise ValueError(f"k must lie in [0, n], got k={k}, n={n}.")
    return k, n


def _level(a: float) -> float:
    a = float(a)
    if not 0.0 < a < 1.0:
        raise ValueError(f"the error probability must lie in (0, 1), got {a}.")
    return a


def clopper_pearson_lower(k: int, n: int, *, alpha: float) -> float:
    """One-sided ``(1 - alpha)`` Clopper-Pearson lower bound on ``p`` from ``k`` of ``n``.

    ``P[p_lb(K, n) > p] <= alpha`` for every ``p`` when ``K ~ Binomial(n, p)``.

    >>> clopper_pearson_lower(0, 100, alpha=0.05)
    0.0
    >>> round(clopper_pearson_lower(50, 100, alpha=0.05), 4)
    0.4136
    """
    k, n = _counts(k, n)
    alpha = _level(alpha)
    if k == 0:
        return 0.0
    return float(stats.beta.ppf(alpha, k, n - k + 1))


def clopper_pearson_upper(k: int, n: int, *, alpha: float) -> float:
    """One-sided ``(1 - alpha)`` Clopper-Pearson upper bound on ``p`` from ``k`` of ``n``.

    >>> clopper_pearson_upper(100, 100, alpha=0.05)
    1.0
    >>> round(clopper_pearson_upper(0, 100, alpha=0.05), 4)  # the "rule of three": ~3/n
    0.0295
    """
    k, n = _counts(k, n)
    alpha = _level(alpha)
    if k == n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def epsilon_lower_bound(
    *, k0: int, n0: int, k1: int, n1: int, alpha: float, delta: float = 0.0
) -> float:
    """``max(0, log((p0_lb - delta) / p1_ub))``, each bound at level ``1 - alpha/2``.

    With probability ``>= 1 - alpha`` over the trials, no ``(eps, delta)``-DP
    guarantee with ``eps`` below this value holds (module docstring).

    Args:
        k0: trials on ``D0`` whose output fell in the event (of ``n0``).
        n0: trials on ``D0``.
        k1: trials on ``D1`` whose output fell in the event (of ``n1``).
        n1: trials on ``D1``.
        alpha: the probability that the bound is wrong.
        delta: the ``delta`` of the guarantee being tested, in ``[0, 1)``.

    Returns:
        The lower confidence bound on epsilon (``inf`` cannot occur: ``p1_ub > 0``).
    """
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got delta={delta}.")
    p0 = clopper_pearson_lower(k0, n0, alpha=alpha / 2)
    p1 = clopper_pearson_upper(k1, n1, alpha=alpha / 2)
    if p0 - delta <= 0.0:
        return 0.0
    return max(0.0, math.log(p0 - delta) - math.log(p1))


def hockey_stick_lower_bound(
    *, k0: int, n0: int, k1: int, n1: int, epsilon: float, alpha: float
) -> float:
    """``max(0, p0_lb - e^epsilon p1_ub)``: a lower bound on ``H_{e^eps}(M(D0) || M(D1))``.

    The hockey-stick divergence ``sup_E P0(E) - e^eps P1(E)`` is the smallest
    ``delta`` for which the pair is ``(eps, delta)``-indistinguishable, so a
    value above a mechanism's claimed ``delta`` at its claimed ``eps`` refutes
    the claim (with probability ``>= 1 - alpha`` of being right).
    """
    if not (epsilon >= 0.0 and not math.isnan(epsilon)):
        raise ValueError(f"epsilon must be non-negative, got epsilon={epsilon}.")
    p0 = clopper_pearson_lower(k0, n0, alpha=alpha / 2)
    p1 = clopper_pearson_upper(k1, n1, alpha=alpha / 2)
    if math.isinf(epsilon):
        return 0.0
    return max(0.0, p0 - math.exp(epsilon) * p1)
