"""From a raw CSV to a schema (issue 17): missing values, number spellings, separators, drafts."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from pmwcm.data.schema import Attribute, Schema, SchemaError
from pmwcm.data.table import DataError, Dataset


def _frame(csv: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(csv), dtype=str, keep_default_na=False)


def test_marker_and_empty_cell_get_the_missing_category_for_bins() -> None:
    schema = Schema.from_json(
        {"attributes": [{"name": "hours", "bins": [0, 40, 100], "missing": ["N", "NA"],
                         "missing_label": "unknown"}]}
    )  # fmt: skip
    ds = Dataset.from_dataframe(_frame("id,hours\n1,10\n2,N\n3,\n4,50\n5,NA\n"), schema)
    assert ds.domain.values_of("hours") == ("[0, 40)", "[40, 100)", "unknown")
    assert ds.records[:, 0].tolist() == [0, 2, 2, 1, 2]


def test_missing_category_for_values_with_map_and_threshold() -> None:
    schema = Schema.from_json(
        {"attributes": [
            {"name": "sex", "values": ["f", "m"], "missing": ["?"], "missing_label": "n/a"},
            {"name": "old", "column": "age", "threshold": 65, "missing_label": "unknown"},
            {"name": "grp", "values": ["a", "b"], "map": {"a": [1, 2], "b": [3]},
             "missing": [-9], "missing_label": "none"},
        ]}
    )  # fmt: skip
    ds = Dataset.from_dataframe(_frame("sex,age,grp\nf,70,1\n?,,-9\nm,20,3\n"), schema)
    assert ds.records.tolist() == [[0, 1, 0], [2, 2, 2], [1, 0, 1]]
    assert schema.domain().sizes == (3, 3, 3)


def test_without_a_label_missing_rows_are_refused_with_their_count() -> None:
    schema = Schema.from_json({"attributes": [{"name": "hours", "bins": [0, 100],
                                               "missing": ["N"]}]})  # fmt: skip
    with pytest.raises(DataError, match=r"row 1: missing value .*2 row\(s\).*missing_label"):
        Dataset.from_dataframe(_frame("id,hours\n1,1\n2,N\n3,\n"), schema)


def test_a_marker_is_not_read_as_a_number() -> None:
    schema = Schema.from_json({"attributes": [{"name": "x", "bins": [0, 10]}]})
    with pytest.raises(DataError, match=r"a value that is not a number.*\"missing\""):
        Dataset.from_dataframe(_frame("x\n1\nN\n"), schema)


@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "Infinity"])
@pytest.mark.parametrize(
    "rule", [{"threshold": 5}, {"bins": [0, 10], "clip": True}, {"bins": [0, 10]}]
)
def test_non_finite_numbers_are_refused_alike_for_bins_and_thresholds(
    cell: str, rule: dict[str, object]
) -> None:
    schema = Schema.from_json({"attributes": [{"name": "x", **rule}]})
    with pytest.raises(DataError, match=r"a value that is not a (finite )?number"):
        Dataset.from_dataframe(_frame(f"x\n1\n{cell}\n"), schema)


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ({"name": "s", "values": ["a", "N"], "missing": ["N"]}, "marker 'N' is also a source"),
        ({"name": "s", "values": ["a"], "missing_label": "a"}, "missing_label 'a' is already"),
        ({"name": "s", "values": ["a"], "missing_label": ""}, "missing_label must be"),
        ({"name": "s", "values": ["a"], "missing": "N"}, "missing must be a list"),
        ({"name": "s", "values": ["a"], "missing": [""]}, "must not contain an empty value"),
    ],
)
def test_bad_missing_rules_are_refused_in_one_line(
    attribute: dict[str, object], message: str
) -> None:
    with pytest.raises(SchemaError, match=message):
        Schema.from_json({"attributes": [attribute]})


def test_missing_fields_round_trip_through_json() -> None:
    a = Attribute(name="h", bins=(0, 1), missing=("N",), missing_label="unknown")
    assert Attribute.from_dict(a.to_dict()) == a
    assert a.to_dict()["missing"] == ["N"] and a.missing_code == 1
    assert Attribute(name="h", bins=(0, 1)).missing_code is None


def test_a_csv_number_written_as_1_0_reads_as_the_schema_value_1(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("y,z\n1.0,a\n0,a\n1e0,a\n")
    schema = Schema.from_json({"attributes": [{"name": "y", "values": [0, 1]}]})
    assert Dataset.from_csv(path, schema).records[:, 0].tolist() == [1, 0, 1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a;b\n1;2\n", "looks semicolon-separated"),
        ("a\tb\n1\t2\n", "looks tab-separated"),
        ("a,b,a\n1,2,3\n", "names column 'a' twice \\(columns 1 and 3\\)"),
        ("a, b,b \n1,2,3\n", "names column 'b' twice"),
    ],
)
def test_other_separators_and_repeated_headers_are_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    from pmwcm.data.schema_draft import draft_schema

    path = tmp_path / "d.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        draft_schema(path)
    with pytest.raises(DataError, match=message):
        Dataset.from_csv(path, Schema.from_json({"attributes": [{"name": "a", "bins": [0, 9]}]}))


def test_draft_of_a_raw_survey_file_orders_codes_and_keeps_numbers_with_markers(
    tmp_path: Path,
) -> None:
    rows = [f"{i % 12 + 1},{i % 97 if i % 9 else 'N'},{'' if i % 13 == 0 else 'ab'[i % 2]}"
            for i in range(300)]  # fmt: skip
    path = tmp_path / "survey.csv"
    path.write_text("code,hours,group\n" + "\n".join(rows) + "\n")
    from pmwcm.data.schema_draft import draft_schema

    code, hours, group = draft_schema(path).attributes
    assert code.values == tuple(str(i) for i in range(1, 13))  # numerically, not 1, 10, 11, 2
    assert hours.bins == tuple(float(e) for e in range(0, 101, 10))  # round edges
    assert (hours.missing, hours.missing_label) == (("N",), "missing")
    assert group.labels == ("a", "b", "missing")
    assert Dataset.from_csv(path, draft_schema(path)).n == 300
