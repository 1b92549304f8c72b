"""The noise levels a budget buys: the accountant, the sparse vector, the oracle calls.

Pure functions of public numbers (a config's budget, shares and ``T``); the
budget plan (:func:`pmwcm.engine.plan.plan_budget`) calls each once per engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import dp_accounting

from pmwcm.mechanisms.accounting import (
    Accountant,
    EpsilonDeltaDpEvent,
    PLDAccountant,
    ZCDPAccountant,
    calibrate_gaussian_multiplier,
    calibrate_noise_level,
    calibrate_parameter,
)
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse, SparseVector

if TYPE_CHECKING:
    from pmwcm.engine.config import PMWConfig


def make_accountant(name: str) -> Accountant:
    """The accountant called ``name`` (``"pld"`` or ``"zcdp"``)."""
    return PLDAccountant() if name == "pld" else ZCDPAccountant()


def make_sparse_vector(
    config: PMWConfig, *, accountant: Accountant, noise: NoiseSource
) -> tuple[SparseVector, float]:
    """The sparse vector at its share of the budget (``config.split``), and its
    query-noise scale ``b``.

    ``b`` is in units of the (unit) sensitivity: Lyu-Su-Li ``2c / eps_2``,
    Dwork-Roth ``4 / eps'``.
    """
    eps_sv, delta_sv = config.split.sparse_vector_budget(config.epsilon, config.delta)
    cutoff = config.max_updates
    if config.sparse_vector == "lyu_su_li":
        sv = LyuSuLiSparse.from_total(epsilon=eps_sv, cutoff=cutoff, noise=noise)
        return sv, 2.0 * cutoff / sv.epsilon_queries
    per_run = dwork_roth_epsilon_per_run(eps_sv, cutoff, delta=delta_sv, accountant=accountant)
    return DworkRothSparse(epsilon_per_run=per_run, cutoff=cutoff, noise=noise), 4.0 / per_run


def dwork_roth_epsilon_per_run(
    epsilon: float, cutoff: int, *, delta: float, accountant: Accountant
) -> float:
    """The largest ``eps'`` whose ``cutoff``-fold composition is ``(epsilon, delta)``-DP.

    Found by :func:`~pmwcm.mechanisms.accounting.calibrate_parameter` between
    ``epsilon / cutoff`` (basic composition: always fits) and ``epsilon``, to
    relative precision ``1e-12``; the value returned fits.
    """
    if cutoff == 1:
        return epsilon
    return calibrate_parameter(
        lambda eps: dp_accounting.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=eps), cutoff),
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        bracket=(epsilon / cutoff, epsilon),
        rtol=1e-12,
    )


def calibrate_oracle(
    event_for: Callable[[float], dp_accounting.DpEvent],
    config: PMWConfig,
    *,
    fixed: dp_accounting.DpEvent,
    accountant: Accountant,
) -> float:
    """The oracle calls' noise level: the smallest for which ``fixed`` (the prior's
    and the sparse vector's events) and ``T`` oracle calls compose to the total
    ``(epsilon, delta)``, i.e. the oracle takes its share ``config.split.oracle``
    and whatever tight composition saves on the other two.

    Gaussian events: :func:`~pmwcm.mechanisms.accounting.calibrate_gaussian_multiplier`
    (from the zCDP estimate); any other monotone family:
    :func:`~pmwcm.mechanisms.accounting.calibrate_noise_level`; both to relative
    precision 1e-6 (the hand-written bisections this replaces stopped at 1e-4
    for Gaussians, so levels now sit closer to the optimum, never above it by
    more than the old slack). Both go
    through ``dp_accounting``'s ``calibrate_dp_mechanism`` and return a level
    that fits.

    Raises:
        ValueError: if ``fixed`` alone exceeds the budget.
    """
    if isinstance(event_for(1.0), dp_accounting.GaussianDpEvent):
        return calibrate_gaussian_multiplier(
            fixed=fixed,
            gaussian_count=config.max_updates,
            epsilon=config.epsilon,
            delta=config.delta,
            accountant=accountant,
        )
    return calibrate_noise_level(
        event_for,
        count=config.max_updates,
        fixed=fixed,
        epsilon=config.epsilon,
        delta=config.delta,
        accountant=accountant,
    )


def default_threshold(noise_scale: float, config: PMWConfig) -> float:
    """``b ln(max(e, k / T))`` (module docstring)."""
    return noise_scale * math.log(max(math.e, config.expected_queries / config.max_updates))
