"""Scalar convex losses ``f(z, y)`` of the GLM catalogue (docs/design.md section 2).

Every catalogue query is a generalised linear model: ``l(theta; x) =
f(<theta, phi(x)>, y(x)) + (lambda/2) ||theta||^2``. This module holds the
one-dimensional part ``f``, its derivative in ``z`` (a subgradient where ``f``
is not differentiable), its second derivative where it exists, and the two
constants the privacy proofs use:

* ``derivative_bound(z_max)``: ``G >= sup |df/dz|`` over ``|z| <= z_max`` and
  every label in the loss's label range (``y in {-1, +1}`` for classification,
  ``y in [-1, 1]`` for regression). With ``||phi|| <= B`` and ``||theta|| <= R``
  the query sets ``z_max = R B``.
* ``smoothness``: ``sup |d^2 f / dz^2|`` (``None`` for the non-smooth ones).

Non-smooth losses expose :meth:`GLMLoss.moreau`, the Moreau envelope
``f_mu(z) = min_w f(w) + (z - w)^2 / (2 mu)``: it is ``(1/mu)``-smooth and
``0 <= f - f_mu <= mu G^2 / 2``, which lets the solver certify a gap on ``f``
by solving the smooth surrogate (Nesterov 2005, "Smooth minimization of
non-smooth functions", section 4).

Shapes: ``z`` and ``y`` broadcast together; results are float64 arrays.

>>> loss = LOSSES["logistic"]()
>>> float(loss.value(np.array(0.0), np.array(1.0)))  # log 2
0.6931471805599453
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

FloatArray = NDArray[np.float64]


class GLMLoss(ABC):
    """A convex loss ``f(z, y)`` of the linear prediction ``z = <theta, phi>``."""

    #: catalogue name, as used in query specs.
    name: str
    #: ``"binary"`` (labels in {-1, +1}) or ``"real"`` (labels in [-1, 1]).
    label_kind: str

    @abstractmethod
    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """``f(z, y)``."""

    @abstractmethod
    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """``df/dz`` (a subgradient at kinks)."""

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """``d^2 f / dz^2``; only for smooth losses.

        Raises:
            NotImplementedError: for non-smooth losses (use :meth:`moreau`).
        """
        raise NotImplementedError(f"The {self.name} loss is not twice differentiable.")

    @abstractmethod
    def derivative_bound(self, z_max: float) -> float:
        """``G``: a bound on ``|df/dz|`` over ``|z| <= z_max`` and all labels."""

    @property
    def smoothness(self) -> float | None:
        """Bound on ``d^2 f / dz^2``, or ``None`` if ``f`` is not smooth."""
        return None

    def moreau(self, mu: float) -> GLMLoss:
        """The ``(1/mu)``-smooth Moreau envelope; smooth losses return themselves."""
        return self


def _kinked(
    r: FloatArray, left_slope: float, right_slope: float, mu: float | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Value, slope and curvature of ``max(left r, right r)`` (a kink at 0).

    With ``mu`` set, returns its Moreau envelope instead: quadratic ``r^2/(2mu)``
    on ``[mu left, mu right]`` and the linear pieces shifted down outside it.
    """
    lin = np.maximum(left_slope * r, right_slope * r)
    if mu is None:
        slope = np.where(r > 0, right_slope, left_slope)
        return lin, slope.astype(np.float64), np.zeros_like(r)
    lo, hi = mu * left_slope, mu * right_slope
    inside = (r >= lo) & (r <= hi)
    value = np.where(
        inside,
        r * r / (2 * mu),
        np.where(
            r > hi,
            right_slope * r - mu * right_slope**2 / 2,
            left_slope * r - mu * left_slope**2 / 2,
        ),
    )
    slope = np.where(inside, r / mu, np.where(r > hi, right_slope, left_slope))
    curvature = np.where(inside, 1.0 / mu, 0.0)
    return value, slope.astype(np.float64), curvature


