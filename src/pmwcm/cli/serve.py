"""``pmwcm serve``: the durable, authenticated HTTP query service (:mod:`pmwcm.service`).

It needs the ``service`` extra; without it the command says so in one line
(:func:`missing_service_extra`, shared with ``pmwcm ask``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

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
#: The top-level modules the ``service`` extra brings.
SERVICE_MODULES = frozenset({"fastapi", "starlette", "uvicorn", "httpx", "pydantic", "psycopg"})


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def missing_service_extra(err: ModuleNotFoundError, command: str) -> typer.Exit:
    """The one-line error for ``pmwcm <command>`` without the ``service`` extra.

    Raises:
        ModuleNotFoundError: ``err`` itself, when the missing module is not one
            the extra provides (a broken install, not a missing extra).
    """
    root = (err.name or "").partition(".")[0]
    if root not in SERVICE_MODULES:
        raise err
    return _fail(
        f"pmwcm {command} needs the 'service' extra (module {root!r} is not installed): "
        "pip install 'pmwcm[service]'"
    )


def check_port_free(host: str, port: int) -> None:
    """Refuses, before any token is made or printed, a port another process holds.

    The probe binds as uvicorn will (``SO_REUSEADDR``, so a port in TIME_WAIT
    counts as free) and releases the port at once.
    """
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        raise _fail(f"--host {host!r} cannot be resolved: {err}.") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            raise _fail(
                f"cannot listen on {host}:{port}: {err.strerror or err} (another server "
                "holds it?); choose another --port. No token was created."
            ) from None


def one_line_validation_error(err: Any) -> str:
    """A pydantic ``ValidationError`` as one line: where, what, and the value given."""
    first = err.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    where = (
        where.replace("parameters.", "--params ", 1) if where.startswith("parameters.") else where
    )
    given = (
        f", got {first['input']!r}" if "input" in first and first.get("type") != "missing" else ""
    )
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{given}{more}."


def _start_session(app: Any, name: str, config: dict[str, Any]) -> None:
    """Creates session ``name`` from ``config``, or checks that the stored one matches it."""
    sessions = app.state.sessions
    record = sessions.store.get_session(name)
    if record is None:
        sessions.create(name, config)
        typer.echo(f"created session {name!r}", err=True)
        return
    stored = {k: record.config.get(k) for k in config}
    if stored != config:
        raise _fail(
            f"session {name!r} exists with another configuration; its data, budget and "
            "parameters cannot change (start without --data, or use --session NEW)."
        )


def _backend_flags(
    backend: str | None, hypothesis_memory: str | None, support_size: int | None
) -> dict[str, Any]:
    """The backend flags given, as session parameters."""
    from pmwcm.cli.common import parse_memory

    flags: dict[str, Any] = {}
    if backend is not None:
        flags["backend"] = backend
    if hypothesis_memory is not None:
        flags["hypothesis_memory"] = parse_memory(hypothesis_memory)
    if support_size is not None:
        flags["support_size"] = support_size
    return flags


def _parameters(params: str | None, flags: dict[str, Any]) -> Any:
    """--params with the backend flags merged in; a parameter given both ways is refused."""
    parameters = json.loads(params) if params else {}
    if flags and isinstance(parameters, dict):
        both = sorted(set(parameters) & set(flags))
        if both:
            raise ValueError(f"{both} given both in --params and as flags; give each once.")
        parameters = parameters | flags
    return parameters


def _connections(path: Path | None, *, spark: bool) -> Any:
    """The operator's named connections (:class:`pmwcm.service.connections.Connections`)."""
    from pmwcm.service.connections import Connections

    if path is None:
        return Connections(spark=spark)
    try:
        connections = Connections.from_file(path, spark=spark)
    except ValueError as err:
        raise _fail(f"--connections: {err}") from None
    if path.stat().st_mode & 0o077:
        typer.echo(
            f"warning: --connections file '{path}' is readable by other users (chmod 600 it).",
            err=True,
        )
    return connections


