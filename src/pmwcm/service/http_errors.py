"""How the HTTP API answers an error: the status, a short body, and how OpenAPI documents it.

Every error body is ``{"detail": ...}`` made :func:`~pmwcm.service.guard.safe` (short,
bounded, no request content but a truncated field name); a 422 has FastAPI's
validation-error shape. The deliberate refusals of :mod:`pmwcm.errors` are answered from
one table, :data:`REFUSALS`. Anything else that escapes a route is a bug: a bare 500,
never the exception's text (:func:`add_error_handlers`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from pmwcm.errors import BudgetExhausted, Halted, InvalidQuery, PmwcmError, Refused
from pmwcm.service.guard import clean_errors, invalid_body, safe
from pmwcm.service.locations import SessionUnavailable
from pmwcm.service.response_models import ErrorOut
from pmwcm.service.sessions import Abandoned
from pmwcm.service.store import StoreBusy
from pmwcm.service.workers import SessionRunner

__all__ = [
    "ERRORS",
    "REFUSALS",
    "SESSION_ERRORS",
    "TOO_LARGE",
    "add_error_handlers",
    "fail",
    "invalid",
    "refusal",
]

#: The errors every ``/v1`` route may answer (OpenAPI ``responses``).
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "The request body is not parseable JSON."},
    401: {"model": ErrorOut, "description": "Missing, unknown or revoked token."},
    403: {"model": ErrorOut, "description": "The token's role or session does not allow this."},
}
#: The error of a route that takes a body.
TOO_LARGE: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorOut, "description": "The request body is over the size limit."},
}
#: The errors of a route on one session.
SESSION_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "The request body is not parseable JSON."},
    **ERRORS,
    404: {"model": ErrorOut, "description": "No such session."},
    503: {
        "model": ErrorOut,
        "description": "The session cannot be loaded, or was busy past the request deadline "
        "(nothing was spent; retry after the Retry-After header's seconds).",
    },
}


def fail(status: int, detail: str) -> HTTPException:
    """The error ``status`` with ``detail`` made safe (a 401 names the Bearer scheme)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return HTTPException(status_code=status, detail=safe(detail), headers=headers)


def invalid(message: str) -> JSONResponse:
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


def refusal(err: PmwcmError) -> JSONResponse:
    """The response :data:`REFUSALS` gives ``err`` (the nearest base class wins)."""
    status, template = next(REFUSALS[c] for c in type(err).__mro__ if c in REFUSALS)
    detail = template.format(err=err)
    if status == 422:
        return invalid(detail)
    return JSONResponse(status_code=status, content={"detail": safe(detail)})


def add_error_handlers(app: FastAPI, runner: SessionRunner) -> None:
    """Answers what escapes ``app``'s routes: a session that cannot be loaded is a 503, a
    busy or abandoned one a 503 with the ``Retry-After`` of ``runner``'s deadline, a body the models
    refuse a 422 that never echoes the input, an HTTP error its status with a safe
    detail, and anything else (a bug) a bare 500."""

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
