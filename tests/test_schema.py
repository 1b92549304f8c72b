"""The schema format: parsing, derived labels, round trips and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmwcm.data.schema import Attribute, Schema, SchemaError, canonical_value, format_number
from pmwcm.kernels.domain import Domain

EXAMPLE = {
    "name": "example",
    "description": "free text",
    "attributes": [
        {"name": "sex", "values": ["female", "male"]},
        {
            "name": "white",
            "column": "race",
            "values": ["no", "yes"],
            "map": {"no": [1, 2], "yes": 0},
        },
        {"name": "age", "bins": [0, 25, 45, 65, 120], "clip": True},
        {"name": "age>=37", "column": "age", "threshold": 37, "values": ["no", "yes"]},
        {"name": "hours", "threshold": 40.5},
    ],
}


def test_example_parses_to_the_expected_domain() -> None:
    s = Schema.from_json(EXAMPLE)
    d = s.domain()
    assert d.names == ("sex", "white", "age", "age>=37", "hours")
    assert d.shape == (2, 2, 4, 2, 2)
    assert d.values_of("age") == ("[0, 25)", "[25, 45)", "[45, 65)", "[65, 120)")
    assert d.values_of("hours") == ("<40.5", ">=40.5")
    assert s.columns == ("sex", "race", "age", "hours")
    assert [a.kind for a in s.attributes] == ["values", "values", "bins", "threshold", "threshold"]


def test_map_groups_sources_and_scalar_source_is_a_one_item_list() -> None:
    a = Schema.from_json(EXAMPLE).attribute("white")
    assert a.source_codes() == {"1": 0, "2": 0, "0": 1}
    assert dict(a.map or {}) == {"no": ("1", "2"), "yes": ("0",)}


def test_map_is_stored_in_value_order_whatever_the_key_order() -> None:
    a = Attribute(name="a", values=("no", "yes"), map={"yes": ["y"], "no": ["n"]})
    assert list(a.map or {}) == ["no", "yes"]


def test_column_defaults_to_name() -> None:
    assert Attribute(name="sex", values=("f", "m")).column == "sex"


@pytest.mark.parametrize("name", ["example"])
def test_json_round_trip(name: str, tmp_path: Path) -> None:
    s = Schema.from_json(EXAMPLE)
    assert Schema.from_json(json.loads(s.to_json())) == s
    path = tmp_path / f"{name}.json"
    path.write_text(s.to_json())
    assert Schema.from_json(path) == s
    assert Schema.from_json(str(path)) == s


def test_to_json_keeps_integral_numbers_integral_and_omits_defaults() -> None:
    d = json.loads(Schema.from_json(EXAMPLE).to_json())
    assert d["attributes"][2] == {"name": "age", "bins": [0, 25, 45, 65, 120], "clip": True}
    assert d["attributes"][0] == {"name": "sex", "values": ["female", "male"]}


@given(
    edges=st.lists(st.integers(-1000, 1000), min_size=2, max_size=8, unique=True).map(sorted),
    clip=st.booleans(),
)
def test_bins_round_trip_for_any_increasing_edges(edges: list[int], clip: bool) -> None:
    s = Schema(attributes=(Attribute(name="x", bins=tuple(edges), clip=clip),))
    back = Schema.from_json(json.loads(s.to_json()))
    assert back == s
    assert back.domain().sizes == (len(edges) - 1,)


def test_from_domain_reads_back_value_labels() -> None:
    d = Domain.from_values({"sex": ["female", "male"], "age": ["[0, 25)", "[25, 120)"]})
    assert Schema.from_domain(d).domain() == d


def test_attribute_lookup_names_known_attributes() -> None:
    with pytest.raises(KeyError, match=r"'nope'.*'sex'"):
        Schema.from_json(EXAMPLE).attribute("nope")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, "1"),
        (1.0, "1"),
        (np.int64(3), "3"),
        (np.float64(2.0), "2"),
        (0.25, "0.25"),
        (True, "True"),
        (np.bool_(False), "False"),
        ("  Male ", "Male"),
        ("", None),
        ("   ", None),
        (None, None),
        (float("nan"), None),
        ("1.0", "1.0"),
    ],
)
def test_canonical_value(value: object, expected: str | None) -> None:
    assert canonical_value(value) == expected


def test_format_number() -> None:
    assert [format_number(x) for x in (21.0, -3.0, 0.5)] == ["21", "-3", "0.5"]


def _attrs(*attrs: object) -> dict[str, object]:
    return {"attributes": list(attrs)}


BAD = [
    ([], "JSON object, got list"),
    ({"attributes": []}, "at least one attribute"),
    ({"attributes": "x"}, "'attributes' list, got 'x'"),
    ({"attrs": []}, "unknown key 'attrs'"),
    ({"name": 3, "attributes": [{"name": "a", "values": [0]}]}, "name must be a string, got 3"),
    (_attrs("a"), r"attributes\[0\] must be an object, got 'a'"),
    (_attrs({"values": [0, 1]}), r"attributes\[0\]: missing key 'name'"),
    (_attrs({"name": "a", "value": [0, 1]}), "unknown key 'value'"),
    (_attrs({"name": "", "values": [0, 1]}), "non-empty string, got ''"),
    (_attrs({"name": "a"}), "attribute 'a': needs values, bins or threshold"),
    (_attrs({"name": "a", "values": []}), "attribute 'a': needs values"),
    (_attrs({"name": "a", "values": "ab"}), "values must be a list, got 'ab'"),
    (_attrs({"name": "a", "values": [1, 1.0]}), r"must be unique, got duplicates \['1'\]"),
    (_attrs({"name": "a", "values": ["x", ""]}), "must not contain an empty value, got ''"),
    (_attrs({"name": "a", "bins": [0, 1], "threshold": 1}), "only one of bins or threshold"),
    (_attrs({"name": "a", "bins": []}), "bins must be a non-empty list, got"),
    (_attrs({"name": "a", "bins": [3]}), r"at least 2 edges, got \[3\]"),
    (_attrs({"name": "a", "bins": [0, "5"]}), "bin edge must be a number, got '5'"),
    (_attrs({"name": "a", "bins": [0, True]}), "bin edge must be a number, got True"),
    (_attrs({"name": "a", "bins": [0, float("inf")]}), "must be finite, got inf"),
    (_attrs({"name": "a", "bins": [0, 5, 5]}), "must increase, got 5 then 5"),
    (
        _attrs({"name": "a", "bins": [0, 1, 2], "values": ["x"]}),
        r"2 bins need 2 values, got \['x'\]",
    ),
    (_attrs({"name": "a", "threshold": "3"}), "threshold must be a number, got '3'"),
    (_attrs({"name": "a", "threshold": 3, "values": [1, 2, 3]}), "a threshold has 2 values"),
    (_attrs({"name": "a", "threshold": 3, "clip": True}), "clip applies only to bins"),
    (_attrs({"name": "a", "bins": [0, 1], "clip": "yes"}), "clip must be true or false, got 'yes'"),
    (_attrs({"name": "a", "bins": [0, 1], "map": {}}), "map applies only to categorical"),
    (_attrs({"name": "a", "values": [0], "map": [1]}), r"map must be an object, got \[1\]"),
    (_attrs({"name": "a", "values": ["y"], "map": {"n": [0]}}), "map key 'n' is not one of values"),
    (
        _attrs({"name": "a", "values": ["y", "n"], "map": {"y": [0]}}),
        r"no source values for \['n'\]",
    ),
    (
        _attrs({"name": "a", "values": ["y"], "map": {"y": []}}),
        r"map\['y'\] lists no source values",
    ),
    (
        _attrs({"name": "a", "values": ["y", "n"], "map": {"y": [0, 1], "n": [1]}}),
        "source value '1' is mapped twice, to 'y' and 'n'",
    ),
    (_attrs({"name": "a", "values": [0], "description": 5}), "description must be a string, got 5"),
    (
        _attrs({"name": "a", "values": [0]}, {"name": "a", "threshold": 1}),
        r"unique, got duplicates \['a'\]",
    ),
]


@pytest.mark.parametrize(("spec", "message"), BAD)
def test_bad_schema_raises_one_clear_error(spec: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        Schema.from_json(spec)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_missing_schema_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"schema file not found: '.*nope\.json'"):
        Schema.from_json(tmp_path / "nope.json")


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "attributes": [\n    {"name": "a" "values": [0]}\n  ]\n}\n')
    with pytest.raises(SchemaError, match="not valid JSON: Expecting ',' delimiter at line 3"):
        Schema.from_json(path)


def test_schema_of_non_attributes_is_rejected() -> None:
    with pytest.raises(SchemaError, match="must be Attribute objects, got 'a'"):
        Schema(attributes=("a",))  # type: ignore[arg-type]


def test_source_codes_only_for_categorical() -> None:
    with pytest.raises(SchemaError, match="attribute 'a' is bins, not categorical"):
        Attribute(name="a", bins=(0, 1)).source_codes()


def test_a_categorical_of_200000_values_is_parsed_and_its_duplicates_named() -> None:
    """Duplicates are counted in one pass (round 2 counted each value's copies with
    ``list.count``: quadratic, 200,000 values did not finish in 10 minutes)."""
    values = [f"v{i}" for i in range(200_000)]
    binary = {"name": "y", "values": ["no", "yes"]}
    schema = Schema.from_json(
        {"name": "big", "attributes": [{"name": "cat", "values": values}, binary]}
    )
    assert schema.domain().sizes == (200_000, 2)
    with pytest.raises(SchemaError, match=r"unique, got duplicates \['v7', 'v9'\]"):
        Schema.from_json(
            {
                "name": "big",
                "attributes": [{"name": "cat", "values": [*values, "v9", "v7", "v9"]}, binary],
            }
        )
