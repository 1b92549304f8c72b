"""The marginal prior: its privacy event, its noise, its fit, and its place in the ledger."""

from __future__ import annotations

import dp_accounting
import numpy as np
import pytest

import pmwcm.mechanisms.priors.marginals as marginals_module
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.dense_marginal import dense_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import (
    DISCREPANCY,
    Measurement,
    default_iterations,
    fit_histogram,
    measure_marginals,
    measurement_event,
    noise_energy,
    pairwise_cliques,
    public_prior,
)
from pmwcm.mechanisms.priors.pairwise_fit import PairwiseFit
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "c": 2, "d": 2})


def _data(seed: int, n: int = 20_000) -> PrivateData:
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, size=n) for s in DOMAIN.sizes], axis=1)
    records[:, 2] = (records[:, 0] + (rng.random(n) < 0.2)) % 2  # c follows a
    return PrivateData.from_records(DOMAIN, records)


class _Recorder(NumpyNoise):
    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.gaussian_calls: list[tuple[float, int]] = []

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        self.gaussian_calls.append((sigma, size))
        return super().gaussian(sigma, size)


def test_pairwise_cliques_cover_every_pair() -> None:
    cliques = pairwise_cliques(DOMAIN)
    assert len(cliques) == 6 and ("a", "b") in cliques and ("c", "d") in cliques
    with pytest.raises(ValueError, match="order"):
        pairwise_cliques(DOMAIN, order=0)


def test_measurement_noise_is_calibrated_to_the_joint_sensitivity(seed: int) -> None:
    # sqrt(2K)/n: replace-one moves 1/n of mass between two cells of each of K marginals.
    data = _data(seed)
    noise = _Recorder(seed)
    cliques = pairwise_cliques(DOMAIN)
    out = measure_marginals(data, cliques, noise_multiplier=3.0, noise=noise)
    cells = sum(int(np.prod([DOMAIN.size_of(a) for a in c])) for c in cliques)
    assert noise.gaussian_calls == [(pytest.approx(3.0 * np.sqrt(12) / data.n), cells)]
    assert [m.clique for m in out] == cliques
    assert measurement_event(3.0) == dp_accounting.GaussianDpEvent(3.0)


def test_fit_recovers_exact_marginals(seed: int) -> None:
    data = _data(seed)
    exact = [
        Measurement(clique=c, values=data.marginal(c), sigma=0.0) for c in pairwise_cliques(DOMAIN)
    ]
    fitted = fit_histogram(DOMAIN, exact, iterations=500)
    for m in exact:
        np.testing.assert_allclose(fitted.marginal(m.clique), m.values, atol=2e-3)
    assert fitted.to_array().sum() == pytest.approx(1.0)


def test_fit_never_increases_the_error_and_handles_noisy_input(seed: int) -> None:
    data = _data(seed)
    noisy = measure_marginals(
        data, pairwise_cliques(DOMAIN), noise_multiplier=50.0, noise=NumpyNoise(seed=seed)
    )

    def err(h: DenseHistogram) -> float:
        return sum(float(((h.marginal(m.clique) - m.values) ** 2).sum()) for m in noisy)

    uniform = DenseHistogram.uniform(DOMAIN)
    fitted = fit_histogram(DOMAIN, noisy, iterations=50)
    assert err(fitted) <= err(uniform)
    assert np.all(fitted.to_array() >= 0)


def test_engine_charges_the_prior_first_and_still_meets_the_budget(seed: int) -> None:
    data = _data(seed)
    config = PMWConfig(epsilon=1.0, delta=1e-6)
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    first = engine.ledger.entries[0]
    assert first.label.startswith("prior")
    assert isinstance(first.event, dp_accounting.GaussianDpEvent)
    assert first.epsilon_after <= config.prior_fraction * config.epsilon + 1e-9
    assert engine.settings.max_updates == 10


