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

The draft is marked as read from the data (its name ``"draft"`` and
:data:`DRAFT_WARNING`): ``pmwcm run``, ``synth`` and the service refuse it until
a person replaces its value sets and edges with public knowledge and removes
the marks, or accepts the leak with ``--accept-drafted-schema``.
"""

from __future__ import annotations

import functools
import math
import os

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


#: Cell texts that commonly mark a missing value in survey and census files.
MISSING_MARKERS = frozenset(
    {"N", "NA", "N/A", "NaN", "nan", "null", "NULL", "None", "?", "-", ".", "missing"}
)

#: The label a draft gives the extra code of missing cells.
MISSING_LABEL = "missing"


def draft_schema(
    data: pd.DataFrame | str | os.PathLike[str], *, max_values: int = 64, bins: int = 10
) -> Schema:
    """Drafts a schema with one attribute per column of ``data``.

    A column with at most ``max_values`` distinct values becomes categorical
    (numbers sorted numerically, so codes read ``1, 2, ..., 10``, not
    ``1, 10, 2``; text sorted alphabetically). A numeric column with more
    values gets about ``bins`` bins with round edges (steps of 1, 2, 2.5 or 5
    times a power of ten) covering its observed range. Missing cells (empty,
    or a common marker of :data:`MISSING_MARKERS` such as ``N`` or ``NA`` in an
    otherwise numeric column) get the attribute's own ``"missing"`` category
    (``missing`` lists the markers seen, ``missing_label`` is
    :data:`MISSING_LABEL`). A text column with more values is skipped; the
    schema's ``description`` names each skipped column and why.

    Args:
        data: a DataFrame or the path of a CSV file with a header row.
        max_values: the most distinct values a categorical attribute may have.
        bins: about how many bins a many-valued numeric column gets.

    Returns:
        A schema named ``"draft"`` whose description carries
        :data:`DRAFT_WARNING`.

    Raises:
        DataError: if the data cannot be read, has no rows, or no column can be drafted.
        ValueError: if ``max_values < 2`` or ``bins < 1``.

    >>> df = pd.DataFrame({"hours": [*range(0, 99), "N"], "code": ["10", "2", "1", "N"] * 25})
    >>> hours, code = draft_schema(df).attributes
    >>> hours.bins, hours.missing, hours.missing_label
    ((0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0), ('N',), 'missing')
    >>> code.values
    ('1', '2', '10')
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
        has_empty = len(present) < len(values)
        numbers = _as_numbers([v for v in present if v not in MISSING_MARKERS])
        markers = [v for v in present if v in MISSING_MARKERS] if numbers else []
        if numbers and len(numbers) + len(markers) < len(present):
            numbers, markers = {}, []  # a text column that merely contains a marker-like value
        kept = [v for v in present if v not in markers]
        label = _missing_label(kept) if has_empty or markers else None
        rule = functools.partial(Attribute, name=name, missing=tuple(markers), missing_label=label)
        if not kept:
            skipped.append(f"{name!r} (only missing values)")
        elif len(kept) <= max_values:
            order = sorted(kept, key=lambda v: numbers[v]) if numbers else kept
            attrs.append(rule(values=tuple(order)))
        elif numbers:
            attrs.append(rule(bins=round_edges([*numbers.values()], bins)))
        else:
            skipped.append(f"{name!r} ({len(kept)} distinct text values > {max_values})")
    if not attrs:
        raise DataError(f"no column could be drafted; skipped {', '.join(skipped)}.")
    description = DRAFT_WARNING
    if skipped:
        description += SKIPPED + ", ".join(skipped) + "."
    return Schema(attributes=tuple(attrs), name="draft", description=description)


def _missing_label(values: list[str]) -> str:
    """:data:`MISSING_LABEL`, bracketed until it is not one of ``values``."""
    label = MISSING_LABEL
    while label in values:
        label = f"({label})"
    return label


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


def round_edges(xs: list[float], bins: int) -> tuple[float, ...]:
    """About ``bins`` half-open bins with round edges whose range covers every value.

    The step is the smallest of ``{1, 2, 2.5, 5} * 10^k`` that covers the range
    in at most ``bins`` steps; the edges are multiples of it, the first at or
    below the smallest value, the last strictly above the largest.

    >>> round_edges([3, 17, 96], 10)
    (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)
    >>> round_edges([0.013, 0.46], 5)
    (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
    """
    lo, hi = min(xs), max(xs)
    span = max(hi - lo, abs(hi) * 1e-9, 1e-12)
    power = 10.0 ** math.floor(math.log10(span / bins))
    step = next(m * power for m in (1, 2, 2.5, 5, 10, 20) if (hi - lo) / (m * power) < bins)
    first = math.floor(lo / step)
    count = math.floor(hi / step) - first + 1
    # round() strips the float noise of i * step (0.30000000000000004 becomes 0.3)
    digits = max(0, -math.floor(math.log10(step)) + 2)
    return tuple(round((first + i) * step, digits) + 0.0 for i in range(count + 1))


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
