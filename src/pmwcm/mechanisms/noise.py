"""Pluggable random sources for every randomized part of the library.

Each mechanism takes a required keyword ``noise: NoiseSource`` and draws all of
its randomness from it, so that production runs and experiments differ only in
the object passed in (STYLE 6: randomness is passed in, never a hidden global).

* :class:`OpenDPNoise` (the default, :func:`default_noise`) samples Laplace and
  Gaussian noise with OpenDP's floating-point-safe samplers: the noise is drawn
  exactly from a discrete distribution on a fine lattice (discrete Laplace /
  discrete Gaussian, Canonne-Kamath-Steinke 2020), which avoids the
  least-significant-bit attack on textbook floating-point samplers
  (Mironov 2012). OpenDP seeds itself from the operating system's CSPRNG.
* :class:`NumpyNoise` wraps a seeded :class:`numpy.random.Generator` for
  reproducible experiments and tests; its ``name`` records the seed so the
  choice is visible in every output. It is *not* floating-point safe.

**Release noisy values with** :func:`add_laplace` / :func:`add_gaussian`, never
as ``value + noise.laplace(...)``. Noise drawn at zero and then added to a
data-dependent float in float64 rounds twice, and the low bits of the sum
reveal the value (the attack of Mironov 2012 survives an exact sampler): with
``y`` a correctly rounded Laplace draw, ``0.0 + y`` can be any float near 0,
while ``0.25 + y`` near 0 is a multiple of ``2^-55`` (Sterbenz cancellation).
The helpers hand the values to OpenDP, which adds the noise exactly and rounds
once; other sources fall back to the plain sum.

>>> noise = NumpyNoise(seed=3)
>>> noise.name
'numpy(seed=3)'
>>> noise.laplace(1.0, 3).shape, noise.laplace(0.0, 2).tolist()
((3,), [0.0, 0.0])
"""

from __future__ import annotations

import math
import operator
import secrets
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "NoiseSource",
    "NumpyNoise",
    "OpenDPNoise",
    "add_gaussian",
    "add_laplace",
    "default_noise",
]

FloatArray = NDArray[np.float64]


@runtime_checkable
class NoiseSource(Protocol):
    """A source of the noise every mechanism draws.

    All draws are float64 arrays of shape ``(size,)`` and centred at zero.
    ``scale == 0`` / ``sigma == 0`` returns zeros; a negative, infinite or NaN
    parameter raises :class:`ValueError` quoting the value.
    """

    @property
    def name(self) -> str:
        """A short description recorded in outputs, e.g. ``"opendp"``."""
        ...

    def laplace(self, scale: float, size: int) -> FloatArray:
        """``size`` i.i.d. draws from Laplace(0, ``scale``), density ``exp(-|z|/b)/(2b)``."""
        ...

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        """``size`` i.i.d. draws from N(0, ``sigma``^2)."""
        ...

    def uniform(self, size: int) -> FloatArray:
        """``size`` i.i.d. draws from Uniform[0, 1) (for sampling public records)."""
        ...


