"""The HTTP API: FastAPI routes over sessions, tokens and the durable store.

**Privacy statement.** Each session runs one online PMW engine
(:class:`pmwcm.engine.online.OnlinePMW`, practical mode) over one private dataset, and
its ledger composes every privacy event of the interaction -- the sparse
vector once, each oracle call -- under the session's total ``(epsilon,
delta)``. Analysts, however many and however adaptive, only ever receive the
engine's released answers (theta, its source, the remaining budget), so the
whole transcript of a session is ``(epsilon, delta)``-DP with respect to
replacing one record of its dataset (Ullman 2015, Theorem "dp"; docs/design.md
section 4). Nothing is answered over budget: the ledger refuses an event
before its noise is drawn, and a spent budget or a halted engine is a 409.
Raw data, true answers and errors, the sparse vector's noisy threshold and the
hypothesis never leave the server. Repeats of a released query are served
from the log. A crash at any instant loses no debit and re-draws no released
answer (:mod:`pmwcm.service.durable`). Noise is OpenDP's, seeded by the OS
CSPRNG; a session's status names its noise source (``noise``).

**Refusals.** A query is validated by :meth:`~pmwcm.kernels.queries.CMQuery.from_dict`
alone and compiled once, by the engine. It is refused (422) only for reasons
decided from public inputs before the data or the budget is touched: a spec
that does not fit the schema (:class:`~pmwcm.errors.InvalidQuery`) or
constants too costly for the bounded real-data solve
(:class:`~pmwcm.errors.Refused`); a spent budget or a halt is a 409. One
table, :data:`REFUSALS`, maps the :mod:`pmwcm.errors` hierarchy to these
answers. Nothing that reads the data raises by design; should anything else
escape, it is a bug: the caller gets a bare 500 and never the exception's text.
A schema drafted from the data (``pmwcm schema``) is refused at session creation unless
``accept_drafted_schema`` is true.

**Limits** (:mod:`pmwcm.service.limits`, all public). A request body over the
limit (1 MB, 1000000 bytes, by default; ``pmwcm serve --max-body-bytes``) is refused with 413
before it is read; a body that strict JSON cannot carry (``NaN``, ``Infinity``,
``1e400``, a lone surrogate) with 422 (:mod:`pmwcm.service.guard`). A query
over the limits on radius, features, interactions or name lengths is refused
with 422 before its session is loaded. Every error message is short and
bounded, and quotes nothing of the request but a truncated field name.

**Bounded work and the worker model** (:mod:`pmwcm.service.workers`). A
request queues on its session in the event loop, holding no thread, and its
work runs on a bounded pool of workers (``pmwcm serve --workers``), one per
session at a time; ``/health`` and other sessions are never queued behind a
slow session. A request whose work has not started within the deadline
(``pmwcm serve --request-deadline``, 30 s by default) is refused with 503 and
``Retry-After``, nothing spent; a client that goes away before its work starts
costs nothing. Once the data is read, the work always runs to its commit, so
the answer is durable and a retry gets it from the log.

**Session builds** (:mod:`pmwcm.service.build_jobs`). Creating a session runs its
build (the paid prior's measurement and fit) in its own process: ``POST /v1/sessions``
answers 202 with the build's status as soon as the build has started (its data opened,
its declared memory and time within the server's limits), or a 422 naming the field
and the limit, with nothing charged, if it cannot start. ``GET
/v1/sessions/{name}/build`` tells ``building``, ``ready``, ``failed`` (a public reason)
or ``cancelled``; ``DELETE`` on it stops the build's process. The session, the prior's
debit and its hypothesis are committed together when the build ends: a build that
never ends charges nothing. ``?wait=SECONDS`` on the creation waits for the build
(201 and the session if it is ready by then); a request on a session still being
built waits for it up to the request deadline.

**Idempotent retries.** A query sent with an ``Idempotency-Key`` header (1-255
visible ASCII characters) has its response kept in the store, committed with
its answer; a retry with the same key, from the same token, gets the original
response byte for byte, after any restart. The same key with another body is
a 422. Refusals are not kept: they are decided from public inputs, and a retry
is refused again.

**Files and databases.** A session's ``data_path``, ``schema_path`` and ``public_data_path``
must lie under the data directories the operator allows at start-up
(``pmwcm serve --data-dir``); no response carries a line of a file or a
server path (a session's paths are shown relative to their data directory).
A PostgreSQL table is read through a connection the operator named at start-up
(``pmwcm serve --connections``), by its name: its URL and password never pass
through the API, the store or the log (:mod:`pmwcm.service.locations`).

**Roles.** The routes come in three groups: ``health_routes`` (open and
identity), ``analyst_routes`` and ``curator_routes``. Every ``/v1`` route
needs ``Authorization: Bearer <token>``. The
curator creates sessions, issues and revokes analyst tokens and reads ledgers
and release logs; an analyst token is scoped to one session and can submit
queries and read that session's budget. ``/health`` is open.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path as FilePath
from typing import Annotated, Any

import anyio
from fastapi import (
    APIRouter,
    Body,
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from pmwcm.engine.online import SYNTHETIC_ANSWER_WARNING
from pmwcm.errors import BudgetExhausted, Halted, InvalidQuery, PmwcmError, Refused
from pmwcm.kernels.coefficients import coefficient_names, on_boundary
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NoiseSource, default_noise
from pmwcm.service import models as m
from pmwcm.service.auth import Principal, authenticate, new_token, verify
from pmwcm.service.build import session_config
from pmwcm.service.build_jobs import BuildRunner, BuildStatus
from pmwcm.service.connections import Connections
from pmwcm.service.guard import BodyGuard, clean_errors, invalid_body, safe
from pmwcm.service.limits import MAX_BODY_BYTES, QUERY_LIMITS, BuildLimits, check_query
from pmwcm.service.sessions import (
    Abandoned,
    Idempotency,
    IdempotencyConflict,
    LiveSession,
    Reply,
    SessionManager,
    SessionNotFound,
    SessionUnavailable,
)
from pmwcm.service.store import StateStore, StoreBusy, StoreError, TokenRecord
from pmwcm.service.workers import DEFAULT_DEADLINE_SECONDS, DEFAULT_WORKERS, SessionRunner

_bearer = HTTPBearer(auto_error=False, description="A curator or analyst token.")
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": m.ErrorOut, "description": "The request body is not parseable JSON."},
    401: {"model": m.ErrorOut, "description": "Missing, unknown or revoked token."},
    403: {"model": m.ErrorOut, "description": "The token's role or session does not allow this."},
}
_TOO_LARGE: dict[int | str, dict[str, Any]] = {
    413: {"model": m.ErrorOut, "description": "The request body is over the size limit."},
}
_SESSION_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": m.ErrorOut, "description": "The request body is not parseable JSON."},
    **_ERRORS,
    404: {"model": m.ErrorOut, "description": "No such session."},
    503: {
        "model": m.ErrorOut,
        "description": "The session cannot be loaded, or was busy past the request deadline "
        "(nothing was spent; retry after the Retry-After header's seconds).",
    },
}
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Makes a retry safe: the same key (1-255 visible ASCII characters) from "
        "the same token returns the original response byte for byte, even after a restart; "
        "the same key with another body is a 422.",
    ),
]
SessionName = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
#: How long session creation waits for its build to start (open the data, check its
#: declared cost) before it answers 202 anyway (the first build also starts the
#: build processes' server, a few seconds).
PREFLIGHT_WAIT_SECONDS = 120.0
#: The longest ``?wait=`` a creation may ask for.
MAX_CREATE_WAIT_SECONDS = 600.0


def _fail(status: int, detail: str) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return HTTPException(status_code=status, detail=safe(detail), headers=headers)


def _invalid(message: str) -> JSONResponse:
    """A 422 in FastAPI's validation-error shape, for errors found past the models."""
    return JSONResponse(status_code=422, content=invalid_body(message))


