"""Auditing the private prior's measurement
(:func:`pmwcm.mechanisms.priors.marginals.measure_marginals`).

**The guarantee audited.** For cliques ``C_1..C_K`` the prior releases ``y =
(D_{C_1}, ..., D_{C_K}) + N(0, sigma^2 I)`` (one concatenated vector). Under
replace-one neighbours, one record moves mass ``1/n`` out of one cell of each
marginal and into another, so each marginal moves by ``sqrt(2) / n`` in L2 and
the concatenation by at most ``sqrt(2K) / n`` (:mod:`pmwcm.mechanisms.priors.marginals`'s
derivation). With ``sigma = m sqrt(2K) / n`` the release is the Gaussian
mechanism with noise multiplier ``m``, i.e. ``(1/m)``-GDP (Dwork, Roth 2014,
App. A; Dong, Roth, Su 2022, Thm. 2.7), and
:func:`pmwcm.mechanisms.priors.marginals.measurement_event`
charges ``GaussianDpEvent(m)``. The audit compares against that event's PLD
epsilon at ``delta``, as :func:`~pmwcm.audit.cases.gaussian_case` does.

**Worst-case neighbours** (:func:`complement_pair`). ``d`` binary attributes,
all ``K = d (d - 1) / 2`` pairs, ``n`` records; ``D1`` replaces one record by
its complement (every attribute flipped), so on every pair the marginal loses
``1/n`` in one cell and gains it in a *different* cell: the mean difference has
norm exactly ``sqrt(2K) / n``, the bound is attained and the audit can be tight.

**Events.** Between ``N(c0, sigma^2 I)`` and ``N(c1, sigma^2 I)`` the
likelihood ratio is monotone in ``<y, c1 - c0>``, so by Neyman-Pearson the
optimal tests are thresholds on the projection ``<y, v>``, ``v = (c1 - c0) /
||c1 - c0||`` (:class:`~pmwcm.audit.events.ThresholdFamily`). On the worst-case
pair the projection is a scalar Gaussian with shift ``1/m`` times its ``sigma``:
the scalar Gaussian mechanism of ``gaussian_case``.

**Vectorised trials** (:class:`MarginalsModel`). Everything data-dependent
comes from the *real* ``measure_marginals`` (or a stand-in with its signature):
one call with a recording zero-noise source (the tape of
:mod:`pmwcm.audit.oracles`) gives the noiseless released vector ``c`` and the ``sigma`` it drew
with; the trials are then ``c + rng.normal(0, sigma, (trials, |c|))``, draw for
draw what ``trials`` successive real calls with
``NumpyNoise(generator=rng)`` release (NumPy fills arrays sequentially).
:func:`crosscheck_prior` confirms that on identical generators.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import ThresholdFamily
from pmwcm.audit.oracles import _Tape
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.priors.marginals import (
    Measurement,
    measure_marginals,
    measurement_event,
    pairwise_cliques,
)
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "MarginalsModel",
    "MeasureFn",
    "complement_pair",
    "crosscheck_prior",
    "prior_case",
]

FloatArray = NDArray[np.float64]

MeasureFn = Callable[..., list[Measurement]]
"""``measure(data, cliques, *, noise_multiplier, noise)``, as :func:`measure_marginals`."""


def _released(measurements: Sequence[Measurement]) -> FloatArray:
    return np.concatenate([np.asarray(m.values, dtype=np.float64).ravel() for m in measurements])


@dataclass(frozen=True, kw_only=True)
class MarginalsModel:
    """``c_D + N(0, sigma^2 I)`` per trial, ``c_D`` and ``sigma`` probed from ``measure``.

    Attributes:
        cliques: the measured cliques.
        noise_multiplier: ``m``, passed to ``measure``.
        measure: the measurement under audit (default: the real one).
    """

    cliques: tuple[tuple[str, ...], ...]
    noise_multiplier: float
    measure: MeasureFn = measure_marginals

    def probe(self, data: PrivateData) -> tuple[FloatArray, float]:
        """The noiseless released vector and the Gaussian ``sigma`` drawn with.

        Raises:
            ValueError: if ``measure`` draws anything but one Gaussian vector.
        """
        tape = _Tape()
        out = self.measure(data, self.cliques, noise_multiplier=self.noise_multiplier, noise=tape)
        if [r[0] for r in tape.requests] != ["gaussian"]:
            raise ValueError(f"expected one Gaussian draw, measure asked for {tape.requests}.")
        return _released(out), tape.requests[0][1]

    def __call__(self, data: PrivateData, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` released vectors (rows) on ``data``."""
        center, sigma = self.probe(data)
        return center + rng.normal(0.0, sigma, (trials, center.size))


