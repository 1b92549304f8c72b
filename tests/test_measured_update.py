"""The measured-marginal update (issue 35): it moves the hypothesis towards the
measurement, reads the data only through it, and its accounting is exact composition."""

from __future__ import annotations

import dataclasses
import math

import dp_accounting
import numpy as np
import pytest

from pmwcm.engine.measured_update import (
    MEASURED_REFIT_ITERATIONS,
    PRECISE_REFIT_SIGMA,
    PRECISE_SUPPORT_REFIT_ITERATIONS,
    MeasuredUpdate,
    measured_positions,
    measured_refit_iterations,
    measured_updates,
    part_to_measure,
)
from pmwcm.engine.online import EngineHalted, OnlinePMW, query_key
from pmwcm.engine.plan import plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.settings import AfterHalt
from pmwcm.engine.snapshot import restore, snapshot
from pmwcm.engine.update_slots import UNMEASURED_THRESHOLD, FallbackRule
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.support import SupportHistogram
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.marginal_measurement import (
    clique_sigma,
    excess_risk_certificate,
    gaussian_l1_bound,
    measure_table,
)
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({f"x{j}": 2 for j in range(6)})


def _records(seed: int, n: int = 3_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, size=(n, 6))
    x[:, 5] = (x[:, 0] ^ x[:, 1] ^ x[:, 2]) | (rng.random(n) < 0.05)  # a 3-way structure
    return x


def test_absorbing_a_precise_measurement_moves_the_clique_marginal_onto_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hypothesis = DenseHistogram.uniform(DOMAIN)
    clique = ("x0", "x1", "x5")
    truth = rng.dirichlet(np.ones(8)).reshape(2, 2, 2)
    measurement = Measurement(clique=clique, values=truth, sigma=1e-6)
    update = MeasuredUpdate(kind="measure", noise_multiplier=1.0)
    before = np.abs(hypothesis.clique_table(clique).table() - truth).sum()
    absorbed = update.absorb(hypothesis, [measurement])
    after = np.abs(absorbed.clique_table(clique).table() - truth).sum()
    assert after < 1e-4 < before
    assert np.array_equal(hypothesis.to_array(), DenseHistogram.uniform(DOMAIN).to_array())


def _every_cell(domain: Domain) -> SupportHistogram:
    """A support holding every cell of ``domain`` once, equal weights."""
    grid = np.indices(domain.shape).reshape(len(domain), -1).T
    return SupportHistogram(domain, grid, np.full(len(grid), -np.log(len(grid))))


def test_on_a_support_the_update_moves_a_wide_clique_as_the_dense_one_does(seed: int) -> None:
    """The support's refit (the Horner passes: a clique of three) reaches the measurement,
    and on a support of every cell agrees with the dense histogram's."""
    rng = np.random.default_rng(seed)
    clique = ("x0", "x1", "x5")
    truth = rng.dirichlet(np.ones(8)).reshape(2, 2, 2)
    precise = Measurement(clique=clique, values=truth, sigma=1e-6)
    update = MeasuredUpdate(kind="measure", noise_multiplier=1.0)
    support = update.absorb(_every_cell(DOMAIN), [precise])
    assert isinstance(support, SupportHistogram)
    assert np.abs(support.clique_table(clique).table() - truth).sum() < 1e-4
    # A noisy measurement with a pair: the weighted fit moves both alike on both backends.
    pair_table = rng.dirichlet(np.ones(4)).reshape(2, 2)
    pair = Measurement(clique=("x2", "x3"), values=pair_table, sigma=0.05)
    noisy = Measurement(clique=clique, values=truth + rng.normal(0, 0.02, (2, 2, 2)), sigma=0.02)
    dense = update.absorb(DenseHistogram.uniform(DOMAIN), [pair, noisy])
    on_support = update.absorb(_every_cell(DOMAIN), [pair, noisy])
    np.testing.assert_allclose(on_support.to_array(), dense.to_array(), rtol=1e-8, atol=1e-12)


