"""The data an engine answers from is the data it opened (issue 33, item 1).

Every engine reads its table once, at open, into a snapshot of distinct coded
records and counts (:class:`~pmwcm.kernels.coded_records.CodedRecords`). Here each
engine's source is opened, an engine answers a seeded stream, the source is then
replaced, appended to or deleted from, and the engine answers on: every answer,
every clique table and ``n`` must be those of an engine on an unchanged copy of
the data (same process, same seed: bit for bit), and every clique table must sum
to exactly ``n``. The fingerprint that a service stores tells the changed data
from the opened data, whatever the row order of either.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pytest

from pmwcm.data.bundled import adult_schema
from pmwcm.data.sources.open import open_source
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.coded_records import CodedRecords
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PinnedSource, PrivateData

SCHEMA = adult_schema("binary")
ROWS = 6000
#: Cliques a stream meets, and a large one (2^13 cells) kept on its occupied cells.
CONFIG = PMWConfig(
    epsilon=2.0, delta=1e-6, prior="uniform", max_updates=3, threshold=20.0, after_halt="synthetic"
)
NAMES = SCHEMA.domain().names
CLIQUES = [(NAMES[8], NAMES[-1]), (NAMES[0], NAMES[3], NAMES[-1]), tuple(NAMES[:13])]


@pytest.fixture(scope="module")
def adult_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first ROWS rows of the bundled Adult CSV, and the same file written as Parquet."""
    folder = tmp_path_factory.mktemp("pinned")
    csv = folder / "adult.csv"
    bundled = resources.files("pmwcm.data.bundled").joinpath("files", "adult.csv")
    lines = bundled.read_text().splitlines()[: ROWS + 1]
    csv.write_text("\n".join(lines) + "\n")
    duckdb.sql(
        f"COPY (SELECT * FROM read_csv('{csv}', all_varchar = true, header = true)) "
        f"TO '{folder / 'adult.parquet'}' (FORMAT parquet)"
    )
    return folder