def serve_command(
    state: Annotated[Path | None, typer.Option("--state", metavar="DIR", help=_STATE_HELP)] = None,
    data: Annotated[Path | None, typer.Option("--data", metavar="PATH", help=_DATA_HELP)] = None,
    schema: Annotated[
        Path | None, typer.Option("--schema", metavar="PATH", help="Schema JSON of --data.")
    ] = None,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", metavar="EPS", help="Total epsilon.")
    ] = None,
    delta: Annotated[
        float | None, typer.Option("--delta", metavar="DELTA", help="Total delta.")
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", metavar="JSON", help=_PARAMS_HELP)
    ] = None,
    session: Annotated[
        str, typer.Option("--session", metavar="NAME", help="Name of that session.")
    ] = "default",
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to bind.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="TCP port.")] = 8000,
    rotate_curator_token: Annotated[bool, typer.Option(help=_ROTATE_HELP)] = False,
    accept_drafted_schema: Annotated[
        bool, typer.Option("--accept-drafted-schema", help=_ACCEPT_DRAFTED_HELP)
    ] = False,
    backend: Annotated[
        str | None, typer.Option("--backend", metavar="[auto|dense|support]", help=_BACKEND_HELP)
    ] = None,
    hypothesis_memory: Annotated[
        str | None, typer.Option("--hypothesis-memory", metavar="BYTES", help=_MEMORY_HELP)
    ] = None,
    support_size: Annotated[
        int | None, typer.Option("--support-size", metavar="M", help=_SUPPORT_HELP)
    ] = None,
    data_dir: Annotated[
        list[Path] | None, typer.Option("--data-dir", metavar="DIR", help=_DATA_DIR_HELP)
    ] = None,
    max_body_bytes: Annotated[
        int | None, typer.Option("--max-body-bytes", metavar="BYTES", help=_MAX_BODY_HELP)
    ] = None,
    store_url: Annotated[
        str | None,
        typer.Option("--store", metavar="URL", envvar="PMWCM_STORE", help=_STORE_HELP),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", metavar="N", help=_WORKERS_HELP)] = 8,
    request_deadline: Annotated[
        float, typer.Option("--request-deadline", metavar="SECONDS", help=_DEADLINE_HELP)
    ] = 30.0,
    build_memory: Annotated[
        int | None, typer.Option("--build-memory", metavar="BYTES", help=_BUILD_MEMORY_HELP)
    ] = None,
    build_seconds: Annotated[
        float | None,
        typer.Option("--build-seconds", metavar="SECONDS", help=_BUILD_SECONDS_HELP),
    ] = None,
    connections_file: Annotated[
        Path | None,
        typer.Option(
            "--connections", metavar="FILE", envvar="PMWCM_CONNECTIONS", help=_CONNECTIONS_HELP
        ),
    ] = None,
    spark: Annotated[bool, typer.Option("--spark", help=_SPARK_HELP)] = False,
    connection: Annotated[
        str | None, typer.Option("--connection", metavar="NAME", help=_CONNECTION_HELP)
    ] = None,
    table: Annotated[str | None, typer.Option("--table", metavar="TABLE", help=_TABLE_HELP)] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", metavar="[duckdb|spark]", help=_ENGINE_HELP)
    ] = None,
) -> None:
    """Serve private CM queries over HTTP, durably (answers survive kill -9).

    At first start the curator token is printed once on stdout. With --data (or
    --connection NAME --table TABLE, or --engine spark), --schema, --epsilon and
    --delta a session (default name 'default') is created at first start and
    checked at every later one. --backend,
    --hypothesis-memory and --support-size set those session parameters (as
    --params would); the session's status reports the backend chosen and why.
    Sessions created over HTTP may only use files under the --data-dir directories,
    and databases through the connections named in --connections (Spark with --spark).
    With --store postgresql://... instead of --state, several processes share the
    sessions, ledgers and answer logs (each session is locked in the database).
    """
    try:
        import uvicorn
        from pydantic import ValidationError

        from pmwcm.service import (
            SQLiteStore,
            StateStore,
            StoreError,
            bootstrap_curator,
            create_app,
        )
        from pmwcm.service.build import SessionUnavailable, session_config
        from pmwcm.service.limits import (
            MAX_BODY_BYTES,
            MAX_BUILD_MEMORY,
            MAX_BUILD_SECONDS,
            BuildLimits,
        )
        from pmwcm.service.models import SessionCreate
    except ModuleNotFoundError as err:
        raise missing_service_extra(err, "serve") from None

    located = data is not None or connection is not None or table is not None
    wanted = (located or None, schema, epsilon, delta)
    if any(v is not None for v in wanted) and any(v is None for v in wanted):
        raise _fail(
            "--data (or --connection/--table), --schema, --epsilon and --delta go together."
        )
    if epsilon is not None and delta is not None:
        from pmwcm.cli.common import check_budget

        check_budget(epsilon, delta)  # the range run and synth accept, in the same words
    flags = _backend_flags(backend, hypothesis_memory, support_size)
    if flags and not located:
        raise _fail("--backend, --hypothesis-memory and --support-size need --data (a session).")
    dirs = list(data_dir or [])
    if not dirs and located and schema is not None:
        dirs = list(dict.fromkeys(p.resolve().parent for p in (data, schema) if p is not None))
    for directory in dirs:
        if not directory.is_dir():
            raise _fail(f"--data-dir {str(directory)!r} is not a directory.")
    limit = MAX_BODY_BYTES if max_body_bytes is None else max_body_bytes
    if limit < 1:
        raise _fail(f"--max-body-bytes must be positive, got {limit}.")
    if workers < 1:
        raise _fail(f"--workers must be positive, got {workers}.")
    if not (math.isfinite(request_deadline) and request_deadline > 0):
        raise _fail(f"--request-deadline must be a positive number, got {request_deadline}.")
    seconds = MAX_BUILD_SECONDS if build_seconds is None else build_seconds
    if not math.isfinite(seconds):
        raise _fail(f"--build-seconds must be a positive number, got {seconds}.")
    try:
        memory = MAX_BUILD_MEMORY if build_memory is None else build_memory
        build_limits = BuildLimits(max_memory=memory, max_seconds=seconds)
    except ValueError:
        raise _fail("--build-memory and --build-seconds must be positive.") from None
    if (state is None) == (store_url is None):
        raise _fail("give exactly one of --state DIR and --store postgresql://...")
    connections = _connections(connections_file, spark=spark)
    check_port_free(host, port)
    try:
        if store_url is not None:
            if not store_url.startswith(("postgresql://", "postgres://")):
                raise _fail("--store must be a postgresql:// URL.")
            from pmwcm.service.postgres_store import PostgresStore

            store: StateStore = PostgresStore(store_url)
        else:
            assert state is not None
            store = SQLiteStore(state)
    except (StoreError, OSError) as err:
        raise _fail(str(err)) from None
    app = create_app(
        store,
        data_dirs=dirs,
        max_body_bytes=limit,
        workers=workers,
        request_deadline=request_deadline,
        connections=connections,
        build_limits=build_limits,
    )
    try:
        if located:
            given = {"connection": connection, "table": table, "engine": engine}
            body = SessionCreate.model_validate(
                {
                    "name": session,
                    **({} if data is None else {"data_path": str(data)}),
                    **{k: v for k, v in given.items() if v is not None},
                    "schema_path": str(schema),
                    "epsilon": epsilon,
                    "delta": delta,
                    "parameters": _parameters(params, flags),
                    "accept_drafted_schema": accept_drafted_schema,
                }
            )
            config = session_config(
                data_path=body.data_path,
                schema_path=body.schema_path,
                epsilon=body.epsilon,
                delta=body.delta,
                parameters=body.parameters.model_dump(exclude_unset=True),
                accept_drafted_schema=body.accept_drafted_schema,
                accept_hint="--accept-drafted-schema",
                connection=body.connection,
                table=body.table,
                engine=body.engine,
                connections=connections,
            )
            _start_session(app, session, config)
        token = bootstrap_curator(store, rotate=rotate_curator_token)
    except (ValidationError, ValueError, StoreError, SessionUnavailable) as err:
        store.close()
        if isinstance(err, ValidationError):
            raise _fail(one_line_validation_error(err)) from None
        cause = f" ({err.__cause__})" if err.__cause__ is not None else ""  # the operator's
        raise _fail(f"{err}{cause}") from None
    except BaseException:
        store.close()
        raise
    if token is not None:
        typer.echo(f"curator token (shown once; keep it secret): {token}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: serving on {host} without TLS; put a TLS proxy in front.", err=True)
    typer.echo(f"serving on http://{host}:{port} (OpenAPI at /docs)", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
