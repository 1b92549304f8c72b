"""The validation layer that never fails: a body limit, strict JSON, bounded messages.

:class:`BodyGuard` is an ASGI middleware in front of every route. It refuses a
body over the limit with 413 before reading it (by its ``Content-Length``, or
as it arrives), and a body that strict JSON cannot carry with 422: not JSON,
not UTF-8, nested too deeply, ``NaN`` / ``Infinity``, a number out of
float64's range (``1e400``) or an integer of more than 19 digits, or a lone
surrogate (``"\\ud800"``) in any string or key. Python's parser accepts all of
these, and a non-finite number or a surrogate that reached an error message
made it unserialisable (a 500, then a dropped connection). What passes is
replayed, unchanged, to the app.

:func:`safe` bounds and escapes every message that leaves the service, and
:func:`clean_errors` reduces a validation error to its location (field names
truncated to :data:`~pmwcm.service.limits.MAX_LOC_CHARS`), message and type:
never the rejected input.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from pmwcm.service.limits import MAX_LOC_CHARS, MAX_MESSAGE_CHARS

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The most validation errors one response lists.
MAX_ERRORS = 10


def safe(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as a string of at most ``limit`` characters that UTF-8 can always encode
    (a lone surrogate is written as its escape)."""
    out = str(text)
    if len(out) > limit:
        out = out[: limit - 3] + "..."
    return out.encode("utf-8", "backslashreplace").decode("utf-8")


def clean_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Validation errors as ``{loc, msg, type}``: no input, no context, all bounded."""
    out = []
    for err in list(errors)[:MAX_ERRORS]:
        loc = err.get("loc", ()) if isinstance(err, dict) else ()
        out.append(
            {
                "loc": [p if isinstance(p, int) else safe(p, MAX_LOC_CHARS) for p in loc][:8],
                "msg": safe(err.get("msg", "Invalid value.") if isinstance(err, dict) else err),
                "type": safe(err.get("type", "value_error") if isinstance(err, dict) else "", 64),
            }
        )
    return out


def invalid_body(message: str, *, type_: str = "value_error") -> dict[str, Any]:
    """A 422 body in FastAPI's validation-error shape."""
    return {"detail": [{"loc": ["body"], "msg": safe(message), "type": type_}]}


class StrictJSONError(ValueError):
    """The body is not strict JSON (the message says why, without quoting it)."""


def _reject_constant(_: str) -> Any:
    raise StrictJSONError("The body holds NaN or Infinity, which JSON cannot carry.")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError("The body holds a number out of float64's range.")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise StrictJSONError("The body holds an integer of more than 19 digits.")
    return int(text)


def _check_strings(value: Any) -> None:
    """Every string and key is valid Unicode (no lone surrogate); iterative, any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            items: list[Any] = [item]
        elif isinstance(item, dict):
            stack.extend(item.values())
            items = list(item.keys())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for text in items:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise StrictJSONError(
                    "The body holds a string that is not valid Unicode (a lone surrogate)."
                ) from None


def parse_strict(body: bytes) -> Any:
    """``body`` parsed as strict JSON.

    Raises:
        StrictJSONError: naming what is wrong, never quoting the body.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise StrictJSONError("The body is not UTF-8.") from None
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except StrictJSONError:
        raise
    except RecursionError:
        raise StrictJSONError("The body is nested too deeply.") from None
    except ValueError:
        raise StrictJSONError("The body is not valid JSON.") from None
    _check_strings(value)
    return value


class BodyGuard:
    """ASGI middleware: the body limit (413) and strict JSON (422) before any route runs.

    Args:
        app: the wrapped application.
        max_body_bytes: the largest body accepted.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def _reply(self, send: Send, status: int, content: dict[str, Any]) -> None:
        body = json.dumps(content).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if status == 413:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = {"detail": f"The request body is over the limit of {self.max_body_bytes} bytes."}
        for name, value in scope.get("headers", ()):
            if name.lower() == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._reply(send, 400, {"detail": "Content-Length is not a number."})
                    return
                if declared > self.max_body_bytes:
                    await self._reply(send, 413, too_big)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._reply(send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body.strip():
            try:
                parse_strict(body)
            except StrictJSONError as err:
                await self._reply(send, 422, invalid_body(str(err), type_="json_invalid"))
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
