"""The web console: pages under ``/ui/`` over the JSON API, and the few read-only routes
they need that the API did not have.

**Pages.** ``pmwcm serve`` serves the files of ``pmwcm/service/ui`` (plain HTML,
CSS and JavaScript in the package: nothing to build, nothing fetched from
elsewhere) under ``/ui/``. Every page is a view over the ``/v1`` API, called
from the browser with the token the user pasted in (kept in the tab's
``sessionStorage``, sent only as ``Authorization: Bearer``, never in a URL), so
a page shows exactly what the API releases to that token: an analyst's token
opening a curator page gets the API's 403, and the page says so. The files are
sent with a strict Content-Security-Policy (same origin only; no inline script).

**Routes added for the console** (same authentication and roles as the API):

* ``GET /v1/sessions/{name}/schema`` (curator, the session's analysts): the
  session's attributes and their values -- the public domain a query is written
  on (no source columns, no paths).
* ``GET /v1/sessions/{name}/my-answers`` (the session's analysts): the answers
  released to the calling token, each as it was released (no other analyst's).
* ``POST /v1/console/plan`` (curator): the budget plan a session creation body
  would get -- the split of epsilon between the paid prior, the sparse vector
  and the oracle calls, ``T``, the mode and the hypothesis backend -- from the
  same public inputs the build uses (the schema, the parameters and ``n``, the
  number of records, public under replace-one neighbours); nothing is stored,
  measured or spent. Bad input is the same 422 creation would give.
* ``GET /v1/console/refusals`` (curator): the latest refusals of analysts'
  queries with the public reasons they were sent (:mod:`pmwcm.service.console_refusals`).
* ``GET /v1/console/audit`` (curator): the last ``pmwcm audit`` report, when the
  operator names it with ``PMWCM_AUDIT_REPORT`` (:mod:`pmwcm.service.console_audit`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from pydantic import BaseModel
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from pmwcm.kernels.coefficients import coefficient_names, on_boundary
from pmwcm.kernels.queries import CMQuery
from pmwcm.service import models as m
from pmwcm.service.console_audit import read_report
from pmwcm.service.console_refusals import RefusalLog, RefusalRecorder
from pmwcm.service.dependencies import (
    Caller,
    Curator,
    SessionName,
    authorize,
    sessions_of,
    store_of,
)
from pmwcm.service.http_errors import ERRORS, SESSION_ERRORS, fail, invalid
from pmwcm.service.locations import SessionUnavailable, digest, open_private
from pmwcm.service.response_models import AnswerOut
from pmwcm.service.routes.sessions import config_of_request, released_spec
from pmwcm.service.store import SessionRecord

#: The console's files (package data).
UI_DIR = Path(__file__).with_name("ui")
#: Where the operator names the last ``pmwcm audit -o FILE`` report.
AUDIT_REPORT_ENV = "PMWCM_AUDIT_REPORT"
#: Same origin only, no inline script or style, no framing, no form posts, no referrer.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}

console_routes = APIRouter()
"""The read-only routes the console's pages need (module docstring)."""


class ConsoleFiles(StaticFiles):
    """The console's static files, each sent with :data:`_PAGE_HEADERS`."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_PAGE_HEADERS)
        return response


class AttributeOut(BaseModel):
    """One attribute of a session's schema: its name, rule and value labels (code order)."""

    name: str
    kind: str
    values: list[str]
    description: str = ""


class SchemaOut(BaseModel):
    """A session's public domain (``drafted``: the curator accepted a schema drafted from
    the data, whose value sets are not covered by the privacy budget)."""

    session: str
    name: str
    description: str
    drafted: bool
    attributes: list[AttributeOut]


class MyAnswerOut(AnswerOut):
    """An answer released to the calling token, with the query it answered."""

    query: dict[str, Any]


