"""Bad input is refused when the data is opened, with a message for the curator.

A missing file, table or column, a column of a type no rule reads, and values
outside the schema each raise :class:`~pmwcm.data.table.DataError` naming the
column and the number of offending rows -- never a value, never a password.
PostgreSQL is read in a read-only snapshot. And a table of 10^6 rows streams
through DuckDB (its counts checked against arithmetic, no timing asserted).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import psycopg
import pytest

from pmwcm.data.schema import Schema
from pmwcm.data.sources.postgres import redact_url
from pmwcm.data.table import DataError
from test_data_sources import open_private_data

SCHEMA = Schema.from_json(
    {
        "attributes": [
            {"name": "sex", "values": ["female", "male"]},
            {"name": "age", "bins": [0, 40, 120]},
        ]
    }
)
SECRET = "Zelda-4471"  # a private value that must never be quoted


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data file not found"):
        open_private_data(tmp_path / "nope.csv", SCHEMA)
    with pytest.raises(DataError, match="cannot tell the format"):
        open_private_data(write(tmp_path / "t.txt", "sex,age\n"), SCHEMA)
    with pytest.raises(DataError, match=r"holds no \.parquet files"):
        open_private_data(tmp_path, SCHEMA)


def test_missing_column_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", "sex,years\nmale,30\n")
    with pytest.raises(DataError, match=r"column 'age' named by the schema is not in"):
        open_private_data(path, SCHEMA)


def test_bad_values_are_counted_not_quoted(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", f"sex,age\nmale,30\n{SECRET},50\n{SECRET},7\nfemale,\n")
    with pytest.raises(DataError) as info:
        open_private_data(path, SCHEMA)
    message = str(info.value)
    assert "column 'sex': 2 rows with a value that is not one of the schema's values" in message
    assert "(and 1 more bad columns)" in message
    assert SECRET not in message


def test_numbers_outside_the_bins_and_text_that_is_no_number(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", "sex,age\nmale,130\nmale,-1\nfemale,old\nmale,20\n")
    with pytest.raises(DataError) as info:
        open_private_data(path, SCHEMA)
    assert "column 'age': 2 rows with a number outside the bins [0, 120)" in str(info.value)
    assert "1 row whose value is not a number" in str(info.value)
    assert "130" not in str(info.value) and "old" not in str(info.value)


def test_type_mismatch_and_empty_table(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    duckdb.sql(
        f"COPY (SELECT 'male' AS sex, DATE '2020-01-01' AS age) TO '{path}' (FORMAT parquet)"
    )
    with pytest.raises(DataError, match=r"column 'age' of .* has type DATE, which the bins rule"):
        open_private_data(path, SCHEMA)
    with pytest.raises(DataError, match="has no data rows"):
        open_private_data(write(tmp_path / "e.csv", "sex,age\n"), SCHEMA)


def test_duckdb_connection_needs_an_existing_table() -> None:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE people AS SELECT 'male' AS sex, 33 AS age")
    with pytest.raises(DataError, match="table 'nobody' not found"):
        open_private_data(connection, SCHEMA, table="nobody")
    data = open_private_data(connection, SCHEMA, table="people")
    assert data.n == 1 and data.marginal(("sex", "age")).tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_postgres_errors_never_show_the_password(postgres_url: str) -> None:
    password = psycopg.conninfo.conninfo_to_dict(postgres_url)["password"]
    assert isinstance(password, str) and password
    wrong = postgres_url.replace(f":{password}@", ":not-the-password@")
    with pytest.raises(DataError) as info:
        open_private_data(wrong, SCHEMA, table="people")
    assert "not-the-password" not in str(info.value) and "***" in str(info.value)
    with pytest.raises(DataError) as info:
        open_private_data(postgres_url, SCHEMA, table="no_such_table")
    assert "table 'no_such_table' not found" in str(info.value)
    assert password not in str(info.value)
    with pytest.raises(DataError, match="needs --table"):
        open_private_data(postgres_url, SCHEMA)
    assert redact_url(postgres_url).count("***") == 1


def test_postgres_without_select_is_permission_denied_not_missing(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS secret_people")
        connection.execute("CREATE TABLE secret_people (sex text, age integer)")
        connection.execute("INSERT INTO secret_people VALUES ('male', 30)")
        connection.execute("DROP ROLE IF EXISTS no_select")
        connection.execute("CREATE ROLE no_select LOGIN PASSWORD 'pw-no-select'")
    parts = psycopg.conninfo.conninfo_to_dict(postgres_url)
    url = f"postgresql://no_select:pw-no-select@{parts['host']}:{parts['port']}/{parts['dbname']}"
    with pytest.raises(DataError, match="permission denied") as info:
        open_private_data(url, SCHEMA, table="secret_people")
    assert "cannot read table 'secret_people'" in str(info.value)
    assert "pw-no-select" not in str(info.value)
    with pytest.raises(DataError, match="table 'absent' not found"):
        open_private_data(url, SCHEMA, table="absent")


def test_postgres_reads_a_quoted_table_once_and_holds_no_connection(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as connection:
        connection.execute('DROP TABLE IF EXISTS "Odd ""name"""')
        connection.execute('CREATE TABLE "Odd ""name""" (sex text, age integer)')
        connection.execute(
            'INSERT INTO "Odd ""name""" VALUES (%s, 30), (%s, 60)', ("male", "female")
        )
    data = open_private_data(postgres_url, SCHEMA, table='Odd "name"')
    assert data.source is not None and data.n == 2
    with psycopg.connect(postgres_url, autocommit=True) as writer:  # writes after opening
        others = writer.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
        assert others == (0,)  # the snapshot is taken: no connection, no open transaction
        writer.execute('INSERT INTO "Odd ""name""" VALUES (%s, 31)', ("male",))
        writer.execute('DROP TABLE "Odd ""name"""')
    assert data.marginal(("sex",)).tolist() == [0.5, 0.5]  # the snapshot of the open
    assert data.marginal(("sex", "age")).sum() == 1.0
    data.close()
    data.close()  # idempotent


def test_a_million_rows_stream_through_duckdb(tmp_path: Path) -> None:
    """10^6 rows written and counted by DuckDB; the counts follow from arithmetic."""
    path = tmp_path / "big.parquet"
    n = 10**6
    duckdb.sql(
        "COPY (SELECT CASE WHEN i % 3 = 0 THEN 'female' ELSE 'male' END AS sex, "
        f"(i % 97) + 1 AS age FROM range({n}) AS r(i)) TO '{path}' (FORMAT parquet)"
    )
    data = open_private_data(path, SCHEMA)
    i = np.arange(n)
    sex, age = (i % 3 != 0).astype(int), ((i % 97) + 1 >= 40).astype(int)
    expected = np.bincount(sex * 2 + age, minlength=4).reshape(2, 2) / n
    assert data.n == n
    np.testing.assert_array_equal(data.marginal(("sex", "age")), expected)
    data.close()
