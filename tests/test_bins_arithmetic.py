"""Evenly spaced bins coded by arithmetic give the binary search's codes on every engine.

:func:`pmwcm.data.sources.sql.bins_code` codes a ``bins`` rule whose edges are evenly
spaced by ``floor((v - e_0) / w)`` and two corrections, instead of a nested ``CASE``
(:func:`~pmwcm.data.sources.sql.evenly_spaced`). Both forms, and NumPy's
``searchsorted`` as the reference, code the same doubles on DuckDB, PostgreSQL and Spark
(real engines, started by the fixtures): every edge, its neighbouring doubles, bin
midpoints, values far outside, signed zeros, infinities and NaN.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import numpy as np
import pytest

from pmwcm.data.schema import Schema
from pmwcm.data.sources import sql

#: Edge sets the arithmetic form takes: unit bins (age), a negative start and width 3,
#: dyadic fractions, large magnitudes, and the widest span it accepts.
EVEN = [
    [float(e) for e in range(17, 103)],
    [float(e) for e in range(-10, 21, 3)],
    [0.5 + 0.25 * k for k in range(9)],
    [1e12 + 5e11 * k for k in range(4)],
    [-(2.0**40), 0.0, 2.0**40],
]


def tricky_values(edges: Sequence[float]) -> list[float]:
    """Each edge and the doubles beside it, the bins' midpoints and quarter points, and
    values far outside, signed zeros, the smallest subnormal, infinities and NaN."""
    out: list[float] = []
    for e in edges:
        out += [e, math.nextafter(e, -math.inf), math.nextafter(e, math.inf)]
    for lo, hi in itertools.pairwise(edges):
        out += [lo + (hi - lo) * f for f in (0.25, 0.5, 0.75)]
    out += [0.0, -0.0, 5e-324, -5e-324, 1e300, -1e300, math.inf, -math.inf, math.nan]
    return out


def reference(edges: Sequence[float], values: Sequence[float], clip: bool) -> list[int]:
    """``bins``' meaning, from NumPy: the fault codes first (a float column's NaN is
    missing, an infinity is not a number), then below, above, or the bin holding ``v``."""
    below, above = (0, len(edges) - 2) if clip else (sql.OUTSIDE, sql.OUTSIDE)
    out = []
    for v in values:
        if math.isnan(v):
            out.append(sql.MISSING)
        elif math.isinf(v):
            out.append(sql.NOT_A_NUMBER)
        elif v < edges[0]:
            out.append(below)
        elif not v < edges[-1]:
            out.append(above)
        else:
            out.append(int(np.searchsorted(edges, v, side="right")) - 1)
    return out


def expressions(edges: Sequence[float], clip: bool, dialect: sql.Dialect) -> tuple[str, str]:
    """The arithmetic form and the binary search's, on a float column ``x``."""
    attr = Schema.from_json({"attributes": [{"name": "c", "bins": edges, "clip": clip}]})
    (attribute,) = attr.attributes
    cell = sql.Cell(raw="x", text="x", number="x", kind="float")
    arithmetic = sql.bins_code(attribute, cell, dialect)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sql, "evenly_spaced", lambda edges: None)
        patch.setattr(sql, "LINEAR_BINS_MAX_EDGES", 2)
        search = sql.bins_code(attribute, cell, dialect)
    assert "floor(" in arithmetic and "floor(" not in search
    return arithmetic, search


Evaluate = Callable[[str, list[float]], list[int]]


def check(evaluate: Evaluate, dialect: sql.Dialect) -> None:
    for edges in EVEN:
        assert sql.evenly_spaced(edges) is not None
        values = tricky_values(edges)
        for clip in (False, True):
            arithmetic, search = expressions(edges, clip, dialect)
            want = reference(edges, values, clip)
            assert evaluate(arithmetic, values) == want
            assert evaluate(search, values) == want


def test_the_rule_is_taken_only_where_the_edges_are_exactly_even() -> None:
    assert sql.evenly_spaced([0.0, 1.0]) is None  # one bin: nothing to search
    assert sql.evenly_spaced([0.0, 0.1, 0.2, 0.3]) is None  # 3 * 0.1 is not 0.3 in float64
    assert sql.evenly_spaced([0.0, 1.0, 3.0]) is None
    assert sql.evenly_spaced([2.0**45, 2.0**45 + 1, 2.0**45 + 2]) is None  # span of 2^45 bins
    assert sql.evenly_spaced([-3.0, -1.0, 1.0]) == 2.0


def test_duckdb_codes_even_bins_as_the_binary_search_does() -> None:
    connection = duckdb.connect()

    def evaluate(expression: str, values: list[float]) -> list[int]:
        connection.execute("CREATE OR REPLACE TEMP TABLE t (i INTEGER, x DOUBLE)")
        connection.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
        rows = connection.execute(f"SELECT {expression} FROM t ORDER BY i").fetchall()
        return [int(r[0]) for r in rows]

    check(evaluate, sql.DIALECTS["duckdb"])


def test_postgres_codes_even_bins_as_the_binary_search_does(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as connection:

        def evaluate(expression: str, values: list[float]) -> list[int]:
            rows = connection.execute(
                f"SELECT {expression} FROM unnest(%s::double precision[]) "
                "WITH ORDINALITY AS t(x, i) ORDER BY i",
                (values,),
            ).fetchall()
            return [int(r[0]) for r in rows]

        check(evaluate, sql.DIALECTS["postgresql"])


def test_spark_codes_even_bins_as_the_binary_search_does(spark: Any) -> None:
    def evaluate(expression: str, values: list[float]) -> list[int]:
        frame = spark.createDataFrame(list(enumerate(values)), "i INT, x DOUBLE")
        frame.createOrReplaceTempView("t")
        rows = spark.sql(f"SELECT {expression} AS code FROM t ORDER BY i").collect()
        return [int(r["code"]) for r in rows]

    check(evaluate, sql.DIALECTS["spark"])