class PlanOut(BaseModel):
    """A session's budget plan before it is created (``POST /v1/console/plan``).

    ``shares`` and ``epsilons`` split epsilon between the paid prior, the sparse
    vector and the oracle calls (the accountant composes them to the total);
    ``max_updates`` is ``T``; ``mode`` and ``backend`` say which engine answers and
    how the hypothesis is held, and why.
    """

    n: int
    attributes: int
    epsilon: float
    delta: float
    accountant: str
    prior: str
    sparse_vector: str
    shares: dict[str, float]
    epsilons: dict[str, float]
    max_updates: int
    mode: str
    backend: dict[str, Any]
    after_halt: str
    parameters: dict[str, Any]
    plan: dict[str, Any]


class RefusalOut(BaseModel):
    """A refused query: when, where, whose, the status and the public reason sent."""

    time: float
    session: str
    token_id: str
    status: int
    reason: str


class AuditTableOut(BaseModel):
    """One table of the audit report, and how many of its rows fail."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    failures: int


class AuditOut(BaseModel):
    """The last ``pmwcm audit`` report (``configured``: the operator named one; ``found``:
    it could be read)."""

    configured: bool
    found: bool
    passed: bool | None = None
    failures: int | None = None
    date: str | None = None
    command: str | None = None
    trials: str | None = None
    confidence: str | None = None
    tables: list[AuditTableOut] = []


def _record(request: Request, name: str) -> SessionRecord:
    record = store_of(request).get_session(name)
    if record is None:
        raise fail(404, f"No session named {name!r}.")
    return record


def _schema(record: SessionRecord) -> Any:
    """The session's schema, checked unchanged since the session was created."""
    from pmwcm.data.schema import Schema

    path = Path(record.config["schema_path"])
    if not path.is_file() or digest(path) != record.config["schema_sha256"]:
        raise SessionUnavailable("The session's schema_path is missing or changed.")
    return Schema.from_json(path)


@console_routes.get(
    "/v1/sessions/{name}/schema", response_model=SchemaOut, responses=SESSION_ERRORS,
    tags=["analyst"],
)  # fmt: skip
def session_schema(request: Request, name: SessionName, who: Caller) -> Any:
    """The session's attributes and their values (curator, or an analyst of this session)."""
    authorize(name, who)
    record = _record(request, name)
    schema = _schema(record)
    return {
        "session": name,
        "name": schema.name,
        "description": schema.description,
        "drafted": bool(record.config.get("drafted_schema_accepted", False)),
        "attributes": [
            {"name": a.name, "kind": a.kind, "values": list(a.labels), "description": a.description}
            for a in schema.attributes
        ],
    }


@console_routes.get(
    "/v1/sessions/{name}/my-answers", response_model=list[MyAnswerOut],
    responses=SESSION_ERRORS, tags=["analyst"],
)  # fmt: skip
def my_answers(request: Request, name: SessionName, who: Caller) -> Any:
    """The answers released to the calling token, in order (an analyst of this session)."""
    authorize(name, who, analyst_only=True)
    record = _record(request, name)
    domain = _schema(record).domain()
    epsilon = float(record.config["epsilon"])
    out = []
    for release in store_of(request).releases(name):
        if release.token_id != who.token_id:
            continue
        spec = released_spec(release.query_key)
        query, answer = CMQuery.from_dict(spec), release.answer
        theta = [float(v) for v in answer["value"]]
        spent = float(answer["epsilon_spent"])
        out.append(
            {
                "index": release.index,
                "query": spec,
                "theta": theta,
                "coefficients": list(coefficient_names(query, domain)),
                "on_boundary": on_boundary(query, theta),
                "source": answer["source"],
                "repeated": answer["repeated"],
                "updates": answer["updates"],
                "epsilon_spent": spent,
                "epsilon_remaining": max(0.0, epsilon - spent),
                "delta": answer["delta"],
            }
        )
    return out


@console_routes.post("/v1/console/plan", response_model=PlanOut, responses=ERRORS, tags=["curator"])
def plan(request: Request, body: m.SessionCreate, _: Curator) -> Any:
    """The budget plan ``body`` would get as a new session; nothing is created (curator)."""
    connections = sessions_of(request).connections
    try:
        config = config_of_request(request, body)
        return _plan_of(config, connections)
    except (ValueError, SessionUnavailable) as err:
        return invalid(str(err))


