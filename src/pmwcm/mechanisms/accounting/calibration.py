"""One calibration routine: a monotone privacy parameter fitted to a target ``(epsilon, delta)``.

Every noise level and per-run epsilon the engines use is found here, by
``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` (Brent's method
with a guaranteed-fitting fallback bisection), run in log space so that its
tolerance is relative, with one of this package's :class:`Accountant` s behind
a ``dp_accounting.PrivacyAccountant`` adapter. The returned value always fits:
``calibrate_dp_mechanism`` only returns a parameter whose epsilon gap is not
positive.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dp_accounting import dp_event, mechanism_calibration, privacy_accountant

from pmwcm.mechanisms.accounting.accountants import Accountant

#: Gap values above this are clipped, so Brent's method never sees ``inf``.
_GAP_CAP = 1e9


class _AccountantAdapter(privacy_accountant.PrivacyAccountant):
    """A fresh ``dp_accounting`` accountant that defers to one of ours."""

    def __init__(self, accountant: Accountant) -> None:
        super().__init__(privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE)
        self._accountant = accountant
        self._events: list[dp_event.DpEvent] = []

    def _maybe_compose(
        self, event: dp_event.DpEvent, count: int, do_compose: bool
    ) -> privacy_accountant.PrivacyAccountant.CompositionErrorDetails | None:
        if do_compose:
            self._events.append(dp_event.SelfComposedDpEvent(event, count))
        return None

    def get_epsilon(self, target_delta: float) -> float:
        """The adapted accountant's epsilon for everything composed, capped at ``1e9``."""
        eps = self._accountant.epsilon(dp_event.ComposedDpEvent(self._events), delta=target_delta)
        return min(eps, _GAP_CAP)


def calibrate_parameter(
    event_for: Callable[[float], dp_event.DpEvent],
    *,
    epsilon: float,
    delta: float,
    accountant: Accountant,
    bracket: tuple[float, float],
    rtol: float,
) -> float:
    """The parameter at the privacy boundary inside ``bracket``, on the side that fits.

    Args:
        event_for: the (composed) event at a parameter value; monotone in it.
        epsilon, delta: the target.
        accountant: composes the events.
        bracket: ``(lo, hi)``, ``0 < lo < hi``, with the boundary between them
            (one end fits the target and the other does not, or an end sits on it).
        rtol: relative tolerance on the parameter (the search runs on its log);
            either direction of monotonicity works (noise levels: larger is
            more private; per-run epsilons: smaller is).

    Returns:
        A value whose event is ``(epsilon, delta)``-DP under ``accountant``,
        within ``rtol`` (relative) of the boundary.
    """
    lo, hi = bracket
    if not 0 < lo < hi:
        raise ValueError(f"bracket must satisfy 0 < lo < hi, got bracket={bracket}.")
    if not 0 < rtol < 1:
        raise ValueError(f"rtol must lie in (0, 1), got rtol={rtol}.")
    log_x = mechanism_calibration.calibrate_dp_mechanism(
        lambda: _AccountantAdapter(accountant),
        lambda x: event_for(math.exp(x)),
        epsilon,
        delta,
        bracket_interval=mechanism_calibration.ExplicitBracketInterval(math.log(lo), math.log(hi)),
        tol=math.log1p(rtol),
    )
    return math.exp(log_x)  # the very value whose gap the routine checked


def bracket_noise_level(
    fits: Callable[[float], bool],
    guess: float,
    *,
    ceiling: float = 1e12,
    floor: float = 1e-12,
    name: str = "noise level",
) -> tuple[float, float]:
    """``(lo, hi)`` around the smallest fitting noise level, by factors of 4 from ``guess``.

    ``hi`` fits; ``lo`` does not, unless ``lo <= floor`` (everything fits).

    Raises:
        ValueError: if no level up to ``ceiling`` fits.
    """
    lo = hi = guess
    while not fits(hi):
        lo, hi = hi, hi * 4
        if hi > ceiling:
            raise ValueError(f"No {name} up to {ceiling:g} fits the budget.")
    if lo == hi:
        while lo > floor and fits(lo):
            hi, lo = lo, lo / 4
    return lo, hi


def calibrate_noise_level(
    event_for: Callable[[float], dp_event.DpEvent],
    *,
    count: int,
    fixed: dp_event.DpEvent | None,
    epsilon: float,
    delta: float,
    accountant: Accountant,
    rtol: float = 1e-6,
    guess: float = 1.0,
    name: str = "noise level",
) -> float:
    """The smallest noise level ``m`` with ``fixed + count x event_for(m)`` within budget.

    ``event_for`` must grow more private with ``m``. The level is bracketed from
    ``guess`` (:func:`bracket_noise_level`; ``name`` is for its error) and refined by
    :func:`calibrate_parameter` to relative precision ``rtol``; it always fits.

    Raises:
        ValueError: if ``fixed`` alone exhausts the budget, or no level fits.
    """
    base = dp_event.NoOpDpEvent() if fixed is None else fixed
    if accountant.epsilon(base, delta=delta) >= epsilon:
        raise ValueError(f"The fixed events alone exhaust epsilon={epsilon}.")

    def composed(level: float) -> dp_event.DpEvent:
        return dp_event.ComposedDpEvent(
            [base, dp_event.SelfComposedDpEvent(event_for(level), count)]
        )

    def fits(level: float) -> bool:
        return accountant.epsilon(composed(level), delta=delta) <= epsilon

    lo, hi = bracket_noise_level(fits, guess, name=name)
    if fits(lo):
        return lo
    return calibrate_parameter(
        composed, epsilon=epsilon, delta=delta, accountant=accountant, bracket=(lo, hi), rtol=rtol
    )
