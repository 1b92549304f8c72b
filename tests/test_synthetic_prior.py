"""Tests of the AIM/MST prior backend (``pmwcm.mechanisms.priors.synthetic``).

And its practical-mode wiring.

OpenDP's ``extras.mbi`` is part of the dev install, so every test here runs the real
mechanism (none is skipped or replaced):

* A missing ``opendp[mbi]`` (simulated by blocking the import) gives the install
  message and charges nothing; the charged event fits the prior's share of the
  budget under each accountant and uses the largest zCDP that does; the engine
  charges the prior *before* OpenDP's MST / AIM runs (the real call, watched),
  and the prior it builds has the data's pairs up to its noise; records are
  rebuilt from a histogram of counts, a non-count histogram is refused.
* On 4 binary
  attributes, n = 2,000 records with a strong chain correlation ``a - b - c``,
  MST and AIM (4 rounds) at ``eps = 20`` return a distribution on the domain
  whose 2-way marginals are within 0.03 of the data's, and the engine built
  with ``prior="mst"`` has the prior first in its ledger and fits the budget.
  Measured (seeds 0-3, loaded 2-core machine): max 2-way marginal error at
  eps = 20 (mbi rho 1.20) MST 0.003-0.009, AIM 0.001-0.009; at the engine's
  prior share eps = 8 (rho 0.25) MST 0.003-0.009; mass on OpenDP's dropped
  null cells 1e-4 to 5e-3; 7-15 s per mechanism run (mostly JAX tracing).
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from typing import Any

import dp_accounting
import numpy as np
import pytest

from pmwcm.engine.practical import (
    PRIORS,
    AccountantName,
    PMWConfig,
    PriorName,
    build_engine,
    make_accountant,
)
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.accounting import (
    EpsilonDeltaDpEvent,
    PLDAccountant,
    PrivacyLedger,
    ZCDPAccountant,
)
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors import synthetic as sp
from pmwcm.mechanisms.priors.support import post_processing_rng
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "d": 2})
PAIRS = list(itertools.combinations(DOMAIN.names, 2))


def chain_records(seed: int, n: int = 2000) -> np.ndarray:
    """``a`` uniform, ``b = a`` w.p. 0.9, ``c = b`` w.p. 0.85, ``d`` independent (p = 0.3)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.9, a, 1 - a)
    c = np.where(rng.random(n) < 0.85, b, 1 - b)
    d = (rng.random(n) < 0.3).astype(np.int64)
    return np.stack([a, b, c, d], axis=1).astype(np.int64)


@pytest.fixture
def chain(seed: int) -> PrivateData:
    return PrivateData.from_records(DOMAIN, chain_records(seed))


def max_pair_error(prior: Histogram, data: PrivateData) -> float:
    return max(float(np.abs(prior.marginal(p) - data.marginal(p)).max()) for p in PAIRS)


def ledger_for(accountant: str, epsilon: float = 2.0, delta: float = 1e-6) -> PrivacyLedger:
    return PrivacyLedger(epsilon=epsilon, delta=delta, accountant=make_accountant(accountant))


# --- without mbi -----------------------------------------------------------------------------