@dataclass(frozen=True)
class Logistic(GLMLoss):
    """``f(z, y) = log(1 + exp(-y z))``, ``y in {-1, +1}``; ``G = 1``, ``1/4``-smooth."""

    name = "logistic"
    label_kind = "binary"

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.logaddexp(0.0, -y * z)

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return -y * expit(-y * z)

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        p = expit(y * z)
        return p * (1.0 - p)

    def derivative_bound(self, z_max: float) -> float:
        return 1.0

    @property
    def smoothness(self) -> float:
        return 0.25


@dataclass(frozen=True)
class Squared(GLMLoss):
    """``f(z, y) = (z - y)^2 / 2``, ``y in [-1, 1]``; ``G = z_max + 1``, 1-smooth."""

    name = "squared"
    label_kind = "real"

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return 0.5 * (z - y) ** 2

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return z - y

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.ones(np.broadcast(z, y).shape)

    def derivative_bound(self, z_max: float) -> float:
        return z_max + 1.0

    @property
    def smoothness(self) -> float:
        return 1.0


@dataclass(frozen=True)
class Huber(GLMLoss):
    """Huber loss of ``r = z - y``: ``r^2/2`` for ``|r| <= h``, else ``h |r| - h^2/2``.

    ``G = min(h, z_max + 1)``, 1-smooth. ``y in [-1, 1]``.
    """

    delta: float = 1.0
    name = "huber"
    label_kind = "real"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.delta) and self.delta > 0):
            raise ValueError(f"huber delta must be positive and finite, got delta={self.delta}.")

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        r = np.abs(z - y)
        h = self.delta
        return np.where(r <= h, 0.5 * r * r, h * r - 0.5 * h * h)

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.clip(z - y, -self.delta, self.delta)

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return (np.abs(z - y) <= self.delta).astype(np.float64)

    def derivative_bound(self, z_max: float) -> float:
        return min(self.delta, z_max + 1.0)

    @property
    def smoothness(self) -> float:
        return 1.0


