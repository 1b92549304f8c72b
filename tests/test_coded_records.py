"""Counting a snapshot's cliques in blocks of rows (issue 37 item 2).

:class:`~pmwcm.kernels.coded_records.CodedRecords` counts a clique
:data:`~pmwcm.kernels.coded_records.COUNT_BLOCK_ROWS` rows at a time and keeps its
counts in the narrowest unsigned dtype, so a snapshot of mostly distinct records
costs a few bytes a record and counting a clique adds temporaries of one block,
not of every row. The tables must be those of one pass over every row, float for
float: integer counts sum exactly in float64 in any order.
"""

from __future__ import annotations

import itertools
import os
import tracemalloc

import numpy as np
import pytest

from pmwcm.kernels import coded_records, spilled_columns
from pmwcm.kernels.coded_records import CodedRecords, count_dtype, merge_counts
from pmwcm.kernels.domain import Domain

#: Cliques that take the four ways of counting 5,000 rows: a dense table (24 cells), a
#: sparse clique summed over all its cells (100 x 60 = 6,000 cells), one counted
#: through a bitmap of its cells (4 x 6 x 7,000 = 168,000: more than 8 a row, at most
#: 64) and one whose blocks' occupied cells are merged (100 x 60 x 7,000 = 4.2e7).
CLIQUES = [("a", "b"), ("c", "d"), ("a", "b", "e"), ("c", "d", "e"), ()]


def snapshot(rows: int, *, counts: bool, seed: int = 3) -> CodedRecords:
    domain = Domain.from_sizes({"a": 4, "b": 6, "c": 100, "d": 60, "e": 7000})
    rng = np.random.default_rng(seed)
    columns = [rng.integers(0, size, rows) for size in domain.sizes]
    weights = rng.integers(1, 300, rows) if counts else None
    return CodedRecords(domain, columns, weights)


