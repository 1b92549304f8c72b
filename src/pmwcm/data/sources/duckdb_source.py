"""DuckDB, embedded: the default engine for files, Polars frames, DuckDB tables and relations.

A CSV file, a Parquet file or a directory of Parquet files is read where it
lies, once, when it is opened (the snapshot of :mod:`pmwcm.data.sources.sql_source`)
-- DuckDB streams it, so it may be larger than memory, and no row passes
through pandas or Python. A CSV is read with every cell as text, exactly as
:meth:`~pmwcm.data.table.Dataset.from_csv` reads it; Parquet keeps its types
(the rules of :mod:`pmwcm.data.sources.sql` say how each type is matched).

A connection opened here is capped (``memory_limit``, default
:data:`DEFAULT_MEMORY_LIMIT`) and spills to a private temporary directory
that :meth:`DuckDBSource.close` removes. What the snapshot holds is planned
from the schema (one packed key per distinct record,
:func:`~pmwcm.data.sources.sql_source.packing`; a wide table is coded row by
row rather than grouped on its raw text), so a 1,000-column table fits the
cap; a query that still outgrows it is refused in one line naming the cap,
never a traceback. Large categoricals are coded by joins with code tables
bound as parameters (:class:`~pmwcm.data.sources.sql.CodeTable`), on the
connections opened here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pmwcm.data.csv_layout import check_csv_layout
from pmwcm.data.schema import Schema
from pmwcm.data.sources.sql import DIALECTS, ColumnKind
from pmwcm.data.sources.sql_source import Parameters, SQLSource
from pmwcm.data.table import DataError

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "FETCH_VECTORS",
    "THREAD_BYTES_PER_COLUMN",
    "DuckDBSource",
    "column_kind",
    "file_relation",
    "planned_threads",
]

#: DuckDB's buffer cap on a connection opened here (its queries spill beyond it).
DEFAULT_MEMORY_LIMIT = "512MB"

#: DuckDB's working memory per thread and per source column while it codes a table (the
#: scan's and the coding layers' vectors of 2,048 cells): a 1,000-column table ran out of
#: 512 MB on 2 threads and fit on 1, so a thread is planned at 256 KiB per column.
THREAD_BYTES_PER_COLUMN = 256 * 1024

#: The snapshot's result is fetched this many of DuckDB's 2,048-row vectors at a time
#: (2^20 rows: 8 MiB a 64-bit column).
FETCH_VECTORS = 512

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_MEMORY = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")
_INTEGER = re.compile(r"(U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT))$")
_FLOAT = re.compile(r"(DOUBLE|FLOAT|REAL|DECIMAL.*)$")
_VIEW = "pmwcm_source"


def column_kind(type_name: str) -> ColumnKind | None:
    """How the schema's rules read a DuckDB column type (``None``: they cannot)."""
    name = type_name.upper()
    if name == "VARCHAR":
        return "text"
    if name == "BOOLEAN":
        return "boolean"
    if _INTEGER.match(name):
        return "integer"
    return "float" if _FLOAT.match(name) else None


