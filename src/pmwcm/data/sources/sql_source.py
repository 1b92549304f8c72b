"""A table behind SQL as a :class:`~pmwcm.mechanisms.private_data.CountSource`, pinned at open.

Opening reads the whole table once, in one query (the *snapshot*): it codes
every cell with the schema's rules (:mod:`pmwcm.data.sources.sql`), packs the
codes into a few integer keys and groups on them:

.. code-block:: sql

    SELECT p0, p1, ..., SUM(cnt) AS cnt FROM (
      SELECT (k0 + 3) + (k1 + 3) * s0 + ... AS p0, ..., cnt FROM (
        SELECT <code of a>(r0) AS k0, <code of b>(r1) AS k1, ..., cnt FROM (
          SELECT "col_a" AS r0, "col_b" AS r1, ..., count(*) AS cnt FROM <table> GROUP BY ...
        ) AS raw
      ) AS coded
    ) AS packed GROUP BY p0, p1, ...

A table of at most :data:`RAW_GROUPING_MAX_COLUMNS` source columns is grouped
on its raw columns first (the engine's own ``GROUP BY``, so the rules run on
distinct raw values only: a long narrow table has few); a wider one is coded
row by row (``1 AS cnt``), since grouping a thousand text columns holds every
distinct raw row in the engine's memory. Either way the last ``GROUP BY`` holds
one packed key per group: each attribute's code shifted past the fault markers
(``k + 3`` in ``0..s+2``) and packed mixed-radix into 63-bit integers
(:func:`packing`), so a 1,000-column table groups on about 40 integers per row,
not 1,000 (:mod:`pmwcm.data.sources.duckdb_source` caps the engine's memory).

Its rows are the data's distinct coded records with their counts
(:class:`~pmwcm.kernels.coded_records.CodedRecords`): what every later clique is
counted from. No row of the table, and no row of the result, is materialised as
Python objects: each engine hands the result over as integer columns, in blocks
where it can (:meth:`SQLSource._column_blocks`: DuckDB's NumPy fetch, PostgreSQL's
``COPY`` stream, Spark's Arrow batches), and each block's packed keys are unpacked
into the narrow codes at once, so the open's peak is the narrow snapshot plus one
block of 64-bit keys, however many distinct records the table has. The source is
not read again: a table replaced, appended to
or deleted from after the open changes nothing the engine answers from, every
clique table has total mass exactly ``n`` (the snapshot's), and the connection
is released as soon as the snapshot is taken.

The same rows validate the data: a cell that fails its rule is coded as a
negative fault marker, so bad data is refused at open, before any query, with a
message that names the column and the number of offending rows -- never a value
(it is shown to the curator who opens the data; an analyst sees none of it).
"""

from __future__ import annotations

import abc
import contextlib
import tempfile
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.data.attribute import Attribute, format_number
from pmwcm.data.schema import Schema
from pmwcm.data.sources.sql import (
    MISSING,
    NOT_A_NUMBER,
    OUTSIDE,
    ColumnKind,
    Dialect,
    code_tables,
    coding_query,
)
from pmwcm.data.table import DataError
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.coded_records import CodedRecords, SnapshotBuilder, code_dtype
from pmwcm.kernels.domain import Domain

__all__ = ["RAW_GROUPING_MAX_COLUMNS", "SQLSource", "fault_message", "packing"]

_FAULTS = (OUTSIDE, MISSING, NOT_A_NUMBER)

#: A table with more source columns than this is coded row by row, not grouped raw first.
RAW_GROUPING_MAX_COLUMNS = 64

#: The shift that makes every code, fault markers included, non-negative in a packed key.
_SHIFT = -min(_FAULTS)

#: The largest packed key: a chunk's radices multiply to at most this (a signed BIGINT).
_KEY_LIMIT = 2**63 - 1

Parameters = dict[str, Any]


def packing(sizes: list[int]) -> list[list[tuple[int, int]]]:
    """How codes of attributes with ``sizes`` pack into 63-bit keys.

    Attribute ``j`` takes ``sizes[j] + 3`` values once shifted past the fault
    markers; consecutive attributes share a key while the product of their
    radices stays below ``2^63``, each at its stride (the product of the
    radices before it in the key). Returns, per key, ``[(j, stride), ...]``.

    >>> packing([2, 2, 100])
    [[(0, 1), (1, 5), (2, 25)]]
    """
    keys: list[list[tuple[int, int]]] = []
    stride = _KEY_LIMIT + 1
    for j, size in enumerate(sizes):
        radix = size + _SHIFT
        if stride * radix > _KEY_LIMIT:
            keys.append([])
            stride = 1
        keys[-1].append((j, stride))
        stride *= radix
    return keys


