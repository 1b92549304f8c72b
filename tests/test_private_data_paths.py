"""The in-memory counting paths of :class:`PrivateData` against the reference count.

Two public rules pick how records are counted (the module docstring): one data
histogram when ``|X| <= n``, the clique's own narrow columns when ``|X| > n``.
Either must give the reference marginal (``ravel_multi_index`` + ``bincount``
over the int64 records) to 1e-12, in both table forms, and serve a repeated
clique from its cache.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pmwcm.kernels.clique_table import CliqueTable, is_dense
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.private_data import PrivateData, code_dtype

SMALL = Domain.from_sizes({"a": 2, "b": 3, "c": 5, "d": 4})  # |X| = 120
LARGE = Domain.from_sizes({"u": 300, "v": 70, "w": 2, "x": 40, "y": 9})  # |X| ~ 1.5e7, uint16 u


def reference(domain: Domain, records: np.ndarray, clique: tuple[str, ...]) -> np.ndarray:
    axes = domain.axes(clique)
    shape = tuple(domain.sizes[a] for a in axes)
    if not axes:
        return np.ones(())
    flat = np.ravel_multi_index(tuple(records[:, list(axes)].T), shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    return counts.reshape(shape).astype(np.float64) / len(records)


def draw(domain: Domain, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Skewed columns: some cells empty, some crowded, as real data.
    cols = [np.minimum(rng.geometric(2.0 / s, size=n) - 1, s - 1) for s in domain.sizes]
    return np.stack(cols, axis=1).astype(np.int64)


def cliques(domain: Domain) -> list[tuple[str, ...]]:
    names = domain.names
    out: list[tuple[str, ...]] = [()]
    for k in (1, 2, 3):
        out += list(itertools.permutations(names, k))[:40]
    return [*out, names, tuple(reversed(names))]


@pytest.mark.parametrize(("domain", "n"), [(SMALL, 5000), (LARGE, 3000)], ids=["X<=n", "X>n"])
def test_marginals_and_tables_equal_the_reference(domain: Domain, n: int, seed: int) -> None:
    records = draw(domain, n, seed)
    data = PrivateData.from_records(domain, records)
    for clique in cliques(domain):
        expected = reference(domain, records, clique)
        shape = expected.shape
        table = data.clique_table(clique)
        assert table.shape == shape
        assert table.is_dense == is_dense(shape)
        if not table.is_dense:  # the occupied cells, exactly those of the reference
            assert table.codes is not None
            np.testing.assert_array_equal(table.codes, np.flatnonzero(expected.reshape(-1)))
        np.testing.assert_allclose(table.table(), expected, rtol=0, atol=1e-12)
        if np.prod(shape) <= 2**16:
            np.testing.assert_allclose(data.marginal(clique), expected, rtol=0, atol=1e-12)


def test_the_histogram_rule_follows_public_sizes(seed: int) -> None:
    small = PrivateData.from_records(SMALL, draw(SMALL, 500, seed))
    large = PrivateData.from_records(LARGE, draw(LARGE, 500, seed))
    small.marginal(("a", "b"))
    large.marginal(("w", "y"))
    assert small._counts is not None  # one data histogram, built once
    assert large._counts is None  # only the clique's columns were read
    assert large._pinned is not None
    assert [c.dtype for c in large._pinned.columns] == [np.uint16, *[np.uint8] * 4]
    assert code_dtype(256) == np.uint8 and code_dtype(70 * 300) == np.uint16


def test_a_repeated_clique_is_served_from_the_cache(seed: int) -> None:
    data = PrivateData.from_records(LARGE, draw(LARGE, 2000, seed))
    first = data.clique_table(("u", "v", "x"))
    assert data.clique_table(("u", "v", "x")) is first
    assert data.marginal(("w", "y")) is data.marginal(["w", "y"])


def test_histogram_equals_the_records_histogram(seed: int) -> None:
    for domain, n in ((SMALL, 800), (Domain.from_sizes({"p": 50, "q": 40, "r": 3}), 900)):
        records = draw(domain, n, seed)
        got = PrivateData.from_records(domain, records).histogram().to_array()
        np.testing.assert_allclose(got, reference(domain, records, domain.names), atol=1e-12)


def test_codes_outside_the_domain_are_refused_when_opened() -> None:
    records = np.zeros((3, len(SMALL)), dtype=np.int64)
    records[1, 2] = 5
    with pytest.raises(ValueError, match=r"outside 0..4 for attribute 'c'"):
        PrivateData.from_records(SMALL, records)
    with pytest.raises(ValueError, match="integer codes"):
        PrivateData.from_records(SMALL, records.astype(float))


def test_a_sparse_table_from_records_is_a_clique_table(seed: int) -> None:
    data = PrivateData.from_records(LARGE, draw(LARGE, 1000, seed))
    table = data.clique_table(("u", "v"))
    assert isinstance(table, CliqueTable) and not table.is_dense
    assert table.mass.sum() == pytest.approx(1.0, abs=1e-12)
    assert not table.mass.flags.writeable
