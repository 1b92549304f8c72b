"""Statistical privacy audits: lower confidence bounds on a mechanism's epsilon.

Differential-privacy bugs are silent: the outputs look fine while the guarantee
is gone. An audit runs a mechanism many times on two neighbouring inputs,
counts an output event and turns the counts into a Clopper-Pearson lower
confidence bound on epsilon (:mod:`pmwcm.audit.bounds`). A bound above the
mechanism's claim refutes the claim; a bound below it is evidence, not proof,
that the claim holds.

Modules: :mod:`~pmwcm.audit.bounds` (the confidence bounds),
:mod:`~pmwcm.audit.events` (event families and the held-out search),
:mod:`~pmwcm.audit.auditor` (:func:`audit`), :mod:`~pmwcm.audit.cases`
(mechanism + claim + neighbours), :mod:`~pmwcm.audit.sparse`,
:mod:`~pmwcm.audit.oracles`, :mod:`~pmwcm.audit.engine`,
:mod:`~pmwcm.audit.prior` (vectorised models of pmwcm's mechanisms,
cross-checked against the real code), :mod:`~pmwcm.audit.pipeline` (the
shipped default pipeline end to end, real code, refusals as outputs),
:mod:`~pmwcm.audit.sensitivity` and :mod:`~pmwcm.audit.suite` (what
``pmwcm audit`` runs).

>>> import numpy as np
>>> from pmwcm.audit import ThresholdFamily, audit
>>> def halved(x, trials, rng):  # claims 1-DP but uses half the Laplace scale
...     return x + rng.laplace(0.0, 0.5, trials)
>>> r = audit(halved, 0.0, 1.0, events=ThresholdFamily(statistic=lambda o: o),
...           trials=100_000, claimed_epsilon=1.0, rng=np.random.default_rng(1))
>>> r.verdict
'violation'
"""

from pmwcm.audit.auditor import AuditResult, Mechanism, audit, claimed_epsilon
from pmwcm.audit.bounds import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    hockey_stick_lower_bound,
)
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import (
    CategoricalFamily,
    Event,
    EventFamily,
    FixedFamily,
    ThresholdFamily,
    combine,
    row_codes,
    search_event,
)
from pmwcm.audit.sensitivity import SensitivityReport, max_sensitivity_search

__all__ = [
    "AuditCase",
    "AuditResult",
    "CategoricalFamily",
    "Event",
    "EventFamily",
    "FixedFamily",
    "Mechanism",
    "SensitivityReport",
    "ThresholdFamily",
    "audit",
    "claimed_epsilon",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "combine",
    "epsilon_lower_bound",
    "hockey_stick_lower_bound",
    "max_sensitivity_search",
    "row_codes",
    "search_event",
]
