"""Drafting a schema from the data itself -- a starting point, never a release.

:func:`draft_schema` reads each column's value set (or its range, for numeric
columns with many values) FROM the data. Those value sets and edges are
functions of the private data: publishing them, or letting them shape a
release, leaks information that no privacy budget accounts for. Replace them
with public knowledge (a code book, round bin edges) before a private release.

>>> import pandas as pd
>>> s = draft_schema(pd.DataFrame({"y": [1, 0, 1], "city": ["b", "a", "b"]}))
>>> [(a.name, a.values) for a in s.attributes]
[('y', ('0', '1')), ('city', ('a', 'b'))]
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from pmwcm.data.attribute import Attribute, canonical_value
from pmwcm.data.schema import Schema
from pmwcm.data.table import DataError, read_csv_text

SKIPPED = " Skipped columns: "  # how the description lists skipped columns

DRAFT_WARNING = (
    "WARNING: this draft schema was read from the data itself. Its value sets and bin "
    "edges leak information about that data; replace them with public knowledge "
    "(a code book, fixed bin edges) before any private release."
)


def draft_schema(
    data: pd.DataFrame | str | os.PathLike[str], *, max_values: int = 64, bins: int = 10
) -> Schema:
    """Drafts a schema with one attribute per column of ``data``.

    A column with at most ``max_values`` distinct values becomes categorical
    (numbers sorted numerically, so a 0/1 column lists ``0`` then ``1``; text
    sorted alphabetically). A numeric column with more values gets ``bins``
    equal-width bins spanning its observed range. A text column with more
    values, or a column with empty cells, is skipped; the schema's
    ``description`` names each skipped column and why.

    Args:
        data: a DataFrame or the path of a CSV file with a header row.
        max_values: the most distinct values a categorical attribute may have.
        bins: the number of bins of a many-valued numeric column.

    Returns:
        A schema named ``"draft"`` whose description carries
        :data:`DRAFT_WARNING`.

    Raises:
        DataError: if the data cannot be read, has no rows, or no column can be drafted.
        ValueError: if ``max_values < 2`` or ``bins < 1``.
    """
    if max_values < 2:
        raise ValueError(f"max_values must be at least 2, got max_values={max_values}.")
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got bins={bins}.")
    df = data if isinstance(data, pd.DataFrame) else read_csv_text(data)
    if len(df) == 0:
        raise DataError("cannot draft a schema from data with no rows.")
    attrs: list[Attribute] = []
    skipped: list[str] = []
    for col in df.columns:
        name = str(col)
        values = [canonical_value(v) for v in pd.unique(df[col].to_numpy(dtype=object))]
        present = sorted({v for v in values if v is not None})
        if len(present) < len(values):
            skipped.append(f"{name!r} (has empty cells)")
            continue
        numbers = _as_numbers(present)
        if len(present) <= max_values:
            order = sorted(present, key=lambda v: numbers[v]) if numbers else present
            attrs.append(Attribute(name=name, values=tuple(order)))
        elif numbers:
            attrs.append(Attribute(name=name, bins=_edges(list(numbers.values()), bins)))
        else:
            skipped.append(f"{name!r} ({len(present)} distinct text values > {max_values})")
    if not attrs:
        raise DataError(f"no column could be drafted; skipped {', '.join(skipped)}.")
    description = DRAFT_WARNING
    if skipped:
        description += SKIPPED + ", ".join(skipped) + "."
    return Schema(attributes=tuple(attrs), name="draft", description=description)


def _as_numbers(values: list[str]) -> dict[str, float]:
    """``{value: float(value)}`` if every value is a finite number, else ``{}``."""
    out: dict[str, float] = {}
    for v in values:
        try:
            x = float(v)
        except ValueError:
            return {}
        if not math.isfinite(x):
            return {}
        out[v] = x
    return out


def _edges(xs: list[float], bins: int) -> tuple[float, ...]:
    """Equal-width half-open bins whose last edge lies above the largest value."""
    lo, hi = min(xs), max(xs)
    if all(x.is_integer() for x in xs):
        step = math.ceil((hi - lo + 1) / bins)
        return tuple(lo + step * i for i in range(bins + 1))
    edges = np.linspace(lo, hi, bins + 1)
    edges[-1] = np.nextafter(hi, math.inf)
    return tuple(float(e) for e in edges)


#: The name :func:`draft_schema` gives every draft.
DRAFT_NAME = "draft"


def drafted_marks(schema: Schema) -> list[str]:
    """The marks of a drafted schema that ``schema`` still carries (empty if none).

    >>> from pmwcm.data.schema import Schema
    >>> s = Schema.from_json({"name": "draft", "attributes": [{"name": "y", "values": ["0"]}]})
    >>> drafted_marks(s)
    ['its name is "draft"']
    """
    marks = []
    if schema.name == DRAFT_NAME:
        marks.append(f'its name is "{DRAFT_NAME}"')
    if DRAFT_WARNING in schema.description:
        marks.append("its description carries the draft WARNING")
    return marks


def drafted_schema_error(schema: Schema, label: str, accept: str) -> str | None:
    """Why a drafted schema is refused (one line), or ``None`` for a reviewed schema.

    Args:
        schema: the loaded schema.
        label: how to name it in the message, e.g. ``"schema 'draft.json'"``.
        accept: how the user accepts it anyway, e.g. ``"--accept-drafted-schema"``.
    """
    marks = drafted_marks(schema)
    if not marks:
        return None
    return (
        f"{label} was drafted from the data by 'pmwcm schema' ({' and '.join(marks)}): "
        "value sets and bin edges read from the private data leak it, outside any privacy "
        "budget. Replace them with public knowledge (a code book, fixed bin edges) and "
        f"remove the draft marks, or pass {accept} to accept the leak."
    )