def changed_copy(csv: Path, out: Path, how: str) -> None:
    """``csv`` changed: rows replaced by others (n kept), rows appended, or rows deleted."""
    header, *lines = csv.read_text().splitlines()
    if how == "replace":  # as many rows, other records: the first half doubled
        lines = lines[: len(lines) // 2] * 2
    elif how == "append":
        lines = lines + lines[:500]
    else:
        lines = lines[500:]
    out.write_text("\n".join([header, *lines]) + "\n")


def to_parquet(csv: Path, out: Path) -> None:
    duckdb.sql(
        f"COPY (SELECT * FROM read_csv('{csv}', all_varchar = true, header = true)) "
        f"TO '{out}' (FORMAT parquet)"
    )


def answers(data: PrivateData, queries: list[CMQuery]) -> list[tuple[Any, ...]]:
    engine = build_engine(data, CONFIG, noise=NumpyNoise(seed=5))
    out = []
    for query in queries:
        answer = engine.answer(query)
        out.append((answer.source, answer.updates, tuple(np.ravel(answer.value))))
    return out


def assert_answers_from_the_opened_data(
    opened: PrivateData, reference: PrivateData, change: Callable[[], None]
) -> None:
    """``opened`` answers half a stream, ``change()`` alters its source, it answers the
    rest: all of it equals ``reference`` (an unchanged copy) on the same seed."""
    queries = random_queries(opened.domain, 12, rng=np.random.default_rng(0))
    expected = answers(reference, queries)
    engine = build_engine(opened, CONFIG, noise=NumpyNoise(seed=5))
    got = []
    for i, query in enumerate(queries):
        if i == len(queries) // 2:
            change()
        answer = engine.answer(query)
        got.append((answer.source, answer.updates, tuple(np.ravel(answer.value))))
    assert got == expected
    assert opened.n == reference.n
    for clique in CLIQUES:
        table = opened.clique_table(clique)
        np.testing.assert_array_equal(table.mass, reference.clique_table(clique).mass)
        assert opened._count_table(clique).mass.sum() == opened.n  # exactly n
    assert opened.fingerprint() == reference.fingerprint()


def in_memory(csv: Path) -> PrivateData:
    from pmwcm.data.table import Dataset

    dataset = Dataset.from_csv(csv, SCHEMA)
    return PrivateData.from_records(dataset.domain, dataset.records)


@pytest.mark.parametrize("how", ["replace", "append", "delete"])
def test_a_parquet_file_changed_after_open(adult_rows: Path, tmp_path: Path, how: str) -> None:
    path = tmp_path / "data.parquet"
    shutil.copy(adult_rows / "adult.parquet", path)
    opened = PrivateData.of(open_source(path, SCHEMA))
    assert isinstance(opened.source, PinnedSource)

    def change() -> None:
        changed_copy(adult_rows / "adult.csv", tmp_path / "changed.csv", how)
        to_parquet(tmp_path / "changed.csv", tmp_path / "changed.parquet")
        (tmp_path / "changed.parquet").replace(path)
        assert PrivateData.of(open_source(path, SCHEMA)).fingerprint() != opened.fingerprint()

    assert_answers_from_the_opened_data(opened, in_memory(adult_rows / "adult.csv"), change)


def test_a_parquet_directory_given_another_file_after_open(
    adult_rows: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    shutil.copy(adult_rows / "adult.parquet", folder / "part-0.parquet")
    opened = PrivateData.of(open_source(folder, SCHEMA))

    def change() -> None:
        shutil.copy(adult_rows / "adult.parquet", folder / "part-1.parquet")

    assert_answers_from_the_opened_data(opened, in_memory(adult_rows / "adult.csv"), change)


@pytest.mark.parametrize("how", ["replace", "delete-file"])
def test_a_csv_changed_or_deleted_after_open(adult_rows: Path, tmp_path: Path, how: str) -> None:
    path = tmp_path / "data.csv"
    shutil.copy(adult_rows / "adult.csv", path)
    opened = PrivateData.of(open_source(path, SCHEMA))

    def change() -> None:
        if how == "replace":
            changed_copy(adult_rows / "adult.csv", path, "replace")
        else:
            path.unlink()

    assert_answers_from_the_opened_data(opened, in_memory(adult_rows / "adult.csv"), change)


def test_records_held_in_memory_are_copied(adult_rows: Path) -> None:
    from pmwcm.data.table import Dataset

    dataset = Dataset.from_csv(adult_rows / "adult.csv", SCHEMA)
    records = np.array(dataset.records)
    opened = PrivateData.from_records(dataset.domain, records)
    assert_answers_from_the_opened_data(
        opened, in_memory(adult_rows / "adult.csv"), lambda: records.__setitem__(..., 0)
    )


@pytest.mark.parametrize("how", ["insert", "delete", "update", "drop"])
def test_a_postgres_table_changed_after_open(adult_rows: Path, postgres_url: str, how: str) -> None:
    table = f"pinned_{how}"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {table}")
        columns = duckdb.sql(
            f"SELECT * FROM read_csv('{adult_rows / 'adult.csv'}', all_varchar = true)"
        )
        assert columns is not None
        names = columns.columns
        typed = ", ".join(f'"{name}" text' for name in names)
        connection.execute(f"CREATE TABLE {table} ({typed})")
        with connection.cursor() as cursor:
            marks = ", ".join(["%s"] * len(names))
            cursor.executemany(f"INSERT INTO {table} VALUES ({marks})", columns.fetchall())
    opened = PrivateData.of(open_source(postgres_url, SCHEMA, table=table))
    statements = {
        "insert": f"INSERT INTO {table} SELECT * FROM {table} LIMIT 500",
        "delete": f"DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} LIMIT 500)",
        "update": f"UPDATE {table} SET \"sex\" = 'Female'",
        "drop": f"DROP TABLE {table}",
    }

    def change() -> None:
        with psycopg.connect(postgres_url, autocommit=True) as writer:
            writer.execute(statements[how])

    assert_answers_from_the_opened_data(opened, in_memory(adult_rows / "adult.csv"), change)


def test_spark_parquet_data_changed_after_open(
    adult_rows: Path, tmp_path: Path, spark: Any
) -> None:
    folder = tmp_path / "spark"
    folder.mkdir()
    shutil.copy(adult_rows / "adult.parquet", folder / "part-0.parquet")
    opened = PrivateData.of(open_source(str(folder), SCHEMA, engine="spark"))

    def change() -> None:
        shutil.copy(adult_rows / "adult.parquet", folder / "part-1.parquet")
        (folder / "part-0.parquet").unlink()

    assert_answers_from_the_opened_data(opened, in_memory(adult_rows / "adult.csv"), change)


def test_the_fingerprint_is_of_the_multiset_of_records() -> None:
    domain = Domain.from_sizes({"a": 3, "b": 2})
    rows = np.array([[0, 1], [2, 0], [0, 1], [1, 1]])
    records = CodedRecords(domain, [rows[:, 0], rows[:, 1]])
    shuffled = rows[[3, 0, 2, 1]]
    grouped = CodedRecords(domain, [np.array([1, 0, 2]), np.array([1, 1, 0])], np.array([1, 2, 1]))
    split = CodedRecords(
        domain, [np.array([0, 2, 1, 0]), np.array([1, 0, 1, 1])], np.array([1, 1, 1, 1])
    )
    same = {
        records.fingerprint(),
        CodedRecords(domain, [shuffled[:, 0], shuffled[:, 1]]).fingerprint(),
        grouped.fingerprint(),
        split.fingerprint(),
    }
    assert len(same) == 1
    moved = rows.copy()
    moved[1, 0] = 1  # one record replaced: a neighbour
    assert CodedRecords(domain, [moved[:, 0], moved[:, 1]]).fingerprint() not in same
    assert records.n == grouped.n == 4 and grouped.rows == 3


def test_coded_records_count_a_clique_with_mass_n() -> None:
    domain = Domain.from_sizes({"a": 3, "b": 2, "c": 5000})
    rng = np.random.default_rng(1)
    columns = [rng.integers(0, s, 200) for s in domain.sizes]
    counts = rng.integers(0, 4, 200)
    pinned = CodedRecords(domain, columns, counts)
    expanded = pinned.records()
    assert expanded.shape == (int(counts.sum()), 3)
    for clique in [("a",), ("b", "a"), ("a", "c"), ()]:
        table = pinned.count_table(clique)
        assert table.mass.sum() == pinned.n
        axes = domain.axes(clique)
        flat = np.zeros(int(np.prod([domain.sizes[a] for a in axes], dtype=np.int64)))
        for row in expanded:
            code = 0
            for axis in axes:
                code = code * domain.sizes[axis] + row[axis]
            flat[code] += 1
        np.testing.assert_array_equal(table.table().ravel(), flat)
    columns[0][:] = 0  # the caller's arrays are not the snapshot
    assert pinned.count_table(("a",)).mass.sum() == pinned.n
    assert not pinned.columns[0].flags.writeable
