"""One door for the private data: :func:`open_source` picks the source from what it gets.

* a path (CSV, Parquet, a directory of Parquet files): DuckDB, in place (the default);
* ``postgresql://...`` with ``table=``: PostgreSQL, read-only;
* a Parquet path or a table name with ``engine="spark"``: Spark SQL;
* a ``duckdb`` relation, or a DuckDB connection with ``table=``: DuckDB, in the
  caller's connection;
* a Polars DataFrame: DuckDB, scanning its Arrow buffers in place (no pandas,
  no pyarrow, no Python rows);
* a pandas DataFrame or a :class:`~pmwcm.data.table.Dataset`: memory
  (the data is there already).

Every source is checked against the whole schema here, when the data is
opened, and ``n`` (public from then on) is fixed here; a bad table raises
:class:`~pmwcm.data.table.DataError` naming the column and the number of
offending rows. The messages are meant for the curator who opens the data.

The result is a count source (or, for data already in memory, a
:class:`~pmwcm.data.table.Dataset`); the engine reads either through
``PrivateData.of`` (:mod:`pmwcm.mechanisms.private_data`, a layer above this one)::

    data = PrivateData.of(open_source("adult.parquet", schema))
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pmwcm.data.schema import Schema
from pmwcm.data.sources.sql_source import SQLSource
from pmwcm.data.table import DataError, Dataset

__all__ = ["ENGINES", "open_source"]

#: The engines a caller may name.
ENGINES = ("duckdb", "spark")
Engine = Literal["duckdb", "spark"]


def _module(obj: object) -> str:
    return type(obj).__module__.split(".")[0]


def open_source(
    data: Any,
    schema: Schema,
    *,
    table: str | None = None,
    engine: Engine | None = None,
    spark: Any = None,
) -> SQLSource | Dataset:
    """Opens the private data under ``schema``, where it lives.

    Args:
        data: a path or ``postgresql://`` URL, a DuckDB relation or
            connection, a Spark path or table name, a pandas/Polars frame, a
            :class:`~pmwcm.data.table.Dataset`.
        schema: the public schema.
        table: the table to read (PostgreSQL, a DuckDB connection, Spark).
        engine: ``"spark"`` to read with Spark; default DuckDB for files.
        spark: a ``SparkSession`` (``engine="spark"``; default ``getOrCreate()``).

    Returns:
        A count source with its public ``n`` (call ``close()`` when done: it
        releases the connection), or a Dataset for data held in memory.

    Raises:
        DataError: the data is missing, unreadable or does not fit the schema.
    """
    if engine is not None and engine not in ENGINES:
        raise DataError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}.")
    if isinstance(data, Dataset):
        if data.domain != schema.domain():
            raise DataError("the Dataset is over a different domain than the schema's.")
        return data
    if engine == "spark":
        from pmwcm.data.sources.spark import SparkSource

        name = table if table is not None else os.fspath(data)
        return SparkSource(name, schema, spark=spark, table=table is not None)
    if _module(data) == "pandas":
        return Dataset.from_dataframe(data, schema)
    if _module(data) == "polars":  # its Arrow buffers, scanned by DuckDB (never imported here)
        from pmwcm.data.sources.duckdb_source import DuckDBSource

        return DuckDBSource.from_frame(data, schema)
    if _module(data) in ("duckdb", "_duckdb"):
        from pmwcm.data.sources.duckdb_source import DuckDBSource

        if hasattr(data, "columns") and hasattr(data, "types"):  # a relation
            return DuckDBSource.from_relation(data, schema)
        if table is None:
            raise DataError("a DuckDB connection needs table= (the table to read).")
        return DuckDBSource.from_table(data, table, schema)
    if isinstance(data, str | os.PathLike):
        from pmwcm.data.sources.postgres import is_postgres_url

        text = os.fspath(data)
        if is_postgres_url(text):
            from pmwcm.data.sources.postgres import PostgresSource

            if table is None:
                raise DataError("a postgresql:// URL needs --table (the table to read).")
            return PostgresSource(text, table, schema)
        if table is not None:
            raise DataError(f"--table applies to a database, not to the file '{text}'.")
        from pmwcm.data.sources.duckdb_source import DuckDBSource

        return DuckDBSource.from_file(Path(text), schema)
    raise DataError(f"cannot read private data from a {type(data).__name__}.")