def test_a_precise_support_refits_longer_and_absorbs_more_of_its_measurement(seed: int) -> None:
    """The refit's rule (where the config keeps its default): 100 steps on a support after
    a measurement more precise than ``PRECISE_REFIT_SIGMA``, else 30, and 30 on the dense
    hypothesis. The longer refit leaves the clique of a rare-celled measurement closer to
    it than 30 steps do, and the precise pair within its noise of where it was."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(64, 0.2)).reshape(DOMAIN.shape)  # rare cells among them
    population = DenseHistogram(DOMAIN, weights)

    def measured(clique: tuple[str, ...], sigma: float) -> Measurement:
        table = population.clique_table(clique).table()
        return Measurement(
            clique=clique, values=table + rng.normal(0, sigma, table.shape), sigma=sigma
        )

    pair, triple = measured(("x0", "x1"), 2e-4), measured(("x2", "x3", "x4"), 4e-4)
    noisy = Measurement(clique=triple.clique, values=triple.values, sigma=2 * PRECISE_REFIT_SIGMA)
    start = MeasuredUpdate(kind="measure", noise_multiplier=1.0, refit_iterations=300).absorb(
        _every_cell(DOMAIN), [pair]
    )
    assert measured_refit_iterations(start, [pair, triple]) == PRECISE_SUPPORT_REFIT_ITERATIONS
    assert measured_refit_iterations(start, [pair, noisy]) == MEASURED_REFIT_ITERATIONS
    dense = DenseHistogram.uniform(DOMAIN)
    assert measured_refit_iterations(dense, [pair, triple]) == MEASURED_REFIT_ITERATIONS

    by_rule = MeasuredUpdate(kind="measure", noise_multiplier=1.0)
    thirty = dataclasses.replace(by_rule, refit_iterations=MEASURED_REFIT_ITERATIONS)

    def gap(hypothesis: Histogram, measurement: Measurement) -> float:
        return float(
            np.square(
                hypothesis.clique_table(measurement.clique).table() - measurement.values
            ).sum()
        )

    longer, shorter = by_rule.absorb(start, [pair, triple]), thirty.absorb(start, [pair, triple])
    assert gap(longer, triple) < gap(shorter, triple) < gap(start, triple)
    assert gap(longer, pair) <= gap(start, pair) + pair.values.size * pair.sigma**2


def test_the_plan_leaves_the_refit_to_the_rule_unless_the_config_sets_it() -> None:
    default = PMWConfig(epsilon=1.0, delta=1e-6, update="measure", announced_queries=100)
    pace = plan_budget(default, n=5_000, domain=DOMAIN).measured_update()
    assert pace is not None and pace.refit_iterations is None
    chosen = dataclasses.replace(default, refit_iterations=7)
    pace = plan_budget(chosen, n=5_000, domain=DOMAIN).measured_update()
    assert pace is not None and pace.refit_iterations == 7


def test_a_noisy_measurement_moves_its_clique_towards_it_and_the_precise_pair_holds(
    seed: int,
) -> None:
    """The weighted refit: a measurement 10x noisier than the prior's pair moves its
    clique's marginal towards it, while the pair stays within its noise of where the
    prior had it. Both are marginals of one (random) population plus noise."""
    rng = np.random.default_rng(seed)
    population = DenseHistogram(DOMAIN, rng.dirichlet(np.full(64, 0.3)).reshape(DOMAIN.shape))
    update = MeasuredUpdate(kind="measure", noise_multiplier=1.0)

    def measured(clique: tuple[str, ...], sigma: float) -> Measurement:
        table = population.clique_table(clique).table()
        return Measurement(
            clique=clique, values=table + rng.normal(0, sigma, table.shape), sigma=sigma
        )

    pair = measured(("x0", "x1"), 0.001)
    noisy = measured(("x0", "x2", "x5"), 0.01)
    prior = update.absorb(DenseHistogram.uniform(DOMAIN), [pair])
    absorbed = update.absorb(prior, [pair, noisy])

    def gap(hypothesis: Histogram, measurement: Measurement) -> float:
        return float(
            np.abs(hypothesis.clique_table(measurement.clique).table() - measurement.values).sum()
        )

    assert gap(absorbed, noisy) < 0.5 * gap(prior, noisy)
    assert gap(absorbed, pair) <= gap(prior, pair) + 4 * pair.sigma


def _stream(seed: int) -> list[CMQuery]:
    return random_queries(DOMAIN, 1000, rng=np.random.default_rng(seed), losses=("logistic",))


def _distinct(queries: list[CMQuery]) -> int:
    """The stream's distinct queries: what ``pmwcm run`` announces (repeats need no round)."""
    return len({query_key(q, DOMAIN) for q in queries})


def _measured_engine(  # type: ignore[no-untyped-def]
    records: np.ndarray,
    update: str,
    seed: int,
    k: int = 1000,
    backend: str = "dense",
    epsilon: float = 1.0,
):
    data = PrivateData.from_records(DOMAIN, records)
    config = PMWConfig(
        epsilon=epsilon,
        delta=1e-6,
        announced_queries=k,
        mode="hybrid",
        after_halt="synthetic",
        update=update,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        support_size=1000 if backend == "support" else 0,
    )
    return build_engine(data, config, noise=NumpyNoise(seed=seed))


@pytest.mark.parametrize("backend", ["dense", "support"])
def test_the_engine_reads_the_data_only_through_the_noisy_measurement(
    seed: int, backend: str
) -> None:
    engine = _measured_engine(_records(seed), "measure", seed, _distinct(_stream(seed)), backend)
    assert engine.backend is not None and engine.backend.kind == backend
    queries = _stream(seed)
    measured = 0
    for query in queries:
        before, measurements = engine.hypothesis, engine.prior_measurements
        answer = engine.answer(query)
        if answer.source == "oracle" and not answer.repeated:
            measured += 1
            measurement = engine.prior_measurements[-1]
            kept = engine.prior_measurements[:-1]
            assert len(kept) == len(measurements)
            assert all(a is b for a, b in zip(kept, measurements, strict=True))
            # The new hypothesis is a function of the old one and the released values.
            expected = engine.measured_update.absorb(before, engine.prior_measurements)
            assert np.array_equal(expected.to_array(), engine.hypothesis.to_array())
            assert measurement.sigma == clique_sigma(
                engine.measured_update.noise_multiplier, engine.data.n
            )
    # Each fresh measured release is one update, and the pacing made some. (Since round 3
    # [a, b] and [b, a] are one query, so most of this stream is repeats, which are
    # answered without a round: fewer than T - 1 paced updates fall on new queries.)
    assert 1 <= measured == len(engine.updates) <= engine.settings.max_updates


