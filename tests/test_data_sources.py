"""One contract suite for every place the private data can live.

Each backend -- in memory, DuckDB on CSV, on Parquet (typed and text columns),
on a relation, on a connection's table and on a Polars frame (typed and text
columns, scanned through Arrow), PostgreSQL (a real server, ``postgres_url``) and Spark
(local mode, a real JVM) -- must give *identical* counts to the in-memory path
on the bundled Adult data under every bundled schema. The counts on *all* the
attributes at once (dense, or the occupied cells) fix every clique's counts,
so one query per schema covers every clique; a few cliques in scrambled order
check the cell coding. Servers are started, never mocked; a server that cannot
start fails its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pytest

from pmwcm.data.bundled import adult_schema, list_schemas, load_adult
from pmwcm.data.schema import Schema
from pmwcm.data.sources.open import open_source
from pmwcm.data.table import DataError
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.mechanisms.private_data import CountSource, PrivateData


def open_private_data(data: Any, schema: Schema, **options: Any) -> PrivateData:
    """Opens a source (:func:`open_source`) as the engine reads it."""
    return PrivateData.of(open_source(data, schema, **options))


SCHEMAS = [name.removeprefix("adult-") for name in list_schemas()]
ADULT_CSV = resources.files("pmwcm.data.bundled").joinpath("files", "adult.csv")


@pytest.fixture(scope="session")
def adult_csv() -> Iterator[Path]:
    with resources.as_file(ADULT_CSV) as path:
        yield path


@pytest.fixture(scope="session")
def adult_parquet(tmp_path_factory: pytest.TempPathFactory, adult_csv: Path) -> dict[str, Path]:
    """Adult as Parquet twice: typed columns (BIGINT) and all-text columns."""
    out = tmp_path_factory.mktemp("parquet")
    typed, text = out / "adult.parquet", out / "adult-text.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{adult_csv}')) TO '{typed}' (FORMAT parquet)")
    duckdb.sql(
        f"COPY (SELECT * FROM read_csv('{adult_csv}', all_varchar = true)) "
        f"TO '{text}' (FORMAT parquet)"
    )
    return {"typed": typed, "text": text}


def load_postgres_table(url: str, name: str, csv: Path) -> None:
    """Creates table ``name`` (text columns) from a CSV with COPY."""
    header = csv.read_text().splitlines()[0].split(",")
    columns = ", ".join(f"{psycopg.sql.Identifier(h).as_string(None)} text" for h in header)
    with psycopg.connect(url) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {name}")
        connection.execute(f"CREATE TABLE {name} ({columns})")
        with connection.cursor().copy(
            f"COPY {name} FROM STDIN WITH (FORMAT csv, HEADER true)"
        ) as copy:
            copy.write(csv.read_bytes())


@pytest.fixture(scope="session")
def adult_postgres(postgres_url: str, adult_csv: Path) -> str:
    load_postgres_table(postgres_url, "adult", adult_csv)
    return postgres_url


Opener = Callable[[Schema], PrivateData]


@pytest.fixture(
    params=[
        "memory",
        "duckdb-csv",
        "duckdb-parquet",
        "duckdb-parquet-text",
        "duckdb-relation",
        "duckdb-table",
        "polars",
        "polars-text",
        "postgres",
        "spark",
    ]
)
def opener(
    request: pytest.FixtureRequest, adult_csv: Path, adult_parquet: dict[str, Path]
) -> Opener:
    kind = request.param
    if kind == "memory":
        return lambda schema: open_private_data(load_adult(schema), schema)
    if kind == "duckdb-csv":
        return lambda schema: open_private_data(adult_csv, schema)
    if kind == "duckdb-parquet":
        return lambda schema: open_private_data(adult_parquet["typed"], schema)
    if kind == "duckdb-parquet-text":
        return lambda schema: open_private_data(str(adult_parquet["text"]), schema)
    if kind == "duckdb-relation":
        connection = duckdb.connect()
        relation = connection.read_parquet(str(adult_parquet["typed"]))
        return lambda schema: open_private_data(relation, schema)
    if kind == "duckdb-table":
        connection = duckdb.connect()
        connection.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{adult_csv}')")
        return lambda schema: open_private_data(connection, schema, table="adult")
    if kind.startswith("polars"):
        import polars as pl

        frame = pl.read_csv(adult_csv, infer_schema=kind == "polars")  # typed, or all text
        return lambda schema: open_private_data(frame, schema)
    if kind == "postgres":
        url = request.getfixturevalue("adult_postgres")
        return lambda schema: open_private_data(url, schema, table="adult")
    session = request.getfixturevalue("spark")
    path = str(adult_parquet["typed"])
    return lambda schema: open_private_data(path, schema, engine="spark", spark=session)


def reference(schema: Schema) -> PrivateData:
    data = load_adult(schema)
    return PrivateData.from_records(data.domain, data.records)


def counts_of(data: PrivateData, clique: tuple[str, ...]) -> CliqueTable:
    if data.source is not None:
        return data.source.counts(clique)
    return data._count_table(clique)


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_backend_counts_like_memory(opener: Opener, name: str) -> None:
    schema = adult_schema(name)
    expected, data = reference(schema), opener(schema)
    try:
        assert data.n == expected.n and data.domain == expected.domain
        if data.source is not None:
            assert isinstance(data.source, CountSource)
        names = data.domain.names
        for clique in (names, (names[5], names[0], names[3])):
            got, want = counts_of(data, clique), counts_of(expected, clique)
            assert got.shape == want.shape and got.is_dense == want.is_dense
            np.testing.assert_array_equal(
                got.codes if got.codes is not None else [],
                want.codes if want.codes is not None else [],
            )
            np.testing.assert_array_equal(got.mass, want.mass)
        for clique in ((names[1], names[0]),):  # through PrivateData's caches
            np.testing.assert_allclose(
                data.marginal(clique), expected.marginal(clique), rtol=0, atol=1e-12
            )
    finally:
        data.close()


def test_a_postgres_snapshot_streamed_in_many_blocks_counts_like_memory(
    adult_postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot's ``COPY`` stream parsed in 4 KiB blocks (hundreds of them on full
    Adult's 48,000 distinct records) gives the records and counts one block gives."""
    from pmwcm.data.sources import postgres

    parsed: list[int] = []
    parse = postgres.integer_rows

    def counted(text: bytes | bytearray, width: int) -> list[Any]:
        parsed.append(text.count(b"\n"))
        return parse(text, width)

    monkeypatch.setattr(postgres, "COPY_BLOCK_BYTES", 4096)
    monkeypatch.setattr(postgres, "integer_rows", counted)
    schema = adult_schema("full")
    expected, data = reference(schema), open_private_data(adult_postgres, schema, table="adult")
    try:
        assert len(parsed) > 100 and data.n == expected.n
        names = data.domain.names
        got, want = counts_of(data, names), counts_of(expected, names)
        assert sum(parsed) == got.mass.size  # one line a distinct record
        np.testing.assert_array_equal(got.codes, want.codes)
        np.testing.assert_array_equal(got.mass, want.mass)
    finally:
        data.close()


