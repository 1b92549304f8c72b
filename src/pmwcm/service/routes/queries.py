"""A session's analyst routes: its budget and progress, and its queries.

A query is checked against the public limits (:mod:`pmwcm.service.limits`) and
validated by :meth:`~pmwcm.kernels.queries.CMQuery.from_dict` alone before its session is
loaded; the engine answers it under the session's lock on a worker
(:mod:`pmwcm.service.workers`), and the rendered response is committed with the
answer, so that a retry with the same ``Idempotency-Key`` gets it byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Header, Request, Response

from pmwcm.engine.online import SYNTHETIC_ANSWER_WARNING, Answer
from pmwcm.errors import PmwcmError
from pmwcm.kernels.coefficients import coefficient_names, on_boundary
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.service import models as m
from pmwcm.service.auth import Principal
from pmwcm.service.dependencies import Caller, SessionName, authorize, live_async, runner_of
from pmwcm.service.http_errors import SESSION_ERRORS, TOO_LARGE, fail, invalid, refusal
from pmwcm.service.idempotency import Idempotency, IdempotencyConflict, Reply
from pmwcm.service.limits import QUERY_LIMITS, check_query
from pmwcm.service.response_models import AnswerOut, ErrorOut, StatusOut
from pmwcm.service.sessions import Abandoned, LiveSession
from pmwcm.service.store import StoreBusy, StoreError

router = APIRouter()
"""``GET /v1/sessions/{name}`` and ``POST /v1/sessions/{name}/queries``."""

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
_QUERY_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": m.QuerySpec.model_json_schema()}},
    }
}


@router.get(
    "/v1/sessions/{name}",
    response_model=StatusOut,
    responses=SESSION_ERRORS,
    tags=["analyst"],
)
async def session_status(request: Request, name: SessionName, who: Caller) -> Any:
    """The session's budget and progress (curator, or an analyst of this session)."""
    session = await live_async(request, name, who)
    return await runner_of(request).run(request, name, lambda _, wait: session.status(wait=wait))


@router.post(
    "/v1/sessions/{name}/queries",
    response_model=AnswerOut,
    responses={
        **SESSION_ERRORS,
        409: {"model": ErrorOut, "description": "The privacy budget is spent."},
        **TOO_LARGE,
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
    :meth:`CMQuery.from_dict` alone; refusals are answered from
    :data:`~pmwcm.service.http_errors.REFUSALS`. The response is rendered once and
    committed with the answer, so a retry with the same ``Idempotency-Key`` gets
    these very bytes.
    """
    authorize(name, who, analyst_only=True)
    try:
        check_query(spec)  # the public limits, before the session is loaded
        query = m.QuerySpec.to_query(spec)
    except PmwcmError as err:
        return refusal(err)
    idempotency = None if idempotency_key is None else Idempotency.of(idempotency_key, spec)
    session = await live_async(request, name, who, analyst_only=True)
    if idempotency is not None:  # a retry need not queue behind the session's work
        kept = await _kept(session, who, idempotency)
        if kept is not None:
            return kept
    render = _renderer(query, epsilon=session.record.config["epsilon"])

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
        reply = await runner_of(request).run(request, name, work)
    except PmwcmError as err:  # decided from the spec, the domain and n only
        return refusal(err)
    except IdempotencyConflict as err:
        return invalid(str(err))
    except (StoreBusy, Abandoned):
        raise  # the app's handlers: 503 with Retry-After, nothing spent
    except StoreError as err:
        detail = f"The answer could not be committed, so it was not released: {err}"
        raise fail(503, detail) from None
    return Response(reply.body, status_code=reply.status, media_type="application/json")


async def _kept(session: LiveSession, who: Principal, idempotency: Idempotency) -> Response | None:
    """The response kept for ``idempotency``'s key from ``who``, if any (read on a thread,
    without the session's lock); a 422 if the key answered another body."""
    kept = await anyio.to_thread.run_sync(
        lambda: session.store.kept_response(session.name, who.token_id, idempotency.key)
    )
    if kept is None:
        return None
    try:
        kept = idempotency.check(kept)
    except IdempotencyConflict as err:
        return invalid(str(err))
    return Response(kept.body, status_code=kept.status, media_type="application/json")


def _renderer(query: CMQuery, *, epsilon: float) -> Callable[[Answer, Domain], bytes]:
    """The response body of an answer to ``query`` in a session of total ``epsilon``
    (:class:`~pmwcm.service.response_models.AnswerOut`): rendered once, committed with
    the answer."""

    def render(answer: Answer, domain: Domain) -> bytes:
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
        return AnswerOut.model_validate(payload).model_dump_json().encode("utf-8")

    return render