def _exact_epsilon(events: list[dp_accounting.DpEvent], delta: float) -> float:
    """dp_accounting's own PLD of the events: the Gaussians merged exactly (their
    composition is the Gaussian of ``mu^2 = sum 1 / m^2``), a pure event as its
    privacy-parameters PLD."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    gaussians = [e.noise_multiplier for e in events if isinstance(e, dp_accounting.GaussianDpEvent)]
    pure = [e for e in events if not isinstance(e, dp_accounting.GaussianDpEvent)]
    total = pld_lib.from_gaussian_mechanism(
        1.0 / np.sqrt(sum(1.0 / m**2 for m in gaussians)), value_discretization_interval=1e-4
    )
    for event in pure:
        params = common.DifferentialPrivacyParameters(event.epsilon, event.delta)
        total = total.compose(
            pld_lib.from_privacy_parameters(params, value_discretization_interval=1e-4)
        )
    return float(total.get_epsilon_for_delta(delta))


@pytest.mark.parametrize(
    ("update", "epsilon"), [("measure", 1.0), ("both", 1.0), ("measure", 16.0)]
)
def test_the_ledger_is_exact_composition_of_its_events(
    update: str, epsilon: float, seed: int
) -> None:
    """At eps = 16 the update budget's signal plans every announced query as an update
    (more than 20 measurements, :func:`measured_updates`): still exact composition."""
    engine = _measured_engine(
        _records(seed), update, seed, _distinct(_stream(seed)), epsilon=epsilon
    )
    assert (engine.settings.max_updates > 20) == (epsilon > 1.0)
    queries = _stream(seed)
    for query in queries:
        engine.answer(query)
    events = [entry.event for entry in engine.ledger.entries]
    labels = [entry.label for entry in engine.ledger.entries]
    assert sum(label.startswith("clique measurement") for label in labels) == len(engine.updates)
    assert sum(label.startswith("oracle call") for label in labels) == (
        len(engine.updates) if update == "both" else 0
    )
    exact = _exact_epsilon(events, 1e-6)
    # The ledger's PLD is an upper bound within its discretisation (h = 1e-3).
    assert exact - 1e-9 <= engine.ledger.spent_epsilon() <= exact * (1 + 5e-3) + 1e-6
    # Paced to the announced stream: (nearly) the whole budget is spent, never more.
    assert 0.95 * epsilon <= engine.ledger.spent_epsilon() <= epsilon + 1e-9


def test_the_certificate_bounds_the_excess_risk_it_certifies(seed: int) -> None:
    rng = np.random.default_rng(seed)
    noise = NumpyNoise(seed=seed)
    misses = 0
    for _ in range(200):
        truth = rng.dirichlet(np.ones(8))
        measurement = measure_table(truth, ("a",), n=500, noise_multiplier=1.0, noise=noise)
        fitted = np.clip(measurement.values, 0.0, None)
        fitted = fitted / fitted.sum()
        bound = excess_risk_certificate(
            scale=1.0, measurement=measurement, fitted=fitted, beta=0.05
        )
        misses += np.abs(fitted - truth).sum() > bound  # S ||D_C - P_C||_1 <= bound
    # P(miss) <= 0.05 per draw; 200 draws: P(misses > 25) < 1e-6 (binomial tail).
    assert misses <= 25
    assert gaussian_l1_bound(1.0, 8, beta=0.05) > 8 * np.sqrt(2 / np.pi)


def test_update_setting_is_checked_before_anything_is_spent() -> None:
    with pytest.raises(ValueError, match="update must be one of"):
        PMWConfig(epsilon=1.0, delta=1e-6, update="sometimes")  # type: ignore[arg-type]


def test_a_snapshot_carries_the_measurements_and_the_restored_engine_goes_on(seed: int) -> None:
    records = _records(seed)
    engine = _measured_engine(records, "measure", seed, _distinct(_stream(seed)))
    queries = _stream(seed)
    for query in queries[:500]:
        engine.answer(query)
    made = len(engine.updates)
    assert made >= 4
    restored = restore(
        _measured_engine(records, "measure", seed, _distinct(_stream(seed))), snapshot(engine)
    )
    assert restored.measured_update == engine.measured_update
    assert len(restored.prior_measurements) == len(engine.prior_measurements)
    for mine, theirs in zip(restored.prior_measurements, engine.prior_measurements, strict=True):
        assert mine.clique == theirs.clique and mine.sigma == theirs.sigma
        assert np.array_equal(mine.values, theirs.values)
    assert np.array_equal(restored.hypothesis.to_array(), engine.hypothesis.to_array())
    for query in queries[500:]:
        restored.answer(query)
    assert len(restored.updates) > made
    assert restored.ledger.entries[-1].label.startswith("clique measurement")


#: One attribute wide enough that a clique with it cannot be measured (> 2^12 cells).
WIDE_DOMAIN = Domain.from_sizes({"y": 2, "x": 2, "wide": 3000})


def test_an_unmeasurable_clique_takes_four_slots_at_half_the_multiplier(seed: int) -> None:
    """On a support, the oracle call on a clique too large to measure is one Gaussian at
    ``m / 2`` taking four slots from a pool of twelve the plan keeps beyond the
    measurements' ``T``, then one slot once the pool is spent; the ledger stays exact
    composition within the budget, and the engine halts once the slots are spent
    (threshold 0: the sparse vector flags nearly every query)."""
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, 4_000) for s in WIDE_DOMAIN.sizes], axis=1)
    data = PrivateData.from_records(WIDE_DOMAIN, records)
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, announced_queries=50, mode="hybrid", after_halt="synthetic",
        update="measure", threshold=0.0, backend="support", support_size=1000,
    )  # fmt: skip
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    update, cutoff = engine.measured_update, engine.settings.max_updates
    assert update is not None and update.fallback == FallbackRule(slots=4, pool=12, threshold=3.0)
    assert cutoff == 12 + 20
    wide = CMQuery(loss="logistic", target="y", features=("wide",), encodings={"wide": "ordinal"})
    narrow = CMQuery(loss="logistic", target="y", features=("x",))
    assert not update.measures(WIDE_DOMAIN, wide.clique) and update.measures(
        WIDE_DOMAIN, narrow.clique
    )
    ridge = [
        dataclasses.replace(wide, l2=0.01 * (j + 1)) for j in range(2 * cutoff)
    ]  # distinct queries on the wide clique
    for query in [narrow, *ridge]:
        engine.answer(query)
        if engine.halted:
            break
    calls = [e for e in engine.ledger.entries if e.label.startswith("oracle call")]
    assert calls and all(
        e.event.noise_multiplier == pytest.approx(update.noise_multiplier / 2.0) for e in calls[:3]
    )
    flags = [update.measures(WIDE_DOMAIN, u.round.clique) for u in engine.updates]
    used, measured = update.fallback.slots_used(flags, cutoff=cutoff), sum(flags)
    assert engine.halted and used.total == cutoff and used.pooled == 12
    # Three calls of four slots from the pool, then one slot each until T is spent.
    assert len(engine.updates) == measured + len(calls) and len(calls) == 3 + cutoff - 12 - measured
    pooled = [e for e in calls if e.event.noise_multiplier < update.noise_multiplier]
    assert len(pooled) == 3
    exact = _exact_epsilon([e.event for e in engine.ledger.entries], 1e-6)
    assert exact - 1e-9 <= engine.ledger.spent_epsilon() <= 1.0 + 1e-9


def test_the_measurements_grow_with_the_update_budgets_signal() -> None:
    """``T`` is one measurement per 50 of the update budget's ``epsilon n``, between 20 and
    200, at least the budget rule's, at most the announced queries; a dense plan hands it
    the update budget's share, a support plan none."""
    assert [measured_updates(10, update_signal=s) for s in (0, 1_000, 2_030, 9_768, 1e9)] == [
        20, 20, 41, 195, 200,
    ]  # fmt: skip
    assert measured_updates(300, update_signal=1e9) == 300  # a T set by hand stays
    assert measured_updates(10, 100, update_signal=1e9) == 100
    data = PrivateData.from_records(DOMAIN, _records(0, n=3_000))
    planned = {}
    for epsilon in (0.5, 4.0, 20.0):
        config = PMWConfig(epsilon=epsilon, delta=1e-6, mode="hybrid", update="measure")
        plan = plan_budget(config, n=data.n, domain=DOMAIN)
        signal = epsilon * data.n * plan.config.split.oracle
        planned[epsilon] = plan.config.max_updates
        assert planned[epsilon] == measured_updates(10, update_signal=signal)
    assert planned[0.5] == 20 and planned[20.0] == 200
    # On a support the sparse vector's cutoff is T, and its flags on cliques too large to
    # measure grow with it: T stays 20 (and the oracle calls' pool beyond it).
    support = PMWConfig(
        epsilon=20.0, delta=1e-6, mode="hybrid", update="measure", backend="support",
        support_size=1000,
    )  # fmt: skip
    plan = plan_budget(support, n=data.n, domain=DOMAIN)
    assert plan.backend.kind == "support" and plan.config.max_updates == 20 + 12


