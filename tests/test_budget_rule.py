"""Budget rules (issue 15 item 2): the split and ``T`` by the prior's signal (the
default), and ``T`` by ``(epsilon, n)`` for an informed start (opt-in)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import dp_accounting
import numpy as np
import pytest

from pmwcm.engine.budget_rule import (
    ANCHORS,
    MAX_UPDATES,
    MIN_UPDATES,
    PRIOR_SHARE_SMALL,
    SIGNAL_LARGE,
    SIGNAL_SMALL,
    UPDATES_SMALL,
    plan_for_budget,
    updates_for_budget,
)
from pmwcm.engine.practical import PMWConfig, build_engine, split_fits
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.accounting import PLDAccountant, calibrate_gaussian_multiplier
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData


def test_updates_follow_epsilon_n_within_their_bounds() -> None:
    values = [updates_for_budget(eps, n) for eps in (0.1, 0.5, 1.0, 4.0) for n in (10**3, 10**5)]
    assert min(values) == MIN_UPDATES and max(values) == MAX_UPDATES
    assert updates_for_budget(1.0, 20_000) == 5
    assert updates_for_budget(0.5, 20_000) < updates_for_budget(1.0, 20_000)
    for bad in (0.0, float("inf")):
        with pytest.raises(ValueError, match="epsilon"):
            updates_for_budget(bad, 100)
    with pytest.raises(ValueError, match="n must be"):
        updates_for_budget(1.0, 0)


def test_the_rule_is_opt_in_and_sets_the_engines_t_from_public_n() -> None:
    domain = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
    records = np.random.default_rng(0).integers(0, 2, size=(20_000, 3))
    data = PrivateData.from_records(domain, records)
    config = PMWConfig(epsilon=1.0, delta=1e-6)
    assert config.max_updates == 10  # the default is unchanged
    ruled = config.with_updates_for(data.n)
    assert ruled.max_updates == 5
    engine = build_engine(data, ruled, noise=NumpyNoise(seed=0))
    assert engine.settings.max_updates == engine.sparse_vector.cutoff == 5
    uniform = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform")
    assert uniform.with_updates_for(20_000).max_updates == 50  # the paper's start: no rule


def test_the_plan_keeps_the_old_split_at_large_signal_and_feeds_the_prior_at_small() -> None:
    # Full-resolution Adult and TV16 at epsilon = 1: the old split, unchanged.
    for n, d in ((39_073, 14), (51_680, 17), (10**6, 14)):
        plan = plan_for_budget(1.0, n, d)
        assert (plan.prior_fraction, plan.sv_fraction, plan.max_updates) == (0.4, 0.3, 10)
    small = plan_for_budget(1.0, 5_000, 14)
    assert (small.prior_fraction, small.max_updates) == (PRIOR_SHARE_SMALL, UPDATES_SMALL)
    assert small.sv_fraction == pytest.approx((1 - PRIOR_SHARE_SMALL) / 2)
    # Every anchor is met exactly, and T never leaves [1, 10].
    for anchor in ANCHORS:
        n = int(np.ceil(anchor.signal * np.sqrt(14 * 13)))
        plan = plan_for_budget(1.0, n, 14)
        assert plan.prior_fraction == pytest.approx(anchor.prior_fraction, abs=1e-3)
        assert plan.max_updates == anchor.max_updates
    # Monotone in the signal between the anchors, and epsilon n trades one for one.
    sizes = np.geomspace(SIGNAL_SMALL, SIGNAL_LARGE, 12) * np.sqrt(14 * 13)
    shares = [plan_for_budget(1.0, int(n), 14).prior_fraction for n in sizes]
    assert all(a >= b for a, b in itertools.pairwise(shares))
    assert plan_for_budget(0.5, 40_000, 14) == plan_for_budget(1.0, 20_000, 14)
    # More attributes: more pairs share the prior's noise, so it counts as less signal.
    wide, narrow = plan_for_budget(1.0, 25_000, 30), plan_for_budget(1.0, 25_000, 14)
    assert wide.prior_fraction > narrow.prior_fraction
    for bad in ({"epsilon": 0.0}, {"n": 0}, {"attributes": 0}):
        args = {"epsilon": 1.0, "n": 100, "attributes": 3} | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            plan_for_budget(**args)


def test_build_engine_applies_the_plan_to_the_default_config_only() -> None:
    domain = Domain.from_sizes({f"x{i}": 2 for i in range(14)})
    records = np.random.default_rng(0).integers(0, 2, size=(2_000, 14))
    data = PrivateData.from_records(domain, records)
    config = PMWConfig(epsilon=1.0, delta=1e-6)
    plan = plan_for_budget(1.0, data.n, 14)
    resolved = config.resolved_for(data.n, 14)
    assert (resolved.prior_fraction, resolved.sv_fraction, resolved.max_updates) == (
        plan.prior_fraction,
        plan.sv_fraction,
        plan.max_updates,
    )
    assert resolved.resolved_for(data.n, 14) == resolved  # resolving twice changes nothing
    engine = build_engine(data, config, noise=NumpyNoise(seed=0))
    assert engine.settings.max_updates == engine.sparse_vector.cutoff == plan.max_updates
    # Every share but the defaults is kept as given, and so is every other prior.
    kept = [
        replace(config, budget_rule="fixed"),
        replace(config, prior_fraction=0.5),
        replace(config, sv_fraction=0.2),
        replace(config, prior="uniform"),
        replace(config, prior="aim"),
    ]
    for other in kept:
        assert other.resolved_for(data.n, 14) == other
    with pytest.raises(ValueError, match="budget_rule must be one of"):
        PMWConfig(epsilon=1.0, delta=1e-6, budget_rule="adaptive")  # type: ignore[arg-type]
    # An explicit T is the user's; the shares still follow the rule.
    assert replace(config, max_updates=4).resolved_for(data.n, 14).max_updates == 4


def test_the_plan_reads_only_public_values_and_spends_exactly_the_budget() -> None:
    domain = Domain.from_sizes({f"x{i}": 2 for i in range(6)})
    rng = np.random.default_rng(1)
    first = PrivateData.from_records(domain, rng.integers(0, 2, size=(3_000, 6)))
    second = PrivateData.from_records(domain, np.zeros((3_000, 6), dtype=np.int64))
    config = PMWConfig(epsilon=1.0, delta=1e-6)
    engines = [build_engine(d, config, noise=NumpyNoise(seed=0)) for d in (first, second)]
    # Two datasets of the same n and schema: the same settings, noise levels and charge.
    assert engines[0].settings == engines[1].settings
    assert engines[0].oracle_noise_level == engines[1].oracle_noise_level
    assert [repr(e.event) for e in engines[0].ledger.entries] == [
        repr(e.event) for e in engines[1].ledger.entries
    ]
    prior_event = engines[0].ledger.entries[0].event
    fixed = build_engine(first, replace(config, budget_rule="fixed"), noise=NumpyNoise(seed=0))
    # The rule's prior measures with less noise than the fixed 40% share would.
    assert prior_event.noise_multiplier < fixed.ledger.entries[0].event.noise_multiplier


def test_the_planned_engine_spends_exactly_its_budget_with_the_prior_at_its_share() -> None:
    domain = Domain.from_sizes({f"x{i}": 2 for i in range(8)})
    data = PrivateData.from_records(
        domain, np.random.default_rng(2).integers(0, 2, size=(10_000, 8))
    )
    config = PMWConfig(epsilon=1.0, delta=1e-6)
    plan = plan_for_budget(1.0, data.n, 8)
    assert 0.4 < plan.prior_fraction < 0.95  # inside the rule's ramp
    engine = build_engine(data, config, noise=NumpyNoise(seed=0))
    accountant = PLDAccountant()
    # The prior is measured at the rule's share of (epsilon, delta), not the fixed 40%.
    expected = calibrate_gaussian_multiplier(
        fixed=None,
        gaussian_count=1,
        epsilon=plan.prior_fraction,
        delta=plan.prior_fraction * 1e-6,
        accountant=accountant,
    )
    prior_event = engine.ledger.entries[0].event
    assert prior_event.noise_multiplier == pytest.approx(expected, rel=1e-9)
    # The prior, the sparse vector and all T oracle calls compose to the total, no more.
    whole = dp_accounting.ComposedDpEvent(
        [
            prior_event,
            engine.sparse_vector.privacy_event(),
            dp_accounting.SelfComposedDpEvent(
                engine.oracle.privacy_event(engine.oracle_noise_level), plan.max_updates
            ),
        ]
    )
    assert accountant.epsilon(whole, delta=1e-6) <= 1.0 + 1e-6


def test_a_split_the_accountant_cannot_fit_falls_back_to_the_fixed_one() -> None:
    # epsilon = 1e-3: the PLD's discretisation leaves a 95% prior no room for the rest.
    tiny = PMWConfig(epsilon=1e-3, delta=1e-6)
    assert plan_for_budget(1e-3, 500, 2).prior_fraction == PRIOR_SHARE_SMALL
    assert not split_fits(replace(tiny, prior_fraction=0.95, sv_fraction=0.025))
    resolved = tiny.resolved_for(500, 2)
    assert (resolved.prior_fraction, resolved.sv_fraction, resolved.max_updates) == (0.4, 0.3, 10)
    ordinary = PMWConfig(epsilon=1.0, delta=1e-6).resolved_for(500, 2)
    assert ordinary.prior_fraction == PRIOR_SHARE_SMALL and split_fits(ordinary)
