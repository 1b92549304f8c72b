"""Response bodies of the HTTP API (pydantic); the requests are in :mod:`pmwcm.service.models`.

Responses never carry internal state: no raw data, no true answer or error, no
noisy threshold, no hypothesis. Each model's docstring is its schema's description
in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ErrorOut(BaseModel):
    """Every 4xx/5xx body except FastAPI's 422 validation errors."""

    detail: str


class MeOut(BaseModel):
    """The calling token's identity."""

    token_id: str
    role: Literal["curator", "analyst"]
    session: str | None


class SessionOut(BaseModel):
    """A session as the curator sees it; its files are shown relative to their data
    directory (never as an absolute server path), a database by its connection's name."""

    name: str
    created: float
    data_path: str | None = None
    connection: str | None = None
    table: str | None = None
    engine: str | None = None
    schema_path: str
    public_data_path: str | None = None
    epsilon: float
    delta: float
    parameters: dict[str, Any]
    plan: dict[str, Any] | None = Field(
        default=None,
        description="The budget plan the session's engine was built on "
        "(pmwcm.engine.plan.BudgetPlan: mode, split, T, every calibrated noise level, the "
        "backend), as `pmwcm run --dry-run` prints it; public.",
    )
    drafted_schema_accepted: bool = False


class BuildOut(BaseModel):
    """A session's build (curator): ``building``, ``ready``, ``failed`` (with a public
    ``reason``) or ``cancelled``.

    Creating a session answers 202 with this at once; poll
    ``GET /v1/sessions/{name}/build`` until ``state`` is not ``building``; ``DELETE``
    on it cancels the build (its process is stopped and its memory freed). A build
    that has not ended has charged nothing and created no session. ``memory_bytes``
    and ``seconds`` are the build's declared memory and time limit (public: from the
    schema, the parameters and ``n``); ``session`` is the session once ``ready``.
    """

    name: str
    state: Literal["building", "ready", "failed", "cancelled"]
    reason: str | None = None
    started: float
    finished: float | None = None
    memory_bytes: int | None = None
    seconds: float | None = None
    session: SessionOut | None = None


class StatusOut(BaseModel):
    """A session's budget and progress (curator and the session's analysts).

    ``noise`` names the noise source: ``"opendp"`` (OpenDP, seeded by the OS
    CSPRNG) in production; anything else is a test or experiment. ``backend``
    says how the hypothesis is held (dense tensor or weighted support) and why;
    it reads only the schema and the parameters (public).
    """

    name: str
    epsilon: float
    delta: float
    epsilon_spent: float
    epsilon_remaining: float
    updates: int
    max_updates: int
    answered: int
    halted: bool
    noise: str
    backend: dict[str, Any] | None = Field(
        default=None,
        description="The hypothesis backend and why: {kind, support_size, memory_bytes, "
        "reason} (pmwcm.kernels.backend.BackendChoice).",
    )


class TokenOut(BaseModel):
    """A token's public record (never its secret)."""

    token_id: str
    role: Literal["curator", "analyst"]
    session: str | None
    label: str
    created: float
    revoked: float | None


class IssuedToken(TokenOut):
    """A newly issued token; ``token`` is shown this once and never stored."""

    token: str


class AnswerOut(BaseModel):
    """A released answer.

    ``source`` is ``hypothesis`` (certified by the sparse vector), ``oracle``
    (a fresh private answer) or ``synthetic`` (after the halt, if enabled);
    ``repeated`` marks a query answered before (the same theta, at no cost).
    ``coefficients`` names each coordinate of ``theta`` and ``on_boundary``
    says ``||theta||`` reached the radius; a ``synthetic`` answer carries a ``warning``
    (:mod:`pmwcm.kernels.coefficients`).
    """

    index: int
    theta: list[float]
    source: Literal["hypothesis", "oracle", "synthetic"]
    repeated: bool
    updates: int
    epsilon_spent: float
    epsilon_remaining: float
    delta: float
    coefficients: list[str] = []
    on_boundary: bool = False
    warning: str | None = None


class LedgerEntryOut(BaseModel):
    """One committed debit.

    ``orphan``: the server crashed after this debit was committed and before
    the answer it paid for was; the budget stays spent, the answer was never sent.
    """

    seq: int
    label: str
    event: dict[str, Any]
    epsilon_after: float
    orphan: bool


class LedgerOut(BaseModel):
    """A session's whole ledger."""

    session: str
    epsilon: float
    delta: float
    accountant: str
    epsilon_spent: float
    entries: list[LedgerEntryOut]


class ReleaseOut(BaseModel):
    """One entry of the release log."""

    index: int
    query: dict[str, Any]
    theta: list[float]
    source: str
    repeated: bool
    token_id: str | None