def one_pass(records: CodedRecords, clique: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The clique's occupied cells and counts from every row at once (``np.unique``)."""
    axes = records.domain.axes(clique)
    codes = records.cell_codes(axes).astype(np.int64)
    cells, inverse = np.unique(codes, return_inverse=True)
    return cells, np.bincount(inverse, weights=records.counts, minlength=cells.size)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("counts", [True, False])
def test_cliques_counted_in_blocks_are_those_of_one_pass(
    counts: bool, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks summed on one thread or dealt to three (16 blocks: uneven shares), each
    into its own table: the same floats as one pass over every row."""
    monkeypatch.setattr(coded_records, "COUNT_THREADS", threads)
    records = snapshot(5000, counts=counts)
    whole = {clique: records.count_table(clique) for clique in CLIQUES}
    taken: list[str] = []
    for way in ("_ranked", "_merged"):
        counted = getattr(CodedRecords, way)

        def spy(self: CodedRecords, *args: object, _way: str = way, _f: object = counted) -> object:
            taken.append(_way)
            return _f(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(CodedRecords, way, spy)
    monkeypatch.setattr(coded_records, "COUNT_BLOCK_ROWS", 333)  # 16 blocks, the last short
    for clique in CLIQUES:
        table, before = records.count_table(clique), whole[clique]
        assert table.mass.sum() == records.n
        np.testing.assert_array_equal(table.mass, before.mass)
        if clique == ():
            continue
        assert table.is_dense == (clique == ("a", "b"))
        cells, mass = one_pass(records, clique)
        if table.is_dense:
            np.testing.assert_array_equal(table.mass.ravel()[cells], mass)
        else:
            np.testing.assert_array_equal(table.codes, cells)
            np.testing.assert_array_equal(table.codes, before.codes)
            np.testing.assert_array_equal(table.mass, mass)
    assert taken == ["_ranked", "_merged"]  # one clique each way


def test_full_counts_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    domain = Domain.from_sizes({"a": 3, "b": 5, "c": 2})
    rng = np.random.default_rng(0)
    records = CodedRecords(domain, [rng.integers(0, s, 1000) for s in domain.sizes])
    whole = records.full_counts()
    monkeypatch.setattr(coded_records, "COUNT_BLOCK_ROWS", 7)
    np.testing.assert_array_equal(records.full_counts(), whole)
    assert whole.sum() == 1000 and whole.shape == (3, 5, 2)


def test_counts_are_kept_in_the_narrowest_unsigned_dtype() -> None:
    domain = Domain.from_sizes({"a": 300})
    column = np.arange(300) % 300
    ones = CodedRecords(domain, [column], np.ones(300, dtype=np.int64)).counts
    assert ones is not None and ones.dtype == np.uint8
    wide = np.ones(300, dtype=np.int64)
    wide[7] = 70_000
    records = CodedRecords(domain, [column], wide)
    assert records.counts is not None
    assert records.counts.dtype == np.uint32 and records.n == 299 + 70_000
    assert records.columns[0].dtype == np.uint16
    assert records.nbytes == 300 * 2 + 300 * 4
    assert count_dtype(255) == np.uint8 and count_dtype(256) == np.uint16


def test_from_blocks_is_the_constructor_without_a_second_copy() -> None:
    records = snapshot(3000, counts=True)
    counts = records.counts
    assert counts is not None
    cuts = [0, 1000, 1000, 2500, 3000]  # an empty block too
    column_blocks: list[list[np.ndarray]] = [
        [column[lo:hi].astype(np.int64) for lo, hi in itertools.pairwise(cuts)]
        for column in records.columns
    ]
    count_blocks = [counts[lo:hi].astype(np.uint16) for lo, hi in itertools.pairwise(cuts)]
    built = CodedRecords.from_blocks(records.domain, column_blocks, count_blocks)
    assert all(not blocks for blocks in column_blocks) and not count_blocks  # handed over
    assert built.n == records.n and built.rows == records.rows
    for mine, theirs in zip(built.columns, records.columns, strict=True):
        assert mine.dtype == theirs.dtype and not mine.flags.writeable
        np.testing.assert_array_equal(mine, theirs)
    assert built.counts is not None and built.counts.dtype == counts.dtype == np.uint16
    assert built.fingerprint() == records.fingerprint()
    with pytest.raises(ValueError, match="blocks"):
        CodedRecords.from_blocks(
            records.domain, [[np.zeros(2, np.uint8)]] * 5, [np.ones(3, np.uint8)]
        )


def test_merge_counts_is_the_sorted_union_with_masses_summed() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = np.unique(rng.integers(0, 50, rng.integers(0, 30)))
        b = np.unique(rng.integers(0, 50, rng.integers(0, 30)))
        mass_a = rng.integers(1, 9, a.size).astype(np.float64)
        mass_b = rng.integers(1, 9, b.size).astype(np.float64)
        cells, mass = merge_counts(a.astype(np.int64), mass_a, b.astype(np.int64), mass_b)
        union, inverse = np.unique(np.concatenate([a, b]), return_inverse=True)
        expected = np.bincount(inverse, weights=np.concatenate([mass_a, mass_b]))
        np.testing.assert_array_equal(cells, union)
        np.testing.assert_array_equal(mass, expected)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_counting_a_clique_of_many_rows_adds_one_block_of_temporaries(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2^22 rows (4 Mi: 16 MiB of codes and counts): counting a clique of 6,000 cells
    allocates a table and one block's codes a thread (the last attribute is folded into
    the count, so a block's codes are those of the first: uint8 here), never a float or
    an index a row (32 MiB), as counting in one piece did (codes, ranks and the weights
    as floats)."""
    monkeypatch.setattr(coded_records, "COUNT_THREADS", threads)
    rows = 2**22
    domain = Domain.from_sizes({"c": 100, "d": 60})
    rng = np.random.default_rng(1)
    columns = [rng.integers(0, size, rows, dtype=np.uint8) for size in domain.sizes]
    records = CodedRecords(domain, columns, np.ones(rows, dtype=np.uint8))
    records.count_table(("c", "d"))  # compiled before measuring
    tracemalloc.start()
    try:
        table = records.count_table(("c", "d"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert table.mass.sum() == rows
    block = coded_records.COUNT_BLOCK_ROWS  # one block's uint8 codes of "c"
    assert peak <= threads * (block + 6000 * 8) + 2 * 6000 * 8
    assert peak < rows * 8 / 4


def test_a_clique_counted_through_its_bitmap_allocates_its_table_and_the_bitmap() -> None:
    """2^22 rows on a clique of 2.4e8 cells (about 57 a row): its table (16 bytes an
    occupied cell), the bitmap (a quarter byte a cell) and one block; sorting or merging
    would add 16-32 bytes a row."""
    rows = 2**22
    domain = Domain.from_sizes({"c": 100, "d": 60, "e": 40_000})
    rng = np.random.default_rng(4)
    columns = [rng.integers(0, size, rows) for size in domain.sizes]
    records = CodedRecords(domain, columns)
    cells = 100 * 60 * 40_000
    assert 8 * rows < cells <= coded_records.BITMAP_CELLS_PER_ROW * rows
    records.count_table(("c", "d", "e"))  # compiled before measuring
    tracemalloc.start()
    try:
        table = records.count_table(("c", "d", "e"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert table.mass.sum() == rows and table.codes is not None
    held = table.mass.nbytes + table.codes.nbytes
    block = coded_records.COUNT_BLOCK_ROWS * 4  # one block's uint32 codes
    assert peak <= held + cells // 4 + 3 * block


def test_own_pages_copies_into_a_private_map() -> None:
    """A block kept in its own anonymous map (returned to the system when freed), equal
    to the block and independent of it; a block under a page is a plain copy."""
    import mmap

    block = np.arange(10_000, dtype=np.uint16)
    kept = coded_records.own_pages(block)
    assert isinstance(kept.base, memoryview) and isinstance(kept.base.obj, mmap.mmap)
    assert kept.dtype == block.dtype
    np.testing.assert_array_equal(kept, block)
    block[0] = 7
    assert kept[0] == 0
    small = coded_records.own_pages(np.arange(3, dtype=np.uint8))
    assert small.tolist() == [0, 1, 2] and small.base is None


def test_column_files_are_mapped_read_only_and_leave_nothing_on_disk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []
    mkdtemp = spilled_columns.tempfile.mkdtemp

    def recorded(**kwargs: str) -> str:
        made.append(mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(spilled_columns.tempfile, "mkdtemp", recorded)
    files = spilled_columns.ColumnFiles([np.dtype(np.uint8), np.dtype(np.uint16)])
    assert os.stat(made[0]).st_mode & 0o077 == 0  # this user's only
    rng = np.random.default_rng(2)
    first = [rng.integers(0, 200, 5000), rng.integers(0, 60000, 5000)]
    second = [rng.integers(0, 200, 3), rng.integers(0, 60000, 3)]
    for block in (first, second):
        for j, column in enumerate(block):
            files.append(j, column)
    columns = files.mapped()
    assert not os.path.exists(made[0])  # directory and files gone, the maps stay valid
    for j, column in enumerate(columns):
        assert column.dtype == (np.uint8, np.uint16)[j] and not column.flags.writeable
        np.testing.assert_array_equal(column, np.concatenate([first[j], second[j]]))
    spilled_columns.release_pages(columns[1], 0, 5003)  # pages let go, read back intact
    np.testing.assert_array_equal(columns[1], np.concatenate([first[1], second[1]]))
    uneven = spilled_columns.ColumnFiles([np.dtype(np.uint8)] * 2)
    uneven.append(0, np.zeros(3))
    with pytest.raises(ValueError, match="as many rows"):
        uneven.mapped()
    assert not os.path.exists(made[1])


def test_release_pages_leaves_memory_that_is_not_a_file_map_alone() -> None:
    """The advice that lets a file map's pages go would zero an anonymous map's."""
    kept = coded_records.own_pages(np.arange(5000, dtype=np.uint16))
    spilled_columns.release_pages(kept, 0, 5000)
    plain = np.arange(5000, dtype=np.uint16)
    spilled_columns.release_pages(plain, 0, 5000)
    np.testing.assert_array_equal(kept, np.arange(5000))
    np.testing.assert_array_equal(plain, np.arange(5000))


@pytest.mark.parametrize("spill_bytes", [0, 20_000, 2**40])
def test_a_snapshot_built_in_files_counts_like_one_in_memory(
    spill_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spilled at once, midway, or never: the same records, counts and tables."""
    reference = snapshot(6000, counts=True)
    counts = reference.counts
    assert counts is not None
    monkeypatch.setattr(spilled_columns, "SPILL_BYTES", spill_bytes)
    monkeypatch.setattr(coded_records, "COUNT_BLOCK_ROWS", 512)
    builder = coded_records.SnapshotBuilder(reference.domain)
    for lo in range(0, 6000, 1000):
        builder.add([c[lo : lo + 1000] for c in reference.columns], counts[lo : lo + 1000])
    built = builder.records()
    builder.discard()  # nothing left to drop: the snapshot stays whole
    assert built.spilled == (spill_bytes < 2**40) and not reference.spilled
    assert built.n == reference.n and built.fingerprint() == reference.fingerprint()
    for clique in CLIQUES:
        mine, theirs = built.count_table(clique), reference.count_table(clique)
        np.testing.assert_array_equal(mine.mass, theirs.mass)
        if mine.codes is not None:
            np.testing.assert_array_equal(mine.codes, theirs.codes)


@pytest.mark.parametrize(
    "sizes",
    [
        {"a": 3, "b": 5, "c": 200},  # buckets on a and b (15), then on c too (3,000)
        {"wide": 70_000, "b": 2},  # one leading attribute past the bucket limit
    ],
)
def test_a_fingerprint_taken_in_batches_is_the_whole_sorts(
    sizes: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of a few hundred rows (one skewed bucket larger than a batch), counts
    and repeated records: the digest of one sort of every row, byte for byte."""
    from pmwcm.kernels import records_fingerprint

    domain = Domain.from_sizes(sizes)
    rng = np.random.default_rng(9)
    rows = 5000
    columns = [rng.integers(0, min(size, 40), rows) for size in domain.sizes]
    columns[0][:1500] = 1  # one bucket of 1,500 rows at least
    counts = rng.integers(1, 5, rows)
    records = CodedRecords(domain, columns, counts)
    plain = CodedRecords(domain, columns)
    whole = records.fingerprint(), plain.fingerprint()
    monkeypatch.setattr(records_fingerprint, "FINGERPRINT_BATCH_ROWS", 300)
    monkeypatch.setattr(records_fingerprint, "_SCAN_ROWS", 700)
    assert (records.fingerprint(), plain.fingerprint()) == whole
    expanded = CodedRecords(domain, [c[::-1] for c in plain.columns])  # row order moved
    assert expanded.fingerprint() == whole[1]


def test_a_fingerprint_of_many_rows_sorts_a_batch_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2^22 rows in batches of 2^19: the peak is a batch's temporaries (about 64 bytes a
    row of it), where sorting every row at once held about 47 bytes a row of all."""
    from pmwcm.kernels import records_fingerprint

    rows, batch = 2**22, 2**19
    monkeypatch.setattr(records_fingerprint, "FINGERPRINT_BATCH_ROWS", batch)
    domain = Domain.from_sizes({f"c{j}": 100 for j in range(5)})
    rng = np.random.default_rng(6)
    records = CodedRecords(domain, [rng.integers(0, 100, rows) for _ in range(5)])
    tracemalloc.start()
    try:
        records.fingerprint()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * batch < 47 * rows / 3


def test_a_clique_whose_one_size_alone_does_not_fit_its_code_type_is_counted() -> None:
    """A 1-way clique of 256 values has codes up to 255 (uint8), but 256 itself does not
    fit uint8; so with a size-1 attribute before it. Counted exactly, as from the records
    (the paid prior measures such 1-ways where the noise swamps an attribute's pairs)."""
    domain = Domain.from_sizes({"one": 1, "id": 256, "flag": 2})
    rng = np.random.default_rng(0)
    columns = [np.zeros(600, dtype=np.uint8), rng.integers(0, 256, 600).astype(np.uint8),
               rng.integers(0, 2, 600).astype(np.uint8)]  # fmt: skip
    records = CodedRecords(domain, columns)
    expected = np.bincount(columns[1], minlength=256).astype(float)
    np.testing.assert_array_equal(records.count_table(("id",)).table(), expected)
    np.testing.assert_array_equal(records.count_table(("one", "id")).table().ravel(), expected)
    both = records.count_table(("id", "flag")).table()
    np.testing.assert_array_equal(both.sum(axis=1), expected)
