"""One clique's marginal, measured with the Gaussian mechanism (the measured update, issue 35).

When the engine's sparse vector flags a query on clique ``C`` (target and
features), the query depends on the data only through the normalised marginal
``D_C``. The measured update (:mod:`pmwcm.engine.measured_update`) releases

    y = D_C + N(0, sigma^2 I),      sigma = m sqrt(2) / n,

and refits the hypothesis to it and to every earlier measurement.

**Guarantee.** Under replace-one neighbours one record moves mass ``1 / n`` out
of one cell of ``D_C`` and into another (or into the same one), so
``||D_C - D'_C||_2 <= sqrt(2) / n``. With ``sigma = m sqrt(2) / n`` the release
is the Gaussian mechanism with noise multiplier ``m``, i.e. ``(1/m)``-GDP
(Dong, Roth, Su 2022, Thm. 2.7; Dwork, Roth 2014, App. A): its event is
``GaussianDpEvent(m)`` (:func:`clique_measurement_event`), which the caller
charges to its ledger **before** :func:`measure_table` draws any noise. The
noise is added by :func:`~pmwcm.mechanisms.noise.add_gaussian` with the
engine's :class:`~pmwcm.mechanisms.noise.NoiseSource` (OpenDP's samplers outside
tests). This is the prior's measurement
(:func:`~pmwcm.mechanisms.priors.marginals.measure_marginals`) with ``K = 1``.

**What a measurement certifies** (:func:`excess_risk_certificate`). For a CM
query of scale ``S`` (one record moves its loss by at most ``S / n``, so each
cell's loss ``l_c(theta)`` varies over ``[a, a + S]`` for every ``theta`` in the
ball) and any ``P`` with clique marginal ``P_C``::

    |L_D(theta) - L_P(theta)| = |sum_c (D_C - P_C)(c) (l_c(theta) - a - S/2)|
                              <= S ||D_C - P_C||_1 / 2

(the differences sum to zero, so the constant ``a + S/2`` can be subtracted),
hence ``theta_P = argmin L_P`` has excess risk on the data
``L_D(theta_P) - min L_D <= S ||D_C - P_C||_1`` (twice the uniform gap). With
``||D_C - P_C||_1 <= ||y - P_C||_1 + ||y - D_C||_1``, the first term public and
the second the L1 norm of ``N(0, sigma^2 I_m)``: it is ``sqrt(m)``-Lipschitz in
the Gaussian vector, with mean at most ``sigma m sqrt(2 / pi)``, so by Gaussian
concentration (Boucheron, Lugosi, Massart 2013, Thm. 5.6) it exceeds
``sigma (m sqrt(2/pi) + sqrt(2 m ln(1/beta)))`` with probability at most
``beta``. So with probability ``>= 1 - beta`` over the measurement's noise::

    L_D(theta_P) - min L_D <= S (||y - P_C||_1 + sigma (m sqrt(2/pi) + sqrt(2 m ln(1/beta))))

plus the hypothesis solve's own gap. Every term on the right is public.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np

from pmwcm.kernels.histogram import FloatArray
from pmwcm.mechanisms.noise import NoiseSource, add_gaussian
from pmwcm.mechanisms.priors.marginals import Measurement, measurement_event
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "clique_measurement_event",
    "clique_sigma",
    "excess_risk_certificate",
    "gaussian_l1_bound",
    "measure_clique",
    "measure_table",
]


def clique_measurement_event(noise_multiplier: float) -> dp_accounting.DpEvent:
    """``GaussianDpEvent(m)``: the cost of one :func:`measure_table` at multiplier ``m``."""
    return measurement_event(noise_multiplier)


def clique_sigma(noise_multiplier: float, n: int) -> float:
    """``sigma = m sqrt(2) / n``: the replace-one L2 sensitivity of one normalised
    marginal times the noise multiplier.

    >>> round(clique_sigma(1.0, 100), 6)
    0.014142
    """
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be a positive integer, got n={n!r}.")
    measurement_event(noise_multiplier)  # validates the multiplier
    return noise_multiplier * math.sqrt(2.0) / n


def measure_table(
    table: FloatArray,
    clique: tuple[str, ...],
    *,
    n: int,
    noise_multiplier: float,
    noise: NoiseSource,
) -> Measurement:
    """``table + N(0, sigma^2 I)`` with ``sigma = m sqrt(2) / n`` (module docstring).

    ``table`` is the data's normalised marginal on ``clique`` (dense). The caller
    must have charged :func:`clique_measurement_event` first. The shape of the
    draw is the clique's (public), so nothing here branches on the data.
    """
    sigma = clique_sigma(noise_multiplier, n)
    values = np.asarray(table, dtype=np.float64)
    # add_gaussian, not table + noise.gaussian(...): the float sum leaks (Mironov 2012).
    noisy = add_gaussian(values.ravel(), sigma, noise=noise).reshape(values.shape)
    return Measurement(clique=tuple(clique), values=noisy, sigma=sigma)


def measure_clique(
    data: PrivateData,
    clique: tuple[str, ...],
    *,
    noise_multiplier: float,
    noise: NoiseSource,
) -> Measurement:
    """:func:`measure_table` of ``data``'s marginal on ``clique`` (the audited release)."""
    return measure_table(
        data.marginal(clique), clique, n=data.n, noise_multiplier=noise_multiplier, noise=noise
    )


def gaussian_l1_bound(sigma: float, cells: int, *, beta: float) -> float:
    """A ``1 - beta`` upper bound on ``||N(0, sigma^2 I_cells)||_1`` (module docstring).

    >>> round(gaussian_l1_bound(1.0, 1, beta=0.05), 3)
    3.246
    """
    if not 0 < beta < 1:
        raise ValueError(f"beta must lie in (0, 1), got beta={beta}.")
    if not (isinstance(cells, int) and cells >= 1):
        raise ValueError(f"cells must be a positive integer, got cells={cells!r}.")
    mean = cells * math.sqrt(2.0 / math.pi)
    return sigma * (mean + math.sqrt(2.0 * cells * math.log(1.0 / beta)))


def excess_risk_certificate(
    *, scale: float, measurement: Measurement, fitted: FloatArray, beta: float
) -> float:
    """The excess risk the fitted hypothesis's answer is certified not to exceed, with
    probability ``>= 1 - beta`` over the measurement's noise (module docstring):
    ``S (||y - P_C||_1 + gaussian_l1_bound(sigma, m, beta))``. Public values only."""
    residual = float(np.abs(np.asarray(fitted) - measurement.values).sum())
    cells = int(np.size(measurement.values))
    return scale * (residual + gaussian_l1_bound(measurement.sigma, cells, beta=beta))
