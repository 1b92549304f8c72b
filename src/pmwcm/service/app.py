"""The HTTP API: FastAPI routes over sessions, tokens and the durable store.

**Privacy statement.** Each session runs one online PMW engine
(:class:`pmwcm.engine.online.OnlinePMW`, practical mode) over one private dataset, and
its ledger composes every privacy event of the interaction -- the sparse
vector once, each oracle call -- under the session's total ``(epsilon,
delta)``. Analysts, however many and however adaptive, only ever receive the
engine's released answers (theta, its source, the remaining budget), so the
whole transcript of a session is ``(epsilon, delta)``-DP with respect to
replacing one record of its dataset (Ullman 2015, Theorem "dp"; docs/design.md
section 4). Nothing is answered over budget: the ledger refuses an event
before its noise is drawn, and a spent budget or a halted engine is a 409.
Raw data, true answers and errors, the sparse vector's noisy threshold and the
hypothesis never leave the server. Repeats of a released query are served
from the log. A crash at any instant loses no debit and re-draws no released
answer (:mod:`pmwcm.service.durable`). Noise is OpenDP's, seeded by the OS
CSPRNG; a session's status names its noise source (``noise``).

**Refusals.** A query is validated by :meth:`~pmwcm.kernels.queries.CMQuery.from_dict`
alone and compiled once, by the engine. It is refused (422) only for reasons
decided from public inputs before the data or the budget is touched: a spec
that does not fit the schema (:class:`~pmwcm.errors.InvalidQuery`) or
constants too costly for the bounded real-data solve
(:class:`~pmwcm.errors.Refused`); a spent budget or a halt is a 409. One
table, :data:`REFUSALS`, maps the :mod:`pmwcm.errors` hierarchy to these
answers. Nothing that reads the data raises by design; should anything else
escape, it is a bug: the caller gets a bare 500 and never the exception's text.
A schema drafted from the data (``pmwcm schema``) is refused at session creation unless
``accept_drafted_schema`` is true.

**Limits** (:mod:`pmwcm.service.limits`, all public). A request body over the
limit (1 MB, 1000000 bytes, by default; ``pmwcm serve --max-body-bytes``) is refused with 413
before it is read; a body that strict JSON cannot carry (``NaN``, ``Infinity``,
``1e400``, a lone surrogate) with 422 (:mod:`pmwcm.service.guard`). A query
over the limits on radius, features, interactions or name lengths is refused
with 422 before its session is loaded. Every error message is short and
bounded, and quotes nothing of the request but a truncated field name.

**Bounded work and the worker model** (:mod:`pmwcm.service.workers`). A
request queues on its session in the event loop, holding no thread, and its
work runs on a bounded pool of workers (``pmwcm serve --workers``), one per
session at a time; ``/health`` and other sessions are never queued behind a
slow session. A request whose work has not started within the deadline
(``pmwcm serve --request-deadline``, 30 s by default) is refused with 503 and
``Retry-After``, nothing spent; a client that goes away before its work starts
costs nothing. Once the data is read, the work always runs to its commit, so
the answer is durable and a retry gets it from the log.

**Session builds** (:mod:`pmwcm.service.build_jobs`). Creating a session runs its
build (the paid prior's measurement and fit) in its own process: ``POST /v1/sessions``
answers 202 with the build's status as soon as the build has started (its data opened,
its declared memory and time within the server's limits), or a 422 naming the field
and the limit, with nothing charged, if it cannot start. ``GET
/v1/sessions/{name}/build`` tells ``building``, ``ready``, ``failed`` (a public reason)
or ``cancelled``; ``DELETE`` on it stops the build's process. The session, the prior's
debit and its hypothesis are committed together when the build ends: a build that
never ends charges nothing. ``?wait=SECONDS`` on the creation waits for the build
(201 and the session if it is ready by then); a request on a session still being
built waits for it up to the request deadline.

**Idempotent retries.** A query sent with an ``Idempotency-Key`` header (1-255
visible ASCII characters) has its response kept in the store, committed with
its answer; a retry with the same key, from the same token, gets the original
response byte for byte, after any restart. The same key with another body is
a 422. Refusals are not kept: they are decided from public inputs, and a retry
is refused again.

**Files and databases.** A session's ``data_path``, ``schema_path`` and ``public_data_path``
must lie under the data directories the operator allows at start-up
(``pmwcm serve --data-dir``); no response carries a line of a file or a
server path (a session's paths are shown relative to their data directory).
A PostgreSQL table is read through a connection the operator named at start-up
(``pmwcm serve --connections``), by its name: its URL and password never pass
through the API, the store or the log (:mod:`pmwcm.service.locations`).

**Roles.** Every ``/v1`` route needs ``Authorization: Bearer <token>``. The
curator creates sessions, issues and revokes analyst tokens and reads ledgers
and release logs; an analyst token is scoped to one session and can submit
queries and read that session's budget. ``/health`` is open.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import FastAPI

from pmwcm.mechanisms.noise import NoiseSource, default_noise
from pmwcm.service.build_jobs import BuildRunner
from pmwcm.service.connections import Connections
from pmwcm.service.console import mount_console
from pmwcm.service.guard import BodyGuard
from pmwcm.service.http_errors import REFUSALS, add_error_handlers
from pmwcm.service.limits import MAX_BODY_BYTES, BuildLimits
from pmwcm.service.routes import health, queries, sessions, tokens
from pmwcm.service.sessions import SessionManager
from pmwcm.service.store import StateStore
from pmwcm.service.workers import DEFAULT_DEADLINE_SECONDS, DEFAULT_WORKERS, SessionRunner

__all__ = ["REFUSALS", "create_app"]


def create_app(
    store: StateStore,
    *,
    noise_factory: Callable[[], NoiseSource] = default_noise,
    close_store: bool = True,
    data_dirs: Sequence[str | os.PathLike[str]] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    workers: int = DEFAULT_WORKERS,
    request_deadline: float = DEFAULT_DEADLINE_SECONDS,
    connections: Connections | None = None,
    build_limits: BuildLimits | None = None,
) -> FastAPI:
    """The service's ASGI app over ``store`` (see the module docstring).

    Args:
        store: the durable state (e.g. :class:`pmwcm.service.sqlite_store.SQLiteStore`).
        noise_factory: each engine's random source; keep the default
            (OpenDP, CSPRNG) for anything but tests of the plumbing.
        close_store: close ``store`` when the app shuts down.
        data_dirs: the directories a new session's files must lie under (none by
            default: no session can be created over HTTP until the operator allows one).
        max_body_bytes: the largest request body (1 MB by default); larger is a 413.
        workers: threads for session work (:mod:`pmwcm.service.workers`).
        request_deadline: seconds a request may wait for its session before a 503.
        connections: the named PostgreSQL connections sessions may read
            (:mod:`pmwcm.service.connections`; none by default).
        build_limits: the limits on one session build (:mod:`pmwcm.service.build_jobs`).

    Raises:
        ValueError: a data directory that is not a directory, a non-positive limit, or
            a ``noise_factory`` that cannot be sent to a build process.
    """
    runner = SessionRunner(workers=workers, deadline=request_deadline)
    if not (isinstance(max_body_bytes, int) and max_body_bytes >= 1):
        raise ValueError(f"max_body_bytes must be a positive integer, got {max_body_bytes!r}.")
    dirs = _data_directories(data_dirs)
    live = SessionManager(store, noise_factory=noise_factory, connections=connections)
    builds = BuildRunner(
        store, noise_factory=noise_factory, connections=connections, limits=build_limits
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(builds.close)
        if close_store:
            store.close()

    app = FastAPI(
        title="pmwcm query service",
        version="1",
        summary="Online private multiplicative weights for convex-minimization queries.",
        description=__doc__,
        lifespan=lifespan,
    )
    app.state.sessions = live
    app.state.builds = builds
    app.state.store = store
    app.state.data_dirs = dirs
    app.state.max_body_bytes = max_body_bytes
    app.state.runner = runner
    app.add_middleware(BodyGuard, max_body_bytes=max_body_bytes)
    add_error_handlers(app, runner)
    for resource in (health, queries, sessions, tokens):
        app.router.routes.extend(resource.router.routes)  # flat: each an APIRoute of the app
    mount_console(app)  # the web console under /ui/ and its read-only routes
    return app


def _data_directories(data_dirs: Sequence[str | os.PathLike[str]]) -> tuple[Path, ...]:
    """The operator's data directories, resolved, each once, in the order given.

    Raises:
        ValueError: one is not a directory.
    """
    dirs: list[Path] = []
    for given in data_dirs:
        path = Path(given).resolve()
        if not path.is_dir():
            raise ValueError(f"data directory {str(given)!r} is not a directory.")
        if path not in dirs:
            dirs.append(path)
    return tuple(dirs)
