"""Auditing the paid prior on a weighted support
(:func:`pmwcm.mechanisms.priors.support.support_marginal_prior`) as a black box.

**The guarantee audited.** The support prior releases all 2-way marginals once
with :func:`~pmwcm.mechanisms.priors.marginals.measure_marginals` (the Gaussian
mechanism with noise multiplier ``m`` on a vector of replace-one sensitivity
``sqrt(2K) / n``: ``(1/m)``-GDP, Dwork, Roth 2014, App. A; Dong, Roth, Su 2022,
Thm. 2.7), then proposes ``size`` records from a Chow-Liu tree of the release
and fits their weights to it. Both steps read only the release and randomness
seeded from the noise source, so the whole prior is post-processing of one
``GaussianDpEvent(m)`` (Dwork, Roth 2014, Prop. 2.1) and claims exactly what
:func:`~pmwcm.mechanisms.priors.marginals.measurement_event` charges: the
audit compares against that event's PLD epsilon at ``delta``, as
:func:`~pmwcm.audit.prior.prior_case` does for the measurement alone.

**What is audited.** Nothing is modelled: each trial is one call of the real
``support_marginal_prior`` (measurement, proposal and fit, ~5 ms on the tiny
pair below with the shipped iteration rule) with ``NumpyNoise`` drawing from
the audit's generator, so it runs hundreds of trials where the vectorised
prior audit runs 10^5.

**Neighbours** (:func:`~pmwcm.audit.prior.complement_pair`). Four binary
attributes, ``n = 12``; ``D1`` replaces record 0 (all zeros) by its complement
(all ones). Every 2-way marginal moves (the measurement's worst case), and the
*cell* of the differing record is occupied in one dataset only: ``1111``
holds a record in ``D1`` and none in ``D0``, ``0000`` the reverse. A prior
whose support is built from the private records therefore puts zero mass on
``1111`` under ``D0`` and positive mass under ``D1`` -- an infinite privacy loss.

**Output** (:class:`SupportPriorMechanism`). Per trial the released
histogram over the 16 cells (``SupportHistogram.to_array``), then per cell
``1.0`` if some support record lies on it (a weight that underflows to zero
still marks its cell as held).

**Events** (:func:`support_family`): "the support holds cell ``1111``" and "the
support holds cell ``0000``" (each tried favouring either input), and
thresholds on the released mass of ``1111`` and on ``mass(1111) -
mass(0000)``, the released histogram projected on ``D1 - D0``.

**Negative controls** (:data:`BROKEN`): the PMW^Pub trap (Liu et al. 2021 take
*public* records as the support; taking the private ones publishes which cells
hold a record), :func:`private_support_prior`, which must be caught; and the
measurement at the add/remove ``sigma = m sqrt(K) / n``
(:func:`add_remove_support_prior`), a ``sqrt(2)`` calibration error that the
component audit (``tests/test_audit_prior.py``) catches at 10^5 vectorised
trials and this black-box audit, at hundreds of real ones, is not expected to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import EventFamily, FixedFamily, ThresholdFamily, combine
from pmwcm.audit.prior import complement_pair
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.priors.marginals import (
    PriorRelease,
    measure_marginals,
    measurement_event,
    pairwise_cliques,
)
from pmwcm.mechanisms.priors.support import (
    fit_support,
    support_iterations,
    support_marginal_prior,
)
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "BROKEN",
    "SupportPrior",
    "SupportPriorMechanism",
    "add_remove_support_prior",
    "differing_cells",
    "marginal_direction",
    "private_support_prior",
    "support_family",
    "support_prior_case",
]

FloatArray = NDArray[np.float64]

SupportPrior = Callable[..., PriorRelease[SupportHistogram]]
"""``prior(data, *, noise_multiplier, noise, size, iterations)``, as
:func:`~pmwcm.mechanisms.priors.support.support_marginal_prior`."""


@dataclass(frozen=True, kw_only=True)
class SupportPriorMechanism:
    """``mechanism(data, trials, rng)``: ``trials`` fresh support priors, one row each.

    Attributes:
        noise_multiplier: ``m``, passed to ``prior``.
        size: ``M``, the support's records.
        iterations: the fit's iterations (``None``: the shipped rule,
            :func:`~pmwcm.mechanisms.priors.support.support_iterations`).
        prior: the prior under audit (default: the real one).
    """

    noise_multiplier: float
    size: int = 200
    iterations: int | None = None
    prior: SupportPrior = support_marginal_prior

    def release(self, data: PrivateData, noise: NoiseSource) -> FloatArray:
        """One prior: its histogram over ``X``, then which cells its support holds."""
        h = self.prior(
            data,
            noise_multiplier=self.noise_multiplier,
            noise=noise,
            size=self.size,
            iterations=self.iterations,
        ).hypothesis
        held = np.zeros(data.domain.size)
        cells = np.ravel_multi_index(tuple(np.asarray(h.records, dtype=np.int64).T), h.domain.shape)
        held[cells] = 1.0
        return np.concatenate([h.to_array().ravel(), held])

    def __call__(self, data: PrivateData, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` independent priors on ``data`` (rows)."""
        noise = NumpyNoise(generator=rng)
        return np.array([self.release(data, noise) for _ in range(trials)])