def test_the_pool_joins_the_schedule_so_a_stream_without_fallbacks_spends_every_slot() -> None:
    """With no flagged query at all, the paced updates alone spend all ``T`` slots, the
    oracle pool's included (it joins the schedule in step with the stream), and the
    first ones fall where the schedule without the pool puts them."""
    pooled = MeasuredUpdate(
        kind="measure", noise_multiplier=1.0, pace_queries=1000,
        fallback=FallbackRule(slots=4, pool=12),
    )  # fmt: skip
    plain = dataclasses.replace(pooled, fallback=FallbackRule())

    def schedule(update: MeasuredUpdate, cutoff: int) -> list[int]:
        made: list[int] = []
        for j in range(1000):
            if update.due(answered=j, updates=len(made), cutoff=cutoff):
                made.append(j)
        return made

    with_pool, without = schedule(pooled, 32), schedule(plain, 20)
    assert len(with_pool) == 32 and len(without) == 20
    assert with_pool[0] <= without[0] and with_pool[-1] == 999
    # Spread over the stream in step with it, not bunched at its end: by answer 600 the
    # pool has added its share (12 x 601 / 950) to the schedule's.
    assert sum(j < 600 for j in with_pool) >= sum(j < 600 for j in without) + 4


def test_the_first_paced_update_falls_on_the_first_query_and_the_rest_stay() -> None:
    """Until the first update every answer rests on the prior alone, so the first paced
    update falls on the stream's first fresh query (over the announced measured queries,
    on the first of them); the later ones fall where ``ceil(i k' / (T - reserve))``
    puts them, and the budget is still spent by the end."""
    pace = MeasuredUpdate(kind="measure", noise_multiplier=1.0, pace_queries=1000)

    def schedule(update: MeasuredUpdate, measured: list[bool] | None = None) -> list[int]:
        made: list[int] = []
        for j in range(1000):
            here = True if measured is None else measured[j]
            if update.due(answered=j, updates=len(made), cutoff=20, measured=here):
                made.append(j)
        return made

    plain = schedule(pace)
    horizon, paced = 950, 20 - 6  # ceil(0.95 k) and T - max(2, ceil(0.3 T))
    assert plain[0] == 0 and len(plain) == 20
    assert plain[1:paced] == [math.ceil(i * horizon / paced) - 1 for i in range(2, paced + 1)]
    measured = [j >= 7 and j % 5 == 2 for j in range(1000)]
    positions = tuple(j for j in range(1000) if measured[j])
    announced = dataclasses.replace(pace, measured_positions=positions)
    over_positions = schedule(announced, measured)
    assert over_positions[0] == positions[0] and len(over_positions) == 20
    assert all(measured[j] for j in over_positions)


