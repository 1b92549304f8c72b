"""The curator's routes on analyst tokens: issue one scoped to a session, list, revoke.

A token's secret is shown once, when it is issued, and never stored
(:mod:`pmwcm.service.auth`); every listing shows the public record only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from pmwcm.service import models as m
from pmwcm.service.auth import new_token
from pmwcm.service.dependencies import Curator, SessionName, live, store_of
from pmwcm.service.http_errors import ERRORS, SESSION_ERRORS, TOO_LARGE, fail
from pmwcm.service.response_models import ErrorOut, IssuedToken, TokenOut
from pmwcm.service.store import TokenRecord

router = APIRouter()
"""``/v1/sessions/{name}/tokens`` and ``/v1/tokens/{token_id}``."""


def token_out(record: TokenRecord) -> dict[str, Any]:
    """A token's public record (:class:`~pmwcm.service.response_models.TokenOut`), never
    its secret."""
    return {
        "token_id": record.token_id,
        "role": record.role,
        "session": record.session,
        "label": record.label,
        "created": record.created,
        "revoked": record.revoked,
    }


@router.post(
    "/v1/sessions/{name}/tokens",
    status_code=201,
    response_model=IssuedToken,
    responses={**SESSION_ERRORS, **TOO_LARGE},
    tags=["curator"],
)
def issue_token(request: Request, name: SessionName, body: m.TokenCreate, who: Curator) -> Any:
    """Issues an analyst token scoped to this session (curator); shown once."""
    live(request, name, who)
    token, record = new_token(role="analyst", session=name, label=body.label)
    store_of(request).add_token(record)
    return {**token_out(record), "token": token}


@router.get(
    "/v1/sessions/{name}/tokens",
    response_model=list[TokenOut],
    responses=SESSION_ERRORS,
    tags=["curator"],
)
def list_tokens(request: Request, name: SessionName, who: Curator) -> Any:
    """The session's analyst tokens, revoked ones included (curator)."""
    live(request, name, who)
    return [token_out(t) for t in store_of(request).list_tokens(session=name)]


@router.delete(
    "/v1/tokens/{token_id}",
    status_code=204,
    responses={**ERRORS, 404: {"model": ErrorOut, "description": "No such token."}},
    tags=["curator"],
)
def revoke_token(
    request: Request, token_id: Annotated[str, Path(max_length=64)], _: Curator
) -> Response:
    """Revokes an analyst token (curator). Curator tokens rotate with the CLI."""
    if not store_of(request).revoke_token(token_id, role="analyst"):
        raise fail(404, f"No active analyst token {token_id!r}.")
    return Response(status_code=204)
