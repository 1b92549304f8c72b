"""Contracts of the generic auditor: Clopper-Pearson bounds, event search, verdicts.

Statistical tests use ``alpha = 1e-6``: a correct mechanism is flagged with
probability at most 1e-6 per test (the bounds are exact). Broken mechanisms are
caught with margins that held for every seed in 0..99.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pmwcm.audit import (
    CategoricalFamily,
    Event,
    FixedFamily,
    ThresholdFamily,
    audit,
    clopper_pearson_lower,
    clopper_pearson_upper,
    combine,
    epsilon_lower_bound,
    hockey_stick_lower_bound,
    row_codes,
    search_event,
)

ALPHA = 1e-6


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (517, 1000), (1, 10**6)])
def test_clopper_pearson_matches_scipy_exact_one_sided(k: int, n: int) -> None:
    lo = stats.binomtest(k, n, alternative="greater").proportion_ci(0.95, method="exact").low
    hi = stats.binomtest(k, n, alternative="less").proportion_ci(0.95, method="exact").high
    assert clopper_pearson_lower(k, n, alpha=0.05) == pytest.approx(lo, rel=1e-6, abs=1e-15)
    assert clopper_pearson_upper(k, n, alpha=0.05) == pytest.approx(hi, rel=1e-6, abs=1e-15)


def test_clopper_pearson_covers_at_its_level(seed: int) -> None:
    # 20,000 binomial experiments at alpha = 0.1: misses ~ Bin(20000, <= 0.1); the
    # check fails falsely with probability < 1e-6 (mean <= 2000, sd ~ 42, bound 2230).
    rng = np.random.default_rng(seed)
    p, n = 0.03, 200
    ks = rng.binomial(n, p, size=20_000)
    low = {k: clopper_pearson_lower(k, n, alpha=0.1) for k in np.unique(ks).tolist()}
    assert sum(low[k] > p for k in ks.tolist()) <= 2230


def test_epsilon_bound_formula_and_edge_cases() -> None:
    p0 = clopper_pearson_lower(900, 1000, alpha=0.025)
    p1 = clopper_pearson_upper(100, 1000, alpha=0.025)
    eps = epsilon_lower_bound(k0=900, n0=1000, k1=100, n1=1000, alpha=0.05)
    assert eps == pytest.approx(math.log(p0 / p1))
    with_delta = epsilon_lower_bound(k0=900, n0=1000, k1=100, n1=1000, alpha=0.05, delta=0.1)
    assert with_delta == pytest.approx(math.log((p0 - 0.1) / p1))
    assert epsilon_lower_bound(k0=0, n0=10, k1=0, n1=10, alpha=0.05) == 0.0
    assert epsilon_lower_bound(k0=5, n0=10, k1=5, n1=10, alpha=0.05) == 0.0
    hs = hockey_stick_lower_bound(k0=900, n0=1000, k1=100, n1=1000, epsilon=1.0, alpha=0.05)
    assert hs == pytest.approx(p0 - math.e * p1)
    with pytest.raises(ValueError, match="k=11"):
        clopper_pearson_lower(11, 10, alpha=0.05)
    with pytest.raises(ValueError, match=r"delta=1\.5"):
        epsilon_lower_bound(k0=1, n0=2, k1=1, n1=2, alpha=0.05, delta=1.5)


def laplace(scale: float) -> Any:
    def mechanism(x: float, trials: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.laplace(0.0, scale, trials)

    return mechanism


def test_correct_laplace_is_consistent_and_nearly_tight(seed: int) -> None:
    # 1-DP; the tail event {out >= t} has ratio exactly e for t >= 1.
    rng = np.random.default_rng(seed)
    family = ThresholdFamily(statistic=lambda o: o, name="out")
    r = audit(laplace(1.0), 0.0, 1.0, events=family, trials=200_000, claimed_epsilon=1.0,
              alpha=ALPHA, rng=rng)  # fmt: skip
    assert r.verdict == "consistent"
    assert 0.75 < r.epsilon_lower_bound <= 1.0
    assert r.hockey_stick_lower_bound == 0.0
    assert r.search_trials == 50_000 and r.trials == 200_000


def test_halved_laplace_scale_is_caught(seed: int) -> None:
    # Claims 1-DP, is 2-DP: lower bounds ranged 1.86-1.97 over seeds 0..99.
    rng = np.random.default_rng(seed)
    family = ThresholdFamily(statistic=lambda o: o, name="out")
    r = audit(laplace(0.5), 0.0, 1.0, events=family, trials=200_000, claimed_epsilon=1.0,
              alpha=ALPHA, rng=rng)  # fmt: skip
    assert r.violated and r.epsilon_lower_bound > 1.3
    assert r.hockey_stick_lower_bound is not None and r.hockey_stick_lower_bound > 0


class Spy:
    """Records every call so the test can check that search and final samples differ."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []

    def __call__(self, x: float, trials: int, rng: np.random.Generator) -> np.ndarray:
        self.calls.append((x, trials))
        return x + rng.laplace(0.0, 1.0, trials)


