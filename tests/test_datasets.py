"""The bundled Adult data and its two schemas."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from pmwcm.data.bundled import adult_schema, list_schemas, load_adult
from pmwcm.data.schema import Schema, SchemaError
from pmwcm.data.table import Dataset

DATA = resources.files("pmwcm.data.bundled").joinpath("files")


def _raw_domain() -> dict[str, int]:
    sizes: dict[str, int] = json.loads(DATA.joinpath("adult-domain.json").read_text())
    return sizes


def test_list_and_names() -> None:
    assert list_schemas() == ("adult-binary", "adult-categorical", "adult-full")
    assert adult_schema("binary") == adult_schema("adult-binary")
    assert adult_schema() is adult_schema("binary")
    with pytest.raises(SchemaError, match=r"unknown bundled schema 'tiny'; choose one of \["):
        adult_schema("tiny")


def test_sizes_of_the_bundled_universes() -> None:
    binary = adult_schema("binary").domain()
    assert binary.size == 2**14 and len(binary) == 14
    assert all(v == ("no", "yes") for v in binary.values)
    categorical = adult_schema("categorical").domain()
    assert categorical.size == 1_228_800 <= 2**22
    assert f"{categorical.size:,}" in adult_schema("categorical").description
    assert "2^14" in adult_schema("binary").description


@pytest.mark.parametrize("name", ["adult-binary", "adult-categorical"])
def test_load_adult(name: str) -> None:
    ds = load_adult(name)
    assert ds.n == 48_842
    assert ds.domain == adult_schema(name).domain()
    assert load_adult(name) is ds  # cached: the records are read-only


def test_binary_marginals_match_the_published_uci_counts() -> None:
    ds = load_adult()
    counts = {name: int(ds.column(name).sum()) for name in ds.domain.names}
    # UCI Adult, 48,842 records: 11,687 above 50K, 32,650 male, 41,762 white,
    # 22,379 married-civ-spouse, 19,716 husbands, 33,906 private, 43,832 US-born.
    assert counts["income>50K"] == 11_687
    assert counts["male"] == 32_650
    assert counts["white"] == 41_762
    assert counts["married"] == 22_379
    assert counts["husband"] == 19_716
    assert counts["workclass-private"] == 33_906
    assert counts["native-us"] == 43_832
    # white collar: Tech-support + Sales + Exec-managerial + Prof-specialty + Adm-clerical
    assert counts["white-collar"] == 1_446 + 5_504 + 6_086 + 6_172 + 5_611


def test_every_public_code_is_covered_by_every_bundled_schema() -> None:
    """The schemas come from the public code book: every code in the domain file encodes."""
    sizes = _raw_domain()
    m = max(sizes.values())
    df = pd.DataFrame({c: np.arange(m) % s for c, s in sizes.items()})
    for name in list_schemas():
        ds = Dataset.from_dataframe(df, adult_schema(name))
        assert ds.n == m


def test_thresholds_sit_where_the_decodings_say() -> None:
    s = adult_schema("binary")
    # age code = age - 16, education-num code = years - 1, hours code = hours - 1
    assert s.attribute("age>=37").threshold == 37 - 16
    assert s.attribute("education-num>=10").threshold == 10 - 1
    assert s.attribute("hours>=40").threshold == 40 - 1
    assert s.attribute("fnlwgt>=median").threshold == 11


def test_load_adult_with_a_custom_schema() -> None:
    schema = Schema.from_json({"attributes": [{"name": "sex", "values": [0, 1]}]})
    ds = load_adult(schema)
    assert ds.domain.names == ("sex",) and ds.n == 48_842


def test_data_files_and_notice_ship_with_the_package() -> None:
    names = {p.name for p in DATA.iterdir()}
    expected = {"adult.csv", "adult-domain.json", "NOTICE.md"}
    assert expected | {f"{n}.schema.json" for n in list_schemas()} <= names
    notice = DATA.joinpath("NOTICE.md").read_text()
    for needle in ("CC BY 4.0", "Apache License 2.0", "Becker", "Kohavi", "private-pgm"):
        assert needle in notice
    header = DATA.joinpath("adult.csv").read_text().splitlines()[0].split(",")
    assert header == list(_raw_domain())