@dataclass(frozen=True)
class SmoothedHinge(GLMLoss):
    """Quadratically smoothed hinge of the margin ``m = y z`` (the smooth SVM loss).

    ``0`` for ``m >= 1``; ``(1 - m)^2 / (2 gamma)`` for ``1 - gamma < m < 1``;
    ``1 - m - gamma/2`` otherwise. ``G = 1``, ``(1/gamma)``-smooth; it is the
    Moreau envelope of the hinge, so ``0 <= hinge - smoothed <= gamma / 2``.
    """

    gamma: float = 1.0
    name = "smoothed_hinge"
    label_kind = "binary"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(
                f"smoothed_hinge gamma must be positive and finite, got gamma={self.gamma}."
            )

    def _parts(self, z: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        return _kinked(1.0 - y * z, 0.0, 1.0, self.gamma)

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return self._parts(z, y)[0]

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return -y * self._parts(z, y)[1]

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return self._parts(z, y)[2] * y * y

    def derivative_bound(self, z_max: float) -> float:
        return 1.0

    @property
    def smoothness(self) -> float:
        return 1.0 / self.gamma


@dataclass(frozen=True)
class Hinge(GLMLoss):
    """``f(z, y) = max(0, 1 - y z)``, ``y in {-1, +1}``; ``G = 1``, not smooth."""

    name = "hinge"
    label_kind = "binary"

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.maximum(0.0, 1.0 - y * z)

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.where(y * z < 1.0, -y, 0.0)

    def derivative_bound(self, z_max: float) -> float:
        return 1.0

    def moreau(self, mu: float) -> GLMLoss:
        return SmoothedHinge(gamma=mu)


@dataclass(frozen=True)
class Quantile(GLMLoss):
    """Pinball loss of ``r = y - z``: ``max(tau r, (tau - 1) r)``, ``y in [-1, 1]``.

    ``G = max(tau, 1 - tau)``, not smooth. ``tau = 1/2`` is half the absolute loss.
    """

    tau: float = 0.5
    name = "quantile"
    label_kind = "real"
    _mu: float | None = None

    def __post_init__(self) -> None:
        if not (0.0 < self.tau < 1.0):
            raise ValueError(f"quantile tau must lie in (0, 1), got tau={self.tau}.")

    def _parts(self, z: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        return _kinked(np.asarray(y - z, dtype=np.float64), self.tau - 1.0, self.tau, self._mu)

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return self._parts(z, y)[0]

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return -self._parts(z, y)[1]

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        if self._mu is None:
            return super().second_derivative(z, y)
        return self._parts(z, y)[2]

    def derivative_bound(self, z_max: float) -> float:
        return max(self.tau, 1.0 - self.tau)

    @property
    def smoothness(self) -> float | None:
        return None if self._mu is None else 1.0 / self._mu

    def moreau(self, mu: float) -> GLMLoss:
        return Quantile(tau=self.tau, _mu=mu)


@dataclass(frozen=True)
class Absolute(GLMLoss):
    """``f(z, y) = |z - y|``, ``y in [-1, 1]``; ``G = 1``, not smooth (LAD regression)."""

    name = "absolute"
    label_kind = "real"
    _mu: float | None = None

    def _parts(self, z: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        return _kinked(np.asarray(z - y, dtype=np.float64), -1.0, 1.0, self._mu)

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return self._parts(z, y)[0]

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return self._parts(z, y)[1]

    def second_derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        if self._mu is None:
            return super().second_derivative(z, y)
        return self._parts(z, y)[2]

    def derivative_bound(self, z_max: float) -> float:
        return 1.0

    @property
    def smoothness(self) -> float | None:
        return None if self._mu is None else 1.0 / self._mu

    def moreau(self, mu: float) -> GLMLoss:
        return Absolute(_mu=mu)


def _make(cls: type[GLMLoss], param: str | None) -> Callable[..., GLMLoss]:
    def build(loss_param: float | None = None) -> GLMLoss:
        if loss_param is None:
            return cls()
        if param is None:
            raise ValueError(
                f"The {cls.name} loss takes no parameter, got loss_param={loss_param}."
            )
        return cls(**{param: float(loss_param)})

    build.__doc__ = f"Builds the {cls.name} loss" + (f" (loss_param = {param})." if param else ".")
    return build


#: The parametrised losses' parameter (the field ``loss_param`` sets).
LOSS_PARAMETERS: dict[str, str] = {"huber": "delta", "smoothed_hinge": "gamma", "quantile": "tau"}

#: The catalogue: name -> constructor taking the optional ``loss_param``
#: (Huber ``delta``, smoothed-hinge ``gamma``, quantile ``tau``).
LOSSES: dict[str, Callable[..., GLMLoss]] = {
    cls.name: _make(cls, LOSS_PARAMETERS.get(cls.name))
    for cls in (Logistic, Squared, Huber, SmoothedHinge, Hinge, Quantile, Absolute)
}


def resolved_loss_param(name: str, loss_param: float | None) -> float | None:
    """The parameter the loss ``name`` is built with: ``loss_param`` or its default.

    ``None`` for losses without a parameter. Two specs with the same resolved
    parameter are the same loss (``huber`` and ``huber`` with ``loss_param=1.0``).

    >>> resolved_loss_param("huber", None), resolved_loss_param("logistic", None)
    (1.0, None)
    """
    param = LOSS_PARAMETERS.get(name)
    if param is None:
        return None
    return float(getattr(make_loss(name, loss_param), param))


def make_loss(name: str, loss_param: float | None = None) -> GLMLoss:
    """The catalogue loss ``name`` with its optional parameter.

    Raises:
        ValueError: for an unknown name (the message lists the catalogue) or a bad parameter.
    """
    try:
        build = LOSSES[name]
    except KeyError:
        raise ValueError(f"Unknown loss {name!r}; the catalogue has {sorted(LOSSES)}.") from None
    return build(loss_param)
