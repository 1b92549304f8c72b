"""Contract tests for the online sparse vector variants.

Statistical checks: the probability that the first query answers "above" is
``P(rho - nu <= value - threshold)``, whose exact CDF is known for the
difference of two Laplace variables. Each check is a two-sided binomial test
rejected at p < 1e-6 with the ``seed`` fixture, so it is deterministic for a
given seed and fails falsely with probability at most 1e-6 per check over
seeds (all pass for seeds 0..99).
``test_statistical_check_has_power`` shows the same check rejecting the
known-broken noise scales (query noise not scaled with ``c``; no query noise).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pytest
from dp_accounting import dp_event as de
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent, PLDAccountant, PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.sparse_vector import (
    DworkRothSparse,
    LyuSuLiSparse,
    SparseVector,
    SparseVectorHalted,
)

P_REJECT = 1e-6


class RecordingNoise:
    """A NoiseSource that records every draw as ``(method, scale, size)``."""

    def __init__(self, seed: int = 0) -> None:
        self.inner = NumpyNoise(seed=seed)
        self.calls: list[tuple[str, float, int]] = []

    @property
    def name(self) -> str:
        return "recording"

    def laplace(self, scale: float, size: int) -> np.ndarray:
        self.calls.append(("laplace", scale, size))
        return self.inner.laplace(scale, size)

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        self.calls.append(("gaussian", sigma, size))
        return self.inner.gaussian(sigma, size)

    def uniform(self, size: int) -> np.ndarray:
        self.calls.append(("uniform", 0.0, size))
        return self.inner.uniform(size)


Factory = Callable[..., "DworkRothSparse | LyuSuLiSparse"]


def dr(
    epsilon: float, cutoff: int, noise: NoiseSource, sensitivity: float = 1.0
) -> DworkRothSparse:
    return DworkRothSparse(
        epsilon_per_run=epsilon, cutoff=cutoff, sensitivity=sensitivity, noise=noise
    )


def lsl(epsilon: float, cutoff: int, noise: NoiseSource, sensitivity: float = 1.0) -> LyuSuLiSparse:
    return LyuSuLiSparse.from_total(epsilon, cutoff, sensitivity=sensitivity, noise=noise)


@pytest.fixture(params=[dr, lsl], ids=["dwork_roth", "lyu_su_li"])
def make(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.param
    return factory


def test_protocol(make: Factory) -> None:
    sv = make(1.0, 3, NumpyNoise(seed=0))
    assert isinstance(sv, SparseVector)
    assert (sv.cutoff, sv.positives, sv.halted) == (3, 0, False)


def test_halts_after_cutoff_and_refuses(make: Factory, seed: int) -> None:
    sv = make(1e9, 3, NumpyNoise(seed=seed))
    answers = [sv.above(v, threshold=0.0) for v in (1.0, -1.0, 1.0, -1.0, -1.0, 1.0)]
    assert answers == [True, False, True, False, False, True]
    assert sv.halted and sv.positives == 3
    with pytest.raises(SparseVectorHalted, match="cutoff=3"):
        sv.above(-1.0, threshold=0.0)
    assert sv.positives == 3


class _CountingNoise(NumpyNoise):
    """NumpyNoise that counts its Laplace draws."""

    draws = 0

    def laplace(self, scale: float, size: int) -> np.ndarray:
        self.draws += 1
        return super().laplace(scale, size)


def test_closing_halts_now_without_a_draw_and_survives_its_state(make: Factory, seed: int) -> None:
    """``close`` (the engine's halt on a flag with no update left) halts with positives
    to spare and draws nothing; the halt is in the exported state."""
    noise = _CountingNoise(seed=seed)
    sv = make(1e9, 3, noise)
    assert sv.above(1.0, threshold=0.0) and not sv.halted
    drawn = noise.draws
    sv.close()
    assert sv.halted and sv.positives == 3 and noise.draws == drawn
    with pytest.raises(SparseVectorHalted, match="cutoff=3"):
        sv.above(-1.0, threshold=0.0)
    fresh = make(1e9, 3, NumpyNoise(seed=seed))
    fresh.import_state(sv.export_state())
    assert fresh.halted


@settings(max_examples=40, deadline=None)
@given(
    cutoff=st.integers(1, 5),
    values=st.lists(st.floats(-3, 3), min_size=1, max_size=40),
    seed=st.integers(0, 2**32 - 1),
    variant=st.sampled_from([dr, lsl]),
)
def test_never_more_than_cutoff_positives(
    cutoff: int, values: list[float], seed: int, variant: Factory
) -> None:
    sv, answers = variant(2.0, cutoff, NumpyNoise(seed=seed)), []
    for v in values:
        if sv.halted:
            with pytest.raises(SparseVectorHalted):
                sv.above(v, threshold=0.0)
        else:
            answers.append(sv.above(v, threshold=0.0))
        assert sv.positives == sum(answers) <= cutoff
        assert sv.halted == (sv.positives == cutoff)


def test_huge_epsilon_answers_exactly(make: Factory, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values, thresholds = rng.uniform(-1, 1, 200), rng.uniform(-1, 1, 200)
    keep = np.abs(values - thresholds) > 1e-3
    sv = make(1e12, 500, NumpyNoise(generator=rng))
    got = [sv.above(v, threshold=t) for v, t in zip(values[keep], thresholds[keep], strict=True)]
    assert got == (values[keep] >= thresholds[keep]).tolist()


def test_lyu_su_li_draws_threshold_noise_once(seed: int) -> None:
    noise = RecordingNoise(seed)
    sv = LyuSuLiSparse(
        epsilon_threshold=0.5, epsilon_queries=1.0, cutoff=3, sensitivity=0.1, noise=noise
    )
    sv.privacy_event()
    assert noise.calls == []  # nothing drawn before the first query
    for v in (9.0, -9.0, 9.0, -9.0, 9.0):
        sv.above(v, threshold=0.0)
    rho, nu = ("laplace", 0.1 / 0.5, 1), ("laplace", 2 * 3 * 0.1 / 1.0, 1)
    assert noise.calls == [rho] + [nu] * 5


def test_dwork_roth_redraws_threshold_noise_after_each_positive(seed: int) -> None:
    noise = RecordingNoise(seed)
    sv = DworkRothSparse(epsilon_per_run=1e6, cutoff=2, sensitivity=0.1, noise=noise)
    sv.privacy_event()
    assert noise.calls == []
    for v in (-9.0, 9.0, -9.0, 9.0):
        sv.above(v, threshold=0.0)
    rho, nu = ("laplace", 2 * 0.1 / 1e6, 1), ("laplace", 4 * 0.1 / 1e6, 1)
    assert noise.calls == [rho, nu, nu, rho, nu, nu]  # no draw for the run after the last


def test_privacy_events() -> None:
    noise = NumpyNoise(seed=0)
    assert dr(0.1, 5, noise).privacy_event() == de.SelfComposedDpEvent(
        EpsilonDeltaDpEvent(epsilon=0.1), 5
    )
    sv = LyuSuLiSparse(epsilon_threshold=0.2, epsilon_queries=0.3, cutoff=4, noise=noise)
    assert sv.privacy_event() == EpsilonDeltaDpEvent(epsilon=0.5)


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 0.7, 1.0, 2.9])
@pytest.mark.parametrize("cutoff", [1, 7, 50])
def test_from_total_split_fits_the_budget_exactly(epsilon: float, cutoff: int) -> None:
    sv = LyuSuLiSparse.from_total(epsilon, cutoff, noise=NumpyNoise(seed=0))
    assert sv.epsilon_queries / sv.epsilon_threshold == pytest.approx((2 * cutoff) ** (2 / 3))
    assert sv.epsilon_threshold + sv.epsilon_queries <= epsilon
    ledger = PrivacyLedger(epsilon=epsilon, delta=1e-6, accountant=PLDAccountant())
    ledger.spend(sv.privacy_event(), label="sv")
    assert ledger.spent_epsilon() <= epsilon


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon_per_run": 0.0}, "epsilon_per_run=0.0"),
        ({"epsilon_per_run": math.inf}, "epsilon_per_run=inf"),
        ({"epsilon_per_run": math.nan}, "epsilon_per_run=nan"),
        ({"cutoff": 0}, "cutoff=0"),
        ({"cutoff": 2.5}, "cutoff=2.5"),
        ({"cutoff": True}, "cutoff=True"),
        ({"sensitivity": -1.0}, "sensitivity=-1.0"),
    ],
)
def test_validation_quotes_the_value(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"epsilon_per_run": 1.0, "cutoff": 2, "noise": NumpyNoise(seed=0)}
    with pytest.raises(ValueError, match=re.escape(message)):
        DworkRothSparse(**(args | kwargs))  # type: ignore[arg-type]


def test_validation_of_the_rest() -> None:
    noise = NumpyNoise(seed=0)
    with pytest.raises(ValueError, match=re.escape("epsilon_queries=-1.0")):
        LyuSuLiSparse(epsilon_threshold=1.0, epsilon_queries=-1.0, cutoff=2, noise=noise)
    with pytest.raises(ValueError, match=re.escape("epsilon=0.0")):
        LyuSuLiSparse.from_total(0.0, 2, noise=noise)
    with pytest.raises(TypeError, match="NoiseSource"):
        LyuSuLiSparse.from_total(1.0, 2, noise=np.random.default_rng(0))  # type: ignore[arg-type]
    sv = dr(1.0, 2, noise)
    with pytest.raises(ValueError, match="value=nan"):
        sv.above(math.nan, threshold=0.0)
    with pytest.raises(ValueError, match="threshold=inf"):
        sv.above(0.0, threshold=math.inf)
    with pytest.raises(ValueError, match=re.escape("beta=1.5")):
        sv.accuracy_margin(queries=10, beta=1.5)
    assert sv.positives == 0


# --- statistics -------------------------------------------------------------------------


def laplace_difference_cdf(x: float, a: float, b: float) -> float:
    """CDF of ``rho - nu`` for independent ``rho ~ Lap(a)``, ``nu ~ Lap(b)``, ``a != b``.

    The characteristic function ``1 / ((1 + a^2 t^2)(1 + b^2 t^2))`` splits into
    ``(a^2 phi_a - b^2 phi_b) / (a^2 - b^2)``, and so does the CDF.
    """
    fa, fb = stats.laplace.cdf(x, scale=a), stats.laplace.cdf(x, scale=b)
    return float((a * a * fa - b * b * fb) / (a * a - b * b))


def first_answers(make: Factory, value: float, trials: int, seed: int) -> int:
    noise = NumpyNoise(generator=np.random.default_rng(seed))
    return sum(make(1.0, 4, noise, 0.5).above(value, threshold=1.0) for _ in range(trials))


def binom_pvalue(count: int, trials: int, p: float) -> float:
    return float(stats.binomtest(count, trials, p).pvalue)


TRIALS = 12_000


@pytest.mark.parametrize("offset", [-6.0, -1.0, 0.0, 2.0, 10.0])
def test_first_answer_distribution(make: Factory, offset: float, seed: int) -> None:
    sv = make(1.0, 4, NumpyNoise(seed=0), 0.5)
    a, b = sv.threshold_scale, sv.query_scale
    count = first_answers(make, 1.0 + offset, TRIALS, seed=seed)
    assert binom_pvalue(count, TRIALS, laplace_difference_cdf(offset, a, b)) > P_REJECT


def test_noise_scales_are_the_papers() -> None:
    noise = NumpyNoise(seed=0)
    d = dr(0.8, 5, noise, 0.5)
    assert (d.threshold_scale, d.query_scale) == (2 * 0.5 / 0.8, 4 * 0.5 / 0.8)
    s = LyuSuLiSparse(
        epsilon_threshold=0.2, epsilon_queries=0.6, cutoff=5, sensitivity=0.5, noise=noise
    )
    assert (s.threshold_scale, s.query_scale) == (0.5 / 0.2, 2 * 5 * 0.5 / 0.6)


def test_statistical_check_has_power(seed: int) -> None:
    # The observed LSL counts must reject the broken variants' predictions.
    sv = lsl(1.0, 4, NumpyNoise(seed=0), 0.5)
    a, b = sv.threshold_scale, sv.query_scale
    count = first_answers(lsl, 1.0 + 2.0, TRIALS, seed=seed)
    not_scaled_with_c = laplace_difference_cdf(2.0, a, b / 4)
    no_query_noise = float(stats.laplace.cdf(2.0, scale=a))
    assert binom_pvalue(count, TRIALS, not_scaled_with_c) < P_REJECT
    assert binom_pvalue(count, TRIALS, no_query_noise) < P_REJECT


def test_accuracy_margin_holds(make: Factory, seed: int) -> None:
    """With probability >= 1 - beta, every answer at distance >= margin is right."""
    queries, beta, runs = 30, 0.2, 300
    rng = np.random.default_rng(seed)
    failures = 0
    for _ in range(runs):
        sv = make(5.0, queries, NumpyNoise(generator=rng))
        alpha = sv.accuracy_margin(queries=queries, beta=beta)
        signs = rng.choice([-1.0, 1.0], size=queries)
        answers = [sv.above(s * alpha, threshold=0.0) for s in signs]
        failures += answers != (signs > 0).tolist()
    # One-sided: more failures than Binomial(runs, beta) allows at level 1e-6.
    assert stats.binom.sf(failures - 1, runs, beta) > P_REJECT
