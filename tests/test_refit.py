"""The refit after each update onto the paid prior's released marginals (issue 15).

* The refit is the prior's own fit continued: it lowers the loss on the
  measurements, leaves its input alone, and agrees between the dense and the
  support backend when the support is all of ``X``.
* Its purpose, on known truth: in the parity world of ``test_step_size`` an
  update fixes its query but moves pairs the exact 2-way prior had right; the
  refit puts them back and keeps the update's gain on its query.
* The engine keeps the measurements in its state and snapshots, so a restored
  engine refits exactly as the original (one that lost them does not).
* Bad settings are refused before anything is charged. That the refit reads
  only public values is the swap test of ``test_step_size`` (its engines run
  the default refit).
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.engine.baselines import NonPrivateBaseline, excess_risk
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import REFIT_ITERATIONS, PMWConfig, build_engine
from pmwcm.engine.settings import EngineSettings
from pmwcm.engine.snapshot import encode_state, restore, snapshot
from pmwcm.engine.step_size import PublicContext, step_factor
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import (
    DISCREPANCY,
    Measurement,
    fit_histogram,
    noise_energy,
    pairwise_cliques,
)
from pmwcm.mechanisms.priors.refit import refit_to_measurements
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "c": 2, "y": 2})


def loss(h: Histogram, measurements: list[Measurement]) -> float:
    return 0.5 * sum(float(((h.marginal(m.clique) - m.values) ** 2).sum()) for m in measurements)


def noisy_pairs(seed: int, sigma: float = 1e-3) -> list[Measurement]:
    rng = np.random.default_rng(seed)
    truth = rng.dirichlet(np.ones(DOMAIN.size)).reshape(DOMAIN.shape)
    data = PrivateData(domain=DOMAIN, n=10_000, histogram=DenseHistogram(DOMAIN, truth))
    return [
        Measurement(
            clique=c,
            values=data.marginal(c) + rng.normal(0, sigma, data.marginal(c).shape),
            sigma=sigma,
        )
        for c in pairwise_cliques(DOMAIN)
    ]


def tilted_start(seed: int) -> DenseHistogram:
    """A histogram away from the measurements (as after an update)."""
    rng = np.random.default_rng(seed + 1)
    return DenseHistogram(DOMAIN, rng.dirichlet(np.ones(DOMAIN.size)).reshape(DOMAIN.shape))


def test_the_refit_goes_back_within_the_noise_of_precise_measurements(seed: int) -> None:
    measurements = noisy_pairs(seed)
    start = tilted_start(seed)
    before = start.to_array()
    bound = DISCREPANCY * noise_energy(measurements)
    assert loss(start, measurements) > 100 * bound
    refitted = refit_to_measurements(start, measurements, iterations=1)
    assert loss(refitted, measurements) <= bound
    np.testing.assert_array_equal(start.to_array(), before)
    assert refit_to_measurements(start, measurements, iterations=0) is start
    assert refit_to_measurements(start, [], iterations=3) is start
    with pytest.raises(ValueError, match="iterations=-1"):
        refit_to_measurements(start, measurements, iterations=-1)


def test_the_refit_takes_only_its_steps_within_the_noise(seed: int) -> None:
    # Measurements as noisy as the start is far: within the bound at once, so the
    # refit is its own small steps and no more (each one lowers the loss).
    measurements = noisy_pairs(seed, sigma=0.3)
    start = tilted_start(seed)
    assert loss(start, measurements) <= DISCREPANCY * noise_energy(measurements)
    one, three = (refit_to_measurements(start, measurements, iterations=k) for k in (1, 3))
    assert loss(three, measurements) < loss(one, measurements) < loss(start, measurements)
    fitted = fit_histogram(DOMAIN, measurements, iterations=300, start=start)
    assert loss(fitted, measurements) < loss(three, measurements)


def test_the_refit_is_the_same_on_a_full_support(seed: int) -> None:
    measurements = noisy_pairs(seed)
    dense = tilted_start(seed)
    codes = np.array(list(np.ndindex(*DOMAIN.shape)), dtype=np.int64)
    support = SupportHistogram(DOMAIN, codes, np.log(dense.to_array().ravel()))
    on_dense = refit_to_measurements(dense, measurements, iterations=3)
    on_support = refit_to_measurements(support, measurements, iterations=3)
    assert isinstance(on_support, SupportHistogram)
    np.testing.assert_allclose(on_support.to_array(), on_dense.to_array(), rtol=0, atol=1e-12)


# --- Known truth: y = a XOR b (flip 5%), exact pairs, one update on a query that
# cannot see the parity's third attribute.

PARITY_DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "y": 2})


def parity_data() -> PrivateData:
    p = np.zeros(PARITY_DOMAIN.shape)
    for a, b, c, y in np.ndindex(*PARITY_DOMAIN.shape):
        base = (0.7 if a else 0.3) * (0.6 if b else 0.4) * 0.5
        p[a, b, c, y] = base * (0.95 if y == (a ^ b) else 0.05)
    return PrivateData(domain=PARITY_DOMAIN, n=10**6, histogram=DenseHistogram(PARITY_DOMAIN, p))


def test_the_refit_restores_the_pairs_an_update_moved() -> None:
    data = parity_data()
    exact = [
        Measurement(clique=c, values=data.marginal(c), sigma=1e-6)
        for c in pairwise_cliques(PARITY_DOMAIN)
    ]
    prior = fit_histogram(PARITY_DOMAIN, exact, iterations=300)
    query = CMQuery(
        loss="logistic", target="y", features=("a", "b"), interactions=(("a", "b"),), radius=4.0
    )
    engine = build_engine(
        data,
        PMWConfig(epsilon=1.0, delta=1e-9, prior="public", refit_iterations=0),
        noise=NumpyNoise(seed=0),
        prior=prior,
    )
    round_ = engine.cm_round(query)
    theta = NonPrivateBaseline(data).answer(query)  # the data's own optimum as the answer
    table = prior.clique_table(round_.clique)
    answer = round_.hypothesis_answer(table)
    context = PublicContext(n=data.n, noise_level=1e-9)
    factor = step_factor("calibrated", round_, table, answer, theta, context=context)
    updated = prior.copy()
    updated.reweight_table(round_.clique, table, factor)
    refitted = refit_to_measurements(updated, exact, iterations=REFIT_ITERATIONS)

    def pair_error(h: Histogram) -> float:
        return sum(float(np.abs(h.marginal(m.clique) - m.values).sum()) for m in exact)

    problem = query.compile(PARITY_DOMAIN)
    weights = data.marginal(problem.clique).ravel()

    def own_error(h: Histogram) -> float:
        return excess_risk(
            problem, weights, round_.hypothesis_answer(h.clique_table(round_.clique))
        )

    # the update fixed its query and disturbed the pairs; the refit undoes most of
    # the disturbance and keeps most of the gain
    assert own_error(updated) < 0.5 * own_error(prior)
    assert pair_error(updated) > 10 * pair_error(prior)
    assert pair_error(refitted) < 0.5 * pair_error(updated)
    assert own_error(refitted) < 0.5 * own_error(prior)


# --- The engine keeps the measurements, and a snapshot carries them.

ENGINE_DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "y": 2})
QUERIES = [
    CMQuery(loss="logistic", target=t, features=f)
    for t, f in [
        ("y", ("a",)),
        ("y", ("b",)),
        ("y", ("a", "b")),
        ("c", ("a",)),
        ("y", ("c",)),
        ("y", ("a", "c")),
        ("c", ("b", "y")),
        ("y", ("b", "c")),
    ]
]


def engine_data(seed: int) -> PrivateData:
    rng = np.random.default_rng(seed)
    records = rng.integers(0, 2, size=(20_000, 4))
    records[:, 3] = (records[:, 0] ^ records[:, 1]) ^ (rng.random(20_000) < 0.1)
    return PrivateData.from_records(ENGINE_DOMAIN, records)


def updating_engine(
    data: PrivateData, noise: NumpyNoise, refit: int = REFIT_ITERATIONS
) -> OnlinePMW:
    config = PMWConfig(
        epsilon=4.0,
        delta=1e-9,
        max_updates=8,
        threshold=-1e9,  # every query updates (up to T), so the refit has work
        expected_queries=len(QUERIES),
        after_halt="synthetic",
        refit_iterations=refit,
        # The paper's step: the calibrated one finds the pairwise prior already
        # right on these small cliques and moves nothing, leaving the refit no work.
        step_rule="fixed",
        prior_cliques="pairs",  # the refit onto pairs (the rule picks triples at this n)
    )
    return build_engine(data, config, noise=noise)


def test_the_engine_refits_after_each_update(seed: int) -> None:
    data = engine_data(seed)
    with_refit = updating_engine(data, NumpyNoise(seed=seed))
    without = updating_engine(data, NumpyNoise(seed=seed), refit=0)
    measurements = list(with_refit.prior_measurements)
    prior_loss = loss(with_refit.hypothesis, measurements)
    assert [m.clique for m in measurements] == pairwise_cliques(ENGINE_DOMAIN)
    for mine, theirs in zip(without.prior_measurements, measurements, strict=True):
        np.testing.assert_array_equal(mine.values, theirs.values)  # the same release
    for query in QUERIES[:4]:
        with_refit.answer(query)
        without.answer(query)
    assert len(with_refit.updates) >= 2 and len(without.updates) >= 2
    # the updates moved the pairs the prior had right; the refit brings them back
    assert loss(without.hypothesis, measurements) > 10 * prior_loss
    assert loss(with_refit.hypothesis, measurements) < 0.1 * loss(without.hypothesis, measurements)


def test_a_snapshot_carries_the_measurements_the_refit_reads(seed: int) -> None:
    data = engine_data(seed)
    engine = updating_engine(data, NumpyNoise(seed=seed))
    for query in QUERIES[:4]:
        engine.answer(query)
    restored = restore(updating_engine(data, NumpyNoise(seed=seed + 1)), snapshot(engine))
    assert len(restored.prior_measurements) == len(engine.prior_measurements) == 6
    for mine, theirs in zip(restored.prior_measurements, engine.prior_measurements, strict=True):
        assert (mine.clique, mine.sigma) == (theirs.clique, theirs.sigma)
        np.testing.assert_array_equal(mine.values, theirs.values)
    # The fresh engine measured a prior of its own (seed + 1); the snapshot's replaced it.
    fresh = updating_engine(data, NumpyNoise(seed=seed + 1))
    assert not np.array_equal(
        fresh.prior_measurements[0].values, restored.prior_measurements[0].values
    )
    # A snapshot saved before the refit existed has no measurements: its engine cannot refit.
    old_form = encode_state(engine.state())
    del old_form.state["prior_measurements"]
    assert restore(updating_engine(data, NumpyNoise(seed=seed)), old_form).prior_measurements == ()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_a_bad_refit_setting_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="refit_iterations"):
        PMWConfig(epsilon=1.0, delta=1e-6, refit_iterations=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="refit_iterations"):
        EngineSettings(max_updates=1, learning_rate=1.0, threshold=1.0, refit_iterations=bad)  # type: ignore[arg-type]


def test_composition_mode_does_not_refit() -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, announced_queries=10, mode="composition")
    assert config.resolved_for(10_000, 4).refit_iterations == 0


def test_a_measurement_off_the_schema_is_refused(seed: int) -> None:
    data = engine_data(seed)
    engine = updating_engine(data, NumpyNoise(seed=seed))
    wrong = Measurement(clique=("a", "b"), values=np.zeros((2, 3)), sigma=0.1)
    with pytest.raises(ValueError, match=r"\('a', 'b'\) has shape \(2, 3\)"):
        OnlinePMW(
            data,
            settings=engine.settings,
            sparse_vector=engine.sparse_vector,
            oracle=engine.oracle,
            oracle_noise_level=engine.oracle_noise_level,
            ledger=engine.ledger,
            noise=engine.noise,
            prior=engine.hypothesis,
            prior_measurements=[wrong],
        )