def _check_scale(param: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{param} must be finite and non-negative, got {param}={value}.")
    return value


def _check_size(size: int) -> int:
    try:
        size = operator.index(size)
    except TypeError:
        raise TypeError(f"size must be an integer, got size={size!r}.") from None
    if size < 0:
        raise ValueError(f"size must be non-negative, got size={size}.")
    return size


class NumpyNoise:
    """Noise from a seeded NumPy generator, for experiments and tests.

    Not floating-point safe (textbook inverse-CDF / Ziggurat samplers): use
    :class:`OpenDPNoise` for any release of real data.

    Args:
        seed: seed of a fresh ``numpy.random.default_rng(seed)``.
        generator: an existing generator to draw from (shared, not copied).
            Exactly one of ``seed`` and ``generator`` must be given.

    Raises:
        ValueError: if neither or both of ``seed`` and ``generator`` are given.
    """

    def __init__(
        self, *, seed: int | None = None, generator: np.random.Generator | None = None
    ) -> None:
        if (seed is None) == (generator is None):
            raise ValueError(
                "NumpyNoise needs exactly one of seed= or generator=, got "
                f"seed={seed!r}, generator={generator!r}."
            )
        if generator is None:
            self._rng = np.random.default_rng(seed)
            self._name = f"numpy(seed={seed})"
        else:
            self._rng = generator
            self._name = f"numpy(generator={type(generator.bit_generator).__name__})"

    @property
    def name(self) -> str:
        """``"numpy(seed=...)"`` or ``"numpy(generator=...)"``."""
        return self._name

    def laplace(self, scale: float, size: int) -> FloatArray:
        """Laplace(0, ``scale``) draws; see :class:`NoiseSource`."""
        scale, size = _check_scale("scale", scale), _check_size(size)
        if scale == 0.0:
            return np.zeros(size, dtype=np.float64)
        return self._rng.laplace(0.0, scale, size).astype(np.float64, copy=False)

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        """N(0, ``sigma``^2) draws; see :class:`NoiseSource`."""
        sigma, size = _check_scale("sigma", sigma), _check_size(size)
        if sigma == 0.0:
            return np.zeros(size, dtype=np.float64)
        return self._rng.normal(0.0, sigma, size).astype(np.float64, copy=False)

    def uniform(self, size: int) -> FloatArray:
        """Uniform[0, 1) draws; see :class:`NoiseSource`."""
        return self._rng.random(_check_size(size), dtype=np.float64)


class OpenDPNoise:
    """Floating-point-safe noise from OpenDP, seeded by the OS CSPRNG (the default).

    Laplace noise comes from ``opendp.measurements.make_laplace`` and Gaussian
    noise from ``make_gaussian`` on ``vector_domain(atom_domain(T=float))``:
    OpenDP samples the discrete Laplace / discrete Gaussian on the lattice
    ``2^k Z`` (exact rejection samplers of Canonne, Kamath and Steinke 2020,
    "The Discrete Gaussian for Differential Privacy", Sec. 5) and rounds the
    input onto the lattice, so the released floats carry no sampler artefacts.
    One measurement per ``(kind, scale)`` is built and cached (at most
    ``cache_size`` of them); each call draws a whole vector at once, because
    the per-call overhead is much larger than the per-coordinate cost.

    ``uniform`` draws come from a PCG64 generator seeded with 128 bits from
    :mod:`secrets` (the OS CSPRNG). PCG64 is not itself cryptographic; the
    uniform draws serve only to sample records from a *public* histogram
    (post-processing), where this does not matter.

    OpenDP is imported on first use, and ``dp.enable_features("contrib")`` --
    a process-wide OpenDP setting, required by ``make_laplace`` and
    ``make_gaussian`` -- is switched on then, not at import of this module.

    Args:
        cache_size: how many ``(kind, scale)`` measurements to keep.
    """

    def __init__(self, *, cache_size: int = 64) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, got cache_size={cache_size}.")
        self._cache_size = int(cache_size)
        self._cache: OrderedDict[tuple[str, float], Any] = OrderedDict()
        self._rng = np.random.default_rng(secrets.randbits(128))

    @property
    def name(self) -> str:
        """Always ``"opendp"``."""
        return "opendp"

    def _measurement(self, kind: str, scale: float) -> Any:
        key = (kind, scale)
        meas = self._cache.get(key)
        if meas is not None:
            self._cache.move_to_end(key)
            return meas
        import opendp.prelude as dp

        # Global OpenDP switch; enabled lazily here, never at import time.
        dp.enable_features("contrib")
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        if kind == "laplace":
            meas = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale)
        else:
            meas = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale)
        self._cache[key] = meas
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return meas

    def _draw(self, kind: str, scale: float, size: int) -> FloatArray:
        if scale == 0.0 or size == 0:
            return np.zeros(size, dtype=np.float64)
        out = self._measurement(kind, scale)([0.0] * size)
        return np.asarray(out, dtype=np.float64)

    def laplace(self, scale: float, size: int) -> FloatArray:
        """Laplace(0, ``scale``) draws; see :class:`NoiseSource`."""
        return self._draw("laplace", _check_scale("scale", scale), _check_size(size))

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        """N(0, ``sigma``^2) draws; see :class:`NoiseSource`."""
        return self._draw("gaussian", _check_scale("sigma", sigma), _check_size(size))

    def uniform(self, size: int) -> FloatArray:
        """Uniform[0, 1) draws from the CSPRNG-seeded generator."""
        return self._rng.random(_check_size(size), dtype=np.float64)

    def add(self, kind: str, values: FloatArray, scale: float) -> FloatArray:
        """``values`` plus ``kind`` noise, added exactly inside OpenDP and rounded once.

        OpenDP's default granularity ``2^-1074`` leaves every float input
        unrounded; the sum ``value + noise`` is formed exactly on that lattice
        and rounded to the nearest float, so the output's bits depend on the
        value only through the (private) noisy sum.
        """
        if kind not in ("laplace", "gaussian"):
            raise ValueError(f"kind must be 'laplace' or 'gaussian', got kind={kind!r}.")
        scale = _check_scale("scale", scale)
        arr = np.array(values, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("values must be finite to receive noise.")
        if scale == 0.0 or arr.size == 0:
            return arr
        out = self._measurement(kind, scale)(arr.ravel().tolist())
        return np.asarray(out, dtype=np.float64).reshape(arr.shape)


def _add(kind: str, values: ArrayLike, scale: float, noise: NoiseSource) -> FloatArray:
    if isinstance(noise, OpenDPNoise):
        return noise.add(kind, np.asarray(values, dtype=np.float64), scale)
    arr = np.array(values, dtype=np.float64)
    draw = noise.laplace if kind == "laplace" else noise.gaussian
    return arr + draw(scale, arr.size).reshape(arr.shape)


def add_laplace(values: ArrayLike, scale: float, *, noise: NoiseSource) -> FloatArray:
    """``values + Lap(scale)`` (i.i.d. per entry), floating-point safe with OpenDP.

    Use this, not ``values + noise.laplace(...)``, to release a noisy value
    (module docstring). With :class:`OpenDPNoise` the sum is exact and rounded
    once; any other source falls back to the float64 sum (not safe).

    >>> add_laplace([1.0, 2.0], 0.0, noise=NumpyNoise(seed=0)).tolist()
    [1.0, 2.0]
    """
    return _add("laplace", values, scale, noise)


def add_gaussian(values: ArrayLike, sigma: float, *, noise: NoiseSource) -> FloatArray:
    """``values + N(0, sigma^2)`` (i.i.d. per entry); see :func:`add_laplace`."""
    return _add("gaussian", values, sigma, noise)


def default_noise() -> NoiseSource:
    """The production default: a fresh :class:`OpenDPNoise`."""
    return OpenDPNoise()
