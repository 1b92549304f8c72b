"""``pmwcm schema``: draft a schema from a CSV file, or check one against it.

A drafted schema carries two marks: the name ``"draft"`` and
:data:`pmwcm.data.schema_draft.DRAFT_WARNING` in its description. ``pmwcm run``,
``pmwcm synth`` and the service refuse a schema with either mark
(:func:`pmwcm.data.schema_draft.drafted_schema_error`) unless the user accepts
it explicitly.

``--check`` also says, on stderr, which hypothesis backend the schema's
universe gets (a dense tensor while it fits 512 MiB, a weighted support beyond;
:func:`pmwcm.kernels.backend.choose_backend`), its memory and why, under the
same ``--backend``, ``--hypothesis-memory`` and ``--support-size`` as ``pmwcm
run``; a choice that does not fit (a forced dense tensor over the budget, a
budget over this machine's memory) is refused in one line, exit 1, as ``run``,
``synth`` and ``serve`` refuse it before allocating anything. The support's
size follows ``run``'s rule (:func:`pmwcm.kernels.backend.default_support_size`
of the data's ``n`` and the schema's attribute sizes): with ``--data`` from its rows,
for a bundled schema by name from the bundled file's, else the most it can be.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pmwcm.cli.options import BackendOption, HypothesisMemoryOption, SupportSizeOption

if TYPE_CHECKING:
    from pmwcm.data.schema import Schema
    from pmwcm.kernels.backend import BackendChoice
    from pmwcm.kernels.domain import Domain

_DATA_HELP = "CSV file with a header row."
_CHECK_HELP = "Schema JSON to validate (against --data when given)."
_OUTPUT_HELP = (
    "Write the drafted schema here (atomically) instead of stdout (- is stdout). Refused: "
    "the --data file, a directory or a device."
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def schema_command(
    data: Annotated[Path | None, typer.Option("--data", help=_DATA_HELP)] = None,
    check: Annotated[Path | None, typer.Option("--check", help=_CHECK_HELP)] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help=_OUTPUT_HELP)] = None,
    backend: BackendOption = "auto",
    hypothesis_memory: HypothesisMemoryOption = None,
    support_size: SupportSizeOption = 0,
) -> None:
    """Draft a schema from --data, or check the schema --check (against --data).

    Drafting reads value sets and bin edges FROM the data; replace them with
    public knowledge before any private release. With --check, the backend
    options of 'pmwcm run' say which hypothesis backend the schema would get
    (and a choice that does not fit is refused, exit 1).
    """
    from pmwcm.cli.common import backend_settings, check_backend, check_output, is_stdio
    from pmwcm.data.bundled import BUNDLED_ROWS, is_bundled_name, schema_at
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.schema_draft import DRAFT_WARNING, SKIPPED, draft_schema, drafted_marks
    from pmwcm.data.table import DataError

    try:
        if check is not None:
            if output is not None:
                raise _fail("--output is only for drafting; drop it when using --check.")
            schema = schema_at(check)  # a file, or a bundled schema's name
            domain = schema.domain()
            settings = backend_settings(backend, hypothesis_memory, support_size)
            choice = check_backend(domain, settings)  # refuses what does not fit, n or not
            defaults = (backend, hypothesis_memory, support_size) == ("auto", None, 0)
            about = "backend (default settings)" if defaults else "backend"
            label = f"schema {schema.name!r}" if schema.name else f"schema '{check}'"
            marks = drafted_marks(schema)
            if marks:
                typer.echo(
                    f"note: {label} is marked as drafted from the data ({' and '.join(marks)}); "
                    "run, synth and serve refuse it until its value sets come from public "
                    "knowledge and the marks are removed (or --accept-drafted-schema is given).",
                    err=True,
                )
            if data is None:
                typer.echo(f"ok: {label}: {len(domain)} attributes, |X| = {domain.size:,}")
                if is_bundled_name(check):
                    choice = _sized(choice, domain, settings, BUNDLED_ROWS)
                    about += " on the bundled data"
                typer.echo(f"{about}: {choice.reason}", err=True)
                return
            n = _rows_of(data, schema)
            choice = _sized(choice, domain, settings, n)
            typer.echo(f"{about}: {choice.reason}", err=True)
            typer.echo(
                f"ok: {label} on '{data}': {n:,} rows, {len(domain)} attributes, "
                f"|X| = {domain.size:,}"
            )
            return
        if data is None:
            raise _fail(
                "give --data DATA.csv to draft a schema, or --check SCHEMA.json to check one."
            )
        if output is not None:
            check_output(output, inputs=[("--data", data)])
        drafted = draft_schema(data)
        text = drafted.to_json()
        typer.echo(DRAFT_WARNING, err=True)
        skipped = drafted.description.partition(SKIPPED)[2]
        if skipped:
            typer.echo(f"note: skipped columns: {skipped}", err=True)
        if output is None or is_stdio(output):
            typer.echo(text, nl=False)
            return
        _write(output, text)
        domain = drafted.domain()
        typer.echo(f"wrote '{output}': {len(domain)} attributes, |X| = {domain.size:,}", err=True)
    except (SchemaError, DataError) as exc:
        raise _fail(str(exc)) from None


def _rows_of(data: Path, schema: Schema) -> int:
    """The rows of ``data``, checked against ``schema`` by the reader ``run`` uses (DuckDB:
    a 1,000-column table fits its cap, where pandas took 3.7 GB). A file it refuses is
    read again in memory for a message that names the line."""
    from pmwcm.data.sources.duckdb_source import DuckDBSource
    from pmwcm.data.table import DataError, Dataset

    try:
        source = DuckDBSource.from_file(data, schema)
    except DataError as refused:
        try:
            Dataset.from_csv(data, schema)
        except DataError as exc:
            raise exc from None
        raise refused from None
    source.close()
    return source.n


def _sized(
    choice: BackendChoice, domain: Domain, settings: dict[str, Any], n: int
) -> BackendChoice:
    """The choice ``run`` makes for ``n`` records: the support's size from ``n``, as
    :meth:`pmwcm.engine.config.PMWConfig.backend_choice` sizes it (the same rule, the same
    inputs)."""
    from pmwcm.kernels.backend import choose_backend

    if choice.kind != "support":
        return choice
    return choose_backend(
        domain,
        memory_budget=settings["hypothesis_memory"],
        support_size=settings["support_size"],
        backend=settings["backend"],
        n=n,
    )


def _write(path: Path, text: str) -> None:
    from pmwcm._atomic import atomic_write_text

    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise _fail(f"cannot write '{path}': {exc.strerror or exc}.") from None