REFUSALS: dict[type[PmwcmError], tuple[int, str]] = {
    InvalidQuery: (422, "{err}"),
    Refused: (422, "Refused before any budget was spent: {err}"),
    BudgetExhausted: (409, "Privacy budget exhausted: {err}"),
    Halted: (409, "Privacy budget exhausted: {err}"),
}
"""How each deliberate refusal (:mod:`pmwcm.errors`) is answered: status and detail.

A 422 has FastAPI's validation-error shape; anything not a
:class:`~pmwcm.errors.PmwcmError` is a bug, answered 500 without its text.
"""


def _refusal(err: PmwcmError) -> JSONResponse:
    """The response :data:`REFUSALS` gives ``err`` (the nearest base class wins)."""
    status, template = next(REFUSALS[c] for c in type(err).__mro__ if c in REFUSALS)
    detail = template.format(err=err)
    if status == 422:
        return _invalid(detail)
    return JSONResponse(status_code=status, content={"detail": safe(detail)})


_QUERY_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": m.QuerySpec.model_json_schema()}},
    }
}


def _released_spec(key: str) -> dict[str, Any]:
    """The canonical spec a release-log key names (:func:`pmwcm.engine.online.query_key`)."""
    return CMQuery.from_dict(json.loads(key.removeprefix("cm:"))).to_dict()


