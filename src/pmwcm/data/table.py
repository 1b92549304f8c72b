"""Datasets: ``n`` records of integer codes over a :class:`Domain`.

A :class:`Dataset` is built from a CSV file or a pandas DataFrame through a
:class:`~pmwcm.data.schema.Schema`, which says which columns to read and how each
becomes codes ``0..s_i-1``. Every bad input (missing file or column, unknown
value, number outside the bins, empty table) raises :class:`DataError` with one
message naming the column, the row and the value.

>>> import pandas as pd
>>> from pmwcm.data.schema import Schema
>>> schema = Schema.from_json({"attributes": [
...     {"name": "sex", "values": ["female", "male"]},
...     {"name": "age", "bins": [0, 40, 120]}]})
>>> ds = Dataset.from_dataframe(pd.DataFrame({"sex": ["male", "female"], "age": [37, 52]}), schema)
>>> ds.n, ds.records.tolist()
(2, [[1, 0], [0, 1]])
>>> ds.to_dataframe()["age"].tolist()
['[0, 40)', '[40, 120)']
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pmwcm._atomic import atomic_open
from pmwcm.data.attribute import NUMBER_PATTERN, Attribute, canonical_value, format_number
from pmwcm.data.csv_layout import check_csv_layout
from pmwcm.data.errors import DataError
from pmwcm.data.schema import Schema
from pmwcm.kernels.domain import Domain

IntArray = npt.NDArray[np.int64]
_MISSING = -2  # marks an empty cell in the lookup tables below
_NUMBER_TEXT = re.compile(NUMBER_PATTERN)


@dataclass(frozen=True, kw_only=True, eq=False)
class Dataset:
    """``n >= 1`` records over ``domain``, stored as a read-only ``int64`` array.

    Attributes:
        domain: the data universe; column ``j`` of ``records`` is attribute
            ``domain.names[j]``.
        records: integer codes, shape ``(n, len(domain))``, column ``j`` in
            ``0..domain.sizes[j]-1``.

    Raises:
        DataError: on a wrong shape, non-integer codes, a code out of range or
            no records.
    """

    domain: Domain
    records: IntArray

    def __post_init__(self) -> None:
        if not isinstance(self.domain, Domain):
            raise DataError(f"Dataset needs a Domain, got {type(self.domain).__name__}.")
        raw = np.asarray(self.records)
        if raw.dtype.kind not in "iu":
            raise DataError(f"records must hold integer codes, got dtype {raw.dtype}.")
        m = len(self.domain)
        if raw.ndim != 2 or raw.shape[1] != m:
            raise DataError(f"records must have shape (n, {m}), got {raw.shape}.")
        if raw.shape[0] == 0:
            raise DataError("a Dataset needs at least one record, got n=0.")
        records = np.array(raw, dtype=np.int64, copy=True)
        sizes = np.asarray(self.domain.sizes, dtype=np.int64)
        bad = (records < 0) | (records >= sizes)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            name = self.domain.names[col]
            raise DataError(
                f"records[{row}] has code {records[row, col]} for attribute {name!r}, "
                f"outside 0..{sizes[col] - 1}."
            )
        records.setflags(write=False)
        object.__setattr__(self, "records", records)

    @property
    def n(self) -> int:
        """The number of records."""
        return int(self.records.shape[0])

    def column(self, name: str) -> IntArray:
        """The codes of attribute ``name`` (read-only view, shape ``(n,)``)."""
        return self.records[:, self.domain.index(name)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dataset):
            return NotImplemented
        return self.domain == other.domain and np.array_equal(self.records, other.records)

    def __repr__(self) -> str:
        return f"Dataset(n={self.n}, names={list(self.domain.names)}, |X|={self.domain.size})"

    @classmethod
    def from_dataframe(cls, df: pd.DataFrame, schema: Schema) -> Dataset:
        """Encodes a DataFrame under ``schema`` (extra columns are ignored).

        Raises:
            DataError: if a column is missing, a cell is empty or unknown, a
                number lies outside the bins, or the frame has no rows.
        """
        if not isinstance(df, pd.DataFrame):
            raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}.")
        index = df.index
        return cls._encode(df, schema, lambda i: f"row {index[i]!r}", "the DataFrame")

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str], schema: Schema) -> Dataset:
        """Reads a CSV file with a header row and encodes it under ``schema``.

        Cells are read as text (blanks around them are dropped), so the
        schema's values must match the file's spelling; an empty cell is missing.

        Raises:
            DataError: if the file is missing, unreadable or empty, or any cell
                cannot be encoded (the message gives the CSV line).
        """
        df = read_csv_text(path)
        return cls._encode(df, schema, lambda i: f"line {i + 2}", f"'{path}'")

    @classmethod
    def _encode(
        cls, df: pd.DataFrame, schema: Schema, where: Callable[[int], str], source: str
    ) -> Dataset:
        missing = [c for c in schema.columns if c not in df.columns]
        if missing:
            raise DataError(
                f"column {missing[0]!r} named by the schema is not in {source}; "
                f"its columns are {[str(c) for c in df.columns]}."
            )
        dupes = sorted({str(c) for c in df.columns[df.columns.duplicated()] if c in schema.columns})
        if dupes:
            raise DataError(f"{source} has more than one column named {dupes[0]!r}.")
        if len(df) == 0:
            raise DataError(f"{source} has no data rows.")
        cols = [encode_column(a, df[a.column], where) for a in schema.attributes]
        return cls(domain=schema.domain(), records=np.stack(cols, axis=1))

    def to_dataframe(self, *, labels: bool = True) -> pd.DataFrame:
        """The records as a DataFrame of value labels (or of codes, ``labels=False``)."""
        data: dict[str, Any] = {}
        for j, (name, values) in enumerate(zip(self.domain.names, self.domain.values, strict=True)):
            codes = self.records[:, j]
            data[name] = np.asarray(values, dtype=object)[codes] if labels else codes.copy()
        return pd.DataFrame(data)

    def to_csv(self, path: str | os.PathLike[str], *, labels: bool = True) -> None:
        """Writes the records as CSV (value labels by default), atomically.

        ``Dataset.from_csv(path, Schema.from_domain(ds.domain))`` reads it back.
        """
        with atomic_open(path, newline="") as fh:
            self.to_dataframe(labels=labels).to_csv(fh, index=False)


def read_csv_text(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Reads a CSV file with every cell as stripped text (empty cells stay ``""``), after
    :func:`~pmwcm.data.csv_layout.check_csv_layout` (the rules every command shares).

    Raises:
        DataError: if the file breaks those rules, or cannot be read.
    """
    check_csv_layout(path)
    try:
        return pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            skipinitialspace=True,
            sep=",",
            quotechar='"',
            encoding="utf-8-sig",
        )
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise DataError(f"cannot parse data file '{path}' ({type(exc).__name__}).") from None


