"""Floating-point audits: releasing ``value + noise`` must not leak through low bits.

Mironov (2012) broke textbook Laplace samplers; an exact sampler does not help
if the caller adds its draw to a data-dependent float afterwards: ``0.0 + y``
can be any float near 0, while ``0.25 + y`` near 0 is always a multiple of
``2^-55`` (Sterbenz cancellation). The event below has probability ~0.08 on
``x = 0`` and exactly 0 on ``x = 0.25``. Each test uses ``alpha = 1e-6``: a
correct release is flagged with probability at most 1e-6; the broken one gave
lower bounds of 3.1-3.3 against a claim of 1 for seeds 0..19 (it needs only
about 80 of 5,000 hits on ``x = 0``, where ~450 are expected: a miss has
probability far below 1e-6). OpenDP draws from the OS CSPRNG, so these tests
are not reproducible by seed; their failure probabilities are as stated.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.audit import FixedFamily, audit
from pmwcm.engine.rounds import LinearRound
from pmwcm.mechanisms.noise import OpenDPNoise, add_gaussian, add_laplace

ALPHA = 1e-6
LOW_BITS = FixedFamily(
    events=(
        (
            "0 < out < 1/16 and out not a multiple of 2^-55",
            lambda o: (o > 0) & (o < 0.0625) & (np.mod(o, 2.0**-55) != 0),
        ),
    )
)


@pytest.fixture(scope="module")
def opendp() -> OpenDPNoise:
    return OpenDPNoise()


def test_sum_after_exact_sampler_leaks(opendp: OpenDPNoise, seed: int) -> None:
    """The broken release (test-only): draw at zero, then add in float64."""

    def broken(x: float, trials: int, rng: np.random.Generator) -> np.ndarray:
        return x + opendp.laplace(0.25, trials)  # claims 1-DP for |x - x'| <= 1/4

    r = audit(broken, 0.0, 0.25, events=LOW_BITS, trials=5_000, search_trials=1_000,
              claimed_epsilon=1.0, alpha=ALPHA, rng=np.random.default_rng(seed))  # fmt: skip
    assert r.violated and r.epsilon_lower_bound > 2


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_add_noise_inside_opendp_is_not_flagged(opendp: OpenDPNoise, kind: str, seed: int) -> None:
    add = add_laplace if kind == "laplace" else add_gaussian
    scale = 0.25 if kind == "laplace" else 0.5  # Gaussian: (1/2)-GDP, eps(1e-3) ~ 1.3

    def release(x: float, trials: int, rng: np.random.Generator) -> np.ndarray:
        return add(np.full(trials, x), scale, noise=opendp)

    r = audit(release, 0.0, 0.25, events=LOW_BITS, trials=5_000, search_trials=1_000,
              claimed_epsilon=1.0 if kind == "laplace" else 1.3, alpha=ALPHA,
              delta=0.0 if kind == "laplace" else 1e-3,
              rng=np.random.default_rng(seed))  # fmt: skip
    assert r.verdict == "consistent"
    assert min(r.count0, r.count1) > 0  # both inputs reach the fine-grained floats


def test_linear_answer_of_the_engine_is_not_flagged(opendp: OpenDPNoise, seed: int) -> None:
    """The real release path of a counting query (``LinearRound.private_answer``)."""
    round_ = LinearRound(clique=("a",), table=np.array([0.0, 1.0]), learning_rate=1.0)

    def answer(marginal: np.ndarray, trials: int, rng: np.random.Generator) -> np.ndarray:
        return np.array(
            [round_.private_answer(marginal, n=4, noise_level=1.0, noise=opendp)
             for _ in range(trials)]
        )  # fmt: skip

    # Count 0 of 4 vs count 1 of 4 (one record replaced): 1-DP claimed.
    r = audit(answer, np.array([1.0, 0.0]), np.array([0.75, 0.25]), events=LOW_BITS,
              trials=2_000, search_trials=200, claimed_epsilon=1.0, alpha=ALPHA,
              rng=np.random.default_rng(seed))  # fmt: skip
    assert r.verdict == "consistent" and r.count1 > 0