def _token_out(record: TokenRecord) -> dict[str, Any]:
    return {
        "token_id": record.token_id,
        "role": record.role,
        "session": record.session,
        "label": record.label,
        "created": record.created,
        "revoked": record.revoked,
    }


async def _principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if creds is None:
        raise _fail(401, "Send 'Authorization: Bearer <token>'.")
    store: StateStore = request.app.state.store
    presented = creds.credentials
    record = store.cached_token(presented.partition(".")[0])
    if record is not None:  # in memory: checked in the event loop, no thread
        who = verify(record, presented)
    else:
        who = await anyio.to_thread.run_sync(authenticate, store, presented)
    if who is None:
        raise _fail(401, "Unknown or revoked token.")
    return who


Caller = Annotated[Principal, Depends(_principal)]


def _curator(who: Caller) -> Principal:
    if who.role != "curator":
        raise _fail(403, "This needs the curator's token.")
    return who


Curator = Annotated[Principal, Depends(_curator)]


health_routes = APIRouter()
"""Open and identity routes: ``/health`` (no token) and ``/v1/me``."""

analyst_routes = APIRouter()
"""The analyst's routes: a session's status and its queries."""

curator_routes = APIRouter()
"""The curator's routes: sessions, tokens, ledgers and release logs."""


def _store(request: Request) -> StateStore:
    store: StateStore = request.app.state.store
    return store


