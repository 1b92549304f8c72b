"""``pmwcm serve``'s options: each one's help text and its typer declaration, so that
the command's signature is a table of names (:mod:`pmwcm.cli.serve`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

_STATE_HELP = "State directory (SQLite in WAL mode; keep it private: it holds secrets)."
_DATA_HELP = "CSV file for the session made at start (with --schema, --epsilon, --delta)."
_PARAMS_HELP = "Session parameters as a JSON object, e.g. '{\"max_updates\": 20}'."
_ROTATE_HELP = "Revoke every curator token and print a new one."
_ACCEPT_DRAFTED_HELP = (
    "Accept a --schema drafted from the data by 'pmwcm schema' (its value sets and bin "
    "edges leak the data outside the budget). Without it such a schema is refused."
)
_BACKEND_HELP = (
    "The session's hypothesis backend: auto (dense while it fits --hypothesis-memory, a "
    "weighted support beyond), dense or support (sets the 'backend' parameter)."
)
_MEMORY_HELP = (
    "Bytes the session's hypothesis may take, e.g. 536870912, 512MiB or 2GiB (the "
    "'hypothesis_memory' parameter; the service allows at most 4GiB)."
)
_SUPPORT_HELP = (
    "M, the support backend's records; 0 for the default (the 'support_size' parameter)."
)
_DATA_DIR_HELP = (
    "A directory whose files sessions may use (repeatable). Default: the directories of "
    "--data and --schema, or none (no session can then be created over HTTP)."
)
_MAX_BODY_HELP = "The largest request body in bytes; a larger one is refused with 413."
_STORE_HELP = (
    "A shared PostgreSQL store instead of --state, e.g. postgresql://user@host/db: several "
    "pmwcm serve processes may serve it together. Give the password through PGPASSWORD or "
    "~/.pgpass (or this variable), not on the command line; it is never shown or logged."
)
_CONNECTIONS_HELP = (
    'A JSON file of named PostgreSQL connections, {"NAME": "postgresql://..."}: a '
    'session created over HTTP reads a table through one by its name ("connection", '
    '"table"), so credentials never pass through the API, the state or the log. Keep the '
    "file private (mode 600)."
)
_SPARK_HELP = (
    'Let sessions created over HTTP read with Spark ("engine": "spark"): a Parquet path '
    "under --data-dir or a table of the Spark catalog. Spark starts as the server's set-up "
    "says (SPARK_HOME, spark-defaults.conf, PYSPARK_SUBMIT_ARGS); needs pmwcm[spark]."
)
_CONNECTION_HELP = (
    "The session made at start reads --table through this connection of --connections "
    "(instead of --data)."
)
_TABLE_HELP = "The table the session made at start reads (with --connection, or --engine spark)."
_ENGINE_HELP = (
    "spark: the session made at start reads --data or --table with Spark (needs --spark)."
)
_WORKERS_HELP = "Threads for session work (one session uses one at a time)."
_DEADLINE_HELP = (
    "Seconds a query may wait for its session before it is refused (503, Retry-After) "
    "with nothing spent."
)
_BUILD_MEMORY_HELP = (
    "The most memory (bytes) a session build may declare; a larger one is refused (422) "
    "before it starts, and a running build past twice its declared memory is stopped."
)
_BUILD_SECONDS_HELP = (
    "The longest time (seconds) a session build may declare; a longer one is refused (422) "
    "before it starts, and a running build past its declared time is stopped."
)

StateOption = Annotated[Path | None, typer.Option("--state", metavar="DIR", help=_STATE_HELP)]
DataOption = Annotated[Path | None, typer.Option("--data", metavar="PATH", help=_DATA_HELP)]
SchemaOption = Annotated[
    Path | None, typer.Option("--schema", metavar="PATH", help="Schema JSON of --data.")
]
EpsilonOption = Annotated[
    float | None, typer.Option("--epsilon", metavar="EPS", help="Total epsilon.")
]
DeltaOption = Annotated[float | None, typer.Option("--delta", metavar="DELTA", help="Total delta.")]
ParamsOption = Annotated[str | None, typer.Option("--params", metavar="JSON", help=_PARAMS_HELP)]
SessionOption = Annotated[
    str, typer.Option("--session", metavar="NAME", help="Name of that session.")
]
HostOption = Annotated[str, typer.Option("--host", metavar="ADDRESS", help="Address to bind.")]
PortOption = Annotated[int, typer.Option("--port", metavar="PORT", help="TCP port.")]
RotateOption = Annotated[bool, typer.Option(help=_ROTATE_HELP)]
AcceptDraftedOption = Annotated[
    bool, typer.Option("--accept-drafted-schema", help=_ACCEPT_DRAFTED_HELP)
]
BackendOption = Annotated[
    str | None, typer.Option("--backend", metavar="[auto|dense|support]", help=_BACKEND_HELP)
]
MemoryOption = Annotated[
    str | None, typer.Option("--hypothesis-memory", metavar="BYTES", help=_MEMORY_HELP)
]
SupportOption = Annotated[
    int | None, typer.Option("--support-size", metavar="M", help=_SUPPORT_HELP)
]
DataDirOption = Annotated[
    list[Path] | None, typer.Option("--data-dir", metavar="DIR", help=_DATA_DIR_HELP)
]
MaxBodyOption = Annotated[
    int | None, typer.Option("--max-body-bytes", metavar="BYTES", help=_MAX_BODY_HELP)
]
StoreOption = Annotated[
    str | None, typer.Option("--store", metavar="URL", envvar="PMWCM_STORE", help=_STORE_HELP)
]
WorkersOption = Annotated[int, typer.Option("--workers", metavar="N", help=_WORKERS_HELP)]
DeadlineOption = Annotated[
    float, typer.Option("--request-deadline", metavar="SECONDS", help=_DEADLINE_HELP)
]
BuildMemoryOption = Annotated[
    int | None, typer.Option("--build-memory", metavar="BYTES", help=_BUILD_MEMORY_HELP)
]
BuildSecondsOption = Annotated[
    float | None, typer.Option("--build-seconds", metavar="SECONDS", help=_BUILD_SECONDS_HELP)
]
ConnectionsOption = Annotated[
    Path | None,
    typer.Option(
        "--connections", metavar="FILE", envvar="PMWCM_CONNECTIONS", help=_CONNECTIONS_HELP
    ),
]
SparkOption = Annotated[bool, typer.Option("--spark", help=_SPARK_HELP)]
ConnectionOption = Annotated[
    str | None, typer.Option("--connection", metavar="NAME", help=_CONNECTION_HELP)
]
TableOption = Annotated[str | None, typer.Option("--table", metavar="TABLE", help=_TABLE_HELP)]
EngineOption = Annotated[
    str | None, typer.Option("--engine", metavar="[duckdb|spark]", help=_ENGINE_HELP)
]