def _plan_of(config: dict[str, Any], connections: Any) -> dict[str, Any]:
    """The plan of a session configuration (:class:`PlanOut`): the one budget plan
    (:func:`~pmwcm.engine.plan.plan_budget`) the build would use, so a body this page
    shows a plan for is one creation accepts; reads only ``n`` of the data."""
    from pmwcm.data.schema import Schema
    from pmwcm.engine.plan import plan_budget
    from pmwcm.engine.practical import PMWConfig

    schema = Schema.from_json(Path(config["schema_path"]))
    private = open_private(config, schema, connections=connections, creating=True)
    n = private.n
    private.close()
    asked = PMWConfig(epsilon=config["epsilon"], delta=config["delta"], **config["parameters"])
    budget = plan_budget(
        asked, n=n, domain=schema.domain(), prior_supplied="public_data_path" in config
    )
    pmw = budget.config
    split = pmw.split
    parts = ("prior", "sparse_vector", "oracle")
    return {
        "n": n,
        "attributes": len(schema.attributes),
        "epsilon": pmw.epsilon,
        "delta": pmw.delta,
        "accountant": pmw.accountant,
        "prior": pmw.prior,
        "sparse_vector": pmw.sparse_vector,
        "shares": dict(zip(parts, (split.prior, split.sparse_vector, split.oracle), strict=True)),
        "epsilons": dict(zip(parts, split.epsilons(pmw.epsilon), strict=True)),
        "max_updates": pmw.max_updates,
        "mode": budget.mode_reason,
        "backend": budget.backend.to_dict(),
        "after_halt": pmw.after_halt,
        "parameters": config["parameters"],
        "plan": budget.to_dict(),
    }


@console_routes.get(
    "/v1/console/refusals", response_model=list[RefusalOut], responses=ERRORS, tags=["curator"]
)
def refusals(
    request: Request, _: Curator, session: str | None = Query(default=None, max_length=64)
) -> Any:
    """The latest refused analysts' queries and their public reasons, newest first (curator)."""
    log: RefusalLog = request.app.state.refusals
    return [vars(r) for r in log.latest(session=session)]


@console_routes.get(
    "/v1/console/audit", response_model=AuditOut, responses=ERRORS, tags=["curator"]
)
def audit(request: Request, _: Curator) -> Any:
    """The last privacy audit's report, if the operator named one (curator)."""
    path: Path | None = request.app.state.audit_report
    report = None if path is None else read_report(path)
    if report is None:
        return {"configured": path is not None, "found": False}
    tables = [
        {"title": t.title, "columns": t.columns, "rows": t.rows, "failures": t.failures()}
        for t in report.tables
    ]
    shown = {k: getattr(report, k) for k in ("date", "command", "trials", "confidence")}
    return {"configured": True, "found": True, "passed": report.passed,
            "failures": report.failures, "tables": tables, **shown}  # fmt: skip


def mount_console(app: FastAPI, *, audit_report: Path | None = None) -> None:
    """Adds the console to ``app``: its pages under ``/ui/``, its routes and the refusal log.

    Args:
        app: the service's app (:func:`pmwcm.service.app.create_app`), not yet started.
        audit_report: the last ``pmwcm audit`` report; default ``$PMWCM_AUDIT_REPORT``.
    """
    if audit_report is None and os.environ.get(AUDIT_REPORT_ENV):
        audit_report = Path(os.environ[AUDIT_REPORT_ENV])
    app.state.audit_report = audit_report
    app.state.refusals = RefusalLog()
    app.add_middleware(RefusalRecorder, log=app.state.refusals, store=app.state.store)
    app.router.routes.extend(console_routes.routes)

    @app.get("/ui", include_in_schema=False)
    def _ui() -> RedirectResponse:
        return RedirectResponse("/ui/")

    app.mount("/ui", ConsoleFiles(directory=UI_DIR, html=True), name="ui")