def config_of_request(
    request: Request, body: m.SessionCreate, *, build_limits: BuildLimits | None = None
) -> dict[str, Any]:
    """The stored configuration of a session creation body, with the server's data
    directories and connections (creation and the console's plan read it alike).

    Raises:
        ValueError, SessionUnavailable: as :func:`~pmwcm.service.build.session_config`.
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
        connections=_sessions(request).connections,
        build_limits=build_limits,
    )


def _builds(request: Request) -> BuildRunner:
    builds: BuildRunner = request.app.state.builds
    return builds


def _sessions(request: Request) -> SessionManager:
    sessions: SessionManager = request.app.state.sessions
    return sessions


def _authorize(name: str, who: Principal, *, analyst_only: bool = False) -> None:
    """403 unless ``who`` may use session ``name`` (nothing is loaded)."""
    allowed = who.role == "analyst" and who.session == name
    if not allowed and (analyst_only or who.role != "curator"):
        raise _fail(403, f"This token may not use session {name!r}.")


def _live(
    request: Request, name: str, who: Principal, *, analyst_only: bool = False
) -> LiveSession:
    """The session ``name`` if ``who`` may use it (403 if not, 404 if there is none)."""
    _authorize(name, who, analyst_only=analyst_only)
    try:
        return _sessions(request).get(name)
    except SessionNotFound:
        pass
    # A session still being built is waited for, up to the request deadline.
    status = _builds(request).wait(name, _runner(request).deadline)
    if status is not None and status.state == "building":
        raise StoreBusy(f"Session {name!r} is still being built; retry later.")
    try:
        return _sessions(request).get(name)
    except SessionNotFound:
        raise _fail(404, f"No session named {name!r}.") from None


async def _live_async(
    request: Request, name: str, who: Principal, *, analyst_only: bool = False
) -> LiveSession:
    """:func:`_live` from the event loop: a session already live is found without a thread."""
    _authorize(name, who, analyst_only=analyst_only)
    live = _sessions(request).loaded(name)
    if live is not None:
        return live
    return await anyio.to_thread.run_sync(
        lambda: _live(request, name, who, analyst_only=analyst_only)
    )


@health_routes.get("/health", tags=["meta"])
async def health() -> dict[str, str]:
    """Liveness probe (no token needed; answered in the event loop, never queued)."""
    return {"status": "ok"}


def _runner(request: Request) -> SessionRunner:
    runner: SessionRunner = request.app.state.runner
    return runner


@health_routes.get("/v1/me", response_model=m.MeOut, responses=_ERRORS, tags=["meta"])
def me(who: Caller) -> dict[str, Any]:
    """The calling token's id, role and session."""
    return {"token_id": who.token_id, "role": who.role, "session": who.session}


@analyst_routes.get(
    "/v1/sessions/{name}",
    response_model=m.StatusOut,
    responses=_SESSION_ERRORS,
    tags=["analyst"],
)
async def session_status(request: Request, name: SessionName, who: Caller) -> Any:
    """The session's budget and progress (curator, or an analyst of this session)."""
    session = await _live_async(request, name, who)
    return await _runner(request).run(request, name, lambda _, wait: session.status(wait=wait))


@analyst_routes.post(
    "/v1/sessions/{name}/queries",
    response_model=m.AnswerOut,
    responses={
        **_SESSION_ERRORS,
        409: {"model": m.ErrorOut, "description": "The privacy budget is spent."},
        **_TOO_LARGE,
    },
    tags=["analyst"],
    openapi_extra=_QUERY_BODY,
    description="Answers one CM query privately (an analyst of this session). " + QUERY_LIMITS,
)
async def ask(
    request: Request,
    name: SessionName,
    spec: Annotated[dict[str, Any], Body()],
    who: Caller,
    idempotency_key: IdempotencyKey = None,
) -> Any:
    """Answers one CM query privately (an analyst of this session).

    The body is a :class:`~pmwcm.service.models.QuerySpec`, validated by
    :meth:`CMQuery.from_dict` alone; refusals are answered from :data:`REFUSALS`.
    The response is rendered once and committed with the answer, so a retry
    with the same ``Idempotency-Key`` gets these very bytes.
    """
    _authorize(name, who, analyst_only=True)
    try:
        check_query(spec)  # the public limits, before the session is loaded
        query = m.QuerySpec.to_query(spec)
    except PmwcmError as err:
        return _refusal(err)
    idempotency = None if idempotency_key is None else Idempotency.of(idempotency_key, spec)
    session = await _live_async(request, name, who, analyst_only=True)
    if idempotency is not None:  # a retry need not queue behind the session's work
        kept = await anyio.to_thread.run_sync(
            lambda: session.store.kept_response(name, who.token_id, idempotency.key)
        )
        if kept is not None:
            try:
                kept = idempotency.check(kept)
            except IdempotencyConflict as err:
                return _invalid(str(err))
            return Response(kept.body, status_code=kept.status, media_type="application/json")
    epsilon = session.record.config["epsilon"]

    def render(answer: Any, domain: Domain) -> bytes:
        theta = [float(v) for v in answer.value]
        payload = {
            "coefficients": list(coefficient_names(query, domain)),
            "on_boundary": on_boundary(query, theta),
            "index": answer.index,
            "theta": theta,
            "source": answer.source,
            "repeated": answer.repeated,
            "updates": answer.updates,
            "epsilon_spent": answer.epsilon_spent,
            "epsilon_remaining": max(0.0, epsilon - answer.epsilon_spent),
            "delta": answer.delta,
            "warning": SYNTHETIC_ANSWER_WARNING if answer.source == "synthetic" else None,
        }
        return m.AnswerOut.model_validate(payload).model_dump_json().encode("utf-8")

    def work(proceed: Callable[[], None], wait: float) -> Reply:
        return session.respond(
            query,
            token_id=who.token_id,
            render=render,
            idempotency=idempotency,
            proceed=proceed,
            wait=wait,
        )

    try:
        reply = await _runner(request).run(request, name, work)
    except PmwcmError as err:  # decided from the spec, the domain and n only
        return _refusal(err)
    except IdempotencyConflict as err:
        return _invalid(str(err))
    except (StoreBusy, Abandoned):
        raise  # the app's handlers: 503 with Retry-After, nothing spent
    except StoreError as err:
        detail = f"The answer could not be committed, so it was not released: {err}"
        raise _fail(503, detail) from None
    return Response(reply.body, status_code=reply.status, media_type="application/json")


