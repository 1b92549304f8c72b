"""Privacy audit of the paid prior on a weighted support (:mod:`pmwcm.audit.support_prior`).

The mechanism is the real ``support_marginal_prior`` as a black box (noisy 2-way
marginals, Chow-Liu proposal of ``M = 200`` records, mirror-descent fit with the
shipped iteration rule), one call per trial, on :func:`complement_pair` (4 binary
attributes, K = 6, n = 12; ``D1`` complements record 0, so cell ``1111`` holds a
record in ``D1`` only). Claimed: ``GaussianDpEvent(1)``, eps = 2.32 at delta =
0.01 (proposal and fit are post-processing). Audits use ``alpha = 1e-6`` and 400
final trials per input (+ 100 for the event search; ~5 s a case).

The correct prior is not flagged (bounds about 0.24 - 0.27 on seeds 0..2, best
event a threshold on the prior's 2-way marginals projected on ``c1 - c0``). The
support of the private records puts no mass on ``1111`` under ``D0`` and some
under ``D1`` in every trial: 0 vs 400 hits, bound 3.29 for every seed. The
ledger test checks the order in :func:`build_engine`: the prior's event is
charged before the data is first read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytest

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.support_prior import (
    SupportPriorMechanism,
    differing_cells,
    private_support_prior,
    support_prior_case,
)
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, FloatArray
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import measurement_event, pairwise_cliques
from pmwcm.mechanisms.priors.support import support_marginal_prior
from pmwcm.mechanisms.private_data import PrivateData

ALPHA = 1e-6
TRIALS = 400
PRIOR_LABEL = "prior: noisy 2-way marginals"


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": support_prior_case(),
        "private support": support_prior_case(
            prior=private_support_prior, label="support of the private records"
        ),
    }


def run(case: AuditCase, seed: int) -> Any:
    return case.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)


def test_the_case_audits_the_real_prior_against_the_measurement_event(
    cases: dict[str, AuditCase],
) -> None:
    case = cases["correct"]
    m = case.mechanism
    assert isinstance(m, SupportPriorMechanism)
    assert m.prior is support_marginal_prior and m.iterations is None
    assert (m.noise_multiplier, m.size) == (1.0, 200)
    assert case.claimed_epsilon == claimed_epsilon(measurement_event(1.0), delta=0.01)
    assert case.delta == 0.01
    # 0000 holds a record in D0 only, 1111 in D1 only.
    assert differing_cells(case.dataset0, case.dataset1) == (0, 15)
    out = m(case.dataset0, 2, np.random.default_rng(0))
    assert out.shape == (2, 32)
    assert np.allclose(out[:, :16].sum(axis=1), 1.0)
    assert set(np.unique(out[:, 16:]).tolist()) <= {0.0, 1.0}


def test_the_private_support_publishes_the_occupied_cells(cases: dict[str, AuditCase]) -> None:
    m = cases["private support"].mechanism
    rng = np.random.default_rng(0)
    d0, d1 = cases["private support"].dataset0, cases["private support"].dataset1
    held0, held1 = m(d0, 2, rng)[:, 16:], m(d1, 2, rng)[:, 16:]
    occupied0 = d0.histogram().to_array().ravel() > 0
    occupied1 = d1.histogram().to_array().ravel() > 0
    assert np.array_equal(held0, np.tile(occupied0, (2, 1)).astype(float))
    assert np.array_equal(held1, np.tile(occupied1, (2, 1)).astype(float))


def test_the_support_prior_is_not_flagged(cases: dict[str, AuditCase], seed: int) -> None:
    r = run(cases["correct"], seed)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound < 1.5, r  # seeds 0..2: 0.24 - 0.27 against 2.32


def test_a_support_of_the_private_records_is_caught(cases: dict[str, AuditCase], seed: int) -> None:
    r = run(cases["private support"], seed)
    assert r.violated and r.epsilon_lower_bound > 3.2, r  # 3.29 against 2.32
    assert r.event == "support holds cell 15" and (r.count0, r.count1) == (0, TRIALS)


# --- Structural checks: the prior reads the data once, through the measurement. ---


class _OnlyMarginals:
    """A stand-in for :class:`PrivateData` exposing ``domain``, ``n`` and ``marginal``."""

    def __init__(self, data: PrivateData) -> None:
        self.domain = data.domain
        self.n = data.n
        self.calls: list[tuple[str, ...]] = []
        self._data = data

    def marginal(self, clique: Sequence[str]) -> FloatArray:
        self.calls.append(tuple(clique))
        return self._data.marginal(clique)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the support prior read data.{name}")


def test_the_support_prior_reads_only_the_measured_marginals(seed: int) -> None:
    d0 = support_prior_case().dataset0
    standin = _OnlyMarginals(d0)
    noise = NumpyNoise(seed=seed)
    h = support_marginal_prior(
        cast(PrivateData, standin), noise_multiplier=1.0, noise=noise, size=50, iterations=5
    ).hypothesis
    assert isinstance(h, SupportHistogram) and h.size == 50
    assert standin.calls == pairwise_cliques(d0.domain)


def _parity(odd: int) -> PrivateData:
    """3 binary attributes, every record of parity ``odd``, each cell 3 times."""
    domain = Domain.from_sizes({"a": 2, "b": 2, "c": 2})
    cells = np.array([[a, b, (a + b + odd) % 2] for a in (0, 1) for b in (0, 1)] * 3)
    return PrivateData.from_records(domain, cells)


def test_the_support_depends_on_the_release_alone(seed: int) -> None:
    # Disjoint records, identical 2-way marginals: the same noise must give the same prior.
    even, odd = _parity(0), _parity(1)
    for clique in pairwise_cliques(even.domain):
        assert np.array_equal(even.marginal(clique), odd.marginal(clique))
    priors = [
        support_marginal_prior(
            d, noise_multiplier=1.0, noise=NumpyNoise(seed=seed), size=100
        ).hypothesis
        for d in (even, odd)
    ]
    assert np.array_equal(priors[0].records, priors[1].records)
    assert np.array_equal(priors[0].log_weights, priors[1].log_weights)


class _RecordingData(PrivateData):
    """Logs every read of the data (``marginal``, ``clique_table``, ``histogram``)."""

    log: list[tuple[str, str]]

    def marginal(self, clique: Sequence[str]) -> FloatArray:
        self.log.append(("read", f"marginal {tuple(clique)}"))
        return super().marginal(clique)

    def clique_table(self, clique: Sequence[str]) -> CliqueTable:
        self.log.append(("read", f"clique_table {tuple(clique)}"))
        return super().clique_table(clique)

    def histogram(self) -> DenseHistogram:
        self.log.append(("read", "histogram"))
        return super().histogram()


def test_build_engine_charges_the_support_prior_before_reading_the_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d0 = support_prior_case().dataset0
    log: list[tuple[str, str]] = []
    codes = np.arange(d0.n) % d0.domain.size  # complement_pair's D0
    records = (codes[:, None] >> np.arange(len(d0.domain))[None, :]) & 1
    data = _RecordingData(domain=d0.domain, n=d0.n, records=records)
    data.log = log
    assert all(
        np.array_equal(data.marginal(c), d0.marginal(c)) for c in pairwise_cliques(d0.domain)
    )
    log.clear()
    spend = PrivacyLedger.spend

    def logged(self: PrivacyLedger, event: Any, *, label: str) -> Any:
        log.append(("spend", label))
        return spend(self, event, label=label)

    monkeypatch.setattr(PrivacyLedger, "spend", logged)
    config = PMWConfig(epsilon=1.0, delta=1e-6, backend="support", support_size=1000)
    engine = build_engine(data, config, noise=NumpyNoise(seed=0))
    assert isinstance(engine.hypothesis, SupportHistogram)
    assert engine.hypothesis.size == 1000
    assert [e.label for e in engine.ledger.entries] == [PRIOR_LABEL]
    first_read = next(i for i, (kind, _) in enumerate(log) if kind == "read")
    assert log[:first_read] == [("spend", PRIOR_LABEL)]
    # The prior's reads are exactly the measured cliques, each once.
    cliques = pairwise_cliques(d0.domain)
    assert log[first_read : first_read + len(cliques)] == [
        ("read", f"marginal {c}") for c in cliques
    ]