def crosscheck_prior(
    model: MarginalsModel, data: PrivateData, *, trials: int, rng: np.random.Generator
) -> float:
    """Largest ``|model - real measure|`` over ``trials`` releases from identical generators.

    The real ``model.measure`` is called ``trials`` times with one
    ``NumpyNoise(generator=g)``; the model once with a copy of ``g``.
    """
    seed = int(rng.integers(2**63))
    expected = model(data, trials, np.random.default_rng(seed))
    source: NoiseSource = NumpyNoise(generator=np.random.default_rng(seed))
    worst = 0.0
    for i in range(trials):
        real = model.measure(
            data, model.cliques, noise_multiplier=model.noise_multiplier, noise=source
        )
        worst = max(worst, float(np.max(np.abs(_released(real) - expected[i]))))
    return worst


def complement_pair(attributes: int = 4, n: int = 12) -> tuple[PrivateData, PrivateData]:
    """``(D0, D1)`` on ``attributes`` binary attributes: ``D1`` flips every bit of record 0.

    ``D0``'s records are the binary codes of ``0..n-1`` (cycling), so record 0 is
    all zeros and becomes all ones in ``D1``.
    """
    if attributes < 2 or n < 1:
        raise ValueError(f"need attributes >= 2 and n >= 1, got {attributes}, {n}.")
    domain = Domain.from_sizes({f"x{j}": 2 for j in range(attributes)})
    codes = np.arange(n) % (2**attributes)
    records = (codes[:, None] >> np.arange(attributes)[None, :]) & 1
    flipped = records.copy()
    flipped[0] = 1 - flipped[0]
    return PrivateData.from_records(domain, records), PrivateData.from_records(domain, flipped)


def prior_case(
    *,
    label: str = "prior marginals",
    multiplier: float = 1.0,
    delta: float = 1e-2,
    attributes: int = 4,
    n: int = 12,
    measure: MeasureFn = measure_marginals,
    order: int = 2,
    one_way: int = 0,
) -> AuditCase:
    """All ``order``-way marginals (pairs, or the triples the dense prior measures at
    high signal: :func:`~pmwcm.mechanisms.priors.marginals.prior_order`) of
    :func:`complement_pair` released by ``measure`` with ``m``; with ``one_way``, the
    last ``one_way`` attributes by their 1-ways and the pairs among the others (what
    :func:`~pmwcm.mechanisms.priors.marginals.noise_limited_pairs` measures where the
    noise swamps an attribute's pairs).

    The complement flips every attribute, so every clique of any order moves
    ``1/n`` between two different cells: the pair attains ``sqrt(2K) / n`` for the
    triples, the pairs and the 1-ways alike. The claim is the PLD epsilon of
    :func:`~pmwcm.mechanisms.priors.marginals.measurement_event` at ``delta``.
    """
    d0, d1 = complement_pair(attributes, n)
    if one_way:
        names = d0.domain.names
        kept = [p for p in pairwise_cliques(d0.domain) if not set(p) & set(names[-one_way:])]
        cliques = (*kept, *((a,) for a in names[-one_way:]))
    else:
        cliques = tuple(pairwise_cliques(d0.domain, order=order))
    model = MarginalsModel(cliques=cliques, noise_multiplier=multiplier, measure=measure)
    c0, c1 = model.probe(d0)[0], model.probe(d1)[0]
    gap = float(np.linalg.norm(c1 - c0))
    if not math.isclose(gap, math.sqrt(2 * len(cliques)) / n):
        raise AssertionError(f"not a worst-case pair: ||c1 - c0|| = {gap}.")
    direction = (c1 - c0) / gap
    event = measurement_event(multiplier)
    return AuditCase(
        name=f"{label} (K={len(cliques)}, n={n})",
        guarantee=f"{event}; PLD epsilon at delta={delta:g}",
        mechanism=model,
        dataset0=d0,
        dataset1=d1,
        events=ThresholdFamily(statistic=lambda o: np.asarray(o) @ direction, name="<y, v>"),
        claimed_epsilon=claimed_epsilon(event, delta=delta),
        delta=delta,
    )
