"""The refusals an analyst's queries met, kept in memory for the curator's console.

The service keeps no log of refusals: a refusal is decided from public inputs
(the spec, the schema, ``n``, the budget) before the data is touched, and a
retry is refused again (:mod:`pmwcm.service.app`). The console still shows
the curator what was refused and why, so :class:`RefusalRecorder`, an ASGI
middleware, watches ``POST /v1/sessions/{name}/queries``: a response whose
status is in :data:`RECORDED` is kept -- when, which session, which token,
the status and the public reason the analyst was sent -- in a bounded list
of the latest :data:`MAX_KEPT` of this process (a restart forgets them; with
several processes each keeps its own).

Only refusals of an authenticated analyst of that session are kept: the token
is checked as the API checks it (:func:`pmwcm.service.auth.verify`), so a
caller without a valid token cannot write into the curator's view. The reason
is the response's own ``detail`` (already bounded and stripped of request
values by :mod:`pmwcm.service.guard`), so the curator learns nothing the
analyst was not told.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmwcm.service.auth import Principal, authenticate, verify
from pmwcm.service.store import StateStore

#: The statuses kept: a refusal from the spec or the limits (422), a spent budget or
#: halted engine (409), a body over the size limit (413).
RECORDED = frozenset({409, 413, 422})
MAX_KEPT = 500
MAX_REASON_CHARS = 500
_QUERY_PATH = re.compile(r"^/v1/sessions/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})/queries$")
_MAX_BODY = 16_384


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """One refused query: when (seconds since the epoch), where, whose, and the reason sent."""

    time: float
    session: str
    token_id: str
    status: int
    reason: str


def public_reason(body: bytes) -> str:
    """The ``detail`` of an error body in one line (validation errors as ``loc: msg``).

    >>> public_reason(b'{"detail": [{"loc": ["body", "radius"], "msg": "too large"}]}')
    'body.radius: too large'
    >>> public_reason(b'{"detail": "Privacy budget exhausted: spent"}')
    'Privacy budget exhausted: spent'
    """
    try:
        detail: Any = json.loads(body).get("detail", "")
    except (ValueError, AttributeError):
        return "(no reason given)"
    if isinstance(detail, list):
        detail = "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', []))}: {item.get('msg', '')}"
            for item in detail
            if isinstance(item, dict)
        )
    return str(detail)[:MAX_REASON_CHARS]


class RefusalLog:
    """The latest :data:`MAX_KEPT` refusals of this process (thread-safe)."""

    def __init__(self, *, kept: int = MAX_KEPT) -> None:
        self._kept: deque[Refusal] = deque(maxlen=kept)
        self._lock = threading.Lock()

    def add(self, refusal: Refusal) -> None:
        """Keeps ``refusal`` (the oldest kept goes when the list is full)."""
        with self._lock:
            self._kept.append(refusal)

    def latest(self, *, session: str | None = None) -> list[Refusal]:
        """The kept refusals, newest first (of ``session`` only, when given)."""
        with self._lock:
            kept = list(self._kept)
        return [r for r in reversed(kept) if session is None or r.session == session]


class RefusalRecorder:
    """ASGI middleware that keeps the refusals of analysts' queries in a :class:`RefusalLog`.

    Args:
        app: the wrapped application.
        log: where refusals go.
        store: the token store, to check who sent a refused query.
    """

    def __init__(self, app: ASGIApp, *, log: RefusalLog, store: StateStore) -> None:
        self.app = app
        self.log = log
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _QUERY_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if path is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        status = 0
        body = bytearray()

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and status in RECORDED:
                body.extend(message.get("body", b"")[: _MAX_BODY - len(body)])
            await send(message)

        await self.app(scope, receive, watch)
        if status in RECORDED:
            await self._keep(scope, path.group(1), status, bytes(body))

    async def _keep(self, scope: Scope, session: str, status: int, body: bytes) -> None:
        who = await self._analyst(scope)
        if who is None or who.role != "analyst" or who.session != session:
            return
        self.log.add(
            Refusal(
                time=time.time(),
                session=session,
                token_id=who.token_id,
                status=status,
                reason=public_reason(body),
            )
        )

    async def _analyst(self, scope: Scope) -> Principal | None:
        """The principal behind the request's bearer token, checked as the API checks it."""
        headers = dict(scope.get("headers", []))
        scheme, _, presented = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return None
        record = self.store.cached_token(presented.partition(".")[0])
        if record is not None:
            return verify(record, presented)
        return await anyio.to_thread.run_sync(authenticate, self.store, presented)
