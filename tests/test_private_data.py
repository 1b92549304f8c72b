"""Contract tests for :class:`pmwcm.mechanisms.private_data.PrivateData`.

It is the one door to the real data.

Both backings (records, or a histogram with a stated ``n``) must give the same
clique marginals -- equal to a brute-force count, axes in the order asked,
summing to one -- cached and read-only, and reject inconsistent inputs with
messages that name the problem.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import TOY_DOMAIN, toy_records
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.mechanisms.private_data import PrivateData

CLIQUES = [
    (),
    ("a",),
    ("c",),
    ("y", "a"),
    ("c", "e", "b"),
    ("y", "e", "d", "c", "b", "a"),
    tuple(TOY_DOMAIN.names),
]


def brute_force(records: np.ndarray, domain: Domain, clique: tuple[str, ...]) -> np.ndarray:
    table = np.zeros(tuple(domain.size_of(a) for a in clique))
    for row in records:
        table[tuple(int(row[domain.index(a)]) for a in clique)] += 1
    return table / len(records)


@pytest.mark.parametrize("clique", CLIQUES, ids=lambda c: "-".join(c) or "empty")
def test_marginals_match_brute_force_on_both_backings(clique: tuple[str, ...], seed: int) -> None:
    records = toy_records(seed, n=500)
    from_records = PrivateData.from_records(TOY_DOMAIN, records)
    hist = DenseHistogram.from_records(TOY_DOMAIN, records)
    from_hist = PrivateData(domain=TOY_DOMAIN, n=500, histogram=hist)
    expected = brute_force(records, TOY_DOMAIN, clique)
    for data in (from_records, from_hist):
        table = data.marginal(clique)
        assert table.shape == expected.shape
        np.testing.assert_allclose(table, expected, atol=1e-15)
        assert table.sum() == pytest.approx(1.0)


def test_full_histogram_marginals_are_exact_in_every_axis_order(seed: int) -> None:
    """When ``|X| <= n`` the marginals come from one histogram of counts, cached by the
    set of axes; a clique in another order is the same counts transposed (exact:
    integer counts sum the same in any order)."""
    domain = Domain.from_sizes({"a": 2, "b": 3, "c": 2, "y": 2})
    records = np.random.default_rng(seed).integers(0, domain.sizes, size=(400, 4))
    data = PrivateData.from_records(domain, records)
    for clique in itertools.permutations(("a", "b", "y")):
        expected = brute_force(records, domain, clique)
        np.testing.assert_array_equal(data.marginal(clique), expected)
        np.testing.assert_array_equal(data.clique_table(clique).table(), expected)
    np.testing.assert_array_equal(data.marginal(()), np.ones(()))


def test_marginals_are_cached_and_read_only(toy_data: PrivateData) -> None:
    first = toy_data.marginal(("a", "y"))
    assert toy_data.marginal(["a", "y"]) is first  # any sequence type, same cache entry
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 1.0
    assert toy_data.marginal(("y", "a")) is not first
    np.testing.assert_array_equal(toy_data.marginal(("y", "a")), first.T)


def test_histogram_view_is_a_copy(seed: int) -> None:
    records = toy_records(seed, n=300)
    data = PrivateData.from_records(TOY_DOMAIN, records)
    np.testing.assert_allclose(
        data.histogram().to_array(), DenseHistogram.from_records(TOY_DOMAIN, records).to_array()
    )
    hist = DenseHistogram.from_records(TOY_DOMAIN, records)
    backed = PrivateData(domain=TOY_DOMAIN, n=10**9, histogram=hist)
    copy = backed.histogram()
    copy.reweight(("a",), np.array([0.0, 5.0]))
    np.testing.assert_allclose(backed.histogram().to_array(), hist.to_array())
    assert backed.n == 10**9  # n is stated, not counted, for a histogram


def test_from_records_counts_n(seed: int) -> None:
    records = toy_records(seed, n=123)
    data = PrivateData.from_records(TOY_DOMAIN, records)
    assert data.n == 123 and data.domain == TOY_DOMAIN


def test_validation_messages() -> None:
    records = np.zeros((4, len(TOY_DOMAIN)), dtype=np.int64)
    hist = DenseHistogram.uniform(TOY_DOMAIN)
    with pytest.raises(ValueError, match="exactly one of records=, histogram= or source="):
        PrivateData(domain=TOY_DOMAIN, n=4)
    with pytest.raises(ValueError, match="exactly one of records=, histogram= or source="):
        PrivateData(domain=TOY_DOMAIN, n=4, records=records, histogram=hist)
    for bad_n in (0, -3, 2.5):
        with pytest.raises(ValueError, match="n must be a positive integer"):
            PrivateData(domain=TOY_DOMAIN, n=bad_n, histogram=hist)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"shape \(n, 6\)"):
        PrivateData(domain=TOY_DOMAIN, n=4, records=records[:, :3])
    with pytest.raises(ValueError, match="n=5 but 4 records"):
        PrivateData(domain=TOY_DOMAIN, n=5, records=records)
    other = DenseHistogram.uniform(Domain.from_sizes({"a": 2}))
    with pytest.raises(ValueError, match="different domain"):
        PrivateData(domain=TOY_DOMAIN, n=4, histogram=other)
    data = PrivateData(domain=TOY_DOMAIN, n=4, records=records)
    with pytest.raises(KeyError, match="zz"):
        data.marginal(("a", "zz"))


def test_all_pairs_agree_between_backings(seed: int) -> None:
    """Every 2-way marginal (what the prior measures) agrees between the two backings."""
    records = toy_records(seed, n=400)
    a = PrivateData.from_records(TOY_DOMAIN, records)
    b = PrivateData(
        domain=TOY_DOMAIN, n=400, histogram=DenseHistogram.from_records(TOY_DOMAIN, records)
    )
    for pair in itertools.permutations(TOY_DOMAIN.names, 2):
        np.testing.assert_allclose(a.marginal(pair), b.marginal(pair), atol=1e-15)
