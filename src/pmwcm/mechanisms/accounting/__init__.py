"""One accountant for the whole interaction: privacy events in, (epsilon, delta) out.

Mechanisms describe what they did as Google ``dp_accounting`` events (frozen
data); an :class:`Accountant` turns a composition of events into the epsilon it
guarantees at a given delta, and a :class:`PrivacyLedger` refuses any event
that would take the total over budget *before* the mechanism draws noise.

Events understood here (the neighbouring relation is always ours: replace one
record; every multiplier is a noise scale divided by the replace-one
sensitivity):

* :class:`EpsilonDeltaDpEvent` ``(epsilon, delta)``: any (epsilon, delta)-DP
  mechanism, accounted as the worst case (its dominating pair is the
  four-outcome randomized-response pair of Kairouz, Oh and Viswanath 2015).
  Pure DP is ``delta = 0``; this is how the sparse vector reports itself.
* ``GaussianDpEvent(m)``: Gaussian noise of standard deviation ``m * Delta_2``.
* ``LaplaceDpEvent(b)``: Laplace noise of scale ``b * Delta_1`` (pure 1/b-DP).
* ``ZCDpEvent(rho, xi)`` (zCDP accountant only), ``NoOpDpEvent``,
  ``NonPrivateDpEvent`` (infinite epsilon), and ``SelfComposedDpEvent`` /
  ``ComposedDpEvent`` of these. Composition is adaptive throughout.

>>> sv = dp_event.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=0.05), 50)
>>> accountants = (PLDAccountant(), ZCDPAccountant(), DRVAccountant())
>>> [round(a.epsilon(sv, delta=1e-6), 3) for a in accountants]
[1.489, 1.66, 2.108]
>>> round(kov_epsilon(0.05, 50, 1e-6), 3)  # the exact optimum; basic composition gives 2.5
1.489
>>> ledger = PrivacyLedger(epsilon=2.0, delta=1e-6, accountant=PLDAccountant())
>>> round(ledger.spend(sv, label="sparse vector").epsilon_after, 3)
1.489
"""

from __future__ import annotations

from dp_accounting import dp_event  # noqa: F401  (used by the doctest above)

from pmwcm.mechanisms.accounting.accountants import (
    Accountant,
    DRVAccountant,
    PLDAccountant,
    ZCDPAccountant,
    kov_epsilon,
)
from pmwcm.mechanisms.accounting.calibration import calibrate_noise_level, calibrate_parameter
from pmwcm.mechanisms.accounting.events import EpsilonDeltaDpEvent
from pmwcm.mechanisms.accounting.ledger import (
    BudgetExceededError,
    LedgerEntry,
    PrivacyLedger,
    calibrate_gaussian_multiplier,
)
from pmwcm.mechanisms.accounting.split import BudgetSplit

__all__ = [
    "Accountant",
    "BudgetExceededError",
    "BudgetSplit",
    "DRVAccountant",
    "EpsilonDeltaDpEvent",
    "LedgerEntry",
    "PLDAccountant",
    "PrivacyLedger",
    "ZCDPAccountant",
    "calibrate_gaussian_multiplier",
    "calibrate_noise_level",
    "calibrate_parameter",
    "kov_epsilon",
]