@pytest.fixture
def no_mbi(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes ``import mbi`` / ``import opendp.extras.mbi`` fail, whether installed or not."""
    monkeypatch.setitem(sys.modules, "mbi", None)
    monkeypatch.setitem(sys.modules, "opendp.extras.mbi", None)


def test_priors_list_the_mbi_backends() -> None:
    assert {"aim", "mst"} <= set(PRIORS)
    for prior in ("aim", "mst"):
        config = PMWConfig(epsilon=1.0, delta=1e-6, prior=prior)
        assert (config.max_updates, config.expected_queries) == (10, 10_000)
        with pytest.raises(ValueError, match="prior_fraction"):
            PMWConfig(epsilon=1.0, delta=1e-6, prior=prior, prior_fraction=0.9)


@pytest.mark.parametrize("method", ["aim", "mst"])
@pytest.mark.parametrize("accountant", ["pld", "zcdp"])
def test_missing_mbi_is_a_clear_error_and_charges_nothing(
    no_mbi: None, chain: PrivateData, method: PriorName, accountant: AccountantName
) -> None:
    ledger = ledger_for(accountant, epsilon=4.0)
    config = PMWConfig(
        epsilon=4.0, delta=1e-6, prior=method, accountant=accountant, sv_fraction=0.1
    )
    with pytest.raises(ImportError, match=r'pip install "pmwcm\[mbi\]"') as info:
        build_engine(chain, config, noise=NumpyNoise(seed=0), ledger=ledger)
    assert isinstance(info.value, sp.MbiUnavailableError)
    assert isinstance(info.value, ValueError)  # the service and CLI refuse it as a bad option
    assert ledger.entries == ()
    with pytest.raises(sp.MbiUnavailableError):
        sp.paid_synthetic_prior(chain, method, epsilon=1.0, delta=1e-7, ledger=ledger)
    assert ledger.entries == ()


@pytest.mark.parametrize(("epsilon", "delta"), [(0.2, 1e-7), (1.0, 4e-7), (8.0, 4e-7), (40, 1e-9)])
def test_charged_event_fits_the_prior_share(epsilon: float, delta: float) -> None:
    rho_r = sp.replace_one_rho(epsilon, delta)
    zcdp = ZCDPAccountant()
    # The largest replace-one rho whose conversion fits (relative 1e-9), at least Bun-Steinke's.
    assert zcdp.epsilon(dp_accounting.ZCDpEvent(rho_r), delta=delta) <= epsilon
    assert zcdp.epsilon(dp_accounting.ZCDpEvent(rho_r * (1 + 1e-8)), delta=delta) > epsilon
    log_inv = math.log(1 / delta)
    assert rho_r >= (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2
    for accountant in (PLDAccountant(), zcdp):
        event, rho = sp.prior_event(epsilon=epsilon, delta=delta, accountant=accountant)
        assert rho == rho_r / 4  # add/remove rho: group privacy, replace = remove + add
        assert accountant.epsilon(event, delta=delta) <= epsilon
        if accountant is zcdp:
            assert event == dp_accounting.ZCDpEvent(rho_r)
        else:
            assert event == EpsilonDeltaDpEvent(epsilon=epsilon, delta=delta)
    with pytest.raises(ValueError, match="PLDAccountant cannot"):  # why PLD gets (eps, delta)
        PLDAccountant().epsilon(dp_accounting.ZCDpEvent(rho_r), delta=delta)


# Each method under one accountant (each fit is OpenDP's real one, ~10 s): the charge
# is the method's and the accounting the accountant's, so the other two pairs repeat them.
@pytest.mark.parametrize(
    ("method", "accountant", "epsilon", "sv_fraction"),
    [("aim", "pld", 8.0, 0.3), ("mst", "zcdp", 16.0, 0.1)],
)
def test_engine_charges_the_prior_before_it_runs(
    monkeypatch: pytest.MonkeyPatch,
    chain: PrivateData,
    method: PriorName,
    accountant: AccountantName,
    epsilon: float,
    sv_fraction: float,
) -> None:
    ledger = ledger_for(accountant, epsilon=epsilon)
    calls: list[tuple[str, float, int]] = []
    release = sp._release  # OpenDP's real MST / AIM, watched as it is called

    def watched(
        method: str, domain: Domain, records: np.ndarray, *, rho: float, rounds: int
    ) -> Any:
        calls.append((method, rho, len(ledger.entries)))
        assert PrivateData.from_records(domain, records).histogram().to_array() == pytest.approx(
            chain.histogram().to_array()
        )
        return release(method, domain, records, rho=rho, rounds=rounds)

    monkeypatch.setattr(sp, "_release", watched)
    config = PMWConfig(
        epsilon=epsilon,
        delta=1e-6,
        prior=method,
        accountant=accountant,
        sv_fraction=sv_fraction,
        prior_fraction=0.5,
    )
    engine = build_engine(chain, config, noise=NumpyNoise(seed=0), ledger=ledger)
    share = (0.5 * epsilon, 0.5 * 1e-6)
    assert calls == [(method, sp.replace_one_rho(*share) / 4, 1)]  # charged, then run
    (entry,) = ledger.entries
    assert entry.label == sp.LABELS[method]
    assert ledger.accountant.epsilon(entry.event, delta=share[1]) <= share[0]
    # Null cells dropped, codes mapped through the keys, renormalised: the data's pairs up
    # to the prior's noise (at eps >= 4 about 0.01; a code read through the wrong key, or
    # a pair of the chain lost, is off by 0.2 to 0.4 here).
    assert max_pair_error(engine.hypothesis, chain) < 0.05
    events = [
        entry.event,
        engine.sparse_vector.privacy_event(),
        dp_accounting.SelfComposedDpEvent(
            config.oracle.privacy_event(engine.oracle_noise_level), config.max_updates
        ),
    ]
    total = ledger.accountant.epsilon(dp_accounting.ComposedDpEvent(events), delta=1e-6)
    assert epsilon - 1e-3 <= total <= epsilon


def test_records_rebuilt_from_a_histogram_without_a_refusal_that_reads_the_counts(
    chain: PrivateData,
) -> None:
    counts = PrivateData(domain=DOMAIN, n=chain.n, histogram=chain.histogram())
    rebuilt = sp.records_of(counts)
    assert rebuilt.shape == (chain.n, 4)
    assert DenseHistogram.from_records(DOMAIN, rebuilt).to_array() == pytest.approx(
        chain.histogram().to_array(), abs=1e-15
    )
    ragged = PrivateData(domain=DOMAIN, n=7, histogram=DenseHistogram.uniform(DOMAIN))
    assert sp.records_of(ragged).shape == (7, 4)  # the nearest 7 records, never a refusal
    ledger = ledger_for("pld")
    with pytest.raises(ValueError, match="method"):
        sp.paid_synthetic_prior(chain, "pgm", epsilon=1.0, delta=1e-7, ledger=ledger)


@pytest.mark.parametrize("n", [10**12, 5 * 10**9 + 1])
def test_neighbours_at_large_n_are_refused_alike_from_public_inputs(n: int) -> None:
    """Round 2 checked that ``n * D`` is integral to 1e-6, which at such n depends on
    the counts' rounding: one dataset was accepted and its neighbour refused. Now the
    refusal reads the kind of data, the universe and n only."""
    base = np.full(DOMAIN.size, n // DOMAIN.size)
    base[0] += n - base.sum()
    neighbour = base.copy()
    neighbour[0] -= 1
    neighbour[1] += 1  # one record moved between two cells
    messages = []
    for table in (base, neighbour):
        data = PrivateData(
            domain=DOMAIN, n=n, histogram=DenseHistogram(DOMAIN, table.reshape(DOMAIN.shape) / n)
        )
        ledger = ledger_for("pld")
        with pytest.raises(ValueError, match="records are rebuilt") as refused:
            sp.paid_synthetic_prior(data, "aim", epsilon=1.0, delta=1e-7, ledger=ledger)
        assert ledger.entries == ()
        messages.append(str(refused.value))
    assert messages[0] == messages[1]


def test_largest_remainder_counts_give_back_counts_and_always_n() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 7, 1000, 10**7):
        counts = rng.multinomial(n, np.full(37, 1 / 37))
        np.testing.assert_array_equal(sp.largest_remainder_counts(counts / n, n), counts)
        noisy = rng.dirichlet(np.ones(37))
        rounded = sp.largest_remainder_counts(noisy, n)
        assert rounded.sum() == n and rounded.min() >= 0
        assert np.abs(rounded - noisy * n).max() < 1.0


def test_on_a_support_the_prior_is_records_sampled_from_the_model(
    monkeypatch: pytest.MonkeyPatch, chain: PrivateData
) -> None:
    """The support backend's AIM/MST prior: charged first, then the model sampled (no
    table over X), its pairs the data's up to the mechanism's and the sample's noise."""
    ledger = ledger_for("pld", epsilon=16.0)
    runs: list[int] = []
    release = sp._release

    def watched(
        method: str, domain: Domain, records: np.ndarray, *, rho: float, rounds: int
    ) -> Any:
        runs.append(len(ledger.entries))
        return release(method, domain, records, rho=rho, rounds=rounds)

    monkeypatch.setattr(sp, "_release", watched)
    config = PMWConfig(
        epsilon=16.0,
        delta=1e-6,
        prior="mst",
        backend="support",
        support_size=4096,
        prior_fraction=0.5,
        sv_fraction=0.1,
    )
    engine = build_engine(chain, config, noise=NumpyNoise(seed=0), ledger=ledger)
    assert runs == [1]  # the prior's event was on the ledger before MST read the data
    support = engine.hypothesis
    assert isinstance(support, SupportHistogram)
    # 4096 draws, less any record on OpenDP's null category (a few per thousand).
    assert 4000 <= support.size <= 4096
    assert np.all(support.log_weights == support.log_weights[0])  # equal weights
    # Sampling noise at M = 4096 is about 0.01 per cell; a code read through the
    # wrong key, or the chain lost, is off by 0.2 to 0.4.
    assert max_pair_error(support, chain) < 0.05
    assert ledger.entries[0].label == sp.LABELS["mst"]


