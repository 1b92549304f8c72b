"""Wide tables and large categoricals through DuckDB, at a size a test can afford.

The code paths are those of a 1,000-column table and a categorical of 10^6
values (measured by ``benchmarks/wide_tables.py``): a table wider than
:data:`~pmwcm.data.sources.sql_source.RAW_GROUPING_MAX_COLUMNS` is coded row by
row; codes are packed into 63-bit keys; a text categorical past
:data:`~pmwcm.data.sources.sql.CODE_TABLE_MIN_VALUES` source values is coded by
joins with a bound code table. Each is checked against the in-memory reader
(:meth:`~pmwcm.data.table.Dataset.from_csv`) record by record, refusals
included, and a query that outgrows DuckDB's cap is one line, not a traceback.
"""

from __future__ import annotations

import collections
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.data.sources.duckdb_source import DuckDBSource, planned_threads
from pmwcm.data.sources.sql import CODE_TABLE_MIN_VALUES
from pmwcm.data.sources.sql_source import RAW_GROUPING_MAX_COLUMNS, packing
from pmwcm.data.table import DataError, Dataset

WIDTH = RAW_GROUPING_MAX_COLUMNS + 16
VALUES = CODE_TABLE_MIN_VALUES * 4
runner = CliRunner()


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def records(source: DuckDBSource | Dataset) -> collections.Counter[tuple[int, ...]]:
    """The multiset of coded records, whichever reader made them."""
    if isinstance(source, Dataset):
        return collections.Counter(map(tuple, source.records.tolist()))
    pinned = source.pinned
    rows = zip(*(c.tolist() for c in pinned.columns), strict=True)
    weights = pinned.counts
    assert weights is not None
    out: collections.Counter[tuple[int, ...]] = collections.Counter()
    for row, weight in zip(rows, weights.tolist(), strict=True):
        out[row] += int(weight)
    return out


def wide_table(tmp_path: Path, *, bad_row: int | None = None) -> tuple[Path, Schema]:
    rng = np.random.default_rng(7)
    attributes: list[dict[str, Any]] = [
        {"name": f"c{j}", "values": ["0", "1", "2"][: 2 + j % 2]} for j in range(WIDTH)
    ]
    attributes.append({"name": "age", "bins": [0, 30, 60, 120], "missing": ["NA"],
                       "missing_label": "unknown"})  # fmt: skip
    cells = [[str(int(rng.integers(0, 2 + j % 2))) for j in range(WIDTH)] for _ in range(120)]
    for i, row in enumerate(cells):
        row.append(["17", " 45 ", "NA", "99.5", "3e1"][i % 5])
    if bad_row is not None:
        cells[bad_row][3] = "7"
    path = write_csv(tmp_path / "wide.csv", [str(a["name"]) for a in attributes], cells)
    return path, Schema.from_json({"attributes": attributes})


def test_a_table_wider_than_raw_grouping_has_the_in_memory_records(tmp_path: Path) -> None:
    path, schema = wide_table(tmp_path)
    source = DuckDBSource.from_file(path, schema)
    assert len(list(dict.fromkeys(a.column for a in schema.attributes))) > RAW_GROUPING_MAX_COLUMNS
    assert source.n == 120
    assert records(source) == records(Dataset.from_csv(path, schema))


def test_a_bad_cell_of_a_wide_table_is_refused_by_column(tmp_path: Path) -> None:
    path, schema = wide_table(tmp_path, bad_row=5)
    with pytest.raises(DataError) as caught:
        DuckDBSource.from_file(path, schema)
    message = str(caught.value)
    assert "column 'c3': 1 row with a value that is not one of" in message
    assert "'7'" not in message