def planned_threads(memory_limit: str, columns: int, cores: int | None = None) -> int:
    """DuckDB's threads for coding ``columns`` source columns within ``memory_limit``
    (public: the schema's width and the settings): as many as the machine has, while
    their working memory (:data:`THREAD_BYTES_PER_COLUMN` per column each) takes at
    most half the cap, the other half left to the grouping; at least one.

    >>> planned_threads("512MB", 14, cores=2), planned_threads("512MB", 1000, cores=2)
    (2, 1)
    """
    match = _MEMORY.fullmatch(memory_limit)
    if match is None or match.group(2).lower() not in _UNITS:
        raise DataError(f"memory_limit must be a size such as '512MB', got {memory_limit!r}.")
    limit = float(match.group(1)) * _UNITS[match.group(2).lower()]
    per_thread = max(1, columns) * THREAD_BYTES_PER_COLUMN
    return max(1, min(cores or os.cpu_count() or 1, int(limit // (2 * per_thread))))


def _literal(text: str) -> str:
    return DIALECTS["duckdb"].literal(text)


def _quote(name: str) -> str:
    return DIALECTS["duckdb"].identifier(name)


def file_relation(path: str | os.PathLike[str]) -> str:
    """The DuckDB ``FROM`` item that reads ``path`` in place.

    Raises:
        DataError: the path is missing, or neither CSV, Parquet nor a directory.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"data file not found: '{p}'.")
    if p.is_dir():
        if not any(p.rglob("*.parquet")):
            raise DataError(f"data directory '{p}' holds no .parquet files.")
        return f"read_parquet({_literal(str(p / '**' / '*.parquet'))}, union_by_name = true)"
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes[-1:] in (
        [".parquet"],
        [".pq"],
    ):
        return f"read_parquet({_literal(str(p))})"
    if ".csv" in suffixes or ".tsv" in suffixes:
        check_csv_layout(p)  # the rules every command shares; DuckDB then reads that dialect
        dialect = "delim = ',', quote = '\"', escape = '\"', header = true, strict_mode = true"
        return f"read_csv({_literal(str(p))}, all_varchar = true, {dialect})"
    raise DataError(f"cannot tell the format of '{p}': name it .csv, .parquet or a directory.")


class _ArrowStream:
    """Only the Arrow C stream of ``frame``: DuckDB would otherwise recognise a Polars
    frame and convert it through pyarrow. Each scan exports a fresh stream of the
    same (immutable) buffers, so the data can be read once per query."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.frame.__arrow_c_stream__(requested_schema)


def _prepare(connection: Any) -> None:
    """Settings for a connection opened here: no progress bar (a library prints nothing),
    and no common-subexpression pass, which is quadratic in the snapshot query's size
    (75 of its 85 s of planning on a 1,000-column table; the query names each derived
    form of a cell once already, so the pass finds nothing to share)."""
    connection.execute("SET enable_progress_bar = false")
    connection.execute("SET disabled_optimizers = 'common_subexpressions'")
    connection.execute("SET preserve_insertion_order = false")  # groups have no order


def _out_of_memory(where: str, memory_limit: str | None) -> str:
    """The one line for a read that outgrew DuckDB's cap (the error's advice is for SQL users)."""
    cap = f"its memory limit ({memory_limit})" if memory_limit else "memory"
    return f"DuckDB ran out of {cap} reading {where}."


def _release(own: tuple[Any, str]) -> None:
    connection, spill = own
    connection.close()
    shutil.rmtree(spill, ignore_errors=True)


class DuckDBSource(SQLSource):
    """A table read by DuckDB, validated against the schema when opened.

    Use :meth:`from_file` (a path), :meth:`from_frame` (a Polars frame),
    :meth:`from_relation` (a ``duckdb.DuckDBPyRelation``) or :meth:`from_table`
    (a connection and a table name).

    Args:
        schema: the public schema.
        relation: the ``DuckDBPyRelation`` to read (its columns and types).
        run: runs a query that names the relation ``pmwcm_source``, binding its
            parameters (``None``: only queries without parameters, so no code tables).
        where: names the data in messages.
        own: the connection and spill directory opened here, closed by :meth:`close`.
        memory_limit: the connection's cap, named when a query outgrows it.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        relation: Any,
        run: Callable[[str], Any],
        where: str,
        own: tuple[Any, str] | None = None,
        bind: Callable[[str, Parameters], Any] | None = None,
        memory_limit: str | None = None,
    ) -> None:
        self._run = run
        self._bind = bind
        self._memory_limit = memory_limit
        self._own = own
        # The connection and its spill directory go with the source, close() or not.
        self._finalizer = weakref.finalize(self, _release, own) if own is not None else None
        columns = dict(zip(relation.columns, (str(t) for t in relation.types), strict=True))
        kinds = {c: k for c, t in columns.items() if (k := column_kind(t)) is not None}
        dialect = DIALECTS["duckdb"]
        if bind is None:  # the caller's relation runs text only
            dialect = dataclasses.replace(dialect, code_table="")
        try:
            super().__init__(
                schema,
                relation=_VIEW,
                columns=columns,
                kinds=kinds,
                dialect=dialect,
                where=where,
            )
        except Exception:
            self.close()
            raise

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        schema: Schema,
        *,
        memory_limit: str = DEFAULT_MEMORY_LIMIT,
        threads: int | None = None,
    ) -> DuckDBSource:
        """Reads a CSV file, a Parquet file or a directory of Parquet files in place.

        The file is read once, by the snapshot query at open (the schema's
        columns only); the connection and its private spill directory are
        released right after.
        """
        import duckdb

        relation_sql = file_relation(path)
        spill = tempfile.mkdtemp(prefix="pmwcm-duckdb-")
        config: dict[str, Any] = {
            "memory_limit": memory_limit,
            "temp_directory": spill,
        }
        if threads is None:  # planned from the schema's width, so the snapshot fits the cap
            width = len({a.column for a in schema.attributes})
            threads = planned_threads(memory_limit, width)
        config["threads"] = threads
        connection = duckdb.connect(str(Path(spill) / "data.duckdb"), config=config)
        try:
            _prepare(connection)
            connection.execute(f"CREATE TEMP VIEW {_VIEW} AS SELECT * FROM {relation_sql}")
            relation = connection.table(_VIEW)
        except duckdb.Error as exc:
            connection.close()
            shutil.rmtree(spill, ignore_errors=True)
            if isinstance(exc, duckdb.OutOfMemoryException):
                raise DataError(_out_of_memory(f"'{path}'", memory_limit)) from None
            first = str(exc).strip().splitlines()[0]
            raise DataError(f"cannot read data file '{path}': {first}") from None
        return cls(
            schema,
            relation=relation,
            run=connection.execute,  # binds and plans once (a relation, .sql, binds twice)
            bind=connection.execute,
            where=f"'{path}'",
            own=(connection, spill),
            memory_limit=memory_limit,
        )

    @classmethod
    def from_frame(
        cls, frame: Any, schema: Schema, *, memory_limit: str = DEFAULT_MEMORY_LIMIT
    ) -> DuckDBSource:
        """A Polars ``DataFrame`` (or any object with ``__arrow_c_stream__``), scanned in place.

        DuckDB reads the frame's Arrow buffers through the Arrow C stream
        interface, at the validation pass and at each new clique: no row passes
        through Python or pandas, and pyarrow is not needed. The frame's column
        types are read as Parquet's are (Polars ``String``, ``Categorical`` and
        ``Enum`` columns are text). The frame must not change while the source is open.
        """
        import duckdb

        if not hasattr(frame, "__arrow_c_stream__"):
            raise DataError(
                f"a {type(frame).__name__} has no Arrow stream (__arrow_c_stream__) to scan."
            )
        spill = tempfile.mkdtemp(prefix="pmwcm-duckdb-")
        width = len({a.column for a in schema.attributes})
        config: dict[str, Any] = {
            "memory_limit": memory_limit,
            "temp_directory": spill,
            "threads": planned_threads(memory_limit, width),
        }
        connection = duckdb.connect(config=config)
        stream = _ArrowStream(frame)
        try:
            _prepare(connection)
            relation = connection.from_arrow(stream)
            relation.create_view(_VIEW)
        except duckdb.Error as exc:
            _release((connection, spill))
            first = str(exc).strip().splitlines()[0]
            raise DataError(f"cannot read the {type(frame).__name__}: {first}") from None
        return cls(
            schema,
            relation=relation,
            run=connection.execute,
            bind=connection.execute,
            where=f"the {type(frame).__name__}",
            own=(connection, spill),
            memory_limit=memory_limit,
        )

    @classmethod
    def from_relation(cls, relation: Any, schema: Schema) -> DuckDBSource:
        """A ``duckdb.DuckDBPyRelation`` (its connection stays the caller's)."""
        return cls(
            schema,
            relation=relation,
            run=lambda query: relation.query(_VIEW, query),
            where="the DuckDB relation",
        )

    @classmethod
    def from_table(cls, connection: Any, table: str, schema: Schema) -> DuckDBSource:
        """Table (or view) ``table`` of a DuckDB connection (which stays the caller's)."""
        import duckdb

        try:
            relation = connection.table(table)
        except duckdb.Error:
            raise DataError(f"table {table!r} not found in the DuckDB connection.") from None
        return cls(
            schema,
            relation=relation,
            run=lambda query: relation.query(_VIEW, query),
            where=f"table {table!r}",
        )

    def _column_blocks(
        self, query: str, width: int, parameters: Parameters
    ) -> Generator[Sequence[np.ndarray], None, None]:
        """The result in blocks of :data:`FETCH_VECTORS` of DuckDB's vectors (2^20 rows),
        each column an integer array: fetching it whole would hold every distinct
        record's 64-bit keys at once (16 bytes a record and more: 1.6 GB at 10^8). A
        caller's own relation (:meth:`from_relation`) keeps no result to fetch from in
        parts, so its result comes whole, as DuckDB's NumPy fetch gives it."""
        import duckdb

        try:
            if parameters:
                assert self._bind is not None  # the dialect asks for tables only then
                result = self._bind(query, parameters)
            else:
                result = self._run(query)
            if not hasattr(result, "fetch_df_chunk"):
                yield [np.asarray(column) for column in result.fetchnumpy().values()]
                return
            while True:
                block = result.fetch_df_chunk(FETCH_VECTORS)
                if not len(block):
                    return
                yield [block[column].to_numpy() for column in block.columns]
                del block
        except duckdb.OutOfMemoryException:
            raise DataError(_out_of_memory(self.where, self._memory_limit)) from None

    def close(self) -> None:
        """Closes the connection opened by :meth:`from_file` (idempotent)."""
        if self._finalizer is not None:
            self._own = None
            self._finalizer()