def test_a_duckdb_snapshot_fetched_in_many_blocks_counts_like_memory(
    adult_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's result fetched one 2,048-row vector at a time (24 blocks on full Adult's
    48,000 distinct records), and every clique counted 1,000 rows at a time, give the
    records and counts of one block."""
    from pmwcm.data.sources import duckdb_source
    from pmwcm.kernels import coded_records

    fetched: list[int] = []
    blocks = duckdb_source.DuckDBSource._column_blocks

    def counted(self: Any, *args: Any) -> Any:
        for block in blocks(self, *args):
            fetched.append(len(block[0]))
            yield block

    monkeypatch.setattr(duckdb_source, "FETCH_VECTORS", 1)
    monkeypatch.setattr(duckdb_source.DuckDBSource, "_column_blocks", counted)
    monkeypatch.setattr(coded_records, "COUNT_BLOCK_ROWS", 1000)
    schema = adult_schema("full")
    expected, data = reference(schema), open_private_data(adult_csv, schema)
    try:
        assert len(fetched) > 20 and max(fetched) == 2048 and data.n == expected.n
        names = data.domain.names
        for clique in (names, names[:3], names[2:4]):
            got, want = counts_of(data, clique), counts_of(expected, clique)
            np.testing.assert_array_equal(got.codes, want.codes)
            np.testing.assert_array_equal(got.mass, want.mass)
        assert sum(fetched) == counts_of(data, names).mass.size  # one row a distinct record
    finally:
        data.close()


def test_rows_that_fail_the_schema_are_counted_over_every_block(
    postgres_url: str, adult_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad rows far apart in the stream land in different blocks; the refusal counts all
    of them, as DuckDB's one block does (the same message, the same counts)."""
    from pmwcm.data.sources import postgres

    lines = adult_csv.read_text().splitlines()
    age = lines[0].split(",").index("age")
    for row in (1, 20_000, 48_000):
        cells = lines[row].split(",")
        cells[age] = "500"  # outside the categorical schema's age bins
        lines[row] = ",".join(cells)
    bad = tmp_path / "adult-bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    load_postgres_table(postgres_url, "adult_bad", bad)
    monkeypatch.setattr(postgres, "COPY_BLOCK_BYTES", 4096)
    schema = adult_schema("categorical")
    with pytest.raises(DataError) as from_postgres:
        open_private_data(postgres_url, schema, table="adult_bad")
    with pytest.raises(DataError) as from_duckdb:
        open_private_data(bad, schema)
    said = str(from_postgres.value).split("does not fit the schema: ", 1)[1]
    assert said.startswith("column 'age': 3 rows with a number outside the bins")
    assert said == str(from_duckdb.value).split("does not fit the schema: ", 1)[1]


