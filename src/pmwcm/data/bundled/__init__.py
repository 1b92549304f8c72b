"""Bundled public data: UCI Adult with three ready-made schemas.

The data is the integer-coded Adult file of the private-pgm project (UCI
Adult, Becker & Kohavi 1996, CC BY 4.0; this coding Apache-2.0); see
``data/NOTICE.md`` for provenance and the decodings the schemas rely on.

* ``adult-binary`` (default): 14 no/yes attributes, ``|X| = 2**14 = 16,384``.
* ``adult-categorical``: 12 coarse categorical attributes,
  ``|X| = 1,228,800`` (a 9.8 MB dense float64 histogram).
* ``adult-full``: the 14 columns at their native resolution (every code of
  ``adult-domain.json`` its own value), ``|X| = 6.4e17``: far too large for a
  dense histogram, so only a backend that never enumerates ``X`` can fit it.

>>> list_schemas()
('adult-binary', 'adult-categorical', 'adult-full')
>>> adult_schema("binary").domain().size
16384
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

from pmwcm.data.schema import Schema, SchemaError
from pmwcm.data.table import Dataset

__all__ = [
    "BUNDLED_ROWS",
    "adult_schema",
    "is_bundled_name",
    "list_schemas",
    "load_adult",
    "schema_at",
]

_SCHEMAS = ("adult-binary", "adult-categorical", "adult-full")

#: The number of records of the bundled (public) Adult file, under every bundled schema.
BUNDLED_ROWS = 48_842


def list_schemas() -> tuple[str, ...]:
    """The names of the bundled schemas for Adult."""
    return _SCHEMAS


def _full_name(name: str) -> str:
    full = name if name.startswith("adult-") else f"adult-{name}"
    if full not in _SCHEMAS:
        raise SchemaError(f"unknown bundled schema {name!r}; choose one of {list(_SCHEMAS)}.")
    return full


@functools.cache
def _schema(full: str) -> Schema:
    text = resources.files(__name__).joinpath("files", f"{full}.schema.json")
    with resources.as_file(text) as path:
        return Schema.from_json(path)


def is_bundled_name(where: str | os.PathLike[str]) -> bool:
    """Whether :func:`schema_at` reads ``where`` as a bundled schema's name (no such file)."""
    return not Path(where).exists() and str(where) in _SCHEMAS


def schema_at(where: str | os.PathLike[str]) -> Schema:
    """The schema file at ``where``, or, when no such file exists and ``where`` is a
    bundled schema's name (``adult-binary``, ``adult-categorical``, ``adult-full``),
    that schema: every command that takes a schema takes either.

    Raises:
        SchemaError: neither a readable schema file nor a bundled name (the message
            names the bundled schemas).
    """
    path = Path(where)
    if is_bundled_name(where):
        return _schema(str(where))
    try:
        return Schema.from_json(path)
    except SchemaError as exc:
        if path.exists():
            raise
        said = str(exc).rstrip(".")
        raise SchemaError(f"{said} (or name a bundled schema: {', '.join(_SCHEMAS)}).") from None


def adult_schema(name: str = "binary") -> Schema:
    """A bundled schema for Adult.

    Args:
        name: ``"binary"`` / ``"adult-binary"``, ``"categorical"`` /
            ``"adult-categorical"`` or ``"full"`` / ``"adult-full"``.

    Raises:
        SchemaError: for an unknown name (the message lists the known ones).
    """
    return _schema(_full_name(name))


@functools.cache
def _load(full: str) -> Dataset:
    with resources.as_file(resources.files(__name__).joinpath("files", "adult.csv")) as path:
        return Dataset.from_csv(path, _schema(full))


def load_adult(schema: str | Schema = "binary") -> Dataset:
    """The 48,842 Adult records encoded under a bundled (or your own) schema.

    Args:
        schema: a bundled schema name (see :func:`adult_schema`) or a
            :class:`Schema` over the columns of the coded Adult file.

    Returns:
        A read-only :class:`Dataset` (bundled schemas are cached per process).

    >>> load_adult().n
    48842
    """
    if isinstance(schema, Schema):
        with resources.as_file(resources.files(__name__).joinpath("files", "adult.csv")) as path:
            return Dataset.from_csv(path, schema)
    return _load(_full_name(schema))
