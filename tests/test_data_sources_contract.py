"""DuckDB's codes equal the in-memory path's on generated tables and schemas.

Hypothesis draws small tables (text, integer and float columns, with blanks
around text, missing cells, numbers written as text, bad values) and a schema
rule for each column (categorical with or without ``map``, bins with or without
``clip``, thresholds; each with or without ``missing`` markers and a
``missing_label``). The same table is read twice: by
:meth:`~pmwcm.data.table.Dataset.from_csv` / ``from_dataframe`` in memory and
by DuckDB (from the CSV, and from Parquet with typed columns). Either both
refuse it, or both give the same counts on every attribute and on all of them
together. DuckDB's refusal names the column and the number of bad rows, and
never a value.
"""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pmwcm.data.schema import Schema
from pmwcm.data.sources.duckdb_source import DuckDBSource
from pmwcm.data.table import DataError, Dataset
from pmwcm.mechanisms.private_data import PrivateData

WORDS = ["a", "b", "c", "Doe", "x y"]
PADS = ["", " ", "\t", "  ", "\u3000"]


@st.composite
def text_categorical(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[Any], str]:
    values = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True))
    rule: dict[str, Any] = {"name": name, "values": values}
    if len(values) >= 2 and draw(st.booleans()):  # group the sources into two outputs
        cut = draw(st.integers(1, len(values) - 1))
        rule = {
            "name": name,
            "values": ["lo", "hi"],
            "map": {"lo": values[:cut], "hi": values[cut:]},
        }
    pool = [*values, "zz"] if draw(st.booleans()) else values
    cell = st.tuples(st.sampled_from(PADS), st.sampled_from(pool), st.sampled_from(PADS)).map(
        "".join
    )
    return rule, [draw(cell) for _ in range(ROWS)], "VARCHAR"


@st.composite
def integer_bins(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[Any], str]:
    edges = sorted(draw(st.lists(st.integers(-3, 22), min_size=2, max_size=5, unique=True)))
    rule = {"name": name, "bins": edges, "clip": draw(st.booleans())}
    cells: list[int | None] = [draw(st.integers(-5, 25)) for _ in range(ROWS)]
    if draw(st.booleans()):
        cells[draw(st.integers(0, ROWS - 1))] = None
    return rule, cells, "BIGINT"


@st.composite
def even_bins(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[Any], str]:
    """Evenly spaced edges (coded by arithmetic in SQL) on a float column: cells on the
    edges, the doubles beside them, between them and outside."""
    start, width = draw(st.integers(-6, 6)) / 2, draw(st.integers(1, 4)) / 2
    edges = [start + k * width for k in range(draw(st.integers(3, 6)))]
    rule = {"name": name, "bins": edges, "clip": draw(st.booleans())}
    pool = [*edges, edges[0] - 1, edges[-1] + 1, edges[1] - width / 2, math.nan]
    pool += [math.nextafter(e, d) for e in edges[:2] for d in (-math.inf, math.inf)]
    return rule, [draw(st.sampled_from(pool)) for _ in range(ROWS)], "DOUBLE"


@st.composite
def integer_threshold(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[Any], str]:
    t = draw(st.floats(-4, 24, allow_nan=False).map(lambda x: round(x, 1)))
    return (
        {"name": name, "threshold": t},
        [draw(st.integers(-5, 25)) for _ in range(ROWS)],
        "BIGINT",
    )


@st.composite
def float_categorical(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[Any], str]:
    numbers = [0.5, 1.0, 2.0, -3.25, 1e20]
    values = draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=4, unique=True))
    rule = {"name": name, "values": values}
    pool = [*values, 7.5, math.nan] if draw(st.booleans()) else values
    return rule, [draw(st.sampled_from(pool)) for _ in range(ROWS)], "DOUBLE"


@st.composite
def text_bins(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[Any], str]:
    rule = {"name": name, "bins": [0, 2.5, 10, 100], "clip": draw(st.booleans())}
    good = ["1", " 7.5", "2.5 ", "1e1", "+3", ".5", "99.", "0", "120"]
    pool = [*good, "abc", "", "1,5", "inf", "-INF"] if draw(st.booleans()) else good
    if draw(st.booleans()):  # numbers with a missing-value marker
        pool = [*pool, "N", " NA"]
    return rule, [draw(st.sampled_from(pool)) for _ in range(ROWS)], "VARCHAR"


#: Markers a column of each SQL type can hold (none is a source value of the rules above).
MARKERS = {"VARCHAR": ["N", "NA", "zz"], "BIGINT": ["-5", "25"], "DOUBLE": ["7.5"]}


@st.composite
def with_missing_rule(
    draw: st.DrawFn, column: tuple[dict[str, Any], list[Any], str]
) -> tuple[dict[str, Any], list[Any], str]:
    """The column's rule, sometimes with ``missing`` markers and a ``missing_label``."""
    rule, cells, sql_type = column
    rule = dict(rule)
    if draw(st.booleans()):
        rule["missing"] = draw(st.lists(st.sampled_from(MARKERS[sql_type]), unique=True))
    if draw(st.booleans()):
        rule["missing_label"] = "unknown"
    return rule, cells, sql_type


