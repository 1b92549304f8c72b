"""The curator's routes on sessions: create and build one, follow or cancel its build,
list them, read a session's ledger and its release log.

Creating a session starts its build in its own process (:mod:`pmwcm.service.build_jobs`)
and answers 202 once the build has started, or 201 with the session when it is ready
within ``?wait=``; a body that cannot be built is a 422 naming the field, with nothing
charged. A session's files are shown relative to their data directory, never as a
server path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path as FilePath
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from pmwcm.kernels.queries import CMQuery
from pmwcm.service import models as m
from pmwcm.service.build_jobs import BuildStatus
from pmwcm.service.dependencies import (
    Curator,
    SessionName,
    builds_of,
    live,
    runner_of,
    sessions_of,
    store_of,
)
from pmwcm.service.http_errors import ERRORS, SESSION_ERRORS, TOO_LARGE, fail, invalid
from pmwcm.service.limits import BuildLimits
from pmwcm.service.locations import SessionUnavailable
from pmwcm.service.response_models import BuildOut, ErrorOut, LedgerOut, ReleaseOut, SessionOut
from pmwcm.service.session_config import session_config
from pmwcm.service.store import StoreError

router = APIRouter()
"""``/v1/sessions`` (create, list), a session's build, ledger and release log."""

#: How long session creation waits for its build to start (open the data, check its
#: declared cost) before it answers 202 anyway (the first build also starts the
#: build processes' server, a few seconds).
PREFLIGHT_WAIT_SECONDS = 120.0
#: The longest ``?wait=`` a creation may ask for.
MAX_CREATE_WAIT_SECONDS = 600.0


def config_of_request(
    request: Request, body: m.SessionCreate, *, build_limits: BuildLimits | None = None
) -> dict[str, Any]:
    """The stored configuration of a session creation body, with the server's data
    directories and connections (creation and the console's plan read it alike).

    Raises:
        ValueError, SessionUnavailable: as :func:`~pmwcm.service.session_config.session_config`.
    """
    return session_config(
        data_path=body.data_path,
        schema_path=body.schema_path,
        epsilon=body.epsilon,
        delta=body.delta,
        parameters=body.parameters.model_dump(exclude_unset=True),
        public_data_path=body.public_data_path,
        accept_drafted_schema=body.accept_drafted_schema,
        data_dirs=request.app.state.data_dirs,
        connection=body.connection,
        table=body.table,
        engine=body.engine,
        connections=sessions_of(request).connections,
        build_limits=build_limits,
    )


def released_spec(key: str) -> dict[str, Any]:
    """The canonical spec a release-log key names (:func:`pmwcm.engine.online.query_key`)."""
    return CMQuery.from_dict(json.loads(key.removeprefix("cm:"))).to_dict()


@router.post(
    "/v1/sessions",
    status_code=202,
    response_model=BuildOut,
    responses={
        **ERRORS,
        201: {"model": SessionOut, "description": "Built within the ?wait= seconds."},
        409: {"model": ErrorOut, "description": "The name is taken."},
        **TOO_LARGE,
    },
    tags=["curator"],
)
def create_session(
    request: Request,
    body: m.SessionCreate,
    _: Curator,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_CREATE_WAIT_SECONDS,
            description="Seconds to wait for the build to end (default 0: answer 202 once "
            "it has started); a build that ends ready within them answers 201 and the session.",
        ),
    ] = 0.0,
) -> Any:
    """Starts building a release session over a dataset and schema on the server (curator).

    Answers 202 with the build's status (``Location``: the status to poll) once the
    build has started: the data opened and its declared cost within the server's
    limits. A build that cannot start (bad files or parameters, over a limit) is a
    422 naming the field, with nothing charged and no session created.
    """
    builds = builds_of(request)
    try:
        config = config_of_request(request, body, build_limits=builds.limits)
        status = builds.start(body.name, config, wait=PREFLIGHT_WAIT_SECONDS)
    except StoreError as err:
        raise fail(409, str(err)) from None
    except (ValueError, SessionUnavailable) as err:
        return invalid(str(err))
    if wait > 0:
        status = builds.wait(body.name, wait) or status
        if status.state == "ready":
            record = store_of(request).get_session(body.name)
            if record is not None:
                dirs = request.app.state.data_dirs
                content = session_out(record.name, record.created, record.config, dirs)
                return JSONResponse(status_code=201, content=content)
    location = {"Location": f"/v1/sessions/{body.name}/build"}
    return JSONResponse(status_code=202, content=build_out(request, status), headers=location)


