"""Schemas: how the columns of a table become the attributes of a :class:`Domain`.

A schema is a small JSON document, written from public knowledge (a code
book, fixed bin edges), never from the private data itself::

    {
      "name": "example",
      "description": "optional free text",
      "attributes": [
        {"name": "sex", "values": ["female", "male"]},
        {"name": "white", "column": "race", "values": ["no", "yes"],
         "map": {"no": [1, 2, 3, 4], "yes": [0]}},
        {"name": "age", "bins": [0, 25, 45, 65, 120], "clip": true},
        {"name": "age>=37", "column": "age", "threshold": 37, "values": ["no", "yes"]},
        {"name": "hours", "bins": [0, 20, 40, 60, 100], "missing": ["N", "NA"],
         "missing_label": "unknown"}
      ]
    }

Each attribute has an output ``name``, a source ``column`` (defaults to the
name), an optional ``description``, and exactly one rule:

* ``"values": [...]`` -- categorical. Without ``map`` the source cells must be
  one of these values; the ``i``-th value becomes code ``i``. With
  ``"map": {output value: [source values]}`` several source values are grouped
  into one output value; every output value needs at least one source value,
  and a source value may appear only once.
* ``"bins": [e_0, ..., e_k]`` -- numeric, ``k`` half-open bins
  ``[e_0, e_1), ..., [e_{k-1}, e_k)``. A value outside ``[e_0, e_k)`` is an
  error unless ``"clip": true`` (then it joins the first or last bin).
  ``values`` may name the ``k`` bins; the default labels are ``"[e_0, e_1)"``.
* ``"threshold": t`` -- a derived binary: code 0 if the number is ``< t``,
  code 1 if ``>= t``. ``values`` may name the two codes (default
  ``["<t", ">=t"]``).

Missing values: an empty cell is missing, and so is any source value listed in
the attribute's ``"missing"`` (e.g. ``["N", "NA", -9]``). With
``"missing_label": "unknown"`` every missing cell gets its own last code, so
the attribute has one more value; without it a missing cell is an error that
refuses the whole table and counts the rows concerned.

Source values are compared as text: strings are stripped of surrounding
blanks; numbers from a DataFrame or the schema are written without a trailing
``.0`` (``1.0`` and ``1`` both read ``"1"``), but a CSV cell is read as the text
it holds, so a CSV ``1.0`` does NOT match a value ``1`` (use bins or a
threshold for numbers written in several ways). Numbers for bins and
thresholds must be finite (``inf`` and ``nan`` are refused alike).
For a binary attribute the value listed second is ``+1`` in model encodings,
so list ``"no"`` before ``"yes"``.

>>> s = Schema.from_json({"attributes": [
...     {"name": "sex", "values": ["female", "male"]},
...     {"name": "age>=37", "column": "age", "threshold": 37, "values": ["no", "yes"]},
...     {"name": "age", "bins": [0, 25, 45, 65, 120]}]})
>>> s.domain().shape
(2, 2, 4)
>>> s.domain().values_of("age")
('[0, 25)', '[25, 45)', '[45, 65)', '[65, 120)')
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pmwcm.data.attribute import Attribute, SchemaError, canonical_value, format_number
from pmwcm.kernels.domain import Domain

__all__ = ["Attribute", "Schema", "SchemaError", "canonical_value", "format_number"]

_SCHEMA_KEYS = ("name", "description", "attributes")


@dataclass(frozen=True, kw_only=True)
class Schema:
    """An ordered list of attributes: the recipe from a table to a :class:`Domain`.

    Attributes:
        attributes: the output attributes, in axis order.
        name: a short identifier (e.g. ``"adult-binary"``).
        description: free text (provenance, how the edges were chosen).

    Raises:
        SchemaError: on an empty or duplicated attribute list.
    """

    attributes: tuple[Attribute, ...]
    name: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", tuple(self.attributes))
        self.validate()

    def validate(self) -> None:
        """Checks the whole schema; raises :class:`SchemaError` naming the bad field and value."""
        if not self.attributes:
            raise SchemaError("schema needs at least one attribute, got none.")
        for a in self.attributes:
            if not isinstance(a, Attribute):
                raise SchemaError(f"schema attributes must be Attribute objects, got {a!r}.")
        names = [a.name for a in self.attributes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"schema attribute names must be unique, got duplicates {dupes}.")

    @property
    def names(self) -> tuple[str, ...]:
        """The output attribute names, in axis order."""
        return tuple(a.name for a in self.attributes)

    @property
    def columns(self) -> tuple[str, ...]:
        """The distinct source columns the schema reads, in first-use order."""
        return tuple(dict.fromkeys(a.column for a in self.attributes))

    def attribute(self, name: str) -> Attribute:
        """The attribute called ``name`` (``KeyError`` naming the known ones if absent)."""
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(f"Unknown attribute {name!r}; the schema has {list(self.names)}.")

    def domain(self) -> Domain:
        """The data universe: one axis per attribute, labelled with its values."""
        return Domain(
            names=self.names,
            sizes=tuple(a.size for a in self.attributes),
            values=tuple(a.labels for a in self.attributes),
        )

    @classmethod
    def from_domain(cls, domain: Domain, *, name: str = "") -> Schema:
        """The schema that reads back a table of ``domain``'s value labels (e.g. synthetic data).

        >>> Schema.from_domain(Domain.from_values({"sex": ["female", "male"]})).domain().values
        (('female', 'male'),)
        """
        attrs = tuple(
            Attribute(name=n, values=v) for n, v in zip(domain.names, domain.values, strict=True)
        )
        return cls(attributes=attrs, name=name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this schema."""
        d: dict[str, Any] = {}
        if self.name:
            d["name"] = self.name
        if self.description:
            d["description"] = self.description
        d["attributes"] = [a.to_dict() for a in self.attributes]
        return d

    def to_json(self, *, indent: int = 2) -> str:
        """The schema as JSON text; ``Schema.from_json(json.loads(s.to_json())) == s``."""
        return _dumps(self.to_dict(), indent, 0) + "\n"

    @classmethod
    def from_json(cls, source: str | os.PathLike[str] | Mapping[str, Any]) -> Schema:
        """Reads a schema from a JSON file path or an already-parsed JSON object.

        Raises:
            SchemaError: if the file is missing or unreadable, is not JSON, or
                breaks the format (the message names the key and the value).
        """
        if not isinstance(source, str | os.PathLike):
            return cls._from_dict(source)
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SchemaError(f"schema file not found: '{path}'.") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SchemaError(f"cannot read schema file '{path}': {exc}.") from None
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(
                f"schema file '{path}' is not valid JSON: {exc.msg} at line {exc.lineno} "
                f"column {exc.colno}."
            ) from None
        return cls._from_dict(obj)

    @classmethod
    def _from_dict(cls, d: object) -> Schema:
        if not isinstance(d, Mapping):
            raise SchemaError(f"schema must be a JSON object, got {type(d).__name__}.")
        unknown = [k for k in d if k not in _SCHEMA_KEYS]
        if unknown:
            raise SchemaError(
                f"schema: unknown key {unknown[0]!r} (allowed: {', '.join(_SCHEMA_KEYS)})."
            )
        attrs = d.get("attributes")
        if not isinstance(attrs, list):
            raise SchemaError(f"schema needs an 'attributes' list, got {attrs!r}.")
        for key in ("name", "description"):
            if not isinstance(d.get(key, ""), str):
                raise SchemaError(f"schema {key} must be a string, got {d[key]!r}.")
        return cls(
            attributes=tuple(
                Attribute.from_dict(a, where=f"attributes[{i}]") for i, a in enumerate(attrs)
            ),
            name=d.get("name", ""),
            description=d.get("description", ""),
        )


def _dumps(obj: object, indent: int, level: int) -> str:
    """JSON with one key per line but lists of plain values kept on one line."""
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, indent, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, dict | list) for v in obj):
        items = [inner + _dumps(v, indent, level + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)
