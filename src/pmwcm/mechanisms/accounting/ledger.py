"""The ledger that owns an interaction's budget, and noise calibration against it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dp_accounting import dp_event
from dp_accounting.dp_event import DpEvent

from pmwcm.errors import BudgetExhausted
from pmwcm.mechanisms.accounting.accountants import Accountant
from pmwcm.mechanisms.accounting.budget_rules import zcdp_for
from pmwcm.mechanisms.accounting.calibration import calibrate_noise_level
from pmwcm.mechanisms.accounting.events import check_count, check_delta


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One recorded spend: what, which event, and the total epsilon after it."""

    label: str
    event: DpEvent
    epsilon_after: float


class BudgetExceededError(BudgetExhausted):
    """An event would take the ledger over its (epsilon, delta) budget; nothing was spent."""


class PrivacyLedger:
    """The budget of one interaction; refuses an over-budget event before noise is drawn.

    The total is recomputed from *all* recorded events by the accountant (tight
    composition, not a running sum). There is no tolerance: an event is
    accepted only if the accountant's epsilon is ``<= epsilon`` in float64
    (producers of events, e.g. :func:`calibrate_gaussian_multiplier`, round
    towards the safe side so exact splits fit). Reported totals are made
    monotone (``max`` with the previous total; both are valid upper bounds).

    Args:
        epsilon: the budget, ``> 0`` (``inf`` accepts everything).
        delta: in ``[0, 1)``; the delta at which every epsilon is reported.
        accountant: how events compose.
    """

    def __init__(self, *, epsilon: float, delta: float, accountant: Accountant) -> None:
        epsilon = float(epsilon)
        if not epsilon > 0:
            raise ValueError(f"epsilon must be positive, got epsilon={epsilon}.")
        if not isinstance(accountant, Accountant):
            raise TypeError(f"accountant must be an Accountant, got {accountant!r}.")
        self._epsilon, self._delta, self._accountant = epsilon, check_delta(delta), accountant
        self._entries: list[LedgerEntry] = []

    @property
    def epsilon(self) -> float:
        """The epsilon budget."""
        return self._epsilon

    @property
    def delta(self) -> float:
        """The delta budget, at which every epsilon is reported."""
        return self._delta

    @property
    def accountant(self) -> Accountant:
        """How events compose."""
        return self._accountant

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """Every recorded spend, oldest first."""
        return tuple(self._entries)

    def spent_event(self) -> DpEvent:
        """The composition of everything recorded (``NoOpDpEvent`` if nothing)."""
        if not self._entries:
            return dp_event.NoOpDpEvent()
        return dp_event.ComposedDpEvent([e.event for e in self._entries])

    def spent_epsilon(self) -> float:
        """Epsilon of everything recorded, at the ledger's delta."""
        return self._entries[-1].epsilon_after if self._entries else 0.0

    def remaining_epsilon(self) -> float:
        """``epsilon - spent_epsilon()``, never below zero."""
        return max(0.0, self.epsilon - self.spent_epsilon())

    def epsilon_after(self, event: DpEvent) -> float:
        """The total epsilon if ``event`` were spent now (no side effect)."""
        composed = dp_event.ComposedDpEvent([*(e.event for e in self._entries), event])
        return max(self.spent_epsilon(), self.accountant.epsilon(composed, delta=self.delta))

    def _checked(self, event: DpEvent, label: str) -> float:
        after = self.epsilon_after(event)
        if after > self.epsilon:
            raise BudgetExceededError(
                f"Spending {label} would bring epsilon to {after!r} at delta={self.delta!r} "
                f"({self.accountant.name}), over the budget epsilon={self.epsilon!r}; "
                f"spent {self.spent_epsilon()!r}, left {self.remaining_epsilon()!r}."
            )
        return after

    def check(self, event: DpEvent) -> None:
        """Raises :class:`BudgetExceededError` if ``event`` does not fit; no side effect."""
        self._checked(event, "this event")

    def spend(self, event: DpEvent, *, label: str) -> LedgerEntry:
        """Checks, then records ``event``; atomic (on any error nothing changes)."""
        entry = LedgerEntry(label=label, event=event, epsilon_after=self._checked(event, label))
        self._entries.append(entry)
        return entry


def calibrate_gaussian_multiplier(
    *,
    fixed: DpEvent | None,
    gaussian_count: int,
    epsilon: float,
    delta: float,
    accountant: Accountant,
    rtol: float = 1e-6,
) -> float:
    """Smallest Gaussian multiplier that fits ``gaussian_count`` calls next to ``fixed``.

    Finds ``m`` with ``compose(fixed, gaussian_count x GaussianDpEvent(m))``
    ``(epsilon, delta)``-DP under ``accountant`` with
    :func:`~pmwcm.mechanisms.accounting.calibration.calibrate_noise_level`
    (``dp_accounting``'s ``calibrate_dp_mechanism`` on ``log m``), starting from
    the zCDP estimate. The returned ``m`` was verified to fit and is within
    ``rtol`` (relative) of the boundary (up to the accountant's own monotonicity).

    Raises:
        ValueError: bad arguments, ``fixed`` alone over budget, or no
            multiplier up to 1e12 fits (e.g. ``delta = 0``).
    """
    count = check_count(gaussian_count, name="gaussian_count")
    epsilon, delta = float(epsilon), check_delta(delta)
    if count == 0:
        raise ValueError("gaussian_count must be at least 1, got gaussian_count=0.")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got epsilon={epsilon}.")
    if not (0 < rtol < 1):
        raise ValueError(f"rtol must lie in (0, 1), got rtol={rtol}.")
    base = dp_event.NoOpDpEvent() if fixed is None else fixed
    used = accountant.epsilon(base, delta=delta)
    if used > epsilon:
        raise ValueError(f"fixed alone needs epsilon={used!r} > epsilon={epsilon!r}.")

    # Start from the zCDP estimate of the Gaussian part alone (Bun-Steinke Prop. 1.3).
    rho = zcdp_for(epsilon, delta)
    if not rho > 0:  # epsilon below sqrt(L)'s last bit (5e-324): the guess has no finite value
        raise ValueError(f"epsilon={epsilon!r} is too small for any Gaussian noise multiplier.")
    multiplier = calibrate_noise_level(
        dp_event.GaussianDpEvent,
        count=count,
        fixed=base,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        rtol=rtol,
        guess=math.sqrt(count / (2 * rho)),
        name="Gaussian multiplier",
    )
    return multiplier
