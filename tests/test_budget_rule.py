"""``T`` by ``(epsilon, n)`` for an informed start (issue 15 item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.engine.budget_rule import MAX_UPDATES, MIN_UPDATES, updates_for_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
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
