"""Privacy audits of both online sparse vectors, and of the classic broken variants.

The audited mechanism is :class:`pmwcm.audit.sparse.SparseVectorModel` built
from the real object (its scales, cutoff, variant), cross-checked here against
the real classes on identical noise draws. Neighbours move queries in opposite
directions (``6 up / 3 down`` etc.). Every audit uses ``alpha = 1e-6``: a
correct sparse vector is flagged with probability at most 1e-6 per test. The
broken variants (test-only) are caught with the margins noted at each test:
the smallest lower bound over seeds 0..99.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import numpy as np
import pytest

from pmwcm.audit import ThresholdFamily, audit
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.sparse import (
    SparseVectorModel,
    crosscheck,
    opposite_shifts,
    sparse_vector_case,
)
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse

ALPHA = 1e-6
TRIALS = 200_000


def lsl(epsilon: float, cutoff: int) -> Any:
    return partial(LyuSuLiSparse.from_total, epsilon, cutoff)


def dr(epsilon: float, cutoff: int) -> Any:
    return lambda noise: DworkRothSparse(epsilon_per_run=epsilon, cutoff=cutoff, noise=noise)


class RedrawsThreshold(LyuSuLiSparse):
    """A class whose behaviour the model of Lyu-Su-Li does not describe."""

    def _after_positive(self) -> None:
        self._rho = None


@pytest.mark.parametrize(
    ("make", "up", "down"),
    [(lsl(2.0, 1), 6, 3), (lsl(2.0, 3), 3, 4), (dr(1.0, 2), 3, 4), (dr(1.0, 1), 6, 1)],
    ids=["lsl-c1", "lsl-c3", "dr-c2", "dr-c1"],
)
def test_model_agrees_with_the_real_class_on_identical_draws(
    make: Any, up: int, down: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    sc = opposite_shifts(up, down)
    for values in (sc.values0, sc.values1):
        assert crosscheck(make, values, sc.thresholds, trials=300, rng=rng) == 0


def test_crosscheck_detects_a_class_that_differs_from_its_model(seed: int) -> None:
    make = partial(RedrawsThreshold.from_total, 2.0, 3)
    sc = opposite_shifts(2, 6)
    rng = np.random.default_rng(seed)
    with pytest.raises(AssertionError, match="exhausted"):
        crosscheck(make, sc.values0, sc.thresholds, trials=300, rng=rng)


@pytest.mark.parametrize(
    ("make", "label", "up", "down"),
    [
        (lsl(2.0, 1), "LSL eps=2 c=1", 6, 3),
        (lsl(2.0, 1), "LSL eps=2 c=1", 6, 1),
        (lsl(2.0, 3), "LSL eps=2 c=3", 6, 3),
        (dr(1.0, 2), "DR eps'=1 c=2", 6, 3),
    ],
)
def test_correct_sparse_vectors_are_not_flagged(
    make: Any, label: str, up: int, down: int, seed: int
) -> None:
    case = sparse_vector_case(make, opposite_shifts(up, down), label=label)
    r = case.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 0.3 * case.claimed_epsilon  # the audit has power


def broken(case: AuditCase, **changes: Any) -> AuditCase:
    """The same case with the model's decision rule changed (test-only variants)."""
    model = dataclasses.replace(case.mechanism.model, **changes)  # type: ignore[attr-defined]
    return dataclasses.replace(
        case,
        mechanism=dataclasses.replace(case.mechanism, model=model),  # type: ignore[type-var]
    )


def test_no_query_noise_is_caught(seed: int) -> None:
    # Claims 2-DP; "6 up / 3 down" has a pattern impossible on D1. Lower bounds >= 8.
    case = sparse_vector_case(lsl(2.0, 1), opposite_shifts(6, 3), label="no query noise")
    r = broken(case, query_scale=0.0).run(trials=TRIALS, rng=np.random.default_rng(seed),
                                          alpha=ALPHA)  # fmt: skip
    assert r.violated and r.epsilon_lower_bound > 5


def test_no_cutoff_is_caught(seed: int) -> None:
    # Claims 2-DP with c = 1 but keeps answering: every "down" query leaks. Bounds >= 2.9.
    case = sparse_vector_case(lsl(2.0, 1), opposite_shifts(6, 6), label="no cutoff")
    r = broken(case, cutoff=12).run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated, r


def test_query_noise_not_scaled_by_cutoff_is_caught(seed: int) -> None:
    # Lap(2 Delta / eps2) instead of Lap(2 c Delta / eps2) with c = 3: bounds >= 2.75 vs 2.
    case = sparse_vector_case(lsl(2.0, 3), opposite_shifts(6, 3), label="unscaled")
    model = case.mechanism.model  # type: ignore[attr-defined]
    r = broken(case, query_scale=model.query_scale / 3).run(
        trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA
    )
    assert r.violated, r


def test_releasing_the_noisy_value_is_caught(seed: int) -> None:
    # Roth's lecture-notes variant: a positive answer also releases q + nu. After eight
    # "below" answers, a low released value pins rho low, which the "up" queries then
    # make unlikely on D1: the loss grows with the number of "below" answers.
    # Claims 3-DP (c = 1); lower bounds >= 3.2.
    up = 8
    sc = opposite_shifts(up, 1)
    model = SparseVectorModel.of(LyuSuLiSparse.from_total(3.0, 1, noise=_unused()))
    thresholds = np.zeros(up + 1)

    def release(values: Any, trials: int, rng: np.random.Generator) -> np.ndarray:
        v = np.asarray(values)
        rho, nu = model.draw(trials, v.size, rng)
        answers = model.decide(v, thresholds, rho, nu)
        return np.concatenate([answers, np.where(answers == 1, v + nu, np.nan)], axis=1)

    def released_after_all_below(out: np.ndarray) -> np.ndarray:
        pattern = np.all(out[:, :up] == 0, axis=1) & (out[:, up] == 1)
        return np.where(pattern, out[:, 2 * up + 1], np.nan)

    family = ThresholdFamily(statistic=released_after_all_below, name="released value")
    r = audit(release, np.array(sc.values0), np.array(sc.values1), events=family,
              trials=TRIALS, claimed_epsilon=3.0, alpha=ALPHA,
              rng=np.random.default_rng(seed))  # fmt: skip
    assert r.violated, r


def _unused() -> NoiseSource:
    from pmwcm.mechanisms.noise import NumpyNoise

    return NumpyNoise(seed=0)
