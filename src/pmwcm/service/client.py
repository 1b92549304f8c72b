"""A Python client for the ``pmwcm serve`` HTTP API (:mod:`pmwcm.service.app`).

Analysts use :meth:`Client.ask`; the curator uses the session, token and
ledger methods. Every error response becomes a :class:`ServiceError` (a
:class:`BudgetExhausted` for the 409 that says the privacy budget is spent)
whose message is the server's, naming the bad field where there is one.

>>> client = Client("http://127.0.0.1:8000", token="id.secret")
>>> client.base_url
'http://127.0.0.1:8000'
>>> client.close()

Typical analyst loop (each query may depend on the answers before it)::

    with Client(url, token=analyst_token) as client:
        first = client.ask("default", {"loss": "logistic", "target": "y", "features": ["a"]})
        if first.theta[0] > 0:
            second = client.ask("default", {"loss": "logistic", "target": "y",
                                            "features": ["a", "b"]})
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from pmwcm import errors

__all__ = ["BudgetExhausted", "Client", "Released", "ServiceError"]

#: The longest ``?wait=`` the server takes
#: (:data:`pmwcm.service.routes.sessions.MAX_CREATE_WAIT_SECONDS`).
_LONGEST_WAIT = 600.0
#: Seconds between two looks at a build still under way.
_POLL_SECONDS = 1.0


class ServiceError(Exception):
    """The service answered with an error status.

    Attributes:
        status: the HTTP status code.
        detail: the server's message.
    """

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class BudgetExhausted(ServiceError, errors.BudgetExhausted):
    """409: the session's privacy budget is spent; no further new query is answered.

    Also a :class:`pmwcm.errors.BudgetExhausted`, so one ``except`` catches a
    spent budget whether the engine is local or behind the service.
    """


@dataclass(frozen=True, kw_only=True)
class Released:
    """One released answer (see :class:`pmwcm.service.response_models.AnswerOut`)."""

    index: int
    theta: tuple[float, ...]
    source: str
    repeated: bool
    updates: int
    epsilon_spent: float
    epsilon_remaining: float
    delta: float
    coefficients: tuple[str, ...] = ()
    on_boundary: bool = False
    warning: str | None = None


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        return response.text
    if isinstance(detail, list):  # FastAPI validation errors
        return "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', []))}: {item.get('msg')}"
            for item in detail
            if isinstance(item, dict)
        )
    return str(detail)


class Client:
    """A synchronous client bound to one token.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        token: a curator or analyst token.
        timeout: seconds per request.
        http: an existing :class:`httpx.Client` to send through (e.g. FastAPI's
            ``TestClient``); ``base_url`` and ``timeout`` are then its own.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._owns = http is None
        self._http = http or httpx.Client(base_url=self.base_url, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection pool (not one passed in as ``http``)."""
        if self._owns:
            self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, float] | None = None,
    ) -> Any:
        sent = self._headers if headers is None else {**self._headers, **headers}
        response = self._http.request(method, path, json=body, headers=sent, params=params)
        if response.status_code >= 400:
            kind = BudgetExhausted if response.status_code == 409 and "/queries" in path else None
            raise (kind or ServiceError)(response.status_code, _detail(response))
        return None if response.status_code == 204 else response.json()

    def health(self) -> bool:
        """Whether the service answers its liveness probe."""
        return bool(self._http.get("/health").status_code == 200)

    def me(self) -> dict[str, Any]:
        """This token's id, role and session."""
        return dict(self._call("GET", "/v1/me"))

    def ask(
        self,
        session: str,
        query: Mapping[str, Any] | Any,
        *,
        idempotency_key: str | None = None,
    ) -> Released:
        """Submits one CM query spec (a mapping, or a :class:`pmwcm.kernels.queries.CMQuery`).

        With ``idempotency_key``, resending the same query with the same key (after a
        cut connection, to any process serving the store) returns the original response.

        Raises:
            BudgetExhausted: the session's budget is spent.
            ServiceError: any other refusal (the message names the bad field).
        """
        spec = query.to_dict() if hasattr(query, "to_dict") else dict(query)
        headers = None if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        out = self._call("POST", f"/v1/sessions/{session}/queries", spec, headers)
        known = {k: v for k, v in out.items() if k in Released.__dataclass_fields__}
        return Released(
            **known
            | {"theta": tuple(out["theta"]), "coefficients": tuple(out.get("coefficients", ()))}
        )

    def status(self, session: str) -> dict[str, Any]:
        """The session's budget and progress."""
        return dict(self._call("GET", f"/v1/sessions/{session}"))

    def create_session(
        self,
        name: str,
        *,
        data_path: str | None = None,
        schema_path: str,
        epsilon: float,
        delta: float,
        parameters: Mapping[str, Any] | None = None,
        connection: str | None = None,
        table: str | None = None,
        engine: str | None = None,
        wait: float = 3600.0,
    ) -> dict[str, Any]:
        """Creates a session (curator) over a file on the server (``data_path``), a
        PostgreSQL table through the operator's named ``connection`` and ``table``, or
        Spark (``engine="spark"`` with ``data_path`` or ``table``), and waits for its
        build (polling :meth:`build`, at most ``wait`` seconds).

        Returns:
            The session (as the server describes it) once built.

        Raises:
            ServiceError: refused (422, naming the field), or the build failed, was
                cancelled (409, with its reason) or is still building after ``wait``
                seconds (504; :meth:`build` goes on telling its state).
        """
        location = {"data_path": data_path, "connection": connection, "table": table,
                    "engine": engine}  # fmt: skip
        body = {
            "name": name,
            **{k: v for k, v in location.items() if v is not None},
            "schema_path": schema_path,
            "epsilon": epsilon,
            "delta": delta,
            "parameters": dict(parameters or {}),
        }
        deadline = time.monotonic() + wait
        first = min(wait, _LONGEST_WAIT)
        out = dict(self._call("POST", "/v1/sessions", body, params={"wait": first}))
        if "state" not in out:  # 201: built within the first wait
            return out
        while out["state"] == "building" and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
            out = self.build(name)
        if out["state"] == "ready":
            return dict(out["session"])
        if out["state"] == "building":
            raise ServiceError(504, f"Session {name!r} is still being built after {wait:g} s.")
        raise ServiceError(409, f"Session {name!r} was not built ({out['state']}): {out['reason']}")

    def build(self, session: str) -> dict[str, Any]:
        """The session's build (curator): ``state`` is ``building``, ``ready``, ``failed``
        (with its ``reason``) or ``cancelled``."""
        return dict(self._call("GET", f"/v1/sessions/{session}/build"))

    def cancel_build(self, session: str) -> dict[str, Any]:
        """Cancels the session's build (curator); returns its status once it has stopped."""
        return dict(self._call("DELETE", f"/v1/sessions/{session}/build"))

    def sessions(self) -> list[dict[str, Any]]:
        """All sessions (curator)."""
        return list(self._call("GET", "/v1/sessions"))

    def issue_token(self, session: str, *, label: str = "") -> str:
        """A new analyst token for ``session`` (curator); it is shown only now."""
        return str(self._call("POST", f"/v1/sessions/{session}/tokens", {"label": label})["token"])

    def tokens(self, session: str) -> list[dict[str, Any]]:
        """The session's analyst tokens, without secrets (curator)."""
        return list(self._call("GET", f"/v1/sessions/{session}/tokens"))

    def revoke_token(self, token_id: str) -> None:
        """Revokes an analyst token by its id (the part before the dot) (curator)."""
        self._call("DELETE", f"/v1/tokens/{token_id}")

    def ledger(self, session: str) -> dict[str, Any]:
        """Every committed debit of the session (curator)."""
        return dict(self._call("GET", f"/v1/sessions/{session}/ledger"))

    def answers(self, session: str) -> list[dict[str, Any]]:
        """The session's release log (curator)."""
        return list(self._call("GET", f"/v1/sessions/{session}/answers"))