def _public_records(seed: int, m: int = 2_000) -> np.ndarray:
    """A public sample from the same population as :func:`_data` (an independent draw)."""
    rng = np.random.default_rng(10_000 + seed)
    records = np.stack([rng.integers(0, s, size=m) for s in DOMAIN.sizes], axis=1)
    records[:, 2] = (records[:, 0] + (rng.random(m) < 0.2)) % 2
    return records


def test_public_prior_costs_nothing(seed: int) -> None:
    """A public start: no ledger line, and the oracle calls get what a paid prior would take."""
    data = _data(seed)
    public = public_prior(DOMAIN, _public_records(seed))
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="public")
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed), prior=public)
    assert engine.ledger.entries == ()
    assert (config.max_updates, config.expected_queries) == (10, 10_000)  # an informed start
    paid = build_engine(data, PMWConfig(epsilon=1.0, delta=1e-6), noise=NumpyNoise(seed=seed))
    # The whole budget minus the sparse vector's: a smaller oracle noise multiplier.
    assert engine.oracle_noise_level < paid.oracle_noise_level
    # The start is the public sample's distribution (mixed with 1% uniform), not D's.
    fitted = engine.hypothesis.marginal(("a", "c")).ravel()
    sample = DenseHistogram.from_records(DOMAIN, _public_records(seed)).marginal(("a", "c"))
    np.testing.assert_allclose(fitted, 0.99 * sample.ravel() + 0.01 / 4, atol=1e-12)


def test_public_prior_keeps_every_cell_reachable() -> None:
    """A cell the public sample never saw keeps mass, so updates can still raise it."""
    only_zeros = np.zeros((5, len(DOMAIN)), dtype=np.int64)
    prior = public_prior(DOMAIN, only_zeros, uniform_weight=0.05)
    values = prior.to_array()
    assert values.min() == pytest.approx(0.05 / DOMAIN.size)
    assert values.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="uniform_weight"):
        public_prior(DOMAIN, only_zeros, uniform_weight=0.0)
    with pytest.raises(ValueError, match="shape"):
        public_prior(DOMAIN, only_zeros[:, :2])


def test_public_prior_must_be_given() -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="public")
    with pytest.raises(ValueError, match="public_prior"):
        build_engine(_data(0), config, noise=NumpyNoise(seed=0))


def test_prior_fraction_must_leave_room_for_the_sparse_vector() -> None:
    with pytest.raises(ValueError, match="prior_fraction"):
        PMWConfig(epsilon=1.0, delta=1e-6, prior_fraction=0.8, sv_fraction=0.3)


def test_uniform_prior_restores_the_papers_start() -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform")
    assert (config.max_updates, config.expected_queries) == (50, 1000)


def test_fit_budget_shrinks_with_the_domain() -> None:
    small = Domain.from_sizes({f"a{i}": 2 for i in range(14)})
    large = Domain.from_sizes({f"a{i}": 4 for i in range(10)})
    assert default_iterations(small, 91) == 300
    assert default_iterations(large, 45) == 30


WIDE = Domain.from_sizes({f"x{i}": 2 for i in range(13)})  # 2^13: the matrix-form fit


def _noisy_pairs(sigma: float, seed: int) -> list[Measurement]:
    """Every pair's marginal of a random distribution on :data:`WIDE`, plus N(0, sigma^2)."""
    rng = np.random.default_rng(seed)
    truth = rng.gamma(0.3, 1.0, WIDE.shape)
    truth /= truth.sum()
    hist = DenseHistogram(WIDE, truth)
    return [
        Measurement(
            clique=c,
            values=hist.marginal(c) + rng.normal(0.0, sigma, (2, 2)),
            sigma=sigma,
        )
        for c in pairwise_cliques(WIDE)
    ]


def _loss(fitted: DenseHistogram, measured: list[Measurement]) -> float:
    return 0.5 * sum(float(((fitted.marginal(m.clique) - m.values) ** 2).sum()) for m in measured)


