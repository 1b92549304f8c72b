"""CMQuery.from_dict checks JSON types: a wrong type is a QueryError naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from pmwcm.kernels.queries import CMQuery, QueryError

BASE: dict[str, Any] = {"loss": "logistic", "target": "y", "features": ["a", "b"]}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("intercept", "no"),
        ("intercept", 1),
        ("radius", True),
        ("radius", "1.0"),
        ("l2", None),
        ("loss", ["logistic"]),
        ("target", 3),
        ("features", "a"),
        ("features", [["a"]]),
        ("loss_param", "0.5"),
        ("encodings", ["a"]),
        ("encodings", {"a": 1}),
    ],
)
def test_wrong_json_type_is_a_query_error_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(QueryError, match=field):
        CMQuery.from_dict({**BASE, field: value})


def test_well_typed_spec_round_trips() -> None:
    spec = {**BASE, "radius": 2, "l2": 0.5, "intercept": False, "loss_param": None}
    query = CMQuery.from_dict(spec)
    assert CMQuery.from_dict(query.to_dict()) == query
