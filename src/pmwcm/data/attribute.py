"""One attribute of a schema: the rule from a source column to integer codes.

See :mod:`pmwcm.data.schema` for the JSON format. An :class:`Attribute` is
categorical (``values``, optionally grouping source values with ``map``),
binned (``bins``: half-open numeric bins with edges from the schema) or a
derived binary (``threshold``).

>>> Attribute(name="age>=37", column="age", threshold=37, values=("no", "yes")).labels
('no', 'yes')
>>> Attribute(name="age", bins=(0, 25, 65, 120)).labels
('[0, 25)', '[25, 65)', '[65, 120)')

Missing values: an empty cell is always missing; ``missing`` lists more
source markers that mean the same (``"N"``, ``"NA"``, ``"-9"``). Without
``missing_label`` a missing cell is an error (the whole table is refused, with
the count of such rows); with it, missing cells get their own last code:

>>> Attribute(name="hours", bins=(0, 40, 100), missing=("N",), missing_label="unknown").labels
('[0, 40)', '[40, 100)', 'unknown')
"""

from __future__ import annotations

import itertools
import math
import types
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

ATTRIBUTE_KEYS = (
    "name",
    "column",
    "description",
    "values",
    "map",
    "bins",
    "threshold",
    "clip",
    "missing",
    "missing_label",
)


#: A finite number written as text, as ``pandas.to_numeric`` reads it (and the SQL
#: path, :mod:`pmwcm.data.sources.sql`); infinities are matched apart.
NUMBER_PATTERN = r"^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"


class SchemaError(ValueError):
    """A schema that cannot be used; the message names the field and the bad value."""


def canonical_value(value: object) -> str | None:
    """The text form under which a source cell is matched against a schema.

    Args:
        value: a cell from a CSV file, a DataFrame or a JSON schema.

    Returns:
        ``None`` for a missing cell (``None``, NaN, an empty or blank string);
        otherwise integral numbers without a fractional part, other numbers via
        ``repr``, booleans as ``"True"``/``"False"``, strings stripped.

    >>> canonical_value(1.0), canonical_value(" Male "), canonical_value(""), canonical_value(0.5)
    ('1', 'Male', None, '0.5')
    """
    if value is None:
        return None
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        x = float(value)
        if math.isnan(x):
            return None
        return str(int(x)) if x.is_integer() else repr(x)
    if isinstance(value, str):
        return value.strip() or None
    text = str(value).strip()  # pandas' NA and NaT print as "<NA>" and "NaT"
    return None if text in ("", "<NA>", "NaT", "nan") else text


def format_number(x: float) -> str:
    """Writes a bin edge or threshold without a trailing ``.0``.

    >>> format_number(21.0), format_number(0.25)
    ('21', '0.25')
    """
    return str(int(x)) if math.isfinite(x) and float(x).is_integer() else repr(float(x))


