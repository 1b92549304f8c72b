"""A table behind SQL as a :class:`~pmwcm.mechanisms.private_data.CountSource`.

Opening reads the whole table once (the *validation pass*): one scan that
codes every cell with the schema's ``CASE`` expressions
(:mod:`pmwcm.data.sources.sql`) and counts, per attribute, the rows of each
fault kind, plus ``count(*)``, which fixes ``n`` (public from then on). Bad
data is refused there, before any query, with a message that names the column
and the number of offending rows -- never a value (it is shown to the curator
who opens the data; an analyst sees none of it).

A clique's counts are then one query, grouped first on the clique's raw source
columns (the engine's own ``GROUP BY`` on those columns) and coded after, on the
distinct raw values only, so that the schema's rules cost next to nothing:

.. code-block:: sql

    SELECT ((k0 * s1) + k1) AS cell, SUM(cnt) FROM (
      SELECT <code of a>(r0) AS k0, <code of b>(r1) AS k1, cnt FROM (
        SELECT "col_a" AS r0, "col_b" AS r1, count(*) AS cnt FROM <table> GROUP BY ...
      ) AS raw
    ) AS coded GROUP BY cell ORDER BY cell

Only counts come back: no row of the table is ever materialised in Python.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pmwcm.data.attribute import Attribute, format_number
from pmwcm.data.schema import Schema
from pmwcm.data.sources.sql import (
    MISSING,
    NOT_A_NUMBER,
    OUTSIDE,
    ColumnKind,
    Dialect,
    coding_query,
)
from pmwcm.data.table import DataError
from pmwcm.kernels.clique_table import CliqueTable, is_dense
from pmwcm.kernels.domain import Domain

__all__ = ["SQLSource", "fault_message"]

_FAULTS = (OUTSIDE, MISSING, NOT_A_NUMBER)


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
    """Counts on cliques from a SQL engine, after one validation pass.

    Subclasses give the dialect, the relation, the column types and a way to
    run a query; this class writes every query and checks the table.

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
        self._n = self._validate()

    @property
    def domain(self) -> Domain:
        """The data universe (from the schema)."""
        return self._domain

    @property
    def n(self) -> int:
        """The number of rows, counted by the validation pass (public from then on)."""
        return self._n

    @abc.abstractmethod
    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        """Runs ``query`` and returns its (few) result rows."""

    def _cells(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """Runs a counts query: its ``(cell, count)`` columns as arrays."""
        rows = self._rows(query)
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        cells, counts = zip(*rows, strict=True)
        return np.asarray(cells, dtype=np.int64), np.asarray(counts, dtype=np.float64)

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the connection (idempotent)."""

    def _validate(self) -> int:
        """The validation pass: one scan, grouped on each schema column alone
        (``GROUPING SETS``); the rules then code the distinct values only."""
        q = self._dialect.identifier
        columns = list(dict.fromkeys(a.column for a in self.schema.attributes))
        raw = {c: f"r{i}" for i, c in enumerate(columns)}
        selected = ", ".join(
            [f"{q(c)} AS {raw[c]}" for c in columns]
            + [f"GROUPING({q(c)}) AS g{raw[c]}" for c in columns]
        )
        sets = ", ".join(f"({q(c)})" for c in columns)
        inner = (
            f"SELECT {selected}, count(*) AS cnt FROM {self._relation} "
            f"GROUP BY GROUPING SETS ({sets})"
        )
        keep = [f"g{r}" for r in raw.values()] + ["cnt"]
        coded = coding_query(self.schema.attributes, raw, self._kinds, self._dialect, inner, keep)
        tallies = [
            f"SUM(CASE WHEN g{raw[a.column]} = 0 AND k{j} = {fault} THEN cnt ELSE 0 END)"
            for j, a in enumerate(self.schema.attributes)
            for fault in _FAULTS
        ]
        query = (
            f"SELECT SUM(CASE WHEN g{raw[columns[0]]} = 0 THEN cnt ELSE 0 END), "
            f"{', '.join(tallies)} FROM ({coded}) AS coded"
        )
        total, *faults = self._rows(query)[0]
        n = int(total or 0)
        if n == 0:
            raise DataError(f"{self.where} has no data rows.")
        problems = []
        for j, attr in enumerate(self.schema.attributes):
            counts = [int(c or 0) for c in faults[3 * j : 3 * j + 3]]
            said = [fault_message(attr, f, c) for f, c in zip(_FAULTS, counts, strict=True) if c]
            if said:
                problems.append(f"column {attr.column!r}: {'; '.join(said)}")
        if problems:
            more = f" (and {len(problems) - 1} more bad columns)" if len(problems) > 1 else ""
            raise DataError(f"{self.where} does not fit the schema: {problems[0]}{more}.")
        return n

    def counts_query(self, clique: Sequence[str]) -> str:
        """The SQL that counts the rows on each cell of ``clique`` (public: no data in it)."""
        q = self._dialect.identifier
        attrs = [self.schema.attributes[self._domain.index(name)] for name in clique]
        raw: dict[str, str] = {}
        for attr in attrs:
            raw.setdefault(attr.column, f"r{len(raw)}")
        selected = ", ".join(f"{q(col)} AS {r}" for col, r in raw.items())
        keys = ", ".join(q(col) for col in raw)
        inner = f"SELECT {selected}, count(*) AS cnt FROM {self._relation} GROUP BY {keys}"
        coded = coding_query(attrs, raw, self._kinds, self._dialect, inner, ["cnt"])
        cell = "CAST(k0 AS BIGINT)"
        for j, attr in enumerate(attrs[1:], start=1):
            cell = f"({cell}) * {attr.size} + k{j}"
        return (
            f"SELECT {cell} AS cell, SUM(cnt) AS cnt FROM ({coded}) AS coded "
            f"GROUP BY {cell} ORDER BY cell"
        )

    def counts(self, clique: tuple[str, ...]) -> CliqueTable:
        """The record counts on ``clique`` (the
        :class:`~pmwcm.mechanisms.private_data.CountSource` contract)."""
        shape = tuple(self._domain.size_of(a) for a in clique)
        if not clique:
            return CliqueTable.dense(np.full((), float(self._n)))
        cells, counts = self._cells(self.counts_query(clique))
        if is_dense(shape):
            table = np.zeros(math.prod(shape))
            table[cells] = counts
            return CliqueTable.dense(table.reshape(shape))
        return CliqueTable(shape=shape, codes=cells, mass=counts)
