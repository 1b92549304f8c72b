"""Bearer tokens for the two roles: the curator and the analysts.

A token reads ``<id>.<secret>``: ``id`` is 16 hex digits (public, used to find
the record and to revoke), ``secret`` is ``secrets.token_urlsafe(32)`` (256
bits from the OS CSPRNG). Only ``sha256(secret)`` is stored; a presented token
is checked by recomputing it and comparing with :func:`hmac.compare_digest`
(constant time). A token is shown once, when it is made.

* The **curator** token is made at the first start of the service (and again
  only by ``pmwcm serve --rotate-curator-token``, which revokes the old ones).
  It creates sessions, issues and revokes analyst tokens and reads ledgers.
* An **analyst** token is scoped to one session: it submits queries and reads
  that session's remaining budget, nothing else.

>>> token, record = new_token(role="analyst", session="s1")
>>> record.token_id == token.split(".")[0], record.digest != token
(True, True)
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from pmwcm.service.store import StateStore, TokenRecord

ROLES = ("curator", "analyst")
_DUMMY_DIGEST = hashlib.sha256(b"no such token").hexdigest()


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who is calling: the token's id, its role and (for an analyst) its session."""

    token_id: str
    role: str
    session: str | None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_token(*, role: str, session: str | None, label: str = "") -> tuple[str, TokenRecord]:
    """A fresh token string and the record to store (which holds only its digest).

    Raises:
        ValueError: unknown ``role``, or an analyst token without a session.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got role={role!r}.")
    if (role == "analyst") != (session is not None):
        raise ValueError("An analyst token needs a session; a curator token has none.")
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    record = TokenRecord(
        token_id=token_id,
        digest=_digest(secret),
        role=role,
        session=session,
        label=label,
        created=time.time(),
    )
    return f"{token_id}.{secret}", record


def authenticate(store: StateStore, presented: str) -> Principal | None:
    """The principal behind ``presented``, or ``None`` if it is malformed, unknown or revoked."""
    token_id, _, secret = presented.partition(".")
    record = store.get_token(token_id) if token_id and secret else None
    return verify(record, presented)


def verify(record: TokenRecord | None, presented: str) -> Principal | None:
    """The principal behind ``presented`` if ``record`` is its live token, else ``None``
    (the digest is compared in constant time, against a dummy when there is no record)."""
    token_id, _, secret = presented.partition(".")
    if record is not None and record.token_id != token_id:
        record = None
    expected = record.digest if record is not None else _DUMMY_DIGEST
    matches = hmac.compare_digest(_digest(secret), expected)
    if record is None or not matches or record.revoked is not None:
        return None
    return Principal(token_id=record.token_id, role=record.role, session=record.session)


def bootstrap_curator(store: StateStore, *, rotate: bool = False) -> str | None:
    """Makes the curator token on first use (or, with ``rotate``, replaces every old one).

    Returns:
        The new token (show it once), or ``None`` if a curator token exists
        and ``rotate`` is false.
    """
    active = [t for t in store.list_tokens() if t.role == "curator" and t.revoked is None]
    if active and not rotate:
        return None
    for old in active:
        store.revoke_token(old.token_id, role="curator")
    token, record = new_token(role="curator", session=None, label="curator")
    store.add_token(record)
    return token
