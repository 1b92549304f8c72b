"""Privacy audit of the private prior's measurement
(:func:`pmwcm.mechanisms.priors.marginals.measure_marginals`).

All 2-way marginals of 4 binary attributes (K = 6), n = 12, one record replaced
by its complement (every marginal moves: the sensitivity sqrt(2K)/n is met).
Claimed: GaussianDpEvent(1), eps = 2.32 at delta = 0.01. Audits use ``alpha =
1e-6`` and 100,000 trials per input; the ranges noted are over seeds 0..99.
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
import pytest

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.prior import MarginalsModel, crosscheck_prior, prior_case
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import Measurement, measure_marginals
from pmwcm.mechanisms.private_data import PrivateData

ALPHA = 1e-6
TRIALS = 100_000


def add_remove_measure(
    data: PrivateData,
    cliques: Any,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
) -> list[Measurement]:
    """Broken (test-only): ``sigma = m sqrt(K) / n``, the add/remove sensitivity
    ``sqrt(K) / n`` used under replace-one (which needs ``sqrt(2K) / n``)."""
    m = noise_multiplier / math.sqrt(2)
    return measure_marginals(data, cliques, noise_multiplier=m, noise=noise)


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": prior_case(),
        "add/remove": prior_case(label="prior, add/remove sigma", measure=add_remove_measure),
        "triples": prior_case(label="prior, all triples", order=3),
        "triples add/remove": prior_case(
            label="prior, all triples, add/remove sigma", measure=add_remove_measure, order=3
        ),
        "mixed": prior_case(label="prior, pairs and 1-ways", one_way=2),
        "mixed add/remove": prior_case(
            label="prior, pairs and 1-ways, add/remove sigma", measure=add_remove_measure, one_way=2
        ),
    }


def test_the_pair_is_worst_case_and_the_claim_is_the_measurement_event(
    cases: dict[str, AuditCase],
) -> None:
    case = cases["correct"]
    model: Any = case.mechanism
    assert isinstance(model, MarginalsModel)
    k, n = len(model.cliques), case.dataset0.n
    assert (k, n) == (6, 12)
    (c0, sigma0), (c1, sigma1) = model.probe(case.dataset0), model.probe(case.dataset1)
    assert sigma0 == sigma1 == pytest.approx(1.0 * math.sqrt(2 * k) / n)
    # Every clique's marginal loses 1/n in one cell and gains it in another.
    diff = (c1 - c0).reshape(k, 4) * n
    assert np.allclose(np.sort(diff, axis=1), [[-1.0, 0.0, 0.0, 1.0]] * k)
    assert np.linalg.norm(c1 - c0) == pytest.approx(math.sqrt(2 * k) / n)
    event = dp_accounting.GaussianDpEvent(1.0)
    assert case.claimed_epsilon == claimed_epsilon(event, delta=0.01)
    assert case.delta == 0.01
    broken: Any = cases["add/remove"].mechanism
    assert broken.probe(case.dataset0)[1] == pytest.approx(math.sqrt(k) / n)


@pytest.mark.parametrize(
    "which", ["correct", "add/remove", "triples", "triples add/remove", "mixed", "mixed add/remove"]
)
def test_prior_model_matches_the_real_measurement(
    cases: dict[str, AuditCase], which: str, seed: int
) -> None:
    case = cases[which]
    model: Any = case.mechanism
    rng = np.random.default_rng(seed)
    for data in (case.dataset0, case.dataset1):
        assert crosscheck_prior(model, data, trials=50, rng=rng) == 0.0


def test_correct_prior_measurement_is_not_flagged(cases: dict[str, AuditCase], seed: int) -> None:
    r = cases["correct"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 1.5  # seeds 0..99: 1.68-2.03 against 2.32


def test_prior_with_add_remove_sensitivity_is_caught(
    cases: dict[str, AuditCase], seed: int
) -> None:
    # (sqrt(2)/m)-GDP claimed as (1/m)-GDP: true eps 3.71 at delta 0.01; bounds 2.67-3.23.
    r = cases["add/remove"].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated, r


def test_the_triples_pair_is_worst_case_too(cases: dict[str, AuditCase]) -> None:
    """All 3-way marginals of 4 binary attributes (K = 4): each moves 1/n between two
    different cells of its 8, so the gap is sqrt(2K) / n, as for the pairs."""
    case = cases["triples"]
    model: Any = case.mechanism
    k, n = len(model.cliques), case.dataset0.n
    assert k == 4 and all(len(c) == 3 for c in model.cliques)
    c0, c1 = model.probe(case.dataset0)[0], model.probe(case.dataset1)[0]
    diff = (c1 - c0).reshape(k, 8) * n
    assert np.allclose(np.sort(diff, axis=1), [[-1.0, *[0.0] * 6, 1.0]] * k)
    assert case.claimed_epsilon == cases["correct"].claimed_epsilon  # the same event


@pytest.mark.parametrize("which", ["triples", "mixed"])
def test_the_other_cliques_priors_are_not_flagged_and_their_planted_bugs_are_caught(
    cases: dict[str, AuditCase], which: str, seed: int
) -> None:
    """All triples, and the noise-limited prior's pairs and 1-ways."""
    r = cases[which].run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r
    broken = cases[f"{which} add/remove"]
    r = broken.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated, r


def test_the_pairs_and_1_ways_pair_is_worst_case_too(cases: dict[str, AuditCase]) -> None:
    """The noise-limited prior's cliques (``noise_limited_pairs``): the pair of the first
    two attributes and the 1-ways of the last two (K = 3); each clique moves 1/n between
    two different cells, so the gap is sqrt(2K) / n."""
    case = cases["mixed"]
    model: Any = case.mechanism
    assert model.cliques == (("x0", "x1"), ("x2",), ("x3",))
    c0, c1 = model.probe(case.dataset0)[0], model.probe(case.dataset1)[0]
    assert np.linalg.norm(c1 - c0) == pytest.approx(math.sqrt(2 * 3) / case.dataset0.n)
    assert np.allclose(np.sort((c1 - c0)[4:] * case.dataset0.n), [-1.0, -1.0, 1.0, 1.0])
