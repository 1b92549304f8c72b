"""Datasets from CSV and DataFrames, their validation, output, and drafted schemas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmwcm.data.schema import Attribute, Schema
from pmwcm.data.schema_draft import DRAFT_WARNING, draft_schema
from pmwcm.data.table import DataError, Dataset
from pmwcm.kernels.domain import Domain

SCHEMA = Schema.from_json(
    {
        "attributes": [
            {"name": "sex", "values": ["female", "male"]},
            {
                "name": "white",
                "column": "race",
                "values": ["no", "yes"],
                "map": {"no": [1, 2], "yes": [0]},
            },
            {"name": "age", "bins": [0, 25, 65, 120]},
            {"name": "old", "column": "age", "threshold": 65, "values": ["no", "yes"]},
            {"name": "hours", "bins": [0, 40, 100], "clip": True},
        ]
    }
)

CSV = """sex,race,age,hours,ignored
male,0,37,40,x
female, 2 ,70,120,y
 male,1,24,-3,z
"""

EXPECTED = [[1, 1, 1, 0, 1], [0, 0, 2, 1, 1], [1, 0, 0, 0, 0]]


def _write(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_from_csv_encodes_every_rule(tmp_path: Path) -> None:
    ds = Dataset.from_csv(_write(tmp_path, CSV), SCHEMA)
    assert ds.n == 3
    assert ds.records.dtype == np.int64
    assert ds.records.tolist() == EXPECTED
    assert ds.domain == SCHEMA.domain()
    assert ds.column("age").tolist() == [1, 2, 0]


def test_from_dataframe_matches_from_csv_with_numeric_dtypes() -> None:
    df = pd.DataFrame(
        {
            "sex": ["male", "female", "male"],
            "race": [0.0, 2.0, 1.0],
            "age": [37, 70, 24],
            "hours": [40.0, 120.0, -3.0],
        }
    )
    assert Dataset.from_dataframe(df, SCHEMA).records.tolist() == EXPECTED


def test_records_are_a_read_only_copy() -> None:
    codes = np.array([[0, 1], [1, 0]])
    ds = Dataset(domain=Domain.from_sizes({"a": 2, "b": 2}), records=codes)
    codes[0, 0] = 1
    assert ds.records[0, 0] == 0
    with pytest.raises(ValueError, match="read-only"):
        ds.records[0, 0] = 1


def test_equality_and_repr() -> None:
    d = Domain.from_sizes({"a": 2})
    one = Dataset(domain=d, records=np.array([[1]]))
    assert one == Dataset(domain=d, records=np.array([[1]], dtype=np.int32))
    assert one != Dataset(domain=d, records=np.array([[0]]))
    assert repr(one) == "Dataset(n=1, names=['a'], |X|=2)"


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (np.array([[0.0, 1.0]]), "integer codes, got dtype float64"),
        (np.array([0, 1]), r"shape \(n, 2\), got \(2,\)"),
        (np.array([[0, 1, 1]]), r"shape \(n, 2\), got \(1, 3\)"),
        (np.zeros((0, 2), dtype=int), "at least one record, got n=0"),
        (np.array([[0, 1], [0, 3]]), r"records\[1\] has code 3 for attribute 'b', outside 0..2"),
        (np.array([[-1, 0]]), r"records\[0\] has code -1 for attribute 'a', outside 0..1"),
    ],
)
def test_bad_records(records: np.ndarray, message: str) -> None:
    with pytest.raises(DataError, match=message):
        Dataset(domain=Domain.from_sizes({"a": 2, "b": 3}), records=records)


def test_to_dataframe_and_csv_round_trip(tmp_path: Path) -> None:
    ds = Dataset.from_csv(_write(tmp_path, CSV), SCHEMA)
    df = ds.to_dataframe()
    assert df["age"].tolist() == ["[25, 65)", "[65, 120)", "[0, 25)"]
    assert df["white"].tolist() == ["yes", "no", "no"]
    assert ds.to_dataframe(labels=False).to_numpy().tolist() == EXPECTED
    out = tmp_path / "labels.csv"
    ds.to_csv(out)
    assert out.read_text().splitlines()[0] == "sex,white,age,old,hours"
    assert Dataset.from_csv(out, Schema.from_domain(ds.domain)) == ds
    ds.to_csv(out, labels=False)
    assert out.read_text().splitlines()[1] == "1,1,1,0,1"


def test_to_csv_failure_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = Dataset.from_csv(_write(tmp_path, CSV), SCHEMA)
    out = _write(tmp_path, "old contents\n", "out.csv")

    def broken(self: pd.DataFrame, fh: object, **kwargs: object) -> None:
        fh.write("half a fi")  # type: ignore[attr-defined]
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError, match="disk full"):
        ds.to_csv(out)
    assert out.read_text() == "old contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "out.csv"]


BAD_CSV = [
    (
        "sex,race,age\nmale,0,30\n",
        r"column 'hours' named by the schema is not in '.*'; its columns",
    ),
    ("sex,race,age,hours\n", "has no data rows"),
    ("sex,race,age,hours\nmale,0,30,1\nMale,0,30,1\n", "line 3: a value that is not one of"),
    (
        "sex,race,age,hours\nmale,7,30,1\n",
        r"column 'race', line 2: a value that .* 'white' \['1', '2', '0'\]",
    ),
    ("sex,race,age,hours\nmale,,30,1\n", "column 'race', line 2: missing value"),
    ("sex,race,age,hours\nmale,0,,1\n", "column 'age', line 2: missing value"),
    (
        "sex,race,age,hours\nmale,0,thirty,1\n",
        "column 'age', line 2: a value that is not a number",
    ),
    ("sex,race,age,hours\nmale,0,120,1\n", r"line 2: a number outside the bins \[0, 120\)"),
    (
        "sex,race,age,hours\nmale,0,-1,1\n",
        r"a number outside the bins \[0, 120\) of attribute 'age'",
    ),
    (
        "sex,race,age,hours\nx,0,1,1\ny,0,1,1\n",
        r"line 2: a value that .* \(1 more rows have bad cells\)",
    ),
    ("", "is empty"),
    ('sex,race\n"male,0\n', "line 2: malformed quoting"),
]


@pytest.mark.parametrize(("text", "message"), BAD_CSV)
def test_bad_csv_raises_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DataError, match=message) as info:
        Dataset.from_csv(_write(tmp_path, text), SCHEMA)
    assert "\n" not in str(info.value)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"data file not found: '.*nope\.csv'"):
        Dataset.from_csv(tmp_path / "nope.csv", SCHEMA)
    with pytest.raises(DataError, match="not a file"):
        Dataset.from_csv(tmp_path, SCHEMA)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("sex,race,age,hours\nm\xe4le,0,1,1\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"is not UTF-8 text \(line 2\); save it as UTF-8") as err:
        Dataset.from_csv(path, SCHEMA)
    assert "m" + "\xe4" not in str(err.value)  # the cell is never quoted


def test_dataframe_errors_name_the_index_label() -> None:
    df = pd.DataFrame({"sex": ["male", None], "race": [0, 0], "age": [1, 1], "hours": [1, 1]})
    df.index = pd.Index(["a", "b"])
    with pytest.raises(DataError, match="column 'sex', row 'b': missing value"):
        Dataset.from_dataframe(df, SCHEMA)
    with pytest.raises(DataError, match="expected a pandas DataFrame, got dict"):
        Dataset.from_dataframe({"sex": ["male"]}, SCHEMA)


def test_draft_lists_zero_one_as_zero_then_one_and_bins_wide_columns(tmp_path: Path) -> None:
    rows = "\n".join(f"{i % 2},{i},{'ab'[i % 2]},{i / 7:.3f}" for i in range(200))
    path = _write(tmp_path, "y,count,letter,ratio\n" + rows + "\n")
    s = draft_schema(path)
    y, count, letter, ratio = s.attributes
    assert (y.values, letter.values) == (("0", "1"), ("a", "b"))
    assert count.bins == tuple(float(20 * i) for i in range(11))
    assert ratio.kind == "bins" and ratio.bins[-1] > 199 / 7
    assert s.name == "draft" and s.description.startswith(DRAFT_WARNING)
    assert Dataset.from_csv(path, s).n == 200  # the draft encodes the data it came from


def test_draft_sorts_numbers_numerically_and_skips_what_it_cannot_draft() -> None:
    df = pd.DataFrame(
        {
            "n": [10, 9, 100, 9],
            "gap": ["a", None, "b", "a"],
            "id": ["u1", "u2", "u3", "u4"],
        }
    )
    s = draft_schema(df, max_values=3)
    assert s.names == ("n", "gap")
    assert s.attributes[0].values == ("9", "10", "100")
    assert s.attributes[1].labels == ("a", "b", "missing")  # empty cells: their own category
    assert "'id' (4 distinct text values > 3)" in s.description
    assert Dataset.from_dataframe(df, s).column("n").tolist() == [1, 0, 2, 0]


def test_draft_errors() -> None:
    with pytest.raises(DataError, match="no column could be drafted; skipped 'id'"):
        draft_schema(pd.DataFrame({"id": ["a", "b", "c"]}), max_values=2)
    with pytest.raises(DataError, match="no rows"):
        draft_schema(pd.DataFrame({"a": []}))
    with pytest.raises(ValueError, match="max_values=1"):
        draft_schema(pd.DataFrame({"a": [1]}), max_values=1)
    with pytest.raises(ValueError, match="bins=0"):
        draft_schema(pd.DataFrame({"a": [1]}), bins=0)


def test_duplicate_source_column_is_rejected() -> None:
    df = pd.DataFrame([[1, 0, 5, 5, 5]], columns=["sex", "sex", "race", "age", "hours"])
    with pytest.raises(DataError, match="more than one column named 'sex'"):
        Dataset.from_dataframe(df, SCHEMA)


@given(
    edges=st.lists(st.integers(-50, 50), min_size=2, max_size=6, unique=True).map(sorted),
    xs=st.lists(st.floats(-60, 60, allow_nan=False), min_size=1, max_size=30),
    clip=st.booleans(),
)
def test_bins_put_each_value_in_its_half_open_bin(
    edges: list[int], xs: list[float], clip: bool
) -> None:
    schema = Schema(attributes=(Attribute(name="x", bins=tuple(edges), clip=clip),))
    inside = all(edges[0] <= x < edges[-1] for x in xs)
    if not (inside or clip):
        with pytest.raises(DataError, match="outside the bins"):
            Dataset.from_dataframe(pd.DataFrame({"x": xs}), schema)
        return
    codes = Dataset.from_dataframe(pd.DataFrame({"x": xs}), schema).column("x")
    for x, c in zip(xs, codes, strict=True):
        lo = -np.inf if clip and c == 0 else edges[c]
        hi = np.inf if clip and c == len(edges) - 2 else edges[c + 1]
        assert lo <= x < hi
