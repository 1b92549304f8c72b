"""``pmwcm serve``: the durable, authenticated HTTP query service (:mod:`pmwcm.service`).

It needs the ``service`` extra; without it the command says so in one line
(:func:`missing_service_extra`, shared with ``pmwcm ask``). Its options are
declared in :mod:`pmwcm.cli.serve_options`, its set-up before it listens in
:mod:`pmwcm.cli.serve_setup`.
"""

from __future__ import annotations

import typer

from pmwcm.cli.common import fail
from pmwcm.cli.serve_options import (
    AcceptDraftedOption,
    BackendOption,
    BuildMemoryOption,
    BuildSecondsOption,
    ConnectionOption,
    ConnectionsOption,
    DataDirOption,
    DataOption,
    DeadlineOption,
    DeltaOption,
    EngineOption,
    EpsilonOption,
    HostOption,
    MaxBodyOption,
    MemoryOption,
    ParamsOption,
    PortOption,
    RotateOption,
    SchemaOption,
    SessionOption,
    SparkOption,
    StateOption,
    StoreOption,
    SupportOption,
    TableOption,
    WorkersOption,
)

#: The top-level modules the ``service`` extra brings.
SERVICE_MODULES = frozenset({"fastapi", "starlette", "uvicorn", "httpx", "pydantic", "psycopg"})


def missing_service_extra(err: ModuleNotFoundError, command: str) -> typer.Exit:
    """The one-line error for ``pmwcm <command>`` without the ``service`` extra.

    Raises:
        ModuleNotFoundError: ``err`` itself, when the missing module is not one
            the extra provides (a broken install, not a missing extra).
    """
    root = (err.name or "").partition(".")[0]
    if root not in SERVICE_MODULES:
        raise err
    return fail(
        f"pmwcm {command} needs the 'service' extra (module {root!r} is not installed): "
        "pip install 'pmwcm[service]'"
    )


def serve_command(
    state: StateOption = None,
    data: DataOption = None,
    schema: SchemaOption = None,
    epsilon: EpsilonOption = None,
    delta: DeltaOption = None,
    params: ParamsOption = None,
    session: SessionOption = "default",
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    rotate_curator_token: RotateOption = False,
    accept_drafted_schema: AcceptDraftedOption = False,
    backend: BackendOption = None,
    hypothesis_memory: MemoryOption = None,
    support_size: SupportOption = None,
    data_dir: DataDirOption = None,
    max_body_bytes: MaxBodyOption = None,
    store_url: StoreOption = None,
    workers: WorkersOption = 8,
    request_deadline: DeadlineOption = 30.0,
    build_memory: BuildMemoryOption = None,
    build_seconds: BuildSecondsOption = None,
    connections_file: ConnectionsOption = None,
    spark: SparkOption = False,
    connection: ConnectionOption = None,
    table: TableOption = None,
    engine: EngineOption = None,
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

        from pmwcm.cli import serve_setup as setup
        from pmwcm.service import create_app
    except ModuleNotFoundError as err:
        raise missing_service_extra(err, "serve") from None

    located = data is not None or connection is not None or table is not None
    setup.check_session_flags(located, schema, epsilon, delta)
    flags = setup.backend_flags(backend, hypothesis_memory, support_size)
    if flags and not located:
        raise fail("--backend, --hypothesis-memory and --support-size need --data (a session).")
    dirs = setup.data_dirs(data_dir, located, data, schema)
    limits = setup.service_limits(
        max_body_bytes, workers, request_deadline, build_memory, build_seconds
    )
    if (state is None) == (store_url is None):
        raise fail("give exactly one of --state DIR and --store postgresql://...")
    connections = setup.connections_of(connections_file, spark=spark)
    setup.check_port_free(host, port)
    store = setup.open_store(state, store_url)
    app = create_app(store, data_dirs=dirs, connections=connections, **limits)
    given = {"data": data, "connection": connection, "table": table, "engine": engine}
    request = setup.session_request(
        session, schema, epsilon, delta, given=given, accept_drafted=accept_drafted_schema
    ) if located else None  # fmt: skip
    token = setup.prepare(
        app, store, request, params=params, flags=flags, rotate=rotate_curator_token,
        connections=connections,
    )  # fmt: skip
    if token is not None:
        typer.echo(f"curator token (shown once; keep it secret): {token}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: serving on {host} without TLS; put a TLS proxy in front.", err=True)
    typer.echo(f"serving on http://{host}:{port} (OpenAPI at /docs)", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