def test_a_sample_from_the_model_is_seeded_by_the_engine_and_leaves_numpy_alone() -> None:
    release = sp._release("mst", DOMAIN, chain_records(0), rho=2.0, rounds=1)

    def sample(seed: int) -> SupportHistogram:
        rng = post_processing_rng(NumpyNoise(seed=seed))
        return sp.support_from_release(release, DOMAIN, 512, rng=rng)

    np.random.seed(123)  # noqa: NPY002 (the legacy generator mbi's sampler reads)
    expected = np.random.random(3)  # noqa: NPY002
    np.random.seed(123)  # noqa: NPY002
    first = sample(1)
    assert np.array_equal(np.random.random(3), expected)  # noqa: NPY002
    assert np.array_equal(first.records, sample(1).records)  # reproducible with seeded noise
    assert not np.array_equal(first.records, sample(2).records)


def test_records_are_taken_as_held_and_from_a_sources_snapshot(
    chain: PrivateData, seed: int
) -> None:
    assert np.array_equal(sp.records_of(chain), chain_records(seed))
    from importlib import resources

    from pmwcm.data.bundled import adult_schema
    from pmwcm.data.sources.open import open_source
    from pmwcm.data.table import Dataset

    csv = resources.files("pmwcm.data.bundled").joinpath("files", "adult.csv")
    with resources.as_file(csv) as path:
        data = PrivateData.of(open_source(path, adult_schema("full")))
        memory = Dataset.from_csv(path, adult_schema("full"))
    try:
        held = data.held_records()
        assert held is not None and data.domain.size > sp.REBUILD_CELLS
        assert held.shape == memory.records.shape
        order = np.lexsort(held.T[::-1])
        expected = np.asarray(memory.records)[np.lexsort(np.asarray(memory.records).T[::-1])]
        np.testing.assert_array_equal(held[order], expected)  # the same multiset of records
    finally:
        data.close()