def test_noise_energy_is_the_expected_loss_at_the_data() -> None:
    measured = _noisy_pairs(0.01, seed=0)
    assert noise_energy(measured) == pytest.approx(0.5 * 78 * 4 * 0.01**2)


def test_a_fit_short_of_its_small_noise_goes_on_until_within_it(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large n (sigma 1e-4): 20 iterations end far above the noise; the fit goes on
    past its budget and stops once within DISCREPANCY times the noise energy."""
    measured = _noisy_pairs(1e-4, seed)
    bound = DISCREPANCY * noise_energy(measured)
    steps: list[int] = []
    original = marginals_module.PairwiseFit.moved

    def counted(self: object, *args: object) -> object:
        steps.append(1)
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(marginals_module.PairwiseFit, "moved", counted)
    # the matrix form's steps are counted: keep the fused form (tests/test_fused_fit.py) out
    monkeypatch.setattr(marginals_module, "FUSED_MAX_CELLS", 0)
    budget_only = fit_histogram(WIDE, measured, iterations=20, continuation=1)
    assert len(steps) == 20 and _loss(budget_only, measured) > 2 * bound
    steps.clear()
    fitted = fit_histogram(WIDE, measured, iterations=20)
    assert 20 < len(steps) < 100 * 20
    assert _loss(fitted, measured) <= bound


def test_a_fit_within_its_noise_after_the_budget_is_left_as_it_was(seed: int) -> None:
    """Small n (sigma 0.01): the budget already ends within the bound; the result is
    the budget-only fit, bit for bit."""
    measured = _noisy_pairs(0.01, seed)
    budget_only = fit_histogram(WIDE, measured, iterations=30, continuation=1)
    assert _loss(budget_only, measured) <= DISCREPANCY * noise_energy(measured)
    fitted = fit_histogram(WIDE, measured, iterations=30)
    np.testing.assert_array_equal(fitted.to_array(), budget_only.to_array())


def test_an_attribute_of_many_values_fits_by_plain_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrix form's one-hot factors grow as ``cells(L) x sum |X_a|``: one
    attribute of 5,000 values would make them 25 million cells for a 20,000-cell
    histogram (10^12 at a million values: ``pmwcm synth`` ran out of memory). The fit
    then runs the plain passes; a domain of many small attributes keeps the matrix form."""
    many = Domain.from_sizes({"code": 5000, "b": 2, "y": 2})
    assert PairwiseFit.factor_cells(many) > many.size
    small = Domain.from_sizes({f"a{i}": 2 for i in range(13)})
    assert PairwiseFit.factor_cells(small) <= small.size

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the matrix form was built")

    monkeypatch.setattr(PairwiseFit, "__init__", refuse)
    # the matrix form's rule, where the fused form (these sizes) would not take the fit
    monkeypatch.setattr(marginals_module, "FUSED_MAX_CELLS", 0)
    rng = np.random.default_rng(0)
    truth = rng.dirichlet(np.ones(many.size)).reshape(many.shape)
    truth[:, 0, 0] *= 5.0  # a (b, y) marginal far from uniform
    truth /= truth.sum()
    exact = [
        Measurement(clique=clique, values=dense_marginal(truth, many.axes(clique)), sigma=1e-3)
        for clique in (("code", "b"), ("b", "y"))
    ]
    fitted = fit_histogram(many, exact, iterations=30)
    start = np.full((2, 2), 0.25)
    moved = np.abs(fitted.marginal(["b", "y"]) - exact[1].values).max()
    assert moved < 0.1 * np.abs(start - exact[1].values).max()
    uniform = DenseHistogram.uniform(small).to_array()
    pairs = [
        Measurement(
            clique=("a0", "a1"),
            values=dense_marginal(uniform, small.axes(("a0", "a1"))),
            sigma=1e-3,
        )
    ]
    with pytest.raises(AssertionError, match="matrix form"):
        fit_histogram(small, pairs, iterations=2)