def test_an_announced_stream_is_paced_over_its_measured_queries() -> None:
    """On full-resolution tables few announced queries are measurable, and mostly early
    in the stream. Paced over all answers, the last updates fall due where no measured
    query comes and slots are left; paced over the announced measured queries, every
    slot is spent, each on a measured query, and spread over them (not bunched at the
    end of the stream)."""
    measured = [j < 300 and j % 3 == 0 for j in range(1000)]  # 100, all in the first 30%
    announced = MeasuredUpdate(
        kind="measure", noise_multiplier=1.0, pace_queries=1000,
        measured_positions=tuple(j for j in range(1000) if measured[j]),
        fallback=FallbackRule(slots=4, pool=12),
    )  # fmt: skip
    unannounced = dataclasses.replace(announced, measured_positions=())

    def schedule(update: MeasuredUpdate, cutoff: int = 32) -> list[int]:
        made: list[int] = []
        for j in range(1000):
            if update.due(answered=j, updates=len(made), cutoff=cutoff, measured=measured[j]):
                made.append(j)
        return made

    paced = schedule(announced)
    assert len(paced) == 32 and all(measured[j] for j in paced)
    assert sum(j < 150 for j in paced) >= 10  # spread over the measured queries
    assert len(schedule(unannounced)) < 32


def test_the_plan_paces_over_the_announced_measured_queries() -> None:
    """``pmwcm run``'s announced cliques set the positions (public); without them none."""
    names = WIDE_DOMAIN.names
    small = tuple(n for n, s in zip(names, WIDE_DOMAIN.sizes, strict=True) if s <= 4)[:2]
    wide = tuple(names)
    workload = [wide, small, wide, small]
    assert measured_positions(WIDE_DOMAIN, workload) == (1, 3)
    config = PMWConfig(epsilon=1.0, delta=1e-6, update="measure", announced_queries=4)
    announced = plan_budget(config, n=5_000, domain=WIDE_DOMAIN, workload=workload)
    plain = plan_budget(config, n=5_000, domain=WIDE_DOMAIN)
    assert announced.measured_positions == (1, 3) and plain.measured_positions == ()
    pace = announced.measured_update()
    assert pace is not None and pace.measured_positions == (1, 3)
    with pytest.raises(ValueError, match="measured_positions"):
        dataclasses.replace(pace, measured_positions=(3, 1))


def test_a_support_plan_raises_the_threshold_on_unmeasurable_cliques_only(seed: int) -> None:
    """The plan's fallback rule: on a support, four slots, a pool of twelve and three times
    the threshold on a clique too large to measure; on a dense hypothesis none of it."""
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, 4_000) for s in WIDE_DOMAIN.sizes], axis=1)
    data = PrivateData.from_records(WIDE_DOMAIN, records)
    rules = {}
    for backend in ("support", "dense"):
        config = PMWConfig(
            epsilon=1.0, delta=1e-6, announced_queries=50, mode="hybrid", update="measure",
            backend=backend, support_size=1000 if backend == "support" else 0,
        )  # fmt: skip
        update = build_engine(data, config, noise=NumpyNoise(seed=seed)).measured_update
        assert update is not None
        rules[backend] = update.fallback
    assert rules["dense"] == FallbackRule()
    support = rules["support"]
    assert support.threshold_factor(measured=True) == 1.0
    assert support.threshold_factor(measured=False) == UNMEASURED_THRESHOLD > 1.0


def _thresholds_given(engine: OnlinePMW) -> list[float]:
    """The list the engine's sparse vector appends each test's threshold to, from now on."""
    given: list[float] = []
    above = engine.sparse_vector.above

    def spy(value: float, *, threshold: float) -> bool:
        given.append(threshold)
        return above(value, threshold=threshold)

    engine.sparse_vector.above = spy  # type: ignore[method-assign]
    return given


