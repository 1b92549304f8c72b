"""Contract tests for the dense histogram: marginals, MW reweighting, sampling.

Marginals and reweights are compared with brute force over every cell of
small random domains (hypothesis, derandomized so runs are reproducible). The
sampler is checked by a chi-square goodness-of-fit test at level 1e-6.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.typing import NDArray
from scipy import stats

from pmwcm.kernels.clique_scale import broadcast_factor
from pmwcm.kernels.dense_marginal import _marginal_by_passes, _one_pass_marginal, dense_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram

FloatArray = NDArray[np.float64]

SETTINGS = settings(derandomize=True, deadline=None, max_examples=200)
P_REJECT = 1e-6  # chi-square level: a correct sampler fails with this probability per seed


def names(m: int) -> list[str]:
    return [f"a{i}" for i in range(m)]


def domain_of(shape: tuple[int, ...]) -> Domain:
    return Domain.from_sizes(dict(zip(names(len(shape)), shape, strict=True)))


def clique_codes(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[NDArray[np.intp], ...]:
    """For every cell ``x`` (C order), its codes ``x_a`` on each clique axis ``a``."""
    grid = np.indices(shape).reshape(len(shape), -1)
    return tuple(grid[a] for a in axes)


def brute_marginal(values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """The marginal by scattering every cell's ``D(x)`` into ``out[x_axes]`` (np.add.at)."""
    if not axes:  # the empty clique: its one cell holds the total mass
        return np.array(math.fsum(values.ravel()))
    out = np.zeros([values.shape[a] for a in axes])
    np.add.at(out, clique_codes(values.shape, axes), values.ravel())
    return out


def brute_reweight(values: FloatArray, axes: tuple[int, ...], log_factor: FloatArray) -> FloatArray:
    """``D(x) exp(f[x_C]) / Z`` cell by cell, in log space shifted by the max on the support."""
    flat = values.ravel()
    logs = np.full(flat.shape, -np.inf)
    f = log_factor[clique_codes(values.shape, axes)] if axes else np.full(flat.size, log_factor)
    pos = flat > 0
    logs[pos] = np.log(flat[pos]) + f[pos]
    out = np.exp(logs - logs.max())
    return (out / out.sum()).reshape(values.shape)


@st.composite
def histograms(draw: st.DrawFn, max_axes: int = 5, max_size: int = 4) -> FloatArray:
    """A non-negative array with positive total, some cells zero, any shape up to 4^5."""
    shape = tuple(
        draw(st.lists(st.integers(1, max_size), min_size=1, max_size=max_axes)),
    )
    values = draw(
        hnp.arrays(
            np.float64,
            shape,
            elements=st.one_of(st.just(0.0), st.floats(1e-6, 1.0)),
        )
    )
    values.flat[draw(st.integers(0, values.size - 1))] += 1.0
    return values


@st.composite
def cliques(draw: st.DrawFn, ndim: int) -> tuple[int, ...]:
    """Distinct axes in any order, possibly none."""
    perm = draw(st.permutations(range(ndim)))
    return tuple(perm[: draw(st.integers(0, ndim))])


@st.composite
def factors(draw: st.DrawFn, shape: tuple[int, ...], bound: float) -> FloatArray:
    return draw(hnp.arrays(np.float64, shape, elements=st.floats(-bound, bound)))


