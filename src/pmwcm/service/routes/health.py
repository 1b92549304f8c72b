"""Open and identity routes: ``/health`` (no token) and ``/v1/me``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from pmwcm.service.dependencies import Caller
from pmwcm.service.http_errors import ERRORS
from pmwcm.service.response_models import MeOut

router = APIRouter()
"""``/health`` and ``/v1/me``."""


@router.get("/health", tags=["meta"])
async def health() -> dict[str, str]:
    """Liveness probe (no token needed; answered in the event loop, never queued)."""
    return {"status": "ok"}


@router.get("/v1/me", response_model=MeOut, responses=ERRORS, tags=["meta"])
def me(who: Caller) -> dict[str, Any]:
    """The calling token's id, role and session."""
    return {"token_id": who.token_id, "role": who.role, "session": who.session}
