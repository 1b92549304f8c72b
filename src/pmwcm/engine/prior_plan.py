"""What a budget plan's paid prior will charge, calibrated at its share (no data read).

The marginal prior measures all pairs with one Gaussian multiplier
(:func:`~pmwcm.mechanisms.priors.marginals.measure_marginals`); with announced
cliques (a workload-aware start, :mod:`pmwcm.mechanisms.priors.workload`) it
also runs ``R`` rounds of selection and measurement, and the pairs' multiplier,
the selections' ``eps_0`` and the rounds' multiplier are set by one zCDP budget
``rho_p``: :data:`~pmwcm.mechanisms.priors.workload.WORKLOAD_SHARE` of it to the
rounds, the rest to the pairs (``m_pairs = 1 / sqrt(2 (1 - share) rho_p)``),
with ``rho_p`` the largest for which all of them compose, under the engine's
accountant, to the prior's ``(epsilon, delta)`` share. AIM and MST charge their
own event (:func:`~pmwcm.mechanisms.priors.synthetic.prior_event`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import dp_accounting

from pmwcm.engine.config import PMWConfig
from pmwcm.mechanisms.accounting import (
    Accountant,
    calibrate_gaussian_multiplier,
    calibrate_noise_level,
)
from pmwcm.mechanisms.priors.marginals import measurement_event
from pmwcm.mechanisms.priors.workload import WORKLOAD_SHARE, WorkloadPlan, workload_plan


@dataclass(frozen=True)
class PriorLevels:
    """What the paid prior will charge: the pairs' Gaussian multiplier (marginals),
    the workload rounds (a workload-aware start) and every event, in order."""

    multiplier: float | None
    events: tuple[dp_accounting.DpEvent, ...]
    workload: WorkloadPlan | None = None

    @classmethod
    def none(cls) -> PriorLevels:
        """No paid prior (the uniform, a public or a supplied start)."""
        return cls(None, ())


def prior_levels(config: PMWConfig, accountant: Accountant) -> PriorLevels:
    """The paid prior's calibration at its share of the budget (no data read).

    Raises:
        ValueError: no multiplier fits the share.
    """
    eps_p, delta_p = config.split.prior_budget(config.epsilon, config.delta)
    if config.prior == "marginals":
        multiplier = calibrate_gaussian_multiplier(
            fixed=None, gaussian_count=1, epsilon=eps_p, delta=delta_p, accountant=accountant
        )
        return PriorLevels(multiplier, (measurement_event(multiplier),))
    if config.prior in ("aim", "mst"):
        from pmwcm.mechanisms.priors.synthetic import prior_event

        event, _ = prior_event(epsilon=eps_p, delta=delta_p, accountant=accountant)
        return PriorLevels(None, (event,))
    return PriorLevels.none()


def workload_levels(
    config: PMWConfig,
    accountant: Accountant,
    candidates: Sequence[tuple[str, ...]],
    *,
    attributes: int,
) -> PriorLevels:
    """The marginal prior with workload rounds over ``candidates`` at the prior's share
    (module docstring); public inputs only.

    Raises:
        ValueError: no level fits the share.
    """
    eps_p, delta_p = config.split.prior_budget(config.epsilon, config.delta)

    def levels(scale: float) -> tuple[float, WorkloadPlan]:
        # scale = 1 / sqrt(2 rho_p): the pairs' multiplier at the whole prior budget
        rho = 1.0 / (2.0 * scale * scale)
        plan = workload_plan(candidates, attributes=attributes, rho=WORKLOAD_SHARE * rho)
        assert plan is not None  # candidates were given (public)
        return scale / math.sqrt(1.0 - WORKLOAD_SHARE), plan

    def event_for(scale: float) -> dp_accounting.DpEvent:
        pairs, plan = levels(scale)
        return dp_accounting.ComposedDpEvent([measurement_event(pairs), plan.event()])

    scale = calibrate_noise_level(
        event_for, count=1, fixed=None, epsilon=eps_p, delta=delta_p, accountant=accountant,
        name="prior noise level",
    )  # fmt: skip
    pairs, plan = levels(scale)
    return PriorLevels(pairs, (measurement_event(pairs), plan.event()), plan)