@SETTINGS
@given(data=st.data(), values=histograms())
def test_marginal_matches_brute_force(data: st.DataObject, values: FloatArray) -> None:
    axes = data.draw(cliques(values.ndim))
    expected = brute_marginal(values, axes)
    got = dense_marginal(values, axes)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15 * values.sum())
    h = DenseHistogram(domain_of(values.shape), values)
    attrs = [f"a{a}" for a in axes]
    np.testing.assert_allclose(h.marginal(attrs), expected / values.sum(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((2,) * 10, (0, 1, 2, 3, 4, 5, 6, 9)),  # kept run before the dropped one is > 64
        ((2,) * 10, (0, 9)),  # pre <= 64: per-block gemv
        ((2,) * 10, (9, 8)),  # leading dropped run (pre = 1), reversed order
        ((2,) * 10, (0, 1)),  # trailing dropped run (post = 1)
        ((2,) * 10, (7, 1, 4)),  # spread: several dropped runs
        ((2,) * 10, ()),  # everything dropped
        ((2,) * 10, tuple(range(9, -1, -1))),  # nothing dropped, axes reversed
        ((3, 4, 2, 5, 3), (4, 1)),
        ((3, 4, 2, 5, 3), (2, 0, 3)),
        ((5, 1, 3, 1, 4), (1, 3)),
        ((130, 2, 3), (0, 2)),  # pre = 130 > 64 with sizes > 2
    ],
)
@pytest.mark.parametrize("method", [_marginal_by_passes, _one_pass_marginal, dense_marginal])
def test_marginal_kernel_branches_match_brute_force(
    shape: tuple[int, ...], axes: tuple[int, ...], method: Callable[..., FloatArray], seed: int
) -> None:
    """Both kernels, whichever of them ``dense_marginal`` takes at this size."""
    values = np.random.default_rng(seed).random(shape)
    np.testing.assert_allclose(
        method(values, axes), brute_marginal(values, axes), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(
    "shape",
    [(), (1,), (7,), (2,) * 15, (3, 1, 4, 1, 5), (300, 2), (2, 300), (11, 13, 17), (4, 4, 2, 256)],
    ids=str,
)
def test_one_pass_marginal_in_any_axis_order_is_the_sorted_one_transposed(
    shape: tuple[int, ...], seed: int
) -> None:
    """The compiled pass against brute force, on rows longer and shorter than its
    code table, trailing dropped runs of every length mod 4, rows whose cells cycle
    through fewer marginal cells than its lanes (a spread clique), and clique orders:
    a clique in another order is the sorted clique's numbers transposed, bit for bit
    (the marginal caches keep only the sorted one)."""
    rng = np.random.default_rng(seed)
    values = rng.random(shape)
    m = len(shape)
    spread = {(0, m // 2, m - 1), (m - 1, 0, m // 2)} if m >= 3 else set()  # four lanes
    cliques = {(), tuple(range(m))} | spread
    cliques |= {tuple(int(a) for a in rng.permutation(m)[:k]) for k in range(m + 1)}
    for axes in sorted(cliques):
        got = _one_pass_marginal(values, axes)
        np.testing.assert_allclose(got, brute_marginal(values, axes), rtol=1e-12, atol=1e-12)
        ordered = tuple(sorted(axes))
        expected = _one_pass_marginal(values, ordered).transpose([ordered.index(a) for a in axes])
        np.testing.assert_array_equal(got, expected)
        assert got.flags.c_contiguous and not np.may_share_memory(got, values)


def test_marginal_edge_cases() -> None:
    d = domain_of((2, 3, 4))
    h = DenseHistogram(d, np.arange(24.0).reshape(2, 3, 4) + 1)
    empty = h.marginal([])
    assert empty.shape == ()
    assert float(empty) == pytest.approx(1.0)
    full = h.marginal(["a2", "a0", "a1"])
    np.testing.assert_allclose(full, h.to_array().transpose(2, 0, 1))
    assert full.flags.c_contiguous
    with pytest.raises(ValueError, match=r"distinct.*\(1, 1\)"):
        h.marginal(["a1", "a1"])
    with pytest.raises(KeyError, match="'zz'"):
        h.marginal(["zz"])


def test_marginal_is_never_a_view_of_the_histogram() -> None:
    """Regression: the marginal on every attribute in domain order used to alias the
    histogram's buffer, so a later reweight changed it and writing to it corrupted ``D``."""
    h = DenseHistogram.uniform(domain_of((2, 3)))
    for attrs in (["a0", "a1"], ["a1", "a0"], ["a0"], []):
        m = h.marginal(attrs)
        before = m.copy()
        h.reweight(["a1"], np.array([0.0, 1.0, 2.0]))
        np.testing.assert_array_equal(m, before)
        m[...] = -1.0
        assert np.all(h.to_array() > 0)


@SETTINGS
@given(data=st.data(), values=histograms())
def test_broadcast_factor_indexes_the_clique(data: st.DataObject, values: FloatArray) -> None:
    axes = data.draw(cliques(values.ndim))
    table = np.arange(math.prod(values.shape[a] for a in axes), dtype=float)
    table = table.reshape([values.shape[a] for a in axes])
    full = np.broadcast_to(broadcast_factor(values.shape, axes, table), values.shape)
    expected = table[clique_codes(values.shape, axes)] if axes else np.full(values.size, table)
    np.testing.assert_array_equal(full.ravel(), expected)


@SETTINGS
@given(data=st.data(), values=histograms())
def test_reweight_matches_brute_force(data: st.DataObject, values: FloatArray) -> None:
    axes = data.draw(cliques(values.ndim))
    log_factor = data.draw(factors(tuple(values.shape[a] for a in axes), 50.0))
    h = DenseHistogram(domain_of(values.shape), values)
    h.reweight([f"a{a}" for a in axes], log_factor)
    expected = brute_reweight(values, axes, log_factor)
    np.testing.assert_allclose(h.to_array(), expected, rtol=1e-12, atol=1e-300)


@settings(SETTINGS, max_examples=60)
@given(data=st.data(), values=histograms(max_axes=4), steps=st.integers(1, 30))
def test_many_reweights_stay_on_the_simplex(
    data: st.DataObject, values: FloatArray, steps: int
) -> None:
    """After up to 30 updates, extreme factors included: sum 1 within 1e-12, all >= 0."""
    h = DenseHistogram(domain_of(values.shape), values)
    reference = values / values.sum()
    for _ in range(steps):
        axes = data.draw(cliques(values.ndim))
        bound = data.draw(st.sampled_from([1.0, 50.0, 2000.0]))
        log_factor = data.draw(factors(tuple(values.shape[a] for a in axes), bound))
        h.reweight([f"a{a}" for a in axes], log_factor)
        reference = brute_reweight(reference, axes, log_factor)
        arr = h.to_array()
        assert np.all(np.isfinite(arr))
        assert np.all(arr >= 0.0)
        assert abs(arr.sum() - 1.0) <= 1e-12
    np.testing.assert_allclose(h.to_array(), reference, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("tiny", [1e-306, 1e-310, 1e-320])
def test_reweight_moves_all_the_mass_onto_a_nearly_empty_cell(tiny: float) -> None:
    """Regression (found by hypothesis): a cell of tiny mass (down to subnormal) given a
    factor e^720 takes nearly all the mass. Dividing by a subnormal Z overflowed, and
    capping the factor at e^700 lost the mass (a total of 0.86)."""
    h = DenseHistogram(domain_of((2, 2)), np.array([[1.0 - tiny, 0.0], [tiny, 0.0]]))
    h.reweight(["a0"], np.array([0.0, 720.0]))
    ratio = math.exp(720.0 + math.log(tiny))  # the cell's mass over the rest's, after
    # a subnormal mass carries fewer digits: 1e-320 has about 13 bits of precision
    rel = 1e-12 if tiny > 1e-308 else 1e-3
    assert h.to_array()[1, 0] == pytest.approx(ratio / (1.0 + ratio), rel=rel)
    assert h.to_array().sum() == pytest.approx(1.0, abs=1e-12 if tiny > 1e-308 else 1e-3)


def test_reweight_when_the_largest_factor_sits_on_an_empty_cell() -> None:
    """Regression: the factor used to be shifted by its global maximum, so an empty cell
    holding it flushed every other factor to zero, ``Z = 0``, and the result was NaN."""
    h = DenseHistogram(domain_of((2, 2)), np.array([[0.5, 0.5], [0.0, 0.0]]))
    h.reweight(["a0"], np.array([-800.0, 0.0]))
    np.testing.assert_array_equal(h.to_array(), [[0.5, 0.5], [0.0, 0.0]])
    h.reweight(["a1"], np.array([-800.0, 0.0]))
    np.testing.assert_array_equal(h.to_array(), [[0.0, 1.0], [0.0, 0.0]])


@SETTINGS
@given(data=st.data(), values=histograms())
def test_reweight_with_precomputed_marginal_equals_without(
    data: st.DataObject, values: FloatArray
) -> None:
    axes = data.draw(cliques(values.ndim))
    attrs = [f"a{a}" for a in axes]
    log_factor = data.draw(factors(tuple(values.shape[a] for a in axes), 50.0))
    a = DenseHistogram(domain_of(values.shape), values)
    b = DenseHistogram(domain_of(values.shape), values)
    a.reweight(attrs, log_factor)
    b.reweight(attrs, log_factor, marginal=b.marginal(attrs))
    np.testing.assert_array_equal(a.to_array(), b.to_array())


def test_reweight_validates_its_inputs() -> None:
    h = DenseHistogram.uniform(domain_of((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(2,\), expected \(3,\)"):
        h.reweight(["a1"], np.zeros(2))
    with pytest.raises(ValueError, match=r"shape \(3, 2\), expected \(2, 3\)"):
        h.reweight(["a0", "a1"], np.zeros((3, 2)))
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="finite"):
            h.reweight(["a1"], np.array([0.0, bad, 1.0]))
    with pytest.raises(ValueError, match=r"marginal has shape \(2,\), expected \(3,\)"):
        h.reweight(["a1"], np.zeros(3), marginal=np.ones(2) / 2)
    with pytest.raises(KeyError, match="'b'"):
        h.reweight(["b"], np.zeros(3))
    np.testing.assert_allclose(h.to_array(), np.full((2, 3), 1 / 6), rtol=1e-15)  # untouched


def test_constructor_validates_and_normalises() -> None:
    d = domain_of((2, 3))
    with pytest.raises(ValueError, match=r"shape \(3, 2\).*\(2, 3\)"):
        DenseHistogram(d, np.ones((3, 2)))
    for bad in (-1.0, np.nan, np.inf):
        values = np.ones((2, 3))
        values[1, 2] = bad
        with pytest.raises(ValueError, match="finite and non-negative"):
            DenseHistogram(d, values)
    with pytest.raises(ValueError, match=r"total=0\.0"):
        DenseHistogram(d, np.zeros((2, 3)))
    raw = np.arange(6.0).reshape(2, 3)
    h = DenseHistogram(d, raw)
    np.testing.assert_allclose(h.to_array(), raw / 15.0)
    assert raw[1, 2] == 5.0  # the caller's array is not modified
    assert isinstance(h, Histogram)
    u = DenseHistogram.uniform(d)
    np.testing.assert_allclose(u.to_array(), np.full((2, 3), 1 / 6), rtol=1e-15)


def test_copy_and_to_array_are_independent() -> None:
    h = DenseHistogram.uniform(domain_of((2, 2)))
    c = h.copy()
    arr = h.to_array()
    arr[0, 0] = 99.0
    h.reweight(["a0"], np.array([0.0, 1.0]))
    np.testing.assert_array_equal(c.to_array(), np.full((2, 2), 0.25))
    assert h.to_array()[0, 0] != 99.0
    h.normalize()
    assert h.to_array().sum() == pytest.approx(1.0, abs=1e-15)


def test_from_records_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (3, 4, 2)
    d = domain_of(shape)
    records = np.stack([rng.integers(0, s, size=1000) for s in shape], axis=1)
    counts = np.zeros(shape)
    np.add.at(counts, tuple(records.T), 1.0)
    h = DenseHistogram.from_records(d, records)
    np.testing.assert_allclose(h.to_array(), counts / 1000, rtol=1e-15)
    w = rng.random(1000)
    weighted = np.zeros(shape)
    np.add.at(weighted, tuple(records.T), w)
    hw = DenseHistogram.from_records(d, records, weights=w)
    np.testing.assert_allclose(hw.to_array(), weighted / w.sum(), rtol=1e-12)


def test_from_records_rejects_bad_input() -> None:
    d = domain_of((3, 4))
    with pytest.raises(ValueError, match=r"\(n, 2\), got \(5, 3\)"):
        DenseHistogram.from_records(d, np.zeros((5, 3), dtype=int))
    with pytest.raises(ValueError, match=r"\(n, 2\), got \(5,\)"):
        DenseHistogram.from_records(d, np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="zero records"):
        DenseHistogram.from_records(d, np.zeros((0, 2), dtype=int))
    with pytest.raises(ValueError):
        DenseHistogram.from_records(d, np.array([[3, 0]]))  # code out of range
    with pytest.raises(ValueError):
        DenseHistogram.from_records(d, np.array([[0, -1]]))


def _chi_square_pvalue(h: DenseHistogram, samples: NDArray[np.int64]) -> float:
    """Goodness of fit of ``samples`` to ``h`` over its cells with positive mass."""
    p = h.to_array().ravel()
    counts = np.bincount(
        np.ravel_multi_index(tuple(samples.T), h.domain.shape), minlength=p.size
    ).astype(float)
    assert np.all(counts[p == 0] == 0), "a zero-mass cell was sampled"
    keep = p > 0
    expected = p[keep] / p[keep].sum() * samples.shape[0]
    return float(stats.chisquare(counts[keep], expected).pvalue)


def test_sample_frequencies_match_the_histogram(seed: int) -> None:
    """Chi-square test at level ``P_REJECT`` = 1e-6 (the false-failure probability for a
    correct sampler, per seed) with >= 1,000 expected draws per cell; the broken variant
    below, which moves 1% of the mass between two cells, fails the same test."""
    rng = np.random.default_rng(seed)
    d = domain_of((3, 4, 2))
    p = 0.5 * rng.dirichlet(np.ones(24)) + 0.5 / 24
    p[[5, 17]] = 0.0  # empty cells must never be drawn
    h = DenseHistogram(d, p.reshape(d.shape))
    samples = h.sample(100_000, rng=rng)
    assert samples.shape == (100_000, 3) and samples.dtype == np.int64
    assert np.all((samples >= 0) & (samples < np.array(d.shape)))
    assert _chi_square_pvalue(h, samples) >= P_REJECT
    # Power: a sampler off by 1% of the mass is rejected (a ~14 sigma effect).
    q = h.to_array().ravel()
    hi, lo = int(np.argmax(q)), int(np.argmin(np.where(q > 0, q, np.inf)))
    q[hi] -= 0.01
    q[lo] += 0.01
    broken = DenseHistogram(d, q.reshape(d.shape)).sample(100_000, rng=rng)
    assert _chi_square_pvalue(h, broken) < P_REJECT


def test_sample_is_reproducible_and_validates_n() -> None:
    h = DenseHistogram(domain_of((2, 3)), np.arange(1.0, 7.0).reshape(2, 3))
    a = h.sample(50, rng=np.random.default_rng(7))
    b = h.sample(50, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert h.sample(0, rng=np.random.default_rng(0)).shape == (0, 2)
    with pytest.raises(ValueError, match="n=-1"):
        h.sample(-1, rng=np.random.default_rng(0))
    point = DenseHistogram(domain_of((2, 3)), np.eye(2, 3))
    draws = point.sample(1000, rng=np.random.default_rng(0))
    assert {tuple(r) for r in draws.tolist()} <= {(0, 0), (1, 1)}


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.integers(1, 64),
        elements=st.floats(-800.0, 800.0) | st.just(-math.inf),
    )
)
def test_our_logsumexp_is_scipys(values: NDArray[np.float64]) -> None:
    """The reweight's normaliser (pmwcm.kernels.logspace) equals SciPy's, which it
    replaced for speed, to a few ulps: with huge, tiny and -inf entries."""
    from scipy.special import logsumexp as scipy_logsumexp

    from pmwcm.kernels.logspace import logsumexp

    expected = float(scipy_logsumexp(values))
    if math.isinf(expected):
        assert logsumexp(values) == expected
    else:
        assert logsumexp(values) == pytest.approx(expected, rel=1e-14, abs=1e-12)