@pytest.mark.parametrize(
    ("sizes", "keys"),
    [([2] * 27, 1), ([2] * 28, 2), ([10**6] * 3, 1), ([10**7] * 3, 2), ([1], 1)],
)
def test_packed_keys_hold_every_code_and_fault(sizes: list[int], keys: int) -> None:
    plan = packing(sizes)
    assert len(plan) == keys and [j for key in plan for j, _ in key] == list(range(len(sizes)))
    rng = np.random.default_rng(0)
    codes = [rng.integers(-3, size, 50) for size in sizes]  # faults -3..-1 included
    for key in plan:
        packed = sum((codes[j] + 3) * stride for j, stride in key)
        assert max((sizes[j] + 3) * stride for j, stride in key) <= 2**63 - 1
        for j, stride in key:
            np.testing.assert_array_equal(packed // stride % (sizes[j] + 3) - 3, codes[j])


def big_categorical(tmp_path: Path, cells: list[str]) -> tuple[Path, Schema]:
    values = [str(v) for v in range(VALUES)]
    codes = {"zero": ["0"], **{f"v{v}": [str(v)] for v in range(1, VALUES - 2)},
             "late": [str(VALUES - 2), str(VALUES - 1), "x'y"]}  # fmt: skip
    attributes = [
        {"name": "id", "values": list(codes), "map": codes, "missing": ["?"],
         "missing_label": "unknown"},
        {"name": "plain", "values": values},
        {"name": "flag", "values": ["no", "yes"]},
    ]  # fmt: skip
    rows = [[cell, str(i % VALUES), ["no", "yes"][i % 2]] for i, cell in enumerate(cells)]
    return write_csv(tmp_path / "big.csv", ["id", "plain", "flag"], rows), Schema.from_json(
        {"attributes": attributes}
    )


def test_a_large_categorical_is_coded_by_its_code_table_as_in_memory(tmp_path: Path) -> None:
    # Respelled numbers ("1.0", "-0", " 3e0 "), a quote, a marker and values of the map.
    cells = ["0", "1.0", "-0", " 3e0 ", "x'y", "?", str(VALUES - 1), "5", "100", "7"] * 30
    path, schema = big_categorical(tmp_path, cells)
    assert len(schema.attributes[0].source_codes()) > CODE_TABLE_MIN_VALUES
    source = DuckDBSource.from_file(path, schema)
    assert source.n == len(cells)
    assert records(source) == records(Dataset.from_csv(path, schema))


@pytest.mark.parametrize("cell", ["-1", "1.5", "nope", str(VALUES)])
def test_a_large_categorical_refuses_what_memory_refuses(tmp_path: Path, cell: str) -> None:
    path, schema = big_categorical(tmp_path, ["1", "2", cell, "4"])
    with pytest.raises(DataError):
        Dataset.from_csv(path, schema)
    with pytest.raises(DataError) as caught:
        DuckDBSource.from_file(path, schema)
    assert "column 'id': 1 row with" in str(caught.value)
    assert f"'{cell}'" not in str(caught.value)


def test_a_query_over_duckdbs_cap_is_one_line(tmp_path: Path) -> None:
    path, schema = wide_table(tmp_path)
    with pytest.raises(DataError) as caught:
        DuckDBSource.from_file(path, schema, memory_limit="1MB")
    assert str(caught.value).startswith("DuckDB ran out of its memory limit (1MB) reading")
    assert "\n" not in str(caught.value)


def test_run_and_schema_check_take_a_large_categorical(tmp_path: Path) -> None:
    cells = [str(i % VALUES) for i in range(400)]
    path, schema = big_categorical(tmp_path, cells)
    schema_path = tmp_path / "big.schema.json"
    schema_path.write_text(schema.to_json(), encoding="utf-8")
    query = {"id": "q", "loss": "logistic", "target": "flag", "features": ["id"]}
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps(query) + "\n", encoding="utf-8")
    checked = runner.invoke(app, ["schema", "--check", str(schema_path), "--data", str(path)])
    assert checked.exit_code == 0, checked.output
    out = tmp_path / "answers.jsonl"
    result = runner.invoke(app, [
        "run", "--data", str(path), "--schema", str(schema_path), "--queries", str(queries),
        "--epsilon", "1", "--delta", "1e-6", "-o", str(out), "--insecure-seeded-noise", "1",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    answer = json.loads(out.read_text(encoding="utf-8"))
    assert len(answer["theta"]) == schema.attributes[0].size + 1  # one-hot and intercept


def test_threads_are_planned_from_the_width_and_the_cap() -> None:
    assert planned_threads("512MB", 14, cores=16) == 16
    assert planned_threads("512MB", 1000, cores=16) == 1  # the 1,000-column benchmark
    assert planned_threads("4GiB", 1000, cores=16) == 8
    with pytest.raises(DataError, match="memory_limit must be a size"):
        planned_threads("lots", 3)
