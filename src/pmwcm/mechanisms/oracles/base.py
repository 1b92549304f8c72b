"""The single-query oracle contract.

An oracle answers one CM query from the real data's marginal on the query's
clique, at a *noise level* ``m`` chosen by the engine's calibration. For the
Gaussian oracles ``m`` is the noise multiplier of a Gaussian mechanism with
sensitivity 1: one call is ``(1/m)``-GDP (Dong, Roth, Su 2022), i.e.
``rho = 1/(2 m^2)``-zCDP, and its privacy event is ``GaussianDpEvent(m)``.
Larger ``m`` is always more private, which is all the calibration needs.

Neighbouring datasets differ in one record (replace-one), so a mean of
per-record vectors bounded by ``G B`` in norm moves by at most ``2 G B / n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import dp_accounting
import numpy as np

from pmwcm.errors import Refused
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.mechanisms.noise import NoiseSource, add_gaussian
from pmwcm.mechanisms.oracles.strongly_convex import project_rows

#: The largest Gaussian ``sigma`` an oracle releases with (public; OpenDP's samplers
#: return infinities near the float64 limit). Beyond it :func:`release_in_ball`
#: returns the ``sigma -> infinity`` limit of its release, which reads no data.
MAX_NOISE_SCALE = 1e250


@dataclass(frozen=True, kw_only=True)
class OracleInput:
    """What an oracle may read: the query and the real data's clique marginal.

    Attributes:
        problem: the query on its clique.
        weights: the real data's marginal on ``problem.clique``, flattened, sum 1.
        n: number of records (public, as in the paper).
    """

    problem: ConvexProblem
    weights: FloatArray
    n: int

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be a positive number of records, got n={self.n}.")


class OracleRefused(Refused, ValueError):
    """The oracle cannot serve this query, decided from its public constants.

    :meth:`Oracle.check` raises it; the engine calls ``check`` before it reads the
    data or spends anything, so it is a refusal, never a failure after a debit.
    """


@runtime_checkable
class Oracle(Protocol):
    """A differentially private single-query CM solver ``M'``."""

    @property
    def name(self) -> str:
        """A short identifier recorded in outputs."""
        ...

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        """The worst-case privacy cost of one call at ``noise_level``."""
        ...

    def check(self, problem: ConvexProblem) -> None:
        """Raises :class:`OracleRefused` if it cannot serve ``problem`` (before any noise)."""
        ...

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        """A private estimate of ``argmin_{theta in Theta} L_D(theta)``."""
        ...


def check_noise_level(noise_level: float) -> None:
    """Rejects a non-positive or non-finite noise multiplier."""
    if not (math.isfinite(noise_level) and noise_level > 0):
        raise ValueError(f"noise_level must be positive and finite, got noise_level={noise_level}.")


def data_free_answer(dim: int, radius: float, noise: NoiseSource) -> FloatArray:
    """``R Z / ||Z||``, ``Z ~ N(0, I)``: the limit of ``Proj(v + sigma Z)`` as ``sigma -> inf``.

    It reads no data, so it is 0-DP: the answer of an oracle whose public
    constants call for more noise than float64 carries.
    """
    z = noise.gaussian(1.0, dim)
    norm = float(np.linalg.norm(z))
    if not norm > 0:
        return np.zeros(dim)
    return np.asarray(z * (radius / norm), dtype=np.float64)


def release_in_ball(
    values: FloatArray, sigma: float, *, radius: float, noise: NoiseSource
) -> FloatArray:
    """``Proj_Theta(values + N(0, sigma^2 I))``, by ``add_gaussian``; never raises.

    ``sigma`` is public: above :data:`MAX_NOISE_SCALE` (or not finite) the
    release is :func:`data_free_answer`, decided before ``values`` is read.
    """
    if not sigma <= MAX_NOISE_SCALE:
        return data_free_answer(values.size, radius, noise)
    # add_gaussian, not values + noise.gaussian(...): the float sum leaks (Mironov 2012).
    return project_rows(add_gaussian(values, sigma, noise=noise), radius)
