"""Auditing the measured update's release
(:func:`pmwcm.mechanisms.marginal_measurement.measure_clique`, issue 35).

**The guarantee audited.** One clique's normalised marginal is released as
``y = D_C + N(0, sigma^2 I)`` with ``sigma = m sqrt(2) / n``: under replace-one
neighbours one record moves mass ``1/n`` from one cell to another, so the L2
sensitivity is ``sqrt(2) / n`` and the release is the Gaussian mechanism with
noise multiplier ``m``, ``(1/m)``-GDP, charged as ``GaussianDpEvent(m)``
(:func:`~pmwcm.mechanisms.marginal_measurement.clique_measurement_event`). The
audit compares against that event's PLD epsilon at ``delta``.

**Worst-case neighbours.** :func:`~pmwcm.audit.prior.complement_pair` on ``d``
binary attributes with the clique of all ``d``: the replaced record is all
zeros in ``D0`` and all ones in ``D1``, so the marginal loses ``1/n`` in one
cell and gains it in another, the bound ``sqrt(2) / n`` is attained.

**Trials** reuse :class:`~pmwcm.audit.prior.MarginalsModel` (the real release
probed once with a recording zero-noise source, then vectorised draws), with
the clique release wrapped in the prior's measurement signature; events are
thresholds on the projection onto the mean difference (Neyman-Pearson for two
Gaussians of equal covariance).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import ThresholdFamily
from pmwcm.audit.prior import MarginalsModel, complement_pair
from pmwcm.mechanisms.marginal_measurement import clique_measurement_event, measure_clique
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData

__all__ = ["CliqueMeasureFn", "as_marginals_measure", "clique_measurement_case"]

CliqueMeasureFn = Callable[..., Measurement]
"""``measure(data, clique, *, noise_multiplier, noise)``, as :func:`measure_clique`."""


def as_marginals_measure(measure: CliqueMeasureFn) -> Callable[..., list[Measurement]]:
    """``measure`` in the prior's signature (one clique), for :class:`MarginalsModel`."""

    def measured(
        data: PrivateData,
        cliques: Sequence[tuple[str, ...]],
        *,
        noise_multiplier: float,
        noise: NoiseSource,
    ) -> list[Measurement]:
        if len(cliques) != 1:
            raise ValueError(f"a clique measurement takes one clique, got {len(cliques)}.")
        return [measure(data, cliques[0], noise_multiplier=noise_multiplier, noise=noise)]

    return measured


def clique_measurement_case(
    *,
    label: str = "clique measurement",
    multiplier: float = 1.0,
    delta: float = 1e-2,
    attributes: int = 3,
    n: int = 12,
    measure: CliqueMeasureFn = measure_clique,
) -> AuditCase:
    """The all-attribute clique of :func:`complement_pair` released by ``measure`` at ``m``.

    Raises:
        AssertionError: the pair does not attain the sensitivity ``sqrt(2) / n``.
    """
    d0, d1 = complement_pair(attributes, n)
    clique = tuple(d0.domain.names)
    model = MarginalsModel(
        cliques=(clique,), noise_multiplier=multiplier, measure=as_marginals_measure(measure)
    )
    c0, c1 = model.probe(d0)[0], model.probe(d1)[0]
    gap = float(np.linalg.norm(c1 - c0))
    if not math.isclose(gap, math.sqrt(2.0) / n):
        raise AssertionError(f"not a worst-case pair: ||c1 - c0|| = {gap}.")
    direction = (c1 - c0) / gap
    event = clique_measurement_event(multiplier)

    def projection(outputs: Any) -> Any:
        return np.asarray(outputs) @ direction

    return AuditCase(
        name=f"{label} (|C|={len(clique)}, n={n})",
        guarantee=f"{event}; PLD epsilon at delta={delta:g}",
        mechanism=model,
        dataset0=d0,
        dataset1=d1,
        events=ThresholdFamily(statistic=projection, name="<y, v>"),
        claimed_epsilon=claimed_epsilon(event, delta=delta),
        delta=delta,
    )