@router.get(
    "/v1/sessions/{name}/build",
    response_model=BuildOut,
    responses={**ERRORS, 404: {"model": ErrorOut, "description": "No such build."}},
    tags=["curator"],
)
def build_status(request: Request, name: SessionName, _: Curator) -> Any:
    """The session's build: building, ready, failed (with a public reason) or cancelled."""
    status = builds_of(request).status(name)
    if status is None:
        raise fail(404, f"No session or build named {name!r}.")
    return build_out(request, status)


@router.delete(
    "/v1/sessions/{name}/build",
    response_model=BuildOut,
    responses={
        **ERRORS,
        404: {"model": ErrorOut, "description": "No such build."},
        409: {"model": ErrorOut, "description": "The build already ended ready."},
    },
    tags=["curator"],
)
def cancel_build(request: Request, name: SessionName, _: Curator) -> Any:
    """Cancels the session's build (curator): its process is stopped and its memory freed;
    nothing is charged and no session is created. A build that ended is left as it is
    (a ready session is a 409)."""
    status = builds_of(request).cancel(name)
    if status is None:
        raise fail(404, f"No session or build named {name!r}.")
    if status.state == "ready":
        raise fail(409, f"Session {name!r} is built; a built session is not cancelled.")
    return build_out(request, status)


def build_out(request: Request, status: BuildStatus) -> dict[str, Any]:
    """A build's status as the API shows it (:class:`~pmwcm.service.response_models.BuildOut`),
    with the session once it is ready."""
    out: dict[str, Any] = {k: getattr(status, k) for k in BuildOut.model_fields if k != "session"}
    out["session"] = None
    if status.state == "ready":
        record = store_of(request).get_session(status.name)
        if record is not None:
            dirs = request.app.state.data_dirs
            out["session"] = session_out(record.name, record.created, record.config, dirs)
    return out


@router.get("/v1/sessions", response_model=list[SessionOut], responses=ERRORS, tags=["curator"])
def list_sessions(request: Request, _: Curator) -> list[dict[str, Any]]:
    """All sessions (curator)."""
    dirs = request.app.state.data_dirs
    return [
        session_out(r.name, r.created, r.config, dirs) for r in store_of(request).list_sessions()
    ]


@router.get(
    "/v1/sessions/{name}/ledger",
    response_model=LedgerOut,
    responses=SESSION_ERRORS,
    tags=["curator"],
)
async def ledger(request: Request, name: SessionName, who: Curator) -> Any:
    """Every committed debit of the session, orphans included (curator)."""
    session = await anyio.to_thread.run_sync(lambda: live(request, name, who))
    lines, status = await runner_of(request).run(
        request, name, lambda _, wait: (session.ledger(wait=wait), session.status(wait=wait))
    )
    return {
        "session": name,
        "epsilon": status.epsilon,
        "delta": status.delta,
        "accountant": session.record.config["parameters"]["accountant"],
        "epsilon_spent": status.epsilon_spent,
        "entries": [vars(line) for line in lines],
    }


@router.get(
    "/v1/sessions/{name}/answers",
    response_model=list[ReleaseOut],
    responses=SESSION_ERRORS,
    tags=["curator"],
)
def answers(request: Request, name: SessionName, who: Curator) -> Any:
    """The release log: every answered request, in order (curator)."""
    live(request, name, who)
    return [
        {
            "index": r.index,
            "query": released_spec(r.query_key),
            "theta": r.answer["value"],
            "source": r.answer["source"],
            "repeated": r.answer["repeated"],
            "token_id": r.token_id,
        }
        for r in store_of(request).releases(name)
    ]


def _shown_path(path: str | None, data_dirs: Sequence[FilePath]) -> str | None:
    """A session file as responses show it: relative to its data directory, else its name
    (never an absolute server path)."""
    if path is None:
        return None
    file = FilePath(path)
    for directory in data_dirs:
        if file.is_relative_to(directory):
            return str(file.relative_to(directory))
    return file.name


def session_out(
    name: str, created: float, config: dict[str, Any], data_dirs: Sequence[FilePath]
) -> dict[str, Any]:
    """A stored session as the curator sees it (:class:`~pmwcm.service.response_models.SessionOut`):
    its files relative to ``data_dirs``."""
    paths = ("data_path", "schema_path", "public_data_path")
    accepted = bool(config.get("drafted_schema_accepted", False))
    return {
        "name": name,
        "created": created,
        **{k: _shown_path(config.get(k), data_dirs) for k in paths},
        **{k: config.get(k) for k in ("connection", "table", "engine")},
        **{k: config.get(k) for k in ("epsilon", "delta", "parameters", "plan")},
        "drafted_schema_accepted": accepted,
    }