@curator_routes.post(
    "/v1/sessions",
    status_code=202,
    response_model=m.BuildOut,
    responses={
        **_ERRORS,
        201: {"model": m.SessionOut, "description": "Built within the ?wait= seconds."},
        409: {"model": m.ErrorOut, "description": "The name is taken."},
        **_TOO_LARGE,
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
    builds = _builds(request)
    try:
        config = config_of_request(request, body, build_limits=builds.limits)
        status = builds.start(body.name, config, wait=PREFLIGHT_WAIT_SECONDS)
    except StoreError as err:
        raise _fail(409, str(err)) from None
    except (ValueError, SessionUnavailable) as err:
        return _invalid(str(err))
    if wait > 0:
        status = builds.wait(body.name, wait) or status
        if status.state == "ready":
            record = _store(request).get_session(body.name)
            if record is not None:
                dirs = request.app.state.data_dirs
                content = _session_out(record.name, record.created, record.config, dirs)
                return JSONResponse(status_code=201, content=content)
    location = {"Location": f"/v1/sessions/{body.name}/build"}
    return JSONResponse(status_code=202, content=_build_out(request, status), headers=location)


@curator_routes.get(
    "/v1/sessions/{name}/build",
    response_model=m.BuildOut,
    responses={**_ERRORS, 404: {"model": m.ErrorOut, "description": "No such build."}},
    tags=["curator"],
)
def build_status(request: Request, name: SessionName, _: Curator) -> Any:
    """The session's build: building, ready, failed (with a public reason) or cancelled."""
    status = _builds(request).status(name)
    if status is None:
        raise _fail(404, f"No session or build named {name!r}.")
    return _build_out(request, status)


@curator_routes.delete(
    "/v1/sessions/{name}/build",
    response_model=m.BuildOut,
    responses={
        **_ERRORS,
        404: {"model": m.ErrorOut, "description": "No such build."},
        409: {"model": m.ErrorOut, "description": "The build already ended ready."},
    },
    tags=["curator"],
)
def cancel_build(request: Request, name: SessionName, _: Curator) -> Any:
    """Cancels the session's build (curator): its process is stopped and its memory freed;
    nothing is charged and no session is created. A build that ended is left as it is
    (a ready session is a 409)."""
    status = _builds(request).cancel(name)
    if status is None:
        raise _fail(404, f"No session or build named {name!r}.")
    if status.state == "ready":
        raise _fail(409, f"Session {name!r} is built; a built session is not cancelled.")
    return _build_out(request, status)


def _build_out(request: Request, status: BuildStatus) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(status, k) for k in m.BuildOut.model_fields if k != "session"}
    out["session"] = None
    if status.state == "ready":
        record = _store(request).get_session(status.name)
        if record is not None:
            dirs = request.app.state.data_dirs
            out["session"] = _session_out(record.name, record.created, record.config, dirs)
    return out


@curator_routes.get(
    "/v1/sessions", response_model=list[m.SessionOut], responses=_ERRORS, tags=["curator"]
)
def list_sessions(request: Request, _: Curator) -> list[dict[str, Any]]:
    """All sessions (curator)."""
    dirs = request.app.state.data_dirs
    return [
        _session_out(r.name, r.created, r.config, dirs) for r in _store(request).list_sessions()
    ]


@curator_routes.get(
    "/v1/sessions/{name}/ledger",
    response_model=m.LedgerOut,
    responses=_SESSION_ERRORS,
    tags=["curator"],
)
async def ledger(request: Request, name: SessionName, who: Curator) -> Any:
    """Every committed debit of the session, orphans included (curator)."""
    session = await anyio.to_thread.run_sync(lambda: _live(request, name, who))
    lines, status = await _runner(request).run(
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


@curator_routes.get(
    "/v1/sessions/{name}/answers",
    response_model=list[m.ReleaseOut],
    responses=_SESSION_ERRORS,
    tags=["curator"],
)
def answers(request: Request, name: SessionName, who: Curator) -> Any:
    """The release log: every answered request, in order (curator)."""
    _live(request, name, who)
    return [
        {
            "index": r.index,
            "query": _released_spec(r.query_key),
            "theta": r.answer["value"],
            "source": r.answer["source"],
            "repeated": r.answer["repeated"],
            "token_id": r.token_id,
        }
        for r in _store(request).releases(name)
    ]


@curator_routes.post(
    "/v1/sessions/{name}/tokens",
    status_code=201,
    response_model=m.IssuedToken,
    responses={**_SESSION_ERRORS, **_TOO_LARGE},
    tags=["curator"],
)
def issue_token(request: Request, name: SessionName, body: m.TokenCreate, who: Curator) -> Any:
    """Issues an analyst token scoped to this session (curator); shown once."""
    _live(request, name, who)
    token, record = new_token(role="analyst", session=name, label=body.label)
    _store(request).add_token(record)
    return {**_token_out(record), "token": token}


@curator_routes.get(
    "/v1/sessions/{name}/tokens",
    response_model=list[m.TokenOut],
    responses=_SESSION_ERRORS,
    tags=["curator"],
)
def list_tokens(request: Request, name: SessionName, who: Curator) -> Any:
    """The session's analyst tokens, revoked ones included (curator)."""
    _live(request, name, who)
    return [_token_out(t) for t in _store(request).list_tokens(session=name)]


@curator_routes.delete(
    "/v1/tokens/{token_id}",
    status_code=204,
    responses={**_ERRORS, 404: {"model": m.ErrorOut, "description": "No such token."}},
    tags=["curator"],
)
def revoke_token(
    request: Request, token_id: Annotated[str, Path(max_length=64)], _: Curator
) -> Response:
    """Revokes an analyst token (curator). Curator tokens rotate with the CLI."""
    if not _store(request).revoke_token(token_id, role="analyst"):
        raise _fail(404, f"No active analyst token {token_id!r}.")
    return Response(status_code=204)


def create_app(
    store: StateStore,
    *,
    noise_factory: Callable[[], NoiseSource] = default_noise,
    close_store: bool = True,
    data_dirs: Sequence[str | os.PathLike[str]] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    workers: int = DEFAULT_WORKERS,
    request_deadline: float = DEFAULT_DEADLINE_SECONDS,
    connections: Connections | None = None,
    build_limits: BuildLimits | None = None,
) -> FastAPI:
    """The service's ASGI app over ``store`` (see the module docstring).

    Args:
        store: the durable state (e.g. :class:`pmwcm.service.sqlite_store.SQLiteStore`).
        noise_factory: each engine's random source; keep the default
            (OpenDP, CSPRNG) for anything but tests of the plumbing.
        close_store: close ``store`` when the app shuts down.
        data_dirs: the directories a new session's files must lie under (none by
            default: no session can be created over HTTP until the operator allows one).
        max_body_bytes: the largest request body (1 MB by default); larger is a 413.
        workers: threads for session work (:mod:`pmwcm.service.workers`).
        request_deadline: seconds a request may wait for its session before a 503.
        connections: the named PostgreSQL connections sessions may read
            (:mod:`pmwcm.service.connections`; none by default).
        build_limits: the limits on one session build (:mod:`pmwcm.service.build_jobs`).

    Raises:
        ValueError: a data directory that is not a directory, a non-positive limit, or
            a ``noise_factory`` that cannot be sent to a build process.
    """
    runner = SessionRunner(workers=workers, deadline=request_deadline)
    if not (isinstance(max_body_bytes, int) and max_body_bytes >= 1):
        raise ValueError(f"max_body_bytes must be a positive integer, got {max_body_bytes!r}.")
    dirs: list[FilePath] = []
    for given in data_dirs:
        path = FilePath(given).resolve()
        if not path.is_dir():
            raise ValueError(f"data directory {str(given)!r} is not a directory.")
        if path not in dirs:
            dirs.append(path)
    sessions = SessionManager(store, noise_factory=noise_factory, connections=connections)
    builds = BuildRunner(
        store, noise_factory=noise_factory, connections=connections, limits=build_limits
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(builds.close)
        if close_store:
            store.close()

    app = FastAPI(
        title="pmwcm query service",
        version="1",
        summary="Online private multiplicative weights for convex-minimization queries.",
        description=__doc__,
        lifespan=lifespan,
    )
    app.state.sessions = sessions
    app.state.builds = builds
    app.state.store = store
    app.state.data_dirs = tuple(dirs)
    app.state.max_body_bytes = max_body_bytes
    app.state.runner = runner
    app.add_middleware(BodyGuard, max_body_bytes=max_body_bytes)

    @app.exception_handler(Exception)
    async def _bug(_: Request, err: Exception) -> JSONResponse:  # never echo the text
        return JSONResponse(status_code=500, content={"detail": "Internal server error."})

    @app.exception_handler(SessionUnavailable)
    async def _unavailable(_: Request, err: SessionUnavailable) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": safe(err)})

    @app.exception_handler(StoreBusy)
    async def _busy(_: Request, err: StoreBusy) -> JSONResponse:
        headers = {"Retry-After": str(runner.retry_after)}
        return JSONResponse(status_code=503, content={"detail": safe(err)}, headers=headers)

    @app.exception_handler(Abandoned)
    async def _abandoned(_: Request, err: Abandoned) -> JSONResponse:  # nobody is listening
        headers = {"Retry-After": str(runner.retry_after)}
        return JSONResponse(status_code=503, content={"detail": safe(err)}, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, err: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the rejected input, which may not even serialise.
        return JSONResponse(status_code=422, content={"detail": clean_errors(err.errors())})

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, err: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            status_code=err.status_code, content={"detail": safe(err.detail)}, headers=err.headers
        )

    for routes in (health_routes, analyst_routes, curator_routes):
        app.router.routes.extend(routes.routes)  # flat: every route is an APIRoute of the app
    from pmwcm.service.console import mount_console  # it imports this module's routes' parts

    mount_console(app)  # the web console under /ui/ and its read-only routes
    return app


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


def _session_out(
    name: str, created: float, config: dict[str, Any], data_dirs: Sequence[FilePath]
) -> dict[str, Any]:
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