def test_the_certificate_states_the_threshold_the_test_used(seed: int) -> None:
    """A hypothesis answer on a clique too large to measure passed a test at three times
    the rule's threshold, so its stated bound is read there too (it was read at the rule's,
    understating it); a measurable clique's stays at the rule's. Public: nothing spent."""
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, 4_000) for s in WIDE_DOMAIN.sizes], axis=1)
    data = PrivateData.from_records(WIDE_DOMAIN, records)
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, announced_queries=50, mode="hybrid", update="measure",
        backend="support", support_size=1000,
    )  # fmt: skip
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    wide = CMQuery(loss="logistic", target="y", features=("wide",), encodings={"wide": "ordinal"})
    narrow = CMQuery(loss="logistic", target="y", features=("x",))
    alpha = engine.sparse_vector.accuracy_margin(queries=50, beta=0.05)
    charged = engine.ledger.entries  # the prior's
    for query, factor in ((narrow, 1.0), (wide, UNMEASURED_THRESHOLD)):
        round_ = engine.cm_round(query)
        delta = round_.sensitivity(data.n)
        expected = (factor * engine.settings.threshold + alpha) * delta + round_.tau
        bound = engine.certified_error(query, beta=0.05, queries=50)
        assert bound == pytest.approx(expected, rel=1e-12)
    assert engine.ledger.entries == charged and not engine.answers
    # The threshold the wide query's test is given is the one its bound states.
    tested = _thresholds_given(engine)
    engine.answer(narrow)  # the first paced update falls here, with no test
    tested.clear()
    engine.answer(wide)
    assert tested == [pytest.approx(UNMEASURED_THRESHOLD * engine.settings.threshold)]


def _flagging_stream(seed: int) -> tuple[list[str], list[float], float]:
    """A 200-query stream under a threshold the sparse vector's noise clears at will (one
    unit of a query's sensitivity): the answers' sources, the thresholds the tests were
    given, and the rule's threshold."""
    data = PrivateData.from_records(DOMAIN, _records(seed))
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, announced_queries=200, mode="hybrid", after_halt="synthetic",
        update="measure", prior="uniform", threshold=1.0,
    )  # fmt: skip
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    given = _thresholds_given(engine)
    queries = random_queries(DOMAIN, 200, rng=np.random.default_rng(seed))
    sources: list[str] = [engine.answer(query).source for query in queries]
    return sources, given, engine.settings.threshold


