"""Idempotent retries: a request's ``Idempotency-Key``, the fingerprint of its body, and
the response kept for them.

A query sent with a key has its rendered response committed with its answer
(:class:`~pmwcm.service.store.KeptResponse`); a retry with the same key from the same
token gets those bytes back, after any restart, and draws nothing. The same key with
another body (another fingerprint) is refused: :class:`IdempotencyConflict`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pmwcm.engine.online import Answer
from pmwcm.service.store import KeptResponse

__all__ = ["Idempotency", "IdempotencyConflict", "Reply"]


class IdempotencyConflict(ValueError):
    """An ``Idempotency-Key`` already answered a request with another body."""


@dataclass(frozen=True, kw_only=True)
class Idempotency:
    """A request's ``Idempotency-Key`` and the fingerprint of its body."""

    key: str
    fingerprint: str

    @classmethod
    def of(cls, key: str, body: Any) -> Idempotency:
        """``key`` with the SHA-256 of ``body`` as canonical JSON (key order ignored)."""
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return cls(key=key, fingerprint=hashlib.sha256(canonical.encode("utf-8")).hexdigest())

    def check(self, kept: KeptResponse) -> KeptResponse:
        """``kept`` if it answered this same body.

        Raises:
            IdempotencyConflict: it answered another body.
        """
        if kept.fingerprint != self.fingerprint:
            raise IdempotencyConflict(
                "This Idempotency-Key was already used for a request with another body; "
                "use a new key for a new request."
            )
        return kept

    def keep(self, *, token_id: str, status: int, body: bytes) -> KeptResponse:
        """The response ``body`` (with ``status``) to keep for this key from ``token_id``."""
        return KeptResponse(
            token_id=token_id,
            key=self.key,
            fingerprint=self.fingerprint,
            status=status,
            body=body,
        )


@dataclass(frozen=True, kw_only=True)
class Reply:
    """What a query request gets: the answer released now (``None`` when the response is
    the one kept for its ``Idempotency-Key``) and the response body, byte for byte."""

    answer: Answer | None
    status: int
    body: bytes
