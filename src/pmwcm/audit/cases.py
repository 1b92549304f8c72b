"""Audit cases: a mechanism, its stated guarantee, a worst-case pair and where to look.

An :class:`AuditCase` is one row of the ``pmwcm audit`` table. This module
also builds the cases for the noise sources: the Laplace and Gaussian
mechanisms on a scalar with sensitivity 1, released through
:func:`pmwcm.mechanisms.noise.add_laplace` / :func:`~pmwcm.mechanisms.noise.add_gaussian` (the
library's release path) with any :class:`~pmwcm.mechanisms.noise.NoiseSource`.

* Laplace, scale ``1/eps``: pure ``eps``-DP (Dwork, Roth 2014, Thm. 3.6);
  neighbours ``0`` and ``1``; the tails ``{out >= t}`` have likelihood ratio
  exactly ``e^eps`` for ``t >= 1``, so the audit is nearly tight.
* Gaussian, ``sigma = m``: ``(1/m)``-GDP (Dong, Roth, Su 2022, Thm. 2.7); the
  claim is the PLD accountant's epsilon of ``GaussianDpEvent(m)`` at ``delta``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np

from pmwcm.audit.auditor import AuditResult, Mechanism, audit, claimed_epsilon
from pmwcm.audit.events import Event, EventFamily, ThresholdFamily
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise, OpenDPNoise, add_gaussian, add_laplace

__all__ = [
    "AuditCase",
    "GaussianMechanism",
    "LaplaceMechanism",
    "gaussian_case",
    "laplace_case",
    "numpy_source",
    "opendp_source",
]

NoiseFor = Callable[[np.random.Generator], NoiseSource]


@dataclass(frozen=True, kw_only=True)
class AuditCase:
    """One mechanism under audit.

    Attributes:
        name: the row label.
        guarantee: the mechanism's stated guarantee, in words.
        mechanism: ``mechanism(dataset, trials, rng) -> outputs``.
        dataset0: ``D0``.
        dataset1: ``D1``, a worst-case neighbour of ``D0``.
        events: the event (or family searched on held-out trials).
        claimed_epsilon: the guarantee's epsilon at ``delta``.
        delta: the delta at which epsilon is bounded.
    """

    name: str
    guarantee: str
    mechanism: Mechanism
    dataset0: Any
    dataset1: Any
    events: Event | EventFamily
    claimed_epsilon: float
    delta: float = 0.0

    def run(
        self,
        *,
        trials: int,
        rng: np.random.Generator,
        alpha: float = 0.05,
        search_trials: int | None = None,
        batch_size: int = 100_000,
    ) -> AuditResult:
        """:func:`~pmwcm.audit.auditor.audit` of this case."""
        return audit(
            self.mechanism,
            self.dataset0,
            self.dataset1,
            events=self.events,
            trials=trials,
            rng=rng,
            claimed_epsilon=self.claimed_epsilon,
            delta=self.delta,
            alpha=alpha,
            search_trials=search_trials,
            batch_size=batch_size,
            name=self.name,
        )


def numpy_source(rng: np.random.Generator) -> NoiseSource:
    """A :class:`~pmwcm.mechanisms.noise.NumpyNoise` drawing from the audit's ``rng``."""
    return NumpyNoise(generator=rng)


def opendp_source() -> NoiseFor:
    """One shared :class:`~pmwcm.mechanisms.noise.OpenDPNoise` (CSPRNG; ignores the audit's rng)."""
    source = OpenDPNoise()
    return lambda rng: source


@dataclass(frozen=True, kw_only=True)
class LaplaceMechanism:
    """``x + Lap(scale)`` per trial, released with :func:`~pmwcm.mechanisms.noise.add_laplace`."""

    scale: float
    source: NoiseFor

    def __call__(self, x: float, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` releases of the scalar ``x``."""
        return add_laplace(np.full(trials, float(x)), self.scale, noise=self.source(rng))


@dataclass(frozen=True, kw_only=True)
class GaussianMechanism:
    """``x + N(0, sigma^2)`` per trial, released by :func:`~pmwcm.mechanisms.noise.add_gaussian`.

    (One draw per trial.)
    """

    sigma: float
    source: NoiseFor

    def __call__(self, x: float, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` releases of the scalar ``x``."""
        return add_gaussian(np.full(trials, float(x)), self.sigma, noise=self.source(rng))


def _output(outputs: Any) -> Any:
    return np.asarray(outputs, dtype=np.float64)


def laplace_case(source: NoiseFor, *, label: str, epsilon: float = 1.0) -> AuditCase:
    """The Laplace mechanism at ``epsilon`` on neighbours ``0`` and ``1``."""
    return AuditCase(
        name=f"Laplace mechanism ({label})",
        guarantee=f"pure {epsilon:g}-DP (scale 1/eps, sensitivity 1)",
        mechanism=LaplaceMechanism(scale=1.0 / epsilon, source=source),
        dataset0=0.0,
        dataset1=1.0,
        events=ThresholdFamily(statistic=_output, name="out"),
        claimed_epsilon=claimed_epsilon(dp_accounting.LaplaceDpEvent(1.0 / epsilon), delta=0.0),
    )


def gaussian_case(
    source: NoiseFor, *, label: str, multiplier: float = 1.0, delta: float = 1e-2
) -> AuditCase:
    """The Gaussian mechanism with ``sigma = multiplier`` on neighbours ``0`` and ``1``."""
    return AuditCase(
        name=f"Gaussian mechanism ({label})",
        guarantee=f"(1/{multiplier:g})-GDP; PLD epsilon at delta={delta:g}",
        mechanism=GaussianMechanism(sigma=multiplier, source=source),
        dataset0=0.0,
        dataset1=1.0,
        events=ThresholdFamily(statistic=_output, name="out"),
        claimed_epsilon=claimed_epsilon(dp_accounting.GaussianDpEvent(multiplier), delta=delta),
        delta=delta,
    )