def test_the_threshold_doubles_once_the_flags_outrun_the_reserve(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flags beyond the pacing's reserve take the slots its schedule needs later, and the
    engine halts once they are gone; from there each flag must clear twice the last
    threshold. Every test gets the rule's threshold times a power of two, and three streams
    keep more of their answers checked than with the factor held at 1 (a stream whose
    flags never outrun the reserve is the same either way)."""
    seeds = (seed, seed + 1000, seed + 2000)
    unchecked, powers = 0, []
    for stream_seed in seeds:
        sources, given, rule = _flagging_stream(stream_seed)
        unchecked += sources.count("synthetic")
        powers += [math.log2(threshold / rule) for threshold in given]
    assert all(p == int(p) and p >= 0 for p in powers) and max(powers) >= 1
    monkeypatch.setattr(MeasuredUpdate, "threshold_factor", lambda self, **counts: 1.0)
    flat = 0
    for stream_seed in seeds:
        sources, given, rule = _flagging_stream(stream_seed)
        flat += sources.count("synthetic")
        assert set(given) == {rule}
    assert unchecked < flat


#: A query on all four cannot be measured (24,000 cells), its part on ``y, x, z`` can.
PART_DOMAIN = Domain.from_sizes({"y": 2, "x": 2, "z": 2, "wide": 3000})
WIDE_QUERY = CMQuery(
    loss="logistic", target="y", features=("x", "z", "wide"), encodings={"wide": "ordinal"},
    interactions=(("x", "z"),),
)  # fmt: skip


def _part_data(seed: int, n: int = 4_000) -> PrivateData:
    rng = np.random.default_rng(seed)
    x, z = rng.integers(0, 2, n), rng.integers(0, 2, n)
    y = (x ^ z) | (rng.random(n) < 0.05)  # the label a 3-way structure no pair shows
    records = np.stack([y, x, z, rng.integers(0, 3000, n)], axis=1)
    return PrivateData.from_records(PART_DOMAIN, records)


def _part_engine(data: PrivateData, seed: int, k: int, **settings: object):  # type: ignore[no-untyped-def]
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, announced_queries=k, mode="hybrid", after_halt="synthetic",
        prior="uniform", **settings,  # type: ignore[arg-type]
    )  # fmt: skip
    return build_engine(data, config, noise=NumpyNoise(seed=seed))


def _ridge(query: CMQuery, count: int) -> list[CMQuery]:
    """``count`` distinct queries on ``query``'s clique (each a round of its own)."""
    return [dataclasses.replace(query, l2=0.01 * (j + 1)) for j in range(count)]


def test_the_part_kept_is_the_largest_that_fits_the_least_measured_first() -> None:
    first = part_to_measure(PART_DOMAIN, WIDE_QUERY, [])
    assert first is not None and first == first.canonical(PART_DOMAIN)
    # Its features, their encodings and the interactions within them; the rest as asked.
    assert (first.features, first.interactions, dict(first.encodings)) == (
        ("x", "z"), (("x", "z"),), {},
    )  # fmt: skip
    assert (first.loss, first.target, first.radius) == ("logistic", "y", WIDE_QUERY.radius)
    domain = Domain.from_sizes({"y": 2, "a": 50, "b": 50, "c": 3})
    query = CMQuery(loss="squared", target="y", features=("a", "b", "c"))
    picks = [part_to_measure(domain, query, measured) for measured in (
        [], [("y", "a", "c")], [("c", "y", "a"), ("y", "b", "c")],
        [("y", "a", "c"), ("y", "b", "c"), ("y", "c", "a")],
    )]  # fmt: skip
    assert [p.features if p else None for p in picks] == [
        ("a", "c"), ("b", "c"), ("a", "c"), ("b", "c"),
    ]  # fmt: skip
    wide_only = CMQuery(loss="logistic", target="y", features=("wide",))
    assert part_to_measure(PART_DOMAIN, wide_only, []) is None  # 6,000 cells: nothing fits


def test_a_paced_update_due_on_an_unmeasurable_clique_measures_a_part_first(seed: int) -> None:
    data = _part_data(seed)
    # No flags (a threshold no error reaches): the part is the round's only update.
    engine = _part_engine(data, seed, k=5, update="measure", threshold=1e9)
    update = engine.measured_update
    assert update is not None and not update.measured_positions
    assert update.measures_parts(PART_DOMAIN, engine.cm_round(WIDE_QUERY).clique)
    before = engine.hypothesis
    answer = engine.answer(WIDE_QUERY)  # the end of a 5-query stream: an update is due at once
    assert answer.source == "hypothesis" and answer.updates == 1
    (part,) = engine.updates
    assert part.query == part_to_measure(PART_DOMAIN, WIDE_QUERY, [])
    assert set(part.round.clique) == {"y", "x", "z"}
    # Paid before it is drawn; the round's own sparse vector test comes after it.
    labels = [entry.label for entry in engine.ledger.entries]
    assert labels == ["clique measurement 1", "sparse vector"]
    (measurement,) = engine.prior_measurements
    assert measurement.clique == part.round.clique
    assert measurement.sigma == clique_sigma(update.noise_multiplier, data.n)
    # Read through the noisy measurement only: the hypothesis is the refit onto the released
    # values, and its marginal on the part moved towards them (never onto the data).
    refitted = update.absorb(before, [measurement])
    assert np.array_equal(refitted.to_array(), engine.hypothesis.to_array())
    truth = data.marginal(measurement.clique)
    assert not np.array_equal(measurement.values, truth)

    def gap(histogram: Histogram) -> float:
        return float(np.abs(histogram.clique_table(measurement.clique).table() - truth).sum())

    assert gap(engine.hypothesis) < gap(before) / 4


@pytest.mark.parametrize("setting", ["announced cliques", "both", "oracle"])
def test_no_part_is_measured_where_the_pacing_knows_the_cliques_or_no_measure_update(
    setting: str, seed: int
) -> None:
    data = _part_data(seed)
    narrow = CMQuery(loss="logistic", target="y", features=("x",))
    stream = [narrow, *_ridge(WIDE_QUERY, 4)]
    if setting == "announced cliques":  # the pacing runs over the measured one
        config = PMWConfig(
            epsilon=1.0, delta=1e-6, announced_queries=5, mode="hybrid",
            after_halt="synthetic", prior="uniform", update="measure",
        )  # fmt: skip
        cliques = [query.clique for query in stream]
        engine = build_engine(data, config, noise=NumpyNoise(seed=seed), workload=cliques)
    else:
        engine = _part_engine(data, seed, k=5, update=setting)
    for query in stream:
        engine.answer(query)
    asked = {query_key(query, PART_DOMAIN) for query in stream}
    assert all(query_key(u.query, PART_DOMAIN) in asked for u in engine.updates)


def test_a_part_leaves_a_slot_for_the_rounds_own_flag_and_the_ledger_stays_exact(
    seed: int,
) -> None:
    """``T = 3`` and every query flagged (threshold ``-10^12``). The first round's part
    takes one slot and its own flag another (an oracle call: the clique cannot be
    measured). At the second round one slot is left: no part (its flag would be a
    fourth update), the flag takes it, and the engine halts, its budget spent within
    ``(epsilon, delta)``. (:meth:`MeasuredUpdate.part_due`'s doctest has the slot rule.)"""
    data = _part_data(seed)
    engine = _part_engine(data, seed, k=3, update="measure", threshold=-1e12)
    assert engine.settings.max_updates == 3
    for query in _ridge(WIDE_QUERY, 3):
        engine.answer(query)
    labels = [entry.label for entry in engine.ledger.entries]
    assert labels == ["clique measurement 1", "sparse vector", "oracle call 2", "oracle call 3"]
    assert engine.halted and [len(u.round.clique) for u in engine.updates] == [3, 4, 4]
    assert engine.answers[-1].source == "synthetic"
    exact = _exact_epsilon([e.event for e in engine.ledger.entries], 1e-6)
    assert exact - 1e-9 <= engine.ledger.spent_epsilon() <= 1.0 + 1e-9


def test_parts_are_measured_at_the_end_of_the_stream_only(seed: int) -> None:
    """k = 100 announced, ``T < k``, no flags: the schedule keeps waiting for a query it
    can measure whole until the last ``T`` queries, where what is left is spent on
    parts, one a query, all but the last slot."""
    k = 100
    engine = _part_engine(_part_data(seed), seed, k=k, update="measure", threshold=1e9)
    cutoff = engine.settings.max_updates
    assert cutoff < k
    answers = [engine.answer(query) for query in _ridge(WIDE_QUERY, k)]
    first = k - cutoff
    assert [a.updates for a in answers[:first]] == [0] * first
    assert [a.updates for a in answers[first:]] == [*range(1, cutoff), cutoff - 1]
    assert all(len(u.round.clique) == 3 for u in engine.updates)


def test_a_snapshot_keeps_the_part_as_an_update_and_its_slot(seed: int) -> None:
    """A restored engine counts the parts' slots as the saved one does, so both go on to
    make the same parts (no flags: a threshold no error reaches; the answers differ only
    by the noise streams, which a restore does not carry)."""
    data = _part_data(seed)
    stream = _ridge(WIDE_QUERY, 4)

    def engine_():  # type: ignore[no-untyped-def]
        return _part_engine(data, seed, k=4, update="measure", threshold=1e9)

    engine = engine_()
    for query in stream[:2]:
        engine.answer(query)
    assert [len(u.round.clique) for u in engine.updates] == [3, 3]
    restored = restore(engine_(), snapshot(engine))
    assert [u.query for u in restored.updates] == [u.query for u in engine.updates]
    assert np.array_equal(restored.hypothesis.to_array(), engine.hypothesis.to_array())
    for query in stream[2:]:
        engine.answer(query)
        restored.answer(query)
    assert len(engine.updates) > 2
    assert [u.query for u in restored.updates] == [u.query for u in engine.updates]


def _past_the_slots(seed: int, threshold: float, after_halt: AfterHalt = "synthetic") -> OnlinePMW:
    """A measured engine announced 5 queries: the pacing's end-of-stream rule spends
    its ``T`` slots on the first ``T`` (measurable) queries, with no test; the stream
    then goes on past them."""
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, announced_queries=5, mode="hybrid", after_halt=after_halt,
        update="measure", prior="uniform", threshold=threshold,
    )  # fmt: skip
    data = PrivateData.from_records(DOMAIN, _records(seed))
    return build_engine(data, config, noise=NumpyNoise(seed=seed))


