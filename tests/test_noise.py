"""Contract tests for the noise sources.

Statistical checks reject at p < 1e-9: a Kolmogorov-Smirnov test of the shape
and an exact test of the scale (``sum |X|/b ~ Gamma(n)`` for Laplace,
``sum X^2/sigma^2 ~ chi2(n)`` for Gaussian). Under a correct sampler each
p-value is uniform, so each check fails falsely with probability 1e-9 (OpenDP
cannot be seeded, so its checks are random; NumPy's use the ``seed`` fixture
and are deterministic for a given seed; all pass for seeds 0..99). A sampler
whose scale is off by 10% fails the scale test: see
``test_scale_check_has_power``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise, OpenDPNoise, default_noise

P_REJECT = 1e-9
N_DRAWS = 20_000


def laplace_scale_pvalue(x: np.ndarray, scale: float) -> float:
    """Two-sided p-value of ``sum |x| / scale ~ Gamma(len(x))``."""
    g = stats.gamma(len(x))
    t = float(np.abs(x).sum() / scale)
    return float(2 * min(g.cdf(t), g.sf(t)))


def gaussian_scale_pvalue(x: np.ndarray, sigma: float) -> float:
    """Two-sided p-value of ``sum x^2 / sigma^2 ~ chi2(len(x))``."""
    c = stats.chi2(len(x))
    t = float(np.square(x).sum() / sigma**2)
    return float(2 * min(c.cdf(t), c.sf(t)))


@pytest.fixture(params=["numpy", "opendp"])
def source(request: pytest.FixtureRequest, seed: int) -> NoiseSource:
    return NumpyNoise(seed=seed) if request.param == "numpy" else OpenDPNoise()


def test_sources_satisfy_protocol(source: NoiseSource) -> None:
    assert isinstance(source, NoiseSource)
    assert isinstance(source.name, str) and source.name


def test_default_is_opendp() -> None:
    noise = default_noise()
    assert isinstance(noise, OpenDPNoise)
    assert noise.name == "opendp"


@pytest.mark.parametrize("method", ["laplace", "gaussian"])
def test_shape_dtype_and_zero_scale(source: NoiseSource, method: str) -> None:
    draw = getattr(source, method)
    x = draw(1.5, 7)
    assert x.shape == (7,) and x.dtype == np.float64
    assert np.all(np.isfinite(x))
    assert draw(0.0, 3).tolist() == [0.0, 0.0, 0.0]
    assert draw(2.0, 0).shape == (0,)


@pytest.mark.parametrize("method", ["laplace", "gaussian"])
@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_bad_scale_is_refused_with_the_value(source: NoiseSource, method: str, bad: float) -> None:
    with pytest.raises(ValueError, match=re.escape(f"={bad}")):
        getattr(source, method)(bad, 3)


def test_bad_size_is_refused(source: NoiseSource) -> None:
    with pytest.raises(ValueError, match="size=-1"):
        source.laplace(1.0, -1)
    with pytest.raises(TypeError, match=re.escape("size=2.5")):
        source.uniform(2.5)  # type: ignore[arg-type]


def test_uniform_in_unit_interval(source: NoiseSource) -> None:
    u = source.uniform(N_DRAWS)
    assert u.dtype == np.float64 and u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > P_REJECT


def test_laplace_distribution(source: NoiseSource) -> None:
    scale = 2.5
    x = source.laplace(scale, N_DRAWS)
    assert stats.kstest(x, "laplace", args=(0.0, scale)).pvalue > P_REJECT
    assert laplace_scale_pvalue(x, scale) > P_REJECT


def test_gaussian_distribution(source: NoiseSource) -> None:
    sigma = 0.3
    x = source.gaussian(sigma, N_DRAWS)
    assert stats.kstest(x, "norm", args=(0.0, sigma)).pvalue > P_REJECT
    assert gaussian_scale_pvalue(x, sigma) > P_REJECT


def test_scale_check_has_power(seed: int) -> None:
    noise = NumpyNoise(seed=seed)
    x, z = noise.laplace(2.5, N_DRAWS), noise.gaussian(0.3, N_DRAWS)
    for wrong in (1.1, 1 / 1.1):
        assert laplace_scale_pvalue(x, 2.5 * wrong) < P_REJECT
        assert gaussian_scale_pvalue(z, 0.3 * wrong) < P_REJECT


def test_numpy_seed_reproducible_and_named() -> None:
    a, b = NumpyNoise(seed=7), NumpyNoise(seed=7)
    assert np.array_equal(a.laplace(1.0, 5), b.laplace(1.0, 5))
    assert np.array_equal(a.gaussian(1.0, 5), b.gaussian(1.0, 5))
    assert a.name == "numpy(seed=7)"
    shared = NumpyNoise(generator=np.random.default_rng(1))
    assert shared.name == "numpy(generator=PCG64)"


def test_numpy_needs_exactly_one_seed_or_generator() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        NumpyNoise()
    with pytest.raises(ValueError, match="exactly one"):
        NumpyNoise(seed=1, generator=np.random.default_rng(1))


def test_opendp_caches_one_measurement_per_scale() -> None:
    noise = OpenDPNoise(cache_size=2)
    noise.laplace(1.0, 2)
    noise.laplace(1.0, 3)
    noise.gaussian(1.0, 2)
    assert len(noise._cache) == 2
    noise.laplace(3.0, 1)
    assert len(noise._cache) == 2
    assert ("laplace", 3.0) in noise._cache and ("laplace", 1.0) not in noise._cache
    with pytest.raises(ValueError, match="cache_size=0"):
        OpenDPNoise(cache_size=0)
