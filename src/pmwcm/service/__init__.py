"""The durable, authenticated HTTP query service (``pmwcm serve``).

Layers, inner to outer: :mod:`~pmwcm.service.store` (the persistent state
behind a small interface, with its append-only answer log), the SQL its backends
share (:mod:`~pmwcm.service.sql_store`) and the backends
:mod:`~pmwcm.service.sqlite_store` (SQLite in WAL mode, the default) and
:mod:`~pmwcm.service.postgres_store` (PostgreSQL, shared by several processes),
:mod:`~pmwcm.service.session_config` (a new session's configuration, checked from
public inputs), :mod:`~pmwcm.service.build` (a session's engine, built the
same way after every restart),
:mod:`~pmwcm.service.durable` (the write-ahead protocol and crash recovery),
:mod:`~pmwcm.service.auth` (hashed bearer tokens, two roles),
:mod:`~pmwcm.service.sessions` (one engine and one lock per release session),
:mod:`~pmwcm.service.workers` (a slow session starves no other; deadlines),
:mod:`~pmwcm.service.models` and :mod:`~pmwcm.service.response_models` (the bodies),
:mod:`~pmwcm.service.routes` (one FastAPI router per resource) and
:mod:`~pmwcm.service.app` (the app; the privacy statement is in its docstring).
Needs the ``service`` extra.
"""

from pmwcm.service.app import create_app
from pmwcm.service.auth import Principal, authenticate, bootstrap_curator, new_token
from pmwcm.service.durable import DurableLedger, recover
from pmwcm.service.sessions import LiveSession, SessionManager
from pmwcm.service.sqlite_store import SQLiteStore
from pmwcm.service.store import StateStore, StoreError

__all__ = [
    "DurableLedger",
    "LiveSession",
    "Principal",
    "SQLiteStore",
    "SessionManager",
    "StateStore",
    "StoreError",
    "authenticate",
    "bootstrap_curator",
    "create_app",
    "new_token",
    "recover",
]
