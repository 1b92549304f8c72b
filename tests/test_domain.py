"""Contract tests for the frozen :class:`~pmwcm.kernels.domain.Domain` value type."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmwcm.kernels.domain import Domain

SETTINGS = settings(derandomize=True, deadline=None, max_examples=60)


def test_from_sizes_shape_size_and_default_labels() -> None:
    d = Domain.from_sizes({"sex": 2, "age": 3, "one": 1})
    assert d.names == ("sex", "age", "one")
    assert d.shape == d.sizes == (2, 3, 1)
    assert d.size == 6
    assert len(d) == 3
    assert d.values == (("0", "1"), ("0", "1", "2"), ("0",))
    assert d.log_size == pytest.approx(math.log(6), rel=1e-15)


def test_from_values_keeps_labels_as_strings() -> None:
    d = Domain.from_values({"sex": ["F", "M"], "bin": [0, 1, 2.5]})
    assert d.sizes == (2, 3)
    assert d.values_of("sex") == ("F", "M")
    assert d.values_of("bin") == ("0", "1", "2.5")


def test_lookup_methods() -> None:
    d = Domain.from_sizes({"a": 2, "b": 3, "c": 4})
    assert d.index("c") == 2
    assert d.axes(["c", "a"]) == (2, 0)
    assert d.axes([]) == ()
    assert d.size_of("b") == 3
    assert d.sizes_of(["c", "a"]) == (4, 2) and d.sizes_of(("b",)) == (3,)
    assert d.sizes_of([]) == ()
    assert "b" in d
    assert "z" not in d


def test_unknown_attribute_raises_keyerror_listing_the_domain() -> None:
    d = Domain.from_sizes({"a": 2, "b": 3})
    with pytest.raises(KeyError, match=r"'zz'.*\['a', 'b'\]"):
        d.index("zz")
    with pytest.raises(KeyError, match="zz"):
        d.axes(["a", "zz"])
    with pytest.raises(KeyError, match="zz"):
        d.project(["zz"])
    with pytest.raises(KeyError, match=r"'zz'.*\['a', 'b'\]"):
        d.sizes_of(("a", "zz"))


def test_lookups_refuse_what_is_not_an_attribute_name_and_read_iterators_once() -> None:
    d = Domain.from_sizes({"a": 2, "b": 3})
    assert ["a"] not in d  # unhashable: no attribute, not a TypeError
    for lookup in (d.index, d.size_of):
        with pytest.raises(KeyError, match=r"\['a'\]"):
            lookup(["a"])  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="zz"):
        d.axes(name for name in ("b", "zz"))
    assert d.axes(name for name in ("b", "a")) == (1, 0)
    assert d.sizes_of(name for name in ("b", "a")) == (3, 2)
    with pytest.raises(KeyError, match="zz"):
        d.sizes_of(name for name in ("b", "zz"))
    with pytest.raises(KeyError, match=r"\['a'\]"):
        d.sizes_of([["a"]])  # type: ignore[list-item]
    assert dataclasses.replace(d, names=("b", "a")).index("b") == 0  # the look-up is rebuilt


def test_project_keeps_the_given_order_sizes_and_labels() -> None:
    d = Domain.from_values({"a": ["x", "y"], "b": ["p", "q", "r"], "c": ["u"]})
    sub = d.project(["b", "a"])
    assert sub.names == ("b", "a")
    assert sub.sizes == (3, 2)
    assert sub.values == (("p", "q", "r"), ("x", "y"))
    assert d.project([]).size == 1


def test_is_frozen_hashable_and_compared_by_value() -> None:
    d = Domain.from_sizes({"a": 2, "b": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.names = ("x", "y")  # type: ignore[misc]
    same = Domain(names=("a", "b"), sizes=(2, 3), values=(("0", "1"), ("0", "1", "2")))
    assert d == same
    assert hash(d) == hash(same)
    assert d != Domain.from_sizes({"b": 3, "a": 2})


def test_lists_are_normalised_to_tuples() -> None:
    d = Domain(names=["a", "b"], sizes=[2, 3])  # type: ignore[arg-type]
    assert d.names == ("a", "b")
    assert d.sizes == (2, 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"names": ("a", "b"), "sizes": (2,)}, r"2 names and 1 sizes"),
        ({"names": ("a", "b", "a"), "sizes": (2, 2, 2)}, r"duplicates \['a'\]"),
        ({"names": ("",), "sizes": (2,)}, r"got ''"),
        ({"names": (3,), "sizes": (2,)}, r"got 3"),
        ({"names": ("a",), "sizes": (0,)}, r"'a'.*size=0"),
        ({"names": ("a",), "sizes": (-2,)}, r"size=-2"),
        ({"names": ("a", "b"), "sizes": (2, 2), "values": (("x", "y"),)}, r"1 lists for 2"),
        ({"names": ("a",), "sizes": (2,), "values": (("x", "y", "z"),)}, r"'a' has size 2.*'z'"),
    ],
)
def test_validation_errors_quote_the_bad_value(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Domain(**kwargs)  # type: ignore[arg-type]


@SETTINGS
@given(st.lists(st.integers(1, 6), min_size=0, max_size=6))
def test_size_and_log_size_agree(sizes: list[int]) -> None:
    d = Domain.from_sizes({f"a{i}": s for i, s in enumerate(sizes)})
    assert d.size == math.prod(sizes)
    assert d.log_size == pytest.approx(math.log(d.size), abs=1e-12)
    assert all(d.size_of(f"a{i}") == s for i, s in enumerate(sizes))
    perm = list(reversed(d.names))
    assert d.project(perm).size == d.size
    assert d.project(perm).project(d.names) == d