def test_a_snapshot_spilled_to_private_files_counts_like_memory_and_leaves_none(
    adult_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot past ``SPILL_BYTES`` is mapped from private files: the same counts as
    memory; its files are gone once it is open, and gone when the open is refused."""
    from pmwcm.data.sources import duckdb_source
    from pmwcm.kernels import spilled_columns

    made: list[str] = []
    mkdtemp = spilled_columns.tempfile.mkdtemp

    def recorded(**kwargs: str) -> str:
        path = mkdtemp(**kwargs)
        if kwargs.get("prefix") == "pmwcm-snapshot-":
            made.append(path)
        return path

    monkeypatch.setattr(spilled_columns.tempfile, "mkdtemp", recorded)
    monkeypatch.setattr(spilled_columns, "SPILL_BYTES", 50_000)  # spilled midway
    monkeypatch.setattr(duckdb_source, "FETCH_VECTORS", 4)
    schema = adult_schema("full")
    expected, data = reference(schema), open_private_data(adult_csv, schema)
    try:
        assert isinstance(data.source, duckdb_source.DuckDBSource) and data.source.pinned.spilled
        assert len(made) == 1 and not Path(made[0]).exists()
        names = data.domain.names
        for clique in (names, names[:3]):
            got, want = counts_of(data, clique), counts_of(expected, clique)
            np.testing.assert_array_equal(got.codes, want.codes)
            np.testing.assert_array_equal(got.mass, want.mass)
    finally:
        data.close()
    lines = adult_csv.read_text().splitlines()
    age = lines[0].split(",").index("age")
    cells = lines[-1].split(",")
    cells[age] = "500"  # the last row: refused after the snapshot spilled
    lines[-1] = ",".join(cells)
    bad = tmp_path / "adult-bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="does not fit the schema"):
        open_private_data(bad, adult_schema("categorical"))
    assert len(made) == 2 and not Path(made[1]).exists()

    def full(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spilled_columns.ColumnFiles, "append", full)
    with pytest.raises(DataError) as no_room:
        open_private_data(adult_csv, schema)
    said = str(no_room.value)
    assert "\n" not in said and "No space left on device" in said and "TMPDIR" in said
    assert len(made) == 3 and not Path(made[2]).exists()


def test_a_snapshot_that_fails_mid_stream_ends_the_copy_before_the_connection(
    adult_postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while the snapshot unpacks its third block propagates, and the half-read
    ``COPY`` is ended there, before the source closes its connection (not left running
    for the collector to end on a closed connection)."""
    from pmwcm.data.sources import postgres, sql_source

    narrow, calls = sql_source.code_dtype, [0]
    attributes = len(adult_schema("full").attributes)

    def failing(cells: int) -> np.dtype:
        calls[0] += 1
        if calls[0] > 2 * attributes:  # in the third block's unpacking
            raise ValueError("planted failure in the third block")
        return narrow(cells)

    states: list[str] = []
    close = postgres.PostgresSource.close

    def recorded(source: postgres.PostgresSource) -> None:
        if source._connection is not None:  # the server's state when the source lets go
            states.append(source._connection.info.transaction_status.name)
        close(source)

    monkeypatch.setattr(postgres, "COPY_BLOCK_BYTES", 4096)
    monkeypatch.setattr(sql_source, "code_dtype", failing)
    monkeypatch.setattr(postgres.PostgresSource, "close", recorded)
    with pytest.raises(ValueError, match="planted failure"):
        open_private_data(adult_postgres, adult_schema("full"), table="adult")
    assert states and "ACTIVE" not in states  # no COPY still running at the close
    monkeypatch.setattr(sql_source, "code_dtype", narrow)
    data = open_private_data(adult_postgres, adult_schema("binary"), table="adult")
    try:
        assert data.n == 48842  # the server is none the worse
    finally:
        data.close()


def test_copy_text_that_is_not_whole_rows_of_integers_is_refused() -> None:
    from pmwcm.data.sources.postgres import integer_rows

    [first, second] = integer_rows(b"1\t2\n3\t4\n", 2)
    assert first.tolist() == [1, 3] and second.tolist() == [2, 4]
    with pytest.raises(ValueError, match="3 integers for 2 rows of 2 columns"):
        integer_rows(b"1\t2\n3\n", 2)


def test_a_database_source_is_a_count_source_with_public_n(adult_csv: Path) -> None:
    data = open_private_data(adult_csv, adult_schema("binary"))
    try:
        assert isinstance(data.source, CountSource)
        assert data.n == 48842  # the bundled file's rows, fixed when opened
        first = data.clique_table(("male", "white"))
        assert data.clique_table(("male", "white")) is first  # a repeated clique is free
    finally:
        data.close()


def test_frames_and_datasets_are_read_in_memory(adult_csv: Path) -> None:
    import pandas as pd

    schema = adult_schema("categorical")
    frame = pd.read_csv(adult_csv)
    data = open_private_data(frame, schema)
    expected = reference(schema)
    assert data.source is None and data.n == expected.n
    np.testing.assert_array_equal(
        data.marginal(data.domain.names[:3]), expected.marginal(data.domain.names[:3])
    )
    assert PrivateData.of(data) is data
    with pytest.raises(DataError, match="different domain"):
        open_private_data(load_adult(schema), adult_schema("binary"))
    with pytest.raises(DataError, match="cannot read private data from a int"):
        open_private_data(3, schema)
    with pytest.raises(TypeError, match="cannot read private data from a str"):
        PrivateData.of("adult.csv")


def test_a_polars_frame_is_scanned_by_duckdb_without_conversion(
    adult_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame's Arrow buffers go to DuckDB as they are: never through pandas,
    pyarrow or Python rows (each of those conversions fails here if called)."""
    import polars as pl

    frame = pl.read_csv(adult_csv)
    for conversion in ("to_pandas", "to_arrow", "rows", "iter_rows", "to_dicts", "to_numpy"):
        monkeypatch.setattr(pl.DataFrame, conversion, None)
    schema = adult_schema("binary")
    data = open_private_data(frame, schema)
    try:
        assert type(data.source).__name__ == "DuckDBSource" and data.n == frame.height
        names = data.domain.names
        np.testing.assert_array_equal(
            data.marginal(names[:2]), reference(schema).marginal(names[:2])
        )
    finally:
        data.close()
    column = schema.attributes[0].column
    broken = frame.with_columns(pl.lit("nope").alias(column))
    with pytest.raises(DataError) as refused:
        open_private_data(broken, schema)
    assert str(refused.value).startswith(
        f"the DataFrame does not fit the schema: column {column!r}: 48842 rows"
    )
