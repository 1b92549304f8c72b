"""A private starting hypothesis: noisy low-order marginals fitted into a histogram.

The paper starts from the uniform histogram. Every query on real data shares
its low-order structure (each attribute's frequency, each pair's correlation),
and the online algorithm's ``T`` updates are a poor way to learn it one query
at a time. So, as MST/AIM do (McKenna et al. 2021, 2022), we *measure* the
1- and 2-way marginals once with the Gaussian mechanism and fit a histogram to
them; the online engine then starts from that histogram and spends its updates
on what the marginals miss (DESIGN.md section 6, "a promising practical design").

**Measurement and its guarantee.** For cliques ``C_1..C_K`` we release
``y_k = D_{C_k} + N(0, sigma^2 I)``. Under replace-one, one record moves mass
``1/n`` from one cell of each marginal to another, so the concatenated vector
of all ``K`` marginals has L2 sensitivity ``sqrt(2K) / n``. With ``sigma = m
sqrt(2K) / n`` the release is one Gaussian mechanism with noise multiplier
``m`` (``(1/m)``-GDP): its event is ``GaussianDpEvent(m)``, charged to the
engine's ledger before any noise is drawn.

**Fitting (post-processing, free).** Entropic mirror descent on the simplex
minimising ``sum_k ||Dhat_{C_k} - y_k||^2 / 2``: ``log Dhat <- log Dhat - s
sum_k (Dhat_{C_k} - y_k)[x_{C_k}]``, normalised, with step ``s`` (as MWEM's
multiplicative-weights fit; Hardt, Ligett, McSherry 2012). It touches only the
released ``y_k``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import dp_accounting
import numpy as np

from pmwcm.domain import Domain
from pmwcm.histogram import DenseHistogram, FloatArray
from pmwcm.noise import NoiseSource, add_gaussian
from pmwcm.private_data import PrivateData


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """A released noisy marginal: ``values = D_C + N(0, sigma^2)`` on ``clique``."""

    clique: tuple[str, ...]
    values: FloatArray
    sigma: float


def pairwise_cliques(domain: Domain, *, order: int = 2) -> list[tuple[str, ...]]:
    """All cliques of ``order`` attributes (and, below them, nothing else: lower
    orders are implied by the higher ones' marginals)."""
    if not 1 <= order <= len(domain):
        raise ValueError(f"order must lie in [1, {len(domain)}], got order={order}.")
    return [tuple(c) for c in itertools.combinations(domain.names, order)]


def measurement_event(noise_multiplier: float) -> dp_accounting.DpEvent:
    """The privacy event of one :func:`measure_marginals` call."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ValueError(f"noise_multiplier must be positive, got {noise_multiplier}.")
    return dp_accounting.GaussianDpEvent(noise_multiplier)


def measure_marginals(
    data: PrivateData,
    cliques: Sequence[tuple[str, ...]],
    *,
    noise_multiplier: float,
    noise: NoiseSource,
) -> list[Measurement]:
    """Releases every clique's marginal with Gaussian noise (see the module docstring).

    The caller must have charged :func:`measurement_event` to its ledger first.
    """
    measurement_event(noise_multiplier)
    if not cliques:
        raise ValueError("measure_marginals needs at least one clique.")
    sigma = noise_multiplier * math.sqrt(2 * len(cliques)) / data.n
    tables = [data.marginal(c) for c in cliques]
    # add_gaussian, not table + noise.gaussian(...): the float sum leaks (Mironov 2012).
    noisy = add_gaussian(np.concatenate([t.ravel() for t in tables]), sigma, noise=noise)
    out, offset = [], 0
    for clique, table in zip(cliques, tables, strict=True):
        values = noisy[offset : offset + table.size].reshape(table.shape)
        offset += table.size
        out.append(Measurement(clique=tuple(clique), values=values, sigma=sigma))
    return out


def fit_histogram(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    iterations: int = 300,
    step: float = 1.0,
    start: DenseHistogram | None = None,
) -> DenseHistogram:
    """Entropic mirror descent onto the measurements (post-processing only).

    Each iteration takes one multiplicative step along all residuals at once; the
    step is halved whenever the squared error increases.
    """
    if iterations < 0:
        raise ValueError(f"iterations must be non-negative, got iterations={iterations}.")
    hist = start.copy() if start is not None else DenseHistogram.uniform(domain)

    def loss(h: DenseHistogram) -> tuple[float, list[FloatArray]]:
        resid = [h.marginal(m.clique) - m.values for m in measurements]
        return 0.5 * sum(float((r * r).sum()) for r in resid), resid

    current, resid = loss(hist)
    for _ in range(iterations):
        trial = hist.copy()
        for m, r in zip(measurements, resid, strict=True):
            trial.reweight(m.clique, -step * r)
        value, t_resid = loss(trial)
        if value <= current:
            hist, current, resid = trial, value, t_resid
            step *= 1.1
        else:
            step *= 0.5
            if step < 1e-8:
                break
    return hist


def marginal_prior(
    data: PrivateData,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
    cliques: Sequence[tuple[str, ...]] | None = None,
    iterations: int = 300,
) -> DenseHistogram:
    """Measure (default: all 2-way) marginals and fit a starting hypothesis.

    The caller charges ``measurement_event(noise_multiplier)`` first.
    """
    chosen = list(cliques) if cliques is not None else pairwise_cliques(data.domain)
    measured = measure_marginals(data, chosen, noise_multiplier=noise_multiplier, noise=noise)
    return fit_histogram(data.domain, measured, iterations=iterations)
