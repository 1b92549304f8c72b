"""The generic privacy auditor: many vectorised trials, one event, one confidence bound.

A *mechanism* under audit is any callable ``mechanism(dataset, trials, rng)``
returning the outputs of ``trials`` independent runs on ``dataset`` as a NumPy
array whose first axis indexes trials (vectorised trials are the natural unit:
a Laplace mechanism is one ``rng.laplace`` call). ``rng`` is the only source of
randomness it may use, unless it deliberately draws from a CSPRNG (OpenDP).

:func:`audit` runs it on two neighbouring inputs ``D0`` and ``D1``:

1. **search** (only when given a family): ``search_trials`` runs on each input;
   :func:`~pmwcm.audit.events.search_event` picks the event and the ordering
   whose bound would be largest;
2. **final**: ``trials`` *fresh* runs on each input count the chosen event; the
   Clopper-Pearson bounds of :mod:`pmwcm.audit.bounds` give, with confidence
   ``1 - alpha``, ``eps >= log((p_a_lb - delta) / p_b_ub)`` and the
   hockey-stick divergence ``>= p_a_lb - e^eps_claim p_b_ub``.

The verdict is ``"violation"`` when the lower bound exceeds the claimed
epsilon (at the claim's ``delta``): if the claim were true, this happens with
probability at most ``alpha``.

>>> def laplace(x, trials, rng):
...     return x + rng.laplace(0.0, 1.0, trials)  # 1-DP for |x - x'| <= 1
>>> from pmwcm.audit.events import Event
>>> tail = Event(description="out >= 1", indicator=lambda o: o >= 1.0, favours=1)
>>> r = audit(laplace, 0.0, 1.0, events=tail, trials=200_000,
...           claimed_epsilon=1.0, rng=np.random.default_rng(0))
>>> r.verdict, 0.9 < r.epsilon_lower_bound <= 1.0
('consistent', True)
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from dp_accounting import dp_event

from pmwcm.audit.bounds import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    hockey_stick_lower_bound,
)
from pmwcm.audit.events import Event, EventFamily, search_event
from pmwcm.mechanisms.accounting import Accountant, PLDAccountant

__all__ = ["AuditResult", "Mechanism", "audit", "claimed_epsilon"]

VIOLATION, CONSISTENT, NO_CLAIM = "violation", "consistent", "no claim"


class Mechanism(Protocol):
    """``mechanism(dataset, trials, rng) -> outputs`` (first axis: trials)."""

    def __call__(self, dataset: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """Outputs of ``trials`` independent runs on ``dataset``."""
        ...


@dataclass(frozen=True, kw_only=True)
class AuditResult:
    """What one audit found.

    Attributes:
        name: the mechanism's label.
        claimed_epsilon: the epsilon the mechanism claims at ``delta`` (or ``None``).
        delta: the delta at which epsilon is bounded.
        epsilon_lower_bound: ``max(0, log((p_a_lb - delta) / p_b_ub))``.
        hockey_stick_lower_bound: ``max(0, p_a_lb - e^claimed p_b_ub)``, a lower
            bound on the delta the mechanism needs at its claimed epsilon
            (``None`` without a claim).
        confidence: ``1 - alpha``, for both bounds together.
        trials: final trials per input.
        search_trials: trials per input spent choosing the event (0: given).
        count0: final trials on ``D0`` in the event.
        count1: final trials on ``D1`` in the event.
        p_lower: Clopper-Pearson lower bound on the favoured input's probability.
        p_upper: Clopper-Pearson upper bound on the other input's probability.
        event: the event's description.
        favours: the input (0 or 1) on which the event is more likely.
        verdict: ``"violation"``, ``"consistent"`` or ``"no claim"``.
    """

    name: str
    claimed_epsilon: float | None
    delta: float
    epsilon_lower_bound: float
    hockey_stick_lower_bound: float | None
    confidence: float
    trials: int
    search_trials: int
    count0: int
    count1: int
    p_lower: float
    p_upper: float
    event: str
    favours: int
    verdict: str

    @property
    def violated(self) -> bool:
        """Whether the lower bound exceeds the claimed epsilon."""
        return self.verdict == VIOLATION


def claimed_epsilon(
    event: dp_event.DpEvent, *, delta: float, accountant: Accountant | None = None
) -> float:
    """The epsilon that ``event`` claims at ``delta`` (PLD accounting by default).

    >>> claimed_epsilon(dp_event.LaplaceDpEvent(0.5), delta=0.0)
    2.0
    """
    return (accountant or PLDAccountant()).epsilon(event, delta=delta)


def _batches(trials: int, batch_size: int) -> Sequence[int]:
    full, rest = divmod(trials, batch_size)
    return [batch_size] * full + ([rest] if rest else [])


def _sample(mechanism: Mechanism, dataset: Any, trials: int, rng: Any, batch: int) -> Any:
    parts = [mechanism(dataset, b, rng) for b in _batches(trials, batch)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def _count(
    mechanism: Mechanism, dataset: Any, trials: int, rng: Any, batch: int, event: Event
) -> int:
    return sum(event.count(mechanism(dataset, b, rng)) for b in _batches(trials, batch))


def audit(
    mechanism: Mechanism,
    dataset0: Any,
    dataset1: Any,
    *,
    events: Event | EventFamily,
    trials: int,
    rng: np.random.Generator,
    claimed_epsilon: float | None = None,
    delta: float = 0.0,
    alpha: float = 0.05,
    search_trials: int | None = None,
    batch_size: int = 100_000,
    name: str = "mechanism",
) -> AuditResult:
    """Lower-bounds the privacy loss of ``mechanism`` between two neighbouring inputs.

    Args:
        mechanism: ``mechanism(dataset, trials, rng) -> outputs``.
        dataset0: ``D0``.
        dataset1: ``D1``, a neighbour of ``D0``.
        events: one :class:`Event` (no search), or a family searched on
            ``search_trials`` separate runs.
        trials: final runs per input (the bound uses these only).
        rng: the audit's random source (passed to the mechanism).
        claimed_epsilon: the mechanism's claim at ``delta``; ``None`` for none.
        delta: the delta of the bound (and of the claim).
        alpha: probability that the reported bounds are wrong.
        search_trials: runs per input for the search (default ``trials // 4``).
        batch_size: runs per call of ``mechanism`` (bounds memory).
        name: a label for the result.

    Returns:
        An :class:`AuditResult`.
    """
    trials, batch_size = operator.index(trials), operator.index(batch_size)
    if trials < 1 or batch_size < 1:
        raise ValueError(f"trials and batch_size must be >= 1, got {trials}, {batch_size}.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got alpha={alpha}.")
    if claimed_epsilon is not None and not claimed_epsilon >= 0:
        raise ValueError(f"claimed_epsilon must be >= 0, got claimed_epsilon={claimed_epsilon}.")
    if isinstance(events, Event):
        chosen, search_trials = events, 0
    else:
        search_trials = max(trials // 4, 1) if search_trials is None else search_trials
        if search_trials < 1:
            raise ValueError(f"a family needs search_trials >= 1, got {search_trials}.")
        out0 = _sample(mechanism, dataset0, search_trials, rng, batch_size)
        out1 = _sample(mechanism, dataset1, search_trials, rng, batch_size)
        chosen, _ = search_event(events, out0, out1, final_trials=trials, alpha=alpha, delta=delta)
        del out0, out1
    k0 = _count(mechanism, dataset0, trials, rng, batch_size, chosen)
    k1 = _count(mechanism, dataset1, trials, rng, batch_size, chosen)
    top, bottom = (k0, k1) if chosen.favours == 0 else (k1, k0)
    eps_lb = epsilon_lower_bound(k0=top, n0=trials, k1=bottom, n1=trials, alpha=alpha, delta=delta)
    hs_lb = None
    verdict = NO_CLAIM
    if claimed_epsilon is not None:
        hs_lb = hockey_stick_lower_bound(
            k0=top, n0=trials, k1=bottom, n1=trials, epsilon=claimed_epsilon, alpha=alpha
        )
        verdict = VIOLATION if eps_lb > claimed_epsilon else CONSISTENT
    return AuditResult(
        name=name,
        claimed_epsilon=claimed_epsilon,
        delta=delta,
        epsilon_lower_bound=eps_lb,
        hockey_stick_lower_bound=hs_lb,
        confidence=1.0 - alpha,
        trials=trials,
        search_trials=search_trials,
        count0=k0,
        count1=k1,
        p_lower=clopper_pearson_lower(top, trials, alpha=alpha / 2),
        p_upper=clopper_pearson_upper(bottom, trials, alpha=alpha / 2),
        event=chosen.description,
        favours=chosen.favours,
        verdict=verdict,
    )