def _no_room(where: str, exc: OSError) -> str:
    """Why a snapshot spilled to private files could not be written or mapped (the
    temporary directory's fault: no value, no size of the data)."""
    reason = exc.strerror or type(exc).__name__
    return (
        f"cannot hold the snapshot of {where} in the temporary directory "
        f"{tempfile.gettempdir()!r} ({reason}); point TMPDIR at a directory with room."
    )


def fault_message(attr: Attribute, fault: int, rows: int) -> str:
    """What is wrong with ``rows`` cells of ``attr``'s column (no value is quoted)."""
    what = f"{rows} row{'s' if rows != 1 else ''}"
    if fault == MISSING:
        return f"{what} with a missing value"
    if fault == NOT_A_NUMBER:
        return f"{what} whose value is not a number (attribute {attr.name!r} uses {attr.kind})"
    if attr.kind == "bins":
        lo, hi = format_number(attr.bins[0]), format_number(attr.bins[-1])
        return (
            f"{what} with a number outside the bins [{lo}, {hi}) of attribute {attr.name!r} "
            '(set "clip": true to clip)'
        )
    return f"{what} with a value that is not one of the schema's values for attribute {attr.name!r}"


class SQLSource(abc.ABC):
    """Counts on cliques of a table behind SQL, from the snapshot its one read took at open.

    Subclasses give the dialect, the relation, the column types and a way to
    run a query; this class writes the snapshot query, checks the table and
    answers every clique from the snapshot.

    Args:
        schema: the public schema (attributes in axis order).
        relation: the ``FROM`` item (a quoted table name, ``read_parquet(...)``).
        columns: the relation's columns and their type names.
        kinds: the columns whose type a rule can read, and how.
        dialect: the engine's SQL spellings.
        where: names the data in messages (a path, a table; never credentials).

    Raises:
        DataError: a column is missing or of a type no rule reads, the table
            has no rows, or some rows fail the schema's rules.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        relation: str,
        columns: Mapping[str, str],
        kinds: Mapping[str, ColumnKind],
        dialect: Dialect,
        where: str,
    ) -> None:
        self.schema = schema
        self._domain = schema.domain()
        self._relation = relation
        self._dialect = dialect
        self.where = where
        self._kinds: dict[str, ColumnKind] = {}
        for attr in schema.attributes:
            if attr.column not in columns:
                raise DataError(
                    f"column {attr.column!r} named by the schema is not in {where}; "
                    f"its columns are {list(columns)}."
                )
            if attr.column not in kinds:
                raise DataError(
                    f"column {attr.column!r} of {where} has type {columns[attr.column]}, which "
                    f"the {attr.kind} rule of attribute {attr.name!r} cannot read "
                    "(text, integer, float or boolean columns only)."
                )
            self._kinds[attr.column] = kinds[attr.column]
        self._pinned = self._snapshot()
        self._release()

    @property
    def domain(self) -> Domain:
        """The data universe (from the schema)."""
        return self._domain

    @property
    def n(self) -> int:
        """The number of rows, counted by the snapshot (public from then on)."""
        return self._pinned.n

    @abc.abstractmethod
    def _column_blocks(
        self, query: str, width: int, parameters: Parameters
    ) -> Generator[Sequence[NDArray[np.integer]], None, None]:
        """Runs ``query`` (``width`` integer columns, none of them NULL; binding
        ``parameters``, which only a dialect with code tables asks for) and yields its
        result in blocks of rows, each block as ``width`` integer arrays of one length.

        An engine hands the result over as columns (never one Python tuple per row:
        at millions of distinct records those cost 260-410 bytes a row), in as many
        blocks as it likes; the snapshot unpacks each block before the next."""

    def _release(self) -> None:
        """Releases what opening held (the connection); the snapshot no longer needs it."""
        self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the connection (idempotent)."""

    @property
    def pinned(self) -> CodedRecords:
        """The snapshot taken at open: the distinct coded records and their counts."""
        return self._pinned

    def snapshot_query(self) -> tuple[str, Parameters]:
        """The one query that reads the table, and the code tables it binds (public: no
        data in either)."""
        q = self._dialect.identifier
        columns = list(dict.fromkeys(a.column for a in self.schema.attributes))
        raw = {c: f"r{i}" for i, c in enumerate(columns)}
        selected = ", ".join(f"{q(c)} AS {raw[c]}" for c in columns)
        if len(columns) <= RAW_GROUPING_MAX_COLUMNS:
            grouped = ", ".join(q(c) for c in columns)
            inner = f"SELECT {selected}, count(*) AS cnt FROM {self._relation} GROUP BY {grouped}"
        else:
            inner = f"SELECT {selected}, 1 AS cnt FROM {self._relation}"
        attrs = self.schema.attributes
        tables = code_tables(attrs, self._kinds, self._dialect)
        coded = coding_query(attrs, raw, self._kinds, self._dialect, inner, ["cnt"], tables)
        keys = packing([a.size for a in attrs])
        packed = ", ".join(
            " + ".join(f"CAST(k{j} + {_SHIFT} AS BIGINT) * {stride}" for j, stride in key)
            + f" AS p{i}"
            for i, key in enumerate(keys)
        )
        names = ", ".join(f"p{i}" for i in range(len(keys)))
        # DuckDB sums BIGINT into HUGEINT and PostgreSQL into NUMERIC: cast back.
        total = "CAST(SUM(cnt) AS BIGINT)"
        query = (
            f"SELECT {names}, {total} AS cnt FROM (SELECT {packed}, cnt FROM ({coded}) AS coded) "
            f"AS packed GROUP BY {names}"
        )
        parameters: Parameters = {}
        for table in tables.values():
            parameters |= table.parameters()
        return query, parameters

    def _snapshot(self) -> CodedRecords:
        """Reads the table once: its coded records and counts, checked against the schema.

        Block by block (:meth:`_column_blocks`), each attribute's codes are unpacked from
        its key, their fault markers tallied and the codes narrowed to the attribute's
        dtype (the counts to the block's largest), so the snapshot's peak is its narrow
        codes plus one block's packed keys, and the blocks become the snapshot's columns
        without a second copy of the whole (:class:`SnapshotBuilder`: in memory, or in
        private files mapped read-only once they pass
        :data:`~pmwcm.kernels.spilled_columns.SPILL_BYTES`).
        """
        attrs = self.schema.attributes
        keys = packing([a.size for a in attrs])
        query, parameters = self.snapshot_query()
        built = SnapshotBuilder(self._domain)
        faults = np.zeros((len(attrs), len(_FAULTS)), dtype=np.int64)
        n = 0
        try:
            # closed here even if a block fails: the engine's cursor ends before the release
            result = self._column_blocks(query, len(keys) + 1, parameters)
            with contextlib.closing(result):
                for *packed, block_counts in result:
                    weights = np.asarray(block_counts, dtype=np.int64)
                    n += int(np.sum(weights, dtype=np.int64))
                    columns = []
                    for key, members in zip(packed, keys, strict=True):
                        key = np.asarray(key, dtype=np.int64)
                        for j, stride in members:  # attributes in order, key after key
                            column = key // stride % (attrs[j].size + _SHIFT) - _SHIFT
                            for i, fault in enumerate(_FAULTS):
                                faults[j, i] += np.sum(weights[column == fault], dtype=np.int64)
                            # valid 0..size-1 unless a fault was tallied (then refused below)
                            columns.append(column.astype(code_dtype(attrs[j].size)))
                    try:
                        built.add(columns, weights)
                    except OSError as exc:  # the spill's files: the disk, not the data
                        raise DataError(_no_room(self.where, exc)) from None
            self._release()  # the engine's buffers go before the columns are assembled
            if n == 0:
                raise DataError(f"{self.where} has no data rows.")
            problems = []
            for attr, tallies in zip(attrs, faults.tolist(), strict=True):
                pairs = zip(_FAULTS, tallies, strict=True)
                said = [fault_message(attr, fault, rows) for fault, rows in pairs if rows]
                if said:
                    problems.append(f"column {attr.column!r}: {'; '.join(said)}")
            if problems:
                more = f" (and {len(problems) - 1} more bad columns)" if len(problems) > 1 else ""
                raise DataError(f"{self.where} does not fit the schema: {problems[0]}{more}.")
            try:
                return built.records()
            except OSError as exc:
                raise DataError(_no_room(self.where, exc)) from None
        finally:
            built.discard()  # files removed whatever happened (a snapshot made is mapped)

    def counts(self, clique: tuple[str, ...]) -> CliqueTable:
        """The record counts on ``clique`` (the
        :class:`~pmwcm.mechanisms.private_data.CountSource` contract), from the snapshot."""
        return self._pinned.count_table(clique)