def encode_column(attr: Attribute, column: pd.Series, where: Callable[[int], str]) -> IntArray:
    """Codes ``0..attr.size-1`` of one source column.

    A missing cell (empty, or one of ``attr.missing``) gets ``attr.missing_code``
    when the attribute has a ``missing_label``; otherwise it is refused, and the
    message counts the rows with a missing cell. A number must be finite:
    ``inf`` is refused like ``nan``, for bins and thresholds alike.

    Args:
        attr: the schema attribute.
        column: the source cells (any dtype).
        where: names row ``i`` in messages (``"line 7"``, ``"row 'a'"``).

    Raises:
        DataError: naming the column, the row and the bad value.
    """
    values = column.to_numpy(dtype=object)
    head = f"column {attr.column!r}, {{}}"
    factor, uniques = pd.factorize(values, use_na_sentinel=True)
    text = [canonical_value(u) for u in uniques]
    markers = set(attr.missing)
    is_missing = np.asarray([*(t is None or t in markers for t in text), True], dtype=bool)[factor]
    if is_missing.any() and attr.missing_code is None:
        rows = np.flatnonzero(is_missing)
        i = int(rows[0])
        marked = f" or a marker in {list(attr.missing)}" if attr.missing else ""
        raise DataError(
            f"{head.format(where(i))}: missing value (empty{marked}); {rows.size} row(s) of "
            f'the column are missing. Give attribute {attr.name!r} a "missing_label" to '
            'count them as their own category (and "missing" to list markers such as '
            '"NA"), or remove those rows.'
        )
    if attr.kind == "values":
        lookup = attr.source_codes()
        table = [_MISSING if t is None or t in markers else _code_of(t, lookup) for t in text]
        codes = np.asarray([*table, _MISSING], dtype=np.int64)[factor]
        bad = np.flatnonzero(codes == -1)
        if bad.size:
            i = int(bad[0])
            more = f" ({bad.size - 1} more rows have bad cells)" if bad.size > 1 else ""
            known = list(attr.source_codes())
            shown = known if len(known) <= 12 else [*known[:12], "..."]
            raise DataError(
                f"{head.format(where(i))}: a value that is not one of the schema's values "
                f"for attribute {attr.name!r} {shown}{more}."
            )
        return _fill_missing(codes, is_missing, attr)
    present = np.where(is_missing, "0", values)
    x = pd.to_numeric(pd.Series(present, dtype=object), errors="coerce").to_numpy(dtype=float)
    bad_number = np.flatnonzero(~np.isfinite(x))
    if bad_number.size:
        i = int(bad_number[0])
        what = "a number" if np.isnan(x[i]) else "a finite number"
        raise DataError(
            f"{head.format(where(i))}: a value that is not {what} "
            f"(attribute {attr.name!r} uses {attr.kind}; list missing-value markers in "
            '"missing").'
        )
    if attr.threshold is not None:
        return _fill_missing((x >= attr.threshold).astype(np.int64), is_missing, attr)
    edges = np.asarray(attr.bins, dtype=float)
    codes = np.searchsorted(edges, x, side="right").astype(np.int64) - 1
    k = len(edges) - 1
    if attr.clip:
        return _fill_missing(np.clip(codes, 0, k - 1), is_missing, attr)
    out = np.flatnonzero(((codes < 0) | (codes >= k)) & ~is_missing)
    if out.size:
        i = int(out[0])
        lo, hi = format_number(edges[0]), format_number(edges[-1])
        raise DataError(
            f"{head.format(where(i))}: a number outside the bins "
            f'[{lo}, {hi}) of attribute {attr.name!r} (set "clip": true to clip).'
        )
    return _fill_missing(codes, is_missing, attr)


def _code_of(text: str, lookup: dict[str, int]) -> int:
    """The code of a cell's text, matching a number written another way (``1.0``, ``1e0``)
    to the schema's canonical spelling ``"1"``; ``-1`` if it matches nothing."""
    if text in lookup:
        return lookup[text]
    if not _NUMBER_TEXT.fullmatch(text):  # what pandas.to_numeric (and the SQL path) read
        return -1
    number = float(text)
    if not np.isfinite(number):
        return -1
    return lookup.get(canonical_value(number) or "", -1)


def _fill_missing(codes: IntArray, is_missing: npt.NDArray[np.bool_], attr: Attribute) -> IntArray:
    """``codes`` with every missing row set to the attribute's missing code."""
    if attr.missing_code is None or not is_missing.any():
        return codes
    return np.where(is_missing, attr.missing_code, codes).astype(np.int64)