def test_service_accepts_synthetic_priors_under_either_accountant() -> None:
    pytest.importorskip("fastapi")  # pmwcm.service needs the service extra
    from pmwcm.service.models import SessionParameters

    assert SessionParameters(prior="aim").prior == "aim"
    # The zCDP debit (a ZCDpEvent) has a JSON form in pmwcm.mechanisms.accounting.codec.
    assert SessionParameters(prior="mst", accountant="zcdp").accountant == "zcdp"


# --- with mbi (opendp[mbi]: .venv-bench) -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("method", ["mst", "aim"])
def test_mbi_prior_matches_the_data_at_large_epsilon(chain: PrivateData, method: str) -> None:
    ledger = ledger_for("pld", epsilon=20.0)
    start = time.perf_counter()
    prior = sp.paid_synthetic_prior(
        chain, method, epsilon=20.0, delta=1e-6, ledger=ledger, rounds=4
    )
    seconds = time.perf_counter() - start
    values = prior.to_array()
    assert values.shape == DOMAIN.shape
    assert np.all(values >= 0) and values.sum() == pytest.approx(1.0, abs=1e-12)
    error = max_pair_error(prior, chain)
    print(f"{method}: max 2-way marginal error {error:.4f}, {seconds:.1f} s")
    assert error < 0.03
    assert [e.label for e in ledger.entries] == [sp.LABELS[method]]
    assert ledger.spent_epsilon() <= 20.0


@pytest.mark.slow
def test_engine_with_mst_prior(chain: PrivateData) -> None:
    config = PMWConfig(epsilon=20.0, delta=1e-6, prior="mst")
    engine = build_engine(chain, config, noise=NumpyNoise(seed=0))
    entries = engine.ledger.entries
    assert entries[0].label == "prior: MST synthetic data (mbi)"
    assert max_pair_error(engine.hypothesis, chain) < 0.03
    events = [
        *(e.event for e in entries),
        engine.sparse_vector.privacy_event(),
        dp_accounting.SelfComposedDpEvent(
            config.oracle.privacy_event(engine.oracle_noise_level), config.max_updates
        ),
    ]
    total = engine.ledger.accountant.epsilon(dp_accounting.ComposedDpEvent(events), delta=1e-6)
    assert engine.ledger.spent_epsilon() <= total <= 20.0
