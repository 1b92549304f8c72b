"""The worker model: a slow session never starves other sessions or ``/health``.

Each request that needs a session's lock goes through :class:`SessionRunner`:

1. **Queue on the session, in the event loop.** It waits for the session's
   gate (an :class:`anyio.Lock`, one per session name) as a coroutine, holding
   no thread. Meanwhile it watches its connection: a client that goes away, or
   a wait that passes the request's deadline, gives the request up there, with
   nothing read and nothing spent (the deadline is a 503 with ``Retry-After``).
   A request that finds its gate free and a worker idle has nothing to wait
   for: it starts at once, without the watcher (the common case, and the
   cheap one: no task group, timer or cancel scope per request).
2. **Work on a bounded pool.** With the gate held, the work runs on a thread
   from the runner's own :class:`anyio.CapacityLimiter` (``workers`` threads),
   apart from the default pool that serves the light routes. The session's
   other requests wait at the gate, so one session occupies at most one worker.
3. **Give up only before the data.** The work calls ``proceed`` after its locks
   are held and the query is compiled (public work), right before it reads the
   data (:meth:`pmwcm.service.sessions.LiveSession.respond`); ``proceed`` raises
   :class:`~pmwcm.service.sessions.Abandoned` if the client has gone or the
   deadline has passed. From then on the work is shielded from cancellation:
   it always runs to its commit, so a debit is never lost and the answer is
   durable -- a retry gets it from the log (or byte for byte with an
   ``Idempotency-Key``). A refusal therefore never depends on the data.

The per-request work itself is bounded from public inputs: the limits of
:mod:`pmwcm.service.limits` and the engine's fixed solver budget.
``/health`` is a coroutine that touches neither a thread nor the store.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from starlette.requests import Request

from pmwcm.service.sessions import Abandoned
from pmwcm.service.store import StoreBusy

T = TypeVar("T")

#: The default number of worker threads for session work. A below-threshold query's
#: worker spends most of its time waiting for its group commit's fsync, not computing:
#: with 8 sessions busy, 8 workers let every one of them reach the same commit (bigger
#: groups, fewer fsyncs, no request queued for a worker), 1.8-1.9 ms of server CPU per
#: answer and 281-310 answers/s at 16 clients against 2.7 ms and 199-215/s with 4
#: (benchmarks/service/throughput.py, 2 cores at a load average of 15).
DEFAULT_WORKERS = 8
#: The default deadline (seconds) for a request's work to start.
DEFAULT_DEADLINE_SECONDS = 30.0

Proceed = Callable[[], None]


class SessionRunner:
    """Runs session work under the session's gate on a bounded pool (module docstring).

    Args:
        workers: threads for session work (at least 1).
        deadline: seconds a request may wait for its work to start (positive).

    Raises:
        ValueError: a non-positive ``workers`` or ``deadline``.
    """

    def __init__(
        self, *, workers: int = DEFAULT_WORKERS, deadline: float = DEFAULT_DEADLINE_SECONDS
    ) -> None:
        if not (isinstance(workers, int) and workers >= 1):
            raise ValueError(f"workers must be a positive integer, got {workers!r}.")
        if not (isinstance(deadline, int | float) and math.isfinite(deadline) and deadline > 0):
            raise ValueError(f"deadline must be a positive number of seconds, got {deadline!r}.")
        self.workers = workers
        self.deadline = float(deadline)
        self._limiter: anyio.CapacityLimiter | None = None
        self._gates: dict[str, anyio.Lock] = {}

    @property
    def retry_after(self) -> int:
        """The ``Retry-After`` (seconds) a busy response suggests."""
        return max(1, math.ceil(self.deadline / 10))

    def _gate(self, name: str) -> anyio.Lock:
        gate = self._gates.get(name)
        if gate is None:
            gate = self._gates[name] = anyio.Lock()
        return gate

    async def run(self, request: Request, name: str, work: Callable[[Proceed, float], T]) -> T:
        """``work(proceed, wait)`` on a worker thread, under session ``name``'s gate.

        ``wait`` is the time left before the deadline (for the locks ``work``
        takes); ``proceed`` raises :class:`Abandoned` once the client is gone or
        the deadline has passed.

        Raises:
            StoreBusy: the deadline passed while queued (nothing was done).
            Abandoned: the client went away while queued (nothing was done).
        """
        if self._limiter is None:  # made in the event loop that uses it
            self._limiter = anyio.CapacityLimiter(self.workers)
        limiter = self._limiter
        until = time.monotonic() + self.deadline
        gone = threading.Event()

        def proceed() -> None:
            if gone.is_set():
                raise Abandoned("The client went away before its query was started.")
            if time.monotonic() > until:
                raise busy

        busy = StoreBusy(
            f"Session {name!r} was busy past the {self.deadline:g} s deadline; "
            "nothing was spent, retry later."
        )
        gate = self._gate(name)
        if not gate.locked() and limiter.available_tokens >= 1:
            # Nothing to queue behind: the work starts now, so there is no wait to watch
            # the connection during (and no task group, watcher or timer to pay for).
            gate.acquire_nowait()
            try:
                with anyio.CancelScope(shield=True):
                    wait = max(0.0, until - time.monotonic())
                    return await anyio.to_thread.run_sync(
                        lambda: work(proceed, wait), limiter=limiter
                    )
            finally:
                gate.release()
        outcome: list[Any] = []
        failure: list[Exception] = []  # raised after the task group, never wrapped by it
        async with anyio.create_task_group() as group:
            group.start_soon(_watch, request, gone, group.cancel_scope)
            try:
                with anyio.fail_after(max(0.0, until - time.monotonic())):
                    await gate.acquire()
                try:
                    with anyio.CancelScope(shield=True):  # from here the work runs to its commit
                        wait = max(0.0, until - time.monotonic())
                        outcome.append(
                            await anyio.to_thread.run_sync(
                                lambda: work(proceed, wait), limiter=limiter
                            )
                        )
                finally:
                    gate.release()
            except TimeoutError:
                failure.append(busy)
            except Exception as err:  # the work's own refusals and errors
                failure.append(err)
            finally:
                group.cancel_scope.cancel()  # stops the watcher
        if failure:
            raise failure[0]
        if not outcome:
            raise Abandoned("The client went away before its query was started.")
        result: T = outcome[0]
        return result


async def _watch(request: Request, gone: threading.Event, scope: anyio.CancelScope) -> None:
    """Sets ``gone`` and cancels ``scope`` when the client disconnects (the body is
    already read, so the next ASGI message is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            scope.cancel()
            return