def _number(value: object, what: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise SchemaError(f"{what} must be a number, got {value!r}.")
    x = float(value)
    if not math.isfinite(x):
        raise SchemaError(f"{what} must be finite, got {value!r}.")
    return x


def _labels(values: Sequence[object], what: str) -> tuple[str, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise SchemaError(f"{what} must be a list, got {values!r}.")
    out = []
    for v in values:
        c = canonical_value(v)
        if c is None:
            raise SchemaError(f"{what} must not contain an empty value, got {v!r}.")
        out.append(c)
    counted = Counter(out)  # one pass: a categorical can have 10^6 values
    dupes = sorted(v for v, times in counted.items() if times > 1)
    if dupes:
        raise SchemaError(f"{what} must be unique, got duplicates {dupes}.")
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Attribute:
    """One output attribute and the rule that computes it from a source column.

    Attributes:
        name: the attribute's name in the :class:`Domain`.
        column: the source column (defaults to ``name``).
        values: categorical values in code order; for bins and thresholds the
            optional labels of the codes.
        map: ``{output value: source values}`` for a categorical attribute that
            groups source values; ``None`` when the source values are ``values``.
        bins: bin edges ``e_0 < ... < e_k`` of a numeric attribute.
        threshold: ``t`` of a derived binary (code 1 iff the number is ``>= t``).
        clip: whether numbers outside the bins join the first or last bin.
        missing: source markers that mean "missing" besides an empty cell
            (compared as canonical text, like ``values``).
        missing_label: the label of a last, extra code that every missing cell
            (empty or a ``missing`` marker) gets; ``None`` refuses missing cells.
        description: free text (provenance, decodings).

    Raises:
        SchemaError: if the rule is ambiguous or inconsistent.

    >>> Attribute(name="white", column="race", values=("no", "yes"),
    ...           map={"no": [1, 2, 3, 4], "yes": [0]}).source_codes()
    {'1': 0, '2': 0, '3': 0, '4': 0, '0': 1}
    """

    name: str
    column: str = ""
    values: tuple[str, ...] = ()
    map: Mapping[str, Sequence[object]] | None = None
    bins: tuple[float, ...] = ()
    threshold: float | None = None
    clip: bool = False
    missing: tuple[str, ...] = ()
    missing_label: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SchemaError(f"attribute name must be a non-empty string, got {self.name!r}.")
        where = f"attribute {self.name!r}"
        column = self.column if self.column != "" else self.name
        if not isinstance(column, str) or not column:
            raise SchemaError(f"{where}: column must be a non-empty string, got {column!r}.")
        object.__setattr__(self, "column", column)
        if not isinstance(self.description, str):
            raise SchemaError(f"{where}: description must be a string, got {self.description!r}.")
        if self.bins and self.threshold is not None:
            raise SchemaError(f"{where}: give only one of bins or threshold, got both.")
        rule = self.kind
        values = _labels(self.values, f"{where}: values")
        object.__setattr__(self, "values", values)
        if not isinstance(self.clip, bool):
            raise SchemaError(f"{where}: clip must be true or false, got {self.clip!r}.")
        if self.clip and not self.bins:
            raise SchemaError(f"{where}: clip applies only to bins, got clip={self.clip!r}.")
        if self.map is not None and rule != "values":
            raise SchemaError(f"{where}: map applies only to categorical values, not {rule}.")
        if rule == "values":
            self._check_values(where)
        elif rule == "bins":
            self._check_bins(where)
        else:
            t = _number(self.threshold, f"{where}: threshold")
            object.__setattr__(self, "threshold", t)
            if values and len(values) != 2:
                raise SchemaError(f"{where}: a threshold has 2 values, got {list(values)}.")
        self._check_missing(where)

    def _check_missing(self, where: str) -> None:
        markers = _labels(self.missing, f"{where}: missing")
        object.__setattr__(self, "missing", markers)
        label = self.missing_label
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise SchemaError(
                f"{where}: missing_label must be a non-empty string or absent, got {label!r}."
            )
        if label is not None:
            object.__setattr__(self, "missing_label", label.strip())
        if self.kind == "values":
            sources = set(self.source_codes())
            clash = [m for m in markers if m in sources]
            if clash:
                raise SchemaError(
                    f"{where}: missing marker {clash[0]!r} is also a source value; a cell "
                    "cannot be both."
                )
        if self.missing_label is not None and self.missing_label in self._rule_labels():
            raise SchemaError(
                f"{where}: missing_label {self.missing_label!r} is already a label of "
                f"{list(self._rule_labels())}."
            )

    def _check_values(self, where: str) -> None:
        if not self.values:
            raise SchemaError(f"{where}: needs values, bins or threshold, got none.")
        if self.map is None:
            return
        if not isinstance(self.map, Mapping):
            raise SchemaError(f"{where}: map must be an object, got {self.map!r}.")
        groups: dict[str, tuple[str, ...]] = {}
        seen: dict[str, str] = {}
        for key, sources in self.map.items():
            out = canonical_value(key)
            if out not in self.values:
                raise SchemaError(
                    f"{where}: map key {key!r} is not one of values {list(self.values)}."
                )
            if not isinstance(sources, Sequence) or isinstance(sources, str):
                sources = [sources]
            srcs = _labels(sources, f"{where}: map[{key!r}]")
            if not srcs:
                raise SchemaError(f"{where}: map[{key!r}] lists no source values.")
            for s in srcs:
                if s in seen:
                    raise SchemaError(
                        f"{where}: source value {s!r} is mapped twice, to {seen[s]!r} and {out!r}."
                    )
                seen[s] = out
            groups[out] = srcs
        missing = [v for v in self.values if v not in groups]
        if missing:
            raise SchemaError(f"{where}: map gives no source values for {missing}.")
        ordered = {v: groups[v] for v in self.values}
        object.__setattr__(self, "map", types.MappingProxyType(ordered))

    def _check_bins(self, where: str) -> None:
        if isinstance(self.bins, str) or not isinstance(self.bins, Sequence):
            raise SchemaError(f"{where}: bins must be a list of numbers, got {self.bins!r}.")
        edges = tuple(_number(e, f"{where}: bin edge") for e in self.bins)
        if len(edges) < 2:
            raise SchemaError(f"{where}: bins need at least 2 edges, got {list(self.bins)}.")
        for lo, hi in itertools.pairwise(edges):
            if not lo < hi:
                raise SchemaError(
                    f"{where}: bin edges must increase, got {format_number(lo)} "
                    f"then {format_number(hi)}."
                )
        object.__setattr__(self, "bins", edges)
        if self.values and len(self.values) != len(edges) - 1:
            raise SchemaError(
                f"{where}: {len(edges) - 1} bins need {len(edges) - 1} values, "
                f"got {list(self.values)}."
            )

    @property
    def kind(self) -> Literal["values", "bins", "threshold"]:
        """Which rule computes this attribute."""
        if self.bins:
            return "bins"
        return "values" if self.threshold is None else "threshold"

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels of codes ``0..size-1``: the rule's, then ``missing_label`` if set."""
        extra = () if self.missing_label is None else (self.missing_label,)
        return self._rule_labels() + extra

    @property
    def missing_code(self) -> int | None:
        """The code of a missing cell (the last one), or ``None`` if missing cells are refused."""
        return None if self.missing_label is None else len(self._rule_labels())

    def _rule_labels(self) -> tuple[str, ...]:
        """The labels the rule itself gives (explicit ``values`` or derived)."""
        if self.values:
            return self.values
        if self.threshold is not None:
            t = format_number(self.threshold)
            return (f"<{t}", f">={t}")
        e = [format_number(x) for x in self.bins]
        return tuple(f"[{lo}, {hi})" for lo, hi in itertools.pairwise(e))

    @property
    def size(self) -> int:
        """``s_i``, the number of codes."""
        return len(self.labels)

    def source_codes(self) -> dict[str, int]:
        """For a categorical attribute, ``{canonical source value: code}``.

        Raises:
            SchemaError: for a bins or threshold attribute.
        """
        if self.kind != "values":
            raise SchemaError(f"attribute {self.name!r} is {self.kind}, not categorical.")
        if self.map is None:
            return {v: i for i, v in enumerate(self.values)}
        index = {v: i for i, v in enumerate(self.values)}
        return {str(s): index[str(out)] for out, srcs in self.map.items() for s in srcs}

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this attribute (``column`` only when it differs from ``name``)."""
        d: dict[str, Any] = {"name": self.name}
        if self.column != self.name:
            d["column"] = self.column
        if self.description:
            d["description"] = self.description
        if self.bins:
            d["bins"] = [_json_number(e) for e in self.bins]
        if self.threshold is not None:
            d["threshold"] = _json_number(self.threshold)
        if self.values:
            d["values"] = list(self.values)
        if self.map is not None:
            d["map"] = {k: list(v) for k, v in self.map.items()}
        if self.clip:
            d["clip"] = True
        if self.missing:
            d["missing"] = list(self.missing)
        if self.missing_label is not None:
            d["missing_label"] = self.missing_label
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str = "attribute") -> Attribute:
        """Reads one attribute object of the JSON format (unknown keys are errors)."""
        if not isinstance(d, Mapping):
            raise SchemaError(f"{where} must be an object, got {d!r}.")
        unknown = [k for k in d if k not in ATTRIBUTE_KEYS]
        if unknown:
            raise SchemaError(
                f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(ATTRIBUTE_KEYS)})."
            )
        if "name" not in d:
            raise SchemaError(f"{where}: missing key 'name'.")
        bins = d.get("bins", ())
        if "bins" in d and (isinstance(bins, str) or not isinstance(bins, Sequence) or not bins):
            raise SchemaError(f"{where}: bins must be a non-empty list, got {bins!r}.")
        return cls(
            name=d["name"],
            column=d.get("column", ""),
            values=d.get("values", ()),
            map=d.get("map"),
            bins=tuple(bins),
            threshold=d.get("threshold"),
            clip=d.get("clip", False),
            missing=d.get("missing", ()),
            missing_label=d.get("missing_label"),
            description=d.get("description", ""),
        )


def _json_number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)
