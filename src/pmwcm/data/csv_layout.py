"""The one set of rules a CSV file must follow, checked once for every command that reads one.

``pmwcm schema --data/--check`` reads a CSV with pandas, ``pmwcm run``, ``synth``
and ``serve`` with DuckDB; each parser, left to itself, guesses: DuckDB sniffs
the separator (a ``;`` file becomes three columns) and renames a repeated
header (``age`` and ``age_1``), pandas pads a short row. So before either
parser sees a file, :func:`check_csv_layout` reads it once, as a stream of
lines, and refuses what the rules do not allow, with one message per fault that
names the file and the line, never a value (the rows are private data):

* UTF-8 text; a byte-order mark at the start is allowed and dropped;
* a header row of unique, non-empty-after-stripping names, separated by commas
  (a header that is one name holding a ``;``, a tab or a ``|`` is refused as
  another separator);
* every row with as many fields as the header (RFC 4180 quoting: a quoted
  field may hold commas and line breaks);
* at least one data row.

The parsers are then told the same dialect (comma, double quote, header), so
both read the file as these rules see it.
"""

from __future__ import annotations

import codecs
import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pmwcm.data.errors import DataError

__all__ = ["check_csv_layout"]

_OTHER_SEPARATORS = ((";", "semicolon"), ("\t", "tab"), ("|", "pipe"))


def _text_lines(fh: BinaryIO, shown: str) -> Iterator[str]:
    """The file's lines as text (UTF-8, a leading byte-order mark dropped); an invalid
    byte sequence is refused with its line number."""
    for number, raw in enumerate(fh, start=1):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(
                f"data file {shown} is not UTF-8 text (line {number}); save it as UTF-8."
            ) from None


def _check_header(names: list[str], shown: str) -> None:
    if len(names) == 1:
        for separator, called in _OTHER_SEPARATORS:
            if separator in names[0]:
                raise DataError(
                    f"data file {shown} has one column whose header {names[0]!r} contains a "
                    f"{called}: it looks {called}-separated; pmwcm reads comma-separated files "
                    "only (convert it, e.g. pandas.read_csv(path, sep=...).to_csv(new_path))."
                )
    seen: dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        if not name:
            raise DataError(f"data file {shown} has a column with an empty header (column {i}).")
        if name in seen:
            raise DataError(
                f"data file {shown} names column {name!r} twice (columns {seen[name]} and "
                f"{i}); rename one."
            )
        seen[name] = i


def check_csv_layout(path: str | os.PathLike[str]) -> list[str]:
    """Checks the file against the module's rules in one streaming pass; returns the header.

    Raises:
        DataError: the file is missing, not a file, empty, not UTF-8, has another
            separator, a repeated or empty column name, a row with another number of
            fields than the header (its line named), or no data rows.
    """
    p = Path(path)
    shown = f"'{p}'"
    if not p.exists():
        raise DataError(f"data file not found: {shown}.")
    if not p.is_file():
        raise DataError(f"data path is not a file: {shown}.")
    with p.open("rb") as fh:
        reader = csv.reader(_text_lines(fh, shown), strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise DataError(f"data file {shown} is empty (no header row).")
            names = [name.strip() for name in header]
            _check_header(names, shown)
            rows = 0
            for row in reader:
                if not row:  # a blank line: pandas and DuckDB both skip it
                    continue
                rows += 1
                if len(row) != len(names):
                    raise DataError(
                        f"data file {shown}, line {reader.line_num}: {len(row)} fields where the "
                        f"header has {len(names)}."
                    )
        except csv.Error:
            raise DataError(
                f"data file {shown}, line {reader.line_num}: malformed quoting (a quote must "
                'open a field and close it, and a quote inside a field is written "").'
            ) from None
    if rows == 0:
        raise DataError(f"data file {shown} has no data rows.")
    return names