ROWS = 12
KINDS = [text_categorical, integer_bins, even_bins, integer_threshold, float_categorical, text_bins]


@st.composite
def tables(draw: st.DrawFn) -> tuple[Schema, dict[str, tuple[list[Any], str]]]:
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    rules, columns = [], {}
    for j, kind in enumerate(kinds):
        rule, cells, sql_type = draw(with_missing_rule(draw(kind(f"c{j}"))))
        rules.append(rule)
        columns[f"c{j}"] = (cells, sql_type)
    return Schema.from_json({"attributes": rules}), columns


def write_csv(path: Path, columns: dict[str, tuple[list[Any], str]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        writer.writerow(columns)
        for row in zip(*(cells for cells, _ in columns.values()), strict=True):
            writer.writerow(["" if c is None or c != c else str(c) for c in row])


def write_parquet(path: Path, columns: dict[str, tuple[list[Any], str]]) -> None:
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE t (" + ", ".join(f"{c} {t}" for c, (_, t) in columns.items()) + ")"
    )
    rows = list(zip(*(cells for cells, _ in columns.values()), strict=True))
    connection.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(columns))})", rows)
    connection.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    connection.close()


def outcome(read: Any) -> PrivateData | str:
    try:
        dataset = read()
    except DataError as exc:
        return str(exc)
    if isinstance(dataset, Dataset):
        return PrivateData.from_records(dataset.domain, dataset.records)
    return PrivateData.from_source(dataset)


def assert_same(memory: PrivateData | str, engine: PrivateData | str, columns: dict) -> None:
    if isinstance(memory, str) or isinstance(engine, str):
        assert isinstance(memory, str) and isinstance(engine, str), (memory, engine)
        assert "row" in engine and "column 'c" in engine
        for cells, _ in columns.values():  # no value of the table is quoted
            for c in cells:
                text = str(c).strip()
                if len(text) >= 2 and not text.replace(".", "").isdigit():
                    assert f"'{text}'" not in engine
        return
    assert engine.n == memory.n
    names = memory.domain.names
    for clique in [*((a,) for a in names), names, tuple(reversed(names))]:
        np.testing.assert_array_equal(engine.marginal(clique), memory.marginal(clique))
    engine.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=tables())
def test_duckdb_codes_equal_the_in_memory_codes(tmp_path: Path, table: Any) -> None:
    check_codes(tmp_path, table)


def check_codes(tmp_path: Path, table: Any) -> None:
    """The table read in memory and by DuckDB (from CSV and from typed Parquet): the
    same outcome, the same counts."""
    schema, columns = table
    csv_path, parquet_path = tmp_path / "t.csv", tmp_path / "t.parquet"
    write_csv(csv_path, columns)
    write_parquet(parquet_path, columns)
    memory_csv = outcome(lambda: Dataset.from_csv(csv_path, schema))
    assert_same(memory_csv, outcome(lambda: DuckDBSource.from_file(csv_path, schema)), columns)
    frame = pd.DataFrame({c: pd.Series(cells, dtype=object) for c, (cells, _) in columns.items()})
    memory_frame = outcome(lambda: Dataset.from_dataframe(frame, schema))
    engine = outcome(lambda: DuckDBSource.from_file(parquet_path, schema))
    assert_same(memory_frame, engine, columns)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=tables())
def test_bins_coded_by_binary_search_equal_the_in_memory_codes(tmp_path: Path, table: Any) -> None:
    """Every ``bins`` rule of three edges or more through the nested ``CASE``s (the form
    a rule of many edges takes): the same codes, faults and refusals as memory."""
    from pmwcm.data.sources import sql

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sql, "LINEAR_BINS_MAX_EDGES", 2)
        check_codes(tmp_path, table)


def test_the_generators_reach_both_outcomes() -> None:
    """The strategies above are not vacuous: fixed draws that fit and that do not."""
    good = Schema.from_json({"attributes": [{"name": "c0", "bins": [0, 10]}]})
    for cells, fits in (([1, 5, 9], True), ([1, 50, None], False)):
        memory = outcome(
            lambda cells=cells: Dataset.from_dataframe(
                pd.DataFrame({"c0": pd.Series(cells, dtype=object)}), good
            )
        )
        assert isinstance(memory, PrivateData) == fits
    assert list(itertools.chain(WORDS))  # the word pool is non-empty


@pytest.mark.parametrize("n", [1, 3])
def test_n_is_counted_when_opened(tmp_path: Path, n: int) -> None:
    path = tmp_path / "t.csv"
    path.write_text("c0\n" + "a\n" * n)
    schema = Schema.from_json({"attributes": [{"name": "c0", "values": ["a"]}]})
    source = DuckDBSource.from_file(path, schema)
    assert source.n == n
    source.close()
