"""The fused one-clique passes of a support agree with the NumPy code they replace."""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.kernels import support as support_module
from pmwcm.kernels import support_cells
from pmwcm.kernels.clique_table import cell_codes, occupied_cells
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support import SupportHistogram
from pmwcm.kernels.support_cells import clique_mass, index_mass, occupied_index, occupied_mass
from pmwcm.kernels.support_passes import CHUNK_MIN_RECORDS, pass_chunks

SIZES = (7, 3, 100, 2, 50, 9, 200)


def _support(size: int, order: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    records = np.empty((size, len(SIZES)), dtype=np.uint8, order=order)  # type: ignore[call-overload]
    for column, values in enumerate(SIZES):
        # Skewed codes, so that some cells of every clique stay empty.
        records[:, column] = np.minimum(rng.geometric(min(3.0 / values, 0.9), size) - 1, values - 1)
    weights = rng.random(size)
    return records, weights / weights.sum()


# One chunk and the threaded chunks; C- and Fortran-ordered records (a support drawn by
# the proposal is column-major).
CASES = [(size, order) for size in (1_000, CHUNK_MIN_RECORDS + 17) for order in ("C", "F")]


@pytest.mark.parametrize(("size", "order"), CASES)
@pytest.mark.parametrize("axes", [(0,), (1, 3), (3, 1, 5), (0, 1, 3, 5)])
def test_clique_mass_is_the_weighted_bincount_of_the_cell_codes(
    size: int, order: str, axes: tuple[int, ...]
) -> None:
    records, weights = _support(size, order)
    sizes = [SIZES[a] for a in axes]
    expected = np.bincount(
        cell_codes(records, axes, sizes), weights=weights, minlength=int(np.prod(sizes))
    )
    np.testing.assert_allclose(clique_mass(records, axes, sizes, weights), expected, rtol=1e-12)


@pytest.mark.parametrize(("size", "order"), CASES)
@pytest.mark.parametrize(
    "axes",
    [
        (2, 3),  # 200 cells: the bitmap
        (2, 4, 0, 3),  # 70,000 cells: the bitmap at the larger size, sorted at 1,000 records
        (4, 2, 6, 0),  # 7,000,000 cells: more than 5 per record at both sizes, sorted
    ],
)
def test_occupied_index_and_index_mass_match_occupied_cells_and_bincount(
    size: int, order: str, axes: tuple[int, ...]
) -> None:
    records, weights = _support(size, order)
    sizes = [SIZES[a] for a in axes]
    codes = cell_codes(records, axes, sizes)
    expected_cells, expected_index = occupied_cells(codes, int(np.prod(sizes)))
    cells, index = occupied_index(records, axes, sizes)
    assert index.dtype == np.int32
    np.testing.assert_array_equal(cells, expected_cells)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(cells[index], codes)
    expected_mass = np.bincount(expected_index, weights=weights, minlength=cells.size)
    np.testing.assert_allclose(index_mass(index, weights, cells.size), expected_mass, rtol=1e-12)


@pytest.mark.parametrize(("size", "order"), CASES)
@pytest.mark.parametrize("keyed", [True, False])
def test_the_sorted_index_keys_codes_with_positions_or_falls_back_to_unique(
    size: int, order: str, keyed: bool
) -> None:
    """Both ways of sorting give :func:`occupied_cells`' arrays: the keyed sort where a
    code and a position fit in 63 bits, ``np.unique`` where they would not (a clique
    declared of ``2^62`` cells, so the decision, not the codes, changes)."""
    records, _ = _support(size, order)
    axes = (4, 2, 6, 0)
    records[size // 2, list(axes)] = 0  # cell 0 occupied: no code may pass for "none yet"
    sizes = [SIZES[a] for a in axes]
    count = int(np.prod(sizes)) if keyed else 2**62
    expected_cells, expected_index = occupied_cells(cell_codes(records, axes, sizes), count)
    calls: list[int] = []
    original = np.unique

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[call-overload]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(support_cells.np, "unique", counting)
        cells, index = support_cells._sorted_index(
            records, np.asarray(axes, np.int64), np.asarray(sizes, np.int64), count
        )
    assert bool(calls) is not keyed
    assert index.dtype == np.int32
    np.testing.assert_array_equal(cells, expected_cells)
    np.testing.assert_array_equal(index, expected_index)


def test_a_table_as_large_as_the_support_is_summed_in_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four chunk tables of nearly ``M`` cells each would hold four times the index:
    past one cell per record the sum runs as one chunk (and gives the same table)."""
    records, weights = _support(CHUNK_MIN_RECORDS + 17, "C")
    clique = (4, 2, 6, 0)
    cells, index = occupied_index(records, clique, [SIZES[a] for a in clique])
    assert cells.size * 4 > index.size  # the case under test
    seen: list[int] = []
    original = support_cells._index_mass

    def counting(*args: object) -> None:
        seen.append(1)
        original(*args)

    monkeypatch.setattr(support_cells, "_index_mass", counting)
    mass = index_mass(index, weights, cells.size)
    assert seen == [1]
    np.testing.assert_allclose(
        mass, np.bincount(index, weights=weights, minlength=cells.size), rtol=1e-12
    )


@pytest.mark.parametrize(("size", "order"), CASES)
@pytest.mark.parametrize(
    "axes",
    [
        (1, 3, 5),  # 54 cells
        (2, 3),  # 200 cells
        (0, 2, 3),  # 1,400 cells: more than one a record at 1,000 records
        (2, 4, 0, 3),  # 70,000 cells: more than one a record in four chunks
    ],
)
def test_occupied_mass_sums_what_the_index_path_sums_bit_for_bit(
    size: int, order: str, axes: tuple[int, ...]
) -> None:
    records, weights = _support(size, order)
    sizes = [SIZES[a] for a in axes]
    found = occupied_mass(records, axes, sizes, weights)
    if len(pass_chunks(size)) * int(np.prod(sizes)) > size:
        assert found is None  # the caller's index path
        return
    assert found is not None
    cells, index = occupied_index(records, axes, sizes)
    np.testing.assert_array_equal(found[0], cells)
    # the same records in the same order into the same chunks: equal, not just close
    np.testing.assert_array_equal(found[1], index_mass(index, weights, cells.size))


def test_a_support_table_is_the_same_with_or_without_the_cached_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records, weights = _support(CHUNK_MIN_RECORDS + 17, "F")
    domain = Domain.from_sizes({f"a{i}": s for i, s in enumerate(SIZES)})
    support = SupportHistogram(domain, records, np.log(weights))
    indexed: list[tuple[int, ...]] = []

    def counted(records: np.ndarray, axes: tuple[int, ...], sizes: tuple[int, ...]) -> object:
        indexed.append(tuple(axes))
        return occupied_index(records, axes, sizes)

    monkeypatch.setattr(support_module, "occupied_index", counted)
    clique = ("a0", "a2", "a3", "a1")  # 4,200 cells: not dense, one-pass table
    fresh = support.clique_table(clique)
    assert indexed == []  # a round's table needs no index
    cells, index = occupied_index(records, (0, 2, 3, 1), (7, 100, 2, 3))
    np.testing.assert_array_equal(fresh.codes, cells)
    np.testing.assert_array_equal(fresh.mass, index_mass(index, support.probabilities, cells.size))
    # A reweight on the clique makes (and caches) the index; the next table reads it.
    support.reweight_table(clique, fresh, np.linspace(-0.5, 0.5, cells.size))
    assert len(indexed) == 1  # the reweight made it
    after = support.clique_table(clique)
    assert len(indexed) == 1  # and the next table read it
    np.testing.assert_array_equal(after.codes, cells)
    np.testing.assert_array_equal(after.mass, index_mass(index, support.probabilities, cells.size))
    by_code = occupied_mass(records, (0, 2, 3, 1), (7, 100, 2, 3), support.probabilities)
    assert by_code is not None
    np.testing.assert_array_equal(after.mass, by_code[1])


def test_occupied_mass_leaves_a_clique_of_many_cells_to_the_index_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records, weights = _support(CHUNK_MIN_RECORDS + 17, "F")
    assert occupied_mass(records, (2, 3), (100, 2), weights) is not None  # 200 cells
    monkeypatch.setattr(support_cells, "BY_CODE_MAX_CELLS", 199)
    assert occupied_mass(records, (2, 3), (100, 2), weights) is None
