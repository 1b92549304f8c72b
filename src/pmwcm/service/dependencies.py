"""What a route gets from its request: the caller (a bearer token's principal and role),
the app's parts, and the session it names, if the caller may use it.

Every ``/v1`` route takes :data:`Caller` (any valid token) or :data:`Curator` (the
curator's); a missing, unknown or revoked token is a 401, a token of the wrong role a
403. A session's routes check the token's scope with :func:`authorize` before anything
is loaded, then get the session with :func:`live` (or :func:`live_async` from the event
loop): a 404 if there is none, a wait up to the request deadline while it is still
being built.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pmwcm.service.auth import Principal, authenticate, verify
from pmwcm.service.build_jobs import BuildRunner
from pmwcm.service.http_errors import fail
from pmwcm.service.sessions import LiveSession, SessionManager, SessionNotFound
from pmwcm.service.store import StateStore, StoreBusy
from pmwcm.service.workers import SessionRunner

__all__ = [
    "Caller",
    "Curator",
    "SessionName",
    "authorize",
    "builds_of",
    "curator",
    "live",
    "live_async",
    "principal",
    "runner_of",
    "sessions_of",
    "store_of",
]

_bearer = HTTPBearer(auto_error=False, description="A curator or analyst token.")

#: A session's name in a path: 1-64 letters, digits, ``_``, ``.``, ``-``.
SessionName = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


async def principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who sent the request: its bearer token's principal (401 without a valid token).

    A token already in the store's cache is checked in the event loop; otherwise the
    store is read on a thread.
    """
    if creds is None:
        raise fail(401, "Send 'Authorization: Bearer <token>'.")
    store = store_of(request)
    presented = creds.credentials
    record = store.cached_token(presented.partition(".")[0])
    if record is not None:  # in memory: checked in the event loop, no thread
        who = verify(record, presented)
    else:
        who = await anyio.to_thread.run_sync(authenticate, store, presented)
    if who is None:
        raise fail(401, "Unknown or revoked token.")
    return who


Caller = Annotated[Principal, Depends(principal)]


def curator(who: Caller) -> Principal:
    """The caller, if it holds the curator's token (403 if not)."""
    if who.role != "curator":
        raise fail(403, "This needs the curator's token.")
    return who


Curator = Annotated[Principal, Depends(curator)]


def store_of(request: Request) -> StateStore:
    """The app's durable store."""
    store: StateStore = request.app.state.store
    return store


def sessions_of(request: Request) -> SessionManager:
    """The app's live sessions."""
    sessions: SessionManager = request.app.state.sessions
    return sessions


def builds_of(request: Request) -> BuildRunner:
    """The app's session builds."""
    builds: BuildRunner = request.app.state.builds
    return builds


def runner_of(request: Request) -> SessionRunner:
    """The app's workers (:mod:`pmwcm.service.workers`)."""
    runner: SessionRunner = request.app.state.runner
    return runner


def authorize(name: str, who: Principal, *, analyst_only: bool = False) -> None:
    """403 unless ``who`` may use session ``name`` (nothing is loaded)."""
    allowed = who.role == "analyst" and who.session == name
    if not allowed and (analyst_only or who.role != "curator"):
        raise fail(403, f"This token may not use session {name!r}.")


def live(request: Request, name: str, who: Principal, *, analyst_only: bool = False) -> LiveSession:
    """The session ``name`` if ``who`` may use it (403 if not, 404 if there is none)."""
    authorize(name, who, analyst_only=analyst_only)
    try:
        return sessions_of(request).get(name)
    except SessionNotFound:
        pass
    # A session still being built is waited for, up to the request deadline.
    status = builds_of(request).wait(name, runner_of(request).deadline)
    if status is not None and status.state == "building":
        raise StoreBusy(f"Session {name!r} is still being built; retry later.")
    try:
        return sessions_of(request).get(name)
    except SessionNotFound:
        raise fail(404, f"No session named {name!r}.") from None


async def live_async(
    request: Request, name: str, who: Principal, *, analyst_only: bool = False
) -> LiveSession:
    """:func:`live` from the event loop: a session already live is found without a thread."""
    authorize(name, who, analyst_only=analyst_only)
    loaded = sessions_of(request).loaded(name)
    if loaded is not None:
        return loaded
    return await anyio.to_thread.run_sync(
        lambda: live(request, name, who, analyst_only=analyst_only)
    )