def test_search_uses_separate_trials_and_batches() -> None:
    spy = Spy()
    family = ThresholdFamily(statistic=lambda o: o)
    r = audit(spy, 0.0, 1.0, events=family, trials=2500, search_trials=700, batch_size=1000,
              rng=np.random.default_rng(0))  # fmt: skip
    assert spy.calls == [(0.0, 700), (1.0, 700)] + [(0.0, 1000)] * 2 + [(0.0, 500)] + [
        (1.0, 1000)
    ] * 2 + [(1.0, 500)]
    assert r.verdict == "no claim" and r.hockey_stick_lower_bound is None


def test_given_event_skips_the_search() -> None:
    spy = Spy()
    event = Event(description="out >= 1", indicator=lambda o: o >= 1.0, favours=1)
    r = audit(spy, 0.0, 1.0, events=event, trials=100, rng=np.random.default_rng(0))
    assert spy.calls == [(0.0, 100), (1.0, 100)]
    assert r.search_trials == 0 and r.event == "out >= 1" and r.favours == 1


def test_categorical_family_finds_the_distinguishing_code() -> None:
    # Randomised response on 3 codes; code 2 never occurs on D0: an infinite ratio.
    def mech(d: int, trials: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(3, size=trials, p=[0.5, 0.5, 0.0] if d == 0 else [0.3, 0.3, 0.4])

    fam = CategoricalFamily(key=lambda o: o, name="code")
    event, score = search_event(
        fam, mech(0, 1000, np.random.default_rng(1)), mech(1, 1000, np.random.default_rng(2)),
        final_trials=1000, alpha=0.05,
    )  # fmt: skip
    assert event.description == "code in {2}" and event.favours == 1 and score > 3


def test_combine_fixed_and_row_codes() -> None:
    fixed = FixedFamily(events=(("first", lambda o: o[:, 0] == 1),))
    both = combine(fixed, CategoricalFamily(key=lambda o: row_codes(o, low=0, high=1)))
    outs = np.array([[1, 0], [0, 1]])
    cands = both.candidates(outs, outs)
    assert [c[0].favours for c in cands[:2]] == [0, 1] and len(cands) == 2 + 4
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        row_codes(np.array([[2]]), low=0, high=1)


def test_validation_messages() -> None:
    with pytest.raises(ValueError, match="favours=2"):
        Event(description="x", indicator=lambda o: o, favours=2)
    with pytest.raises(ValueError, match=r"alpha=1\.5"):
        audit(laplace(1.0), 0.0, 1.0, events=ThresholdFamily(statistic=lambda o: o), trials=10,
              alpha=1.5, rng=np.random.default_rng(0))  # fmt: skip
    bad = Event(description="x", indicator=lambda o: np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=r"shape \(10,\)"):
        audit(laplace(1.0), 0.0, 1.0, events=bad, trials=10, rng=np.random.default_rng(0))