def differing_cells(d0: PrivateData, d1: PrivateData) -> tuple[int, int]:
    """``(c0, c1)``: the flat cells occupied only in ``D0`` and only in ``D1``.

    Raises:
        ValueError: unless exactly one cell each is (a replace-one pair that
            moves a record to a cell ``D0`` leaves empty).
    """
    h0, h1 = d0.histogram().to_array().ravel(), d1.histogram().to_array().ravel()
    only0 = np.flatnonzero((h0 > 0) & (h1 == 0))
    only1 = np.flatnonzero((h1 > 0) & (h0 == 0))
    if only0.size != 1 or only1.size != 1:
        raise ValueError(f"need one cell occupied in each dataset only, got {only0}, {only1}.")
    return int(only0[0]), int(only1[0])


def marginal_direction(d0: PrivateData, d1: PrivateData) -> FloatArray:
    """``w`` over the cells of ``X`` with ``<Dhat, w> = <(Dhat_{C_k})_k, c1 - c0>``:
    the prior's 2-way marginals projected on the neighbours' marginal difference."""
    domain = d0.domain
    cells = np.indices(domain.shape).reshape(len(domain), -1)
    w = np.zeros(domain.size)
    for clique in pairwise_cliques(domain):
        diff = d1.marginal(clique) - d0.marginal(clique)
        w += diff[tuple(cells[a] for a in domain.axes(clique))]
    return w


def support_family(cells: int, c0: int, c1: int, direction: FloatArray) -> EventFamily:
    """Support membership of ``c0`` and ``c1``; thresholds on the mass of ``c1``, on
    ``mass(c1) - mass(c0)`` and on ``<Dhat, direction>`` (rows: ``cells`` masses, then
    ``cells`` held flags)."""

    def held(cell: int) -> Callable[[Any], NDArray[np.bool_]]:
        return lambda out: np.asarray(np.asarray(out)[:, cells + cell] > 0)

    def mass(out: Any) -> FloatArray:
        return np.asarray(np.asarray(out)[:, c1], dtype=np.float64)

    def shift(out: Any) -> FloatArray:
        o = np.asarray(out)
        return np.asarray(o[:, c1] - o[:, c0], dtype=np.float64)

    def project(out: Any) -> FloatArray:
        return np.asarray(np.asarray(out)[:, :cells] @ direction, dtype=np.float64)

    return combine(
        FixedFamily(
            events=(
                (f"support holds cell {c1}", held(c1)),
                (f"support holds cell {c0}", held(c0)),
            )
        ),
        ThresholdFamily(statistic=mass, name=f"mass({c1})"),
        ThresholdFamily(statistic=shift, name=f"mass({c1}) - mass({c0})"),
        ThresholdFamily(statistic=project, name="<Dhat 2-way marginals, c1 - c0>"),
    )


def support_prior_case(
    *,
    label: str = "support prior",
    multiplier: float = 1.0,
    delta: float = 1e-2,
    attributes: int = 4,
    n: int = 12,
    size: int = 200,
    iterations: int | None = None,
    prior: SupportPrior = support_marginal_prior,
) -> AuditCase:
    """``prior`` (measurement, proposal, fit) on :func:`~pmwcm.audit.prior.complement_pair`.

    The claim is the PLD epsilon of
    :func:`~pmwcm.mechanisms.priors.marginals.measurement_event` ``(multiplier)``
    at ``delta``: the proposal and the fit are post-processing.
    """
    d0, d1 = complement_pair(attributes, n)
    c0, c1 = differing_cells(d0, d1)
    mechanism = SupportPriorMechanism(
        noise_multiplier=multiplier, size=size, iterations=iterations, prior=prior
    )
    event = measurement_event(multiplier)
    return AuditCase(
        name=f"{label} (M={size}, K={len(pairwise_cliques(d0.domain))}, n={n})",
        guarantee=f"{event} (proposal and fit are post-processing); PLD epsilon at delta={delta:g}",
        mechanism=mechanism,
        dataset0=d0,
        dataset1=d1,
        events=support_family(d0.domain.size, c0, c1, marginal_direction(d0, d1)),
        claimed_epsilon=claimed_epsilon(event, delta=delta),
        delta=delta,
    )


# --- Negative controls: deliberately broken support priors the audit must flag. ---


def private_support_prior(
    data: PrivateData,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
    size: int,
    iterations: int | None = None,
) -> PriorRelease[SupportHistogram]:
    """Broken: the real release, fitted on a support of the PRIVATE records (PMW^Pub
    with private instead of public records; ``size`` ignored). The support itself
    publishes which cells hold a record, whatever the noise."""
    cliques = pairwise_cliques(data.domain)
    measured = measure_marginals(data, cliques, noise_multiplier=noise_multiplier, noise=noise)
    records = data.histogram().to_array()  # the private records' cells, by their counts
    start = SupportHistogram.full(data.domain, records)
    if iterations is None:
        iterations = support_iterations(start.size, len(cliques))
    return PriorRelease(fit_support(start, measured, iterations=iterations), tuple(measured))


def add_remove_support_prior(
    data: PrivateData,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
    size: int,
    iterations: int | None = None,
) -> PriorRelease[SupportHistogram]:
    """Broken: the support prior measured with the add/remove ``sigma = m sqrt(K) / n``
    (``m / sqrt(2)`` passed on), while ``measurement_event(m)`` is claimed."""
    return support_marginal_prior(
        data,
        noise_multiplier=noise_multiplier / math.sqrt(2),
        noise=noise,
        size=size,
        iterations=iterations,
    )


#: The negative controls by label.
BROKEN: dict[str, SupportPrior] = {
    "support of the private records": private_support_prior,
    "support prior at add/remove sigma": add_remove_support_prior,
}
