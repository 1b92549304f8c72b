"""``pmwcm serve``'s set-up before it listens: its options checked, the store opened,
the start session created (or checked against the stored one), the curator token.

Everything here runs before a token is made or printed, and refuses a fault in
one line (:func:`~pmwcm.cli.common.fail`); the operator's own values (paths,
limits) may be quoted, never a secret.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pmwcm.cli.common import check_budget, fail

if TYPE_CHECKING:
    from pmwcm.service import StateStore


def check_port_free(host: str, port: int) -> None:
    """Refuses, before any token is made or printed, a port another process holds.

    The probe binds as uvicorn will (``SO_REUSEADDR``, so a port in TIME_WAIT
    counts as free) and releases the port at once.
    """
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        raise fail(f"--host {host!r} cannot be resolved: {err}.") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            raise fail(
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
        raise fail(
            f"session {name!r} exists with another configuration; its data, budget and "
            "parameters cannot change (start without --data, or use --session NEW)."
        )


def backend_flags(
    backend: str | None, hypothesis_memory: str | None, support_size: int | None
) -> dict[str, Any]:
    """The backend flags given, as session parameters."""
    from pmwcm.cli.memory_size import MemorySizeError, parse_memory

    flags: dict[str, Any] = {}
    if backend is not None:
        flags["backend"] = backend
    if hypothesis_memory is not None:
        try:
            flags["hypothesis_memory"] = parse_memory(hypothesis_memory)
        except MemorySizeError as exc:
            raise fail(str(exc)) from None
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


def connections_of(path: Path | None, *, spark: bool) -> Any:
    """The operator's named connections (:class:`pmwcm.service.connections.Connections`)."""
    from pmwcm.service.connections import Connections

    if path is None:
        return Connections(spark=spark)
    try:
        connections = Connections.from_file(path, spark=spark)
    except ValueError as err:
        raise fail(f"--connections: {err}") from None
    if path.stat().st_mode & 0o077:
        typer.echo(
            f"warning: --connections file '{path}' is readable by other users (chmod 600 it).",
            err=True,
        )
    return connections


def check_session_flags(
    located: bool, schema: Path | None, epsilon: float | None, delta: float | None
) -> None:
    """The start session's flags go together, and its budget is in the range ``run`` takes."""
    wanted = (located or None, schema, epsilon, delta)
    if any(v is not None for v in wanted) and any(v is None for v in wanted):
        raise fail("--data (or --connection/--table), --schema, --epsilon and --delta go together.")
    if epsilon is not None and delta is not None:
        check_budget(epsilon, delta)  # the range run and synth accept, in the same words


def data_dirs(
    given: list[Path] | None, located: bool, data: Path | None, schema: Path | None
) -> list[Path]:
    """``--data-dir`` (default: the directories of ``--data`` and ``--schema``), each checked."""
    dirs = list(given or [])
    if not dirs and located and schema is not None:
        dirs = list(dict.fromkeys(p.resolve().parent for p in (data, schema) if p is not None))
    for directory in dirs:
        if not directory.is_dir():
            raise fail(f"--data-dir {str(directory)!r} is not a directory.")
    return dirs


def service_limits(
    max_body_bytes: int | None,
    workers: int,
    request_deadline: float,
    build_memory: int | None,
    build_seconds: float | None,
) -> dict[str, Any]:
    """The service's limits, checked, as :func:`pmwcm.service.create_app` keyword arguments."""
    from pmwcm.service.limits import (
        MAX_BODY_BYTES,
        MAX_BUILD_MEMORY,
        MAX_BUILD_SECONDS,
        BuildLimits,
    )

    limit = MAX_BODY_BYTES if max_body_bytes is None else max_body_bytes
    if limit < 1:
        raise fail(f"--max-body-bytes must be positive, got {limit}.")
    if workers < 1:
        raise fail(f"--workers must be positive, got {workers}.")
    if not (math.isfinite(request_deadline) and request_deadline > 0):
        raise fail(f"--request-deadline must be a positive number, got {request_deadline}.")
    seconds = MAX_BUILD_SECONDS if build_seconds is None else build_seconds
    if not math.isfinite(seconds):
        raise fail(f"--build-seconds must be a positive number, got {seconds}.")
    try:
        memory = MAX_BUILD_MEMORY if build_memory is None else build_memory
        build_limits = BuildLimits(max_memory=memory, max_seconds=seconds)
    except ValueError:
        raise fail("--build-memory and --build-seconds must be positive.") from None
    return {
        "max_body_bytes": limit,
        "workers": workers,
        "request_deadline": request_deadline,
        "build_limits": build_limits,
    }


def open_store(state: Path | None, store_url: str | None) -> StateStore:
    """The state store: SQLite under ``--state``, or the PostgreSQL of ``--store`` (one
    of them is given)."""
    from pmwcm.service import SQLiteStore, StoreError

    try:
        if store_url is not None:
            if not store_url.startswith(("postgresql://", "postgres://")):
                raise fail("--store must be a postgresql:// URL.")
            from pmwcm.service.postgres_store import PostgresStore

            return PostgresStore(store_url)
        assert state is not None
        return SQLiteStore(state)
    except (StoreError, OSError) as err:
        raise fail(str(err)) from None


def session_request(
    name: str,
    schema: Path | None,
    epsilon: float | None,
    delta: float | None,
    *,
    given: dict[str, Any],
    accept_drafted: bool,
) -> dict[str, Any]:
    """The start session's ``SessionCreate`` fields from the flags (``given``: ``--data``,
    ``--connection``, ``--table``, ``--engine``, those not given being ``None``), all but
    its ``parameters`` (:func:`prepare` adds them)."""
    data = given.get("data")
    located = {k: v for k, v in given.items() if k != "data" and v is not None}
    return {
        "name": name,
        **({} if data is None else {"data_path": str(data)}),
        **located,
        "schema_path": str(schema),
        "epsilon": epsilon,
        "delta": delta,
        "accept_drafted_schema": accept_drafted,
    }


def prepare(
    app: Any,
    store: StateStore,
    session: dict[str, Any] | None,
    *,
    params: str | None,
    flags: dict[str, Any],
    rotate: bool,
    connections: Any,
) -> str | None:
    """Creates (or checks) the start session described by ``session`` (``SessionCreate``'s
    fields but its ``parameters``: ``--params`` merged with the backend ``flags``), then
    the curator token: the new one to print, or ``None``. Closes the store on any failure."""
    from pydantic import ValidationError

    from pmwcm.service import StoreError, bootstrap_curator
    from pmwcm.service.build import SessionUnavailable, session_config
    from pmwcm.service.models import SessionCreate

    try:
        if session is not None:
            parameters = _parameters(params, flags)
            body = SessionCreate.model_validate(session | {"parameters": parameters})
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
            _start_session(app, body.name, config)
        return bootstrap_curator(store, rotate=rotate)
    except (ValidationError, ValueError, StoreError, SessionUnavailable) as err:
        store.close()
        if isinstance(err, ValidationError):
            raise fail(one_line_validation_error(err)) from None
        cause = f" ({err.__cause__})" if err.__cause__ is not None else ""  # the operator's
        raise fail(f"{err}{cause}") from None
    except BaseException:
        store.close()
        raise
