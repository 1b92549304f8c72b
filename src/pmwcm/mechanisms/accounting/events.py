"""Privacy events as the accountants see them: validation and flattening into groups.

``EpsilonDeltaDpEvent`` is ours (``dp_accounting`` 0.6.0 has none); the other
events are ``dp_accounting``'s. :func:`flatten` reduces any composition to
counts per event kind, which every accountant starts from.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import attr
from dp_accounting import dp_event
from dp_accounting.dp_event import DpEvent

# The shape check of any budget lives with the rules of a user's total (re-exported).
from pmwcm.mechanisms.accounting.budget_rules import check_budget as check_budget


def check_delta(delta: float, *, name: str = "delta", closed: bool = False) -> float:
    """``delta`` as a float in ``[0, 1)`` (``[0, 1]`` if ``closed``); raises naming it."""
    delta = float(delta)
    if not (0.0 <= delta < 1.0 or (closed and delta == 1.0)):
        interval = "[0, 1]" if closed else "[0, 1)"
        raise ValueError(f"{name} must lie in {interval}, got {name}={delta}.")
    return delta


def check_count(count: int, *, name: str = "count") -> int:
    """``count`` as a non-negative int; raises naming it otherwise."""
    if isinstance(count, bool) or int(count) != count or count < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {name}={count!r}.")
    return int(count)


def check_nonneg(value: float, name: str) -> float:
    """``value`` as a non-negative float (NaN refused); raises naming it otherwise."""
    value = float(value)
    if not value >= 0.0:  # also catches nan
        raise ValueError(f"{name} must be non-negative, got {name}={value}.")
    return value


@attr.s(frozen=True, slots=True, auto_attribs=True)
class EpsilonDeltaDpEvent(DpEvent):
    """A mechanism known only to be ``(epsilon, delta)``-DP, accounted as the worst case.

    Attributes:
        epsilon: ``>= 0``; ``inf`` means non-private.
        delta: in ``[0, 1]``; ``0`` (the default) is pure DP.
    """

    epsilon: float
    delta: float = 0.0

    def __attrs_post_init__(self) -> None:
        check_nonneg(self.epsilon, "epsilon")
        check_delta(self.delta, closed=True)


@dataclass(kw_only=True)
class EventTotals:
    """A composition flattened into homogeneous groups (all counts multiplied out)."""

    nonprivate: bool = False
    approx: Counter[tuple[float, float]] = field(default_factory=Counter)  # (eps, delta)
    laplace: Counter[float] = field(default_factory=Counter)  # multiplier b
    gauss_mu2: float = 0.0  # sum_i count_i / m_i^2: Gaussians compose exactly in quadrature
    zcdp_rho: float = 0.0
    zcdp_xi: float = 0.0

    def pure_groups(self) -> list[tuple[float, float, int]]:
        """``(eps, delta, count)`` for every (eps, delta) and Laplace group."""
        groups = [(e, d, c) for (e, d), c in sorted(self.approx.items())]
        return groups + [(1.0 / b, 0.0, c) for b, c in sorted(self.laplace.items())]

    def basic_epsilon(self, delta: float) -> float:
        """Basic composition ``(sum eps_i, sum delta_i)``; ``inf`` if it does not apply."""
        groups = self.pure_groups()
        if self.gauss_mu2 > 0 or self.zcdp_rho > 0 or self.zcdp_xi > 0:
            return math.inf
        if math.fsum(c * d for _, d, c in groups) > delta:
            return math.inf
        return math.fsum(c * e for e, _, c in groups)


def flatten(event: DpEvent) -> EventTotals:
    """The totals of a (possibly nested) composed event, for the closed-form accountants."""
    t = EventTotals()
    stack: list[tuple[DpEvent, int]] = [(event, 1)]
    while stack:
        ev, count = stack.pop()
        if count == 0 or isinstance(ev, dp_event.NoOpDpEvent):
            continue
        if isinstance(ev, dp_event.NonPrivateDpEvent):
            t.nonprivate = True
        elif isinstance(ev, dp_event.SelfComposedDpEvent):
            stack.append((ev.event, count * check_count(ev.count)))
        elif isinstance(ev, dp_event.ComposedDpEvent):
            stack.extend((e, count) for e in ev.events)
        elif isinstance(ev, EpsilonDeltaDpEvent):
            if math.isinf(ev.epsilon) or ev.delta == 1.0:
                t.nonprivate = True
            elif ev.epsilon > 0 or ev.delta > 0:
                t.approx[(float(ev.epsilon), float(ev.delta))] += count
        elif isinstance(ev, dp_event.GaussianDpEvent | dp_event.LaplaceDpEvent):
            m = check_nonneg(ev.noise_multiplier, "noise_multiplier")
            if m == 0:
                t.nonprivate = True
            elif math.isfinite(m) and isinstance(ev, dp_event.GaussianDpEvent):
                t.gauss_mu2 += count / m**2
            elif math.isfinite(m):
                t.laplace[m] += count
        elif isinstance(ev, dp_event.ZCDpEvent):
            rho, xi = check_nonneg(ev.rho, "rho"), check_nonneg(ev.xi, "xi")
            t.zcdp_rho, t.zcdp_xi = t.zcdp_rho + count * rho, t.zcdp_xi + count * xi
        else:
            raise ValueError(f"Cannot account for {type(ev).__name__}: {ev!r}.")
    return t
