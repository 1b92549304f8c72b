"""Privacy audit of the measured update's release
(:func:`pmwcm.mechanisms.marginal_measurement.measure_clique`, issue 35).

The all-attribute clique of 3 binary attributes, n = 12, one record replaced by
its complement (the sensitivity sqrt(2)/n is met). Claimed: GaussianDpEvent(1),
eps = 2.32 at delta = 0.01. Audits use ``alpha = 1e-6`` (a correct release is
flagged with probability at most 1e-6) and 100,000 trials per input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.clique_measurement import as_marginals_measure, clique_measurement_case
from pmwcm.audit.prior import MarginalsModel, crosscheck_prior
from pmwcm.mechanisms.marginal_measurement import measure_clique
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData

ALPHA = 1e-6
TRIALS = 100_000


def unscaled_measure(
    data: PrivateData, clique: tuple[str, ...], *, noise_multiplier: float, noise: NoiseSource
) -> Measurement:
    """Broken (test-only): noise not scaled with the sensitivity, ``sigma = m / n``
    (the add/remove sensitivity ``1/n`` used under replace-one, which needs sqrt(2)/n)."""
    return measure_clique(
        data, clique, noise_multiplier=noise_multiplier / math.sqrt(2.0), noise=noise
    )


def quarter_noise_measure(
    data: PrivateData, clique: tuple[str, ...], *, noise_multiplier: float, noise: NoiseSource
) -> Measurement:
    """Broken (test-only): a quarter of the noise (e.g. sigma computed for n 4x too large)."""
    return measure_clique(data, clique, noise_multiplier=noise_multiplier / 4.0, noise=noise)


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": clique_measurement_case(),
        "unscaled": clique_measurement_case(label="unscaled sigma", measure=unscaled_measure),
        "quarter": clique_measurement_case(label="quarter sigma", measure=quarter_noise_measure),
    }


def test_the_pair_is_worst_case_and_sigma_follows_the_sensitivity(
    cases: dict[str, AuditCase],
) -> None:
    case = cases["correct"]
    model: Any = case.mechanism
    assert isinstance(model, MarginalsModel)
    (c0, sigma0), (c1, sigma1) = model.probe(case.dataset0), model.probe(case.dataset1)
    assert sigma0 == sigma1 == pytest.approx(math.sqrt(2.0) / 12)
    assert np.sort((c1 - c0) * 12).tolist() == [-1.0] + [0.0] * 6 + [1.0]


@pytest.mark.parametrize("which", ["correct", "unscaled"])
def test_model_matches_the_real_release(cases: dict[str, AuditCase], which: str, seed: int) -> None:
    model: Any = cases[which].mechanism
    rng = np.random.default_rng(seed)
    for data in (cases[which].dataset0, cases[which].dataset1):
        assert crosscheck_prior(model, data, trials=50, rng=rng) == 0.0


def test_a_release_without_noise_is_refused_by_the_model() -> None:
    def noiseless(data: PrivateData, clique: tuple[str, ...], **_: Any) -> Measurement:
        return Measurement(clique=clique, values=data.marginal(clique), sigma=0.0)

    with pytest.raises(ValueError, match="one Gaussian draw"):
        clique_measurement_case(measure=noiseless)
    assert as_marginals_measure(noiseless) is not None


def test_correct_clique_measurement_is_not_flagged(cases: dict[str, AuditCase], seed: int) -> None:
    r = cases["correct"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 1.5


@pytest.mark.parametrize("which", ["unscaled", "quarter"])
def test_noise_not_scaled_with_the_sensitivity_is_caught(
    cases: dict[str, AuditCase], which: str, seed: int
) -> None:
    r = cases[which].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated, r
