"""Loading a command's inputs: the schema (refused if drafted from the data unless
accepted), a CSV under it, or the private data where it lives; each fault one line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pmwcm.cli.common import fail

if TYPE_CHECKING:
    from pmwcm.data.schema import Schema
    from pmwcm.data.table import Dataset
    from pmwcm.mechanisms.private_data import PrivateData


def load_schema(path: Path, *, accept_drafted: bool) -> Schema:
    """The schema at ``path`` (or the bundled schema of that name: ``adult-binary``, ...);
    refuses one drafted from the data unless ``accept_drafted``.

    An accepted drafted schema gets a warning on stderr.
    """
    from pmwcm.data.bundled import schema_at
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.schema_draft import drafted_schema_error

    try:
        schema = schema_at(path)
    except SchemaError as exc:
        raise fail(str(exc)) from None
    problem = drafted_schema_error(schema, f"--schema '{path}'", "--accept-drafted-schema")
    if problem is not None:
        if not accept_drafted:
            raise fail(problem)
        typer.echo(
            f"warning: --schema '{path}' was drafted from the data; its value sets and bin "
            "edges leak the data outside the privacy budget (accepted by "
            "--accept-drafted-schema).",
            err=True,
        )
    return schema


def load_data(data: Path, schema: Schema) -> Dataset:
    """The CSV encoded under the schema; a one-line error if it does not fit."""
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.table import DataError, Dataset

    try:
        return Dataset.from_csv(data, schema)
    except (SchemaError, DataError) as exc:
        raise fail(str(exc)) from None


def _csv_from_stdin(schema: Schema) -> Dataset:
    """``--data -``: a CSV read from stdin, checked as a file is (the same reader, on a
    copy in a private temporary directory that is removed at once)."""
    import shutil
    import tempfile

    from pmwcm.data.schema import SchemaError
    from pmwcm.data.table import DataError, Dataset

    folder = Path(tempfile.mkdtemp(prefix="pmwcm-stdin-"))  # mode 0700
    try:
        copy = folder / "stdin.csv"
        with copy.open("wb") as sink:
            shutil.copyfileobj(sys.stdin.buffer, sink)
        try:
            return Dataset.from_csv(copy, schema)
        except (SchemaError, DataError) as exc:
            raise fail(str(exc).replace(f"'{copy}'", "stdin")) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def open_data(
    data: str, schema: Schema, *, table: str | None = None, engine: str | None = None
) -> PrivateData:
    """The private data where it lives (:func:`~pmwcm.data.sources.open.open_source`),
    checked against the schema; a one-line error if it does not fit."""
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.sources.open import open_source
    from pmwcm.data.table import DataError
    from pmwcm.mechanisms.private_data import PrivateData

    if engine not in (None, "duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, got {engine!r}.")
    if data == "-":
        return PrivateData.of(_csv_from_stdin(schema))
    try:
        opened = open_source(
            data, schema, table=table, engine="spark" if engine == "spark" else None
        )
    except (SchemaError, DataError) as exc:
        raise fail(str(exc)) from None
    except ModuleNotFoundError as exc:
        extra = "spark" if engine == "spark" else "postgres"
        raise fail(
            f"this --data needs the optional package {exc.name}: pip install 'pmwcm[{extra}]'."
        ) from None
    return PrivateData.of(opened)
