"""The HTTP API's routes, one router per resource (FastAPI's ``APIRouter``).

:mod:`~pmwcm.service.routes.health` (``/health``, open, and ``/v1/me``),
:mod:`~pmwcm.service.routes.queries` (a session's budget and its queries: the
analyst's), :mod:`~pmwcm.service.routes.sessions` (creating and building sessions,
their ledgers and release logs: the curator's) and
:mod:`~pmwcm.service.routes.tokens` (analyst tokens: the curator's).
:func:`pmwcm.service.app.create_app` adds them to the app in that order, then the
console's (:mod:`pmwcm.service.console`). What every route shares -- the caller, the
session, the error answers -- is in :mod:`pmwcm.service.dependencies` and
:mod:`pmwcm.service.http_errors`.
"""