#: Distinct queries on one measurable clique (each a round of its own).
PAST_STREAM = _ridge(CMQuery(loss="logistic", target="x5", features=("x0", "x1", "x2")), 30)


def test_a_measured_engine_tests_past_its_last_update_and_halts_at_the_first_flag(
    seed: int,
) -> None:
    """The paced updates take the ``T`` slots with no positive, so the sparse vector
    (cutoff ``T``, charged whole) has its positives left: past the last update every
    query is still tested, and one below the threshold is a checked hypothesis answer
    (it had been synthetic). The first flag with no slot to act on halts the engine
    there, closing the sparse vector; nothing is spent after the last update."""
    quiet = _past_the_slots(seed, threshold=1e9)  # no error reaches it
    cutoff = quiet.settings.max_updates
    assert cutoff < len(PAST_STREAM)
    sources = [quiet.answer(query).source for query in PAST_STREAM]
    assert sources == ["oracle"] * cutoff + ["hypothesis"] * (len(PAST_STREAM) - cutoff)
    assert not quiet.halted and quiet.sparse_vector.positives == 0
    assert len(quiet.updates) == cutoff

    flagging = _past_the_slots(seed, threshold=-1e12)  # every test flags
    charged = None
    answers = []
    for j, query in enumerate(PAST_STREAM):
        if j == cutoff:
            charged = list(flagging.ledger.entries)
        answers.append(flagging.answer(query))
    assert [a.source for a in answers[:cutoff]] == ["oracle"] * cutoff
    assert [a.source for a in answers[cutoff:]] == ["synthetic"] * (len(PAST_STREAM) - cutoff)
    assert flagging.halted and flagging.sparse_vector.halted
    assert list(flagging.ledger.entries) == charged  # the test's cost was charged whole
    labels = [entry.label for entry in flagging.ledger.entries]
    assert labels.count("sparse vector") == 1 and len(flagging.updates) == cutoff
    # The halt is in the sparse vector's state, so a restored engine stays halted, and one
    # restored past its slots, not halted, goes on testing.
    halted = restore(_past_the_slots(seed, threshold=-1e12), snapshot(flagging))
    assert halted.halted and halted.answer(_ridge(PAST_STREAM[0], 31)[-1]).source == "synthetic"
    going_on = restore(_past_the_slots(seed, threshold=1e9), snapshot(quiet))
    assert not going_on.halted
    assert going_on.answer(_ridge(PAST_STREAM[0], 31)[-1]).source == "hypothesis"


def test_an_engine_that_refuses_after_its_halt_halts_when_its_slots_are_spent(
    seed: int,
) -> None:
    """With ``after_halt="refuse"`` a flag past the slots could only be refused, and a
    refusal is no answer a durable store commits: the test's outcome would be seen before
    the closed sparse vector is saved. So such an engine halts when its slots are spent,
    as the paper's does, and refuses before any test."""
    engine = _past_the_slots(seed, threshold=-1e12, after_halt="refuse")
    cutoff = engine.settings.max_updates
    for query in PAST_STREAM[:cutoff]:
        assert engine.answer(query).source == "oracle"
    assert engine.halted and not engine.sparse_vector.halted
    charged, state = list(engine.ledger.entries), engine.sparse_vector.export_state()
    tested = _thresholds_given(engine)
    for query in PAST_STREAM[cutoff : cutoff + 2]:
        with pytest.raises(EngineHalted, match="after_halt='synthetic'"):
            engine.answer(query)
    assert not tested and engine.sparse_vector.export_state() == state
    assert list(engine.ledger.entries) == charged and len(engine.answers) == cutoff
