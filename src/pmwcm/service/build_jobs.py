"""Session builds off the request path: a child process each, a status to poll, a cancel.

Creating a session measures its prior and fits the hypothesis: seconds for a
small schema, minutes for a support of millions of records. A
:class:`BuildRunner` runs each build in its own process
(:func:`pmwcm.service.build_child.run_build`, forked from a clean
``forkserver`` that has the library loaded), so that

* the request that creates the session returns as soon as the build has
  *started* (its data opened and its declared cost within the operator's
  limits: :func:`~pmwcm.service.build.preflight`), or is refused before it
  starts with nothing charged;
* the build's state (``building``, ``ready``, ``failed`` with a public reason,
  ``cancelled``) can be polled;
* a cancel kills the process, which frees its memory at once, whatever pass it is in;
* the declared limits are enforced from outside: a build whose resident memory
  passes :data:`MEMORY_ENFORCED` times its declared memory (plus
  :data:`MEMORY_SLACK`) above its baseline, or whose time passes its declared
  seconds, is stopped and marked failed.

A build that ends commits the session row, its build-time debits and its
snapshot in one transaction (:func:`~pmwcm.service.build.genesis`, unchanged):
before that nothing of the build is stored or released, so a cancelled, failed
or crashed build charges nothing anyone can see and leaves no session.

Spark sessions (``engine: "spark"``) build in a thread of the server instead:
their data is the server's Spark session (its catalog, its temporary views),
which another process cannot see. Such a build is cancelled at its end (its
result is discarded) and its memory is not enforced.

Build states live in this process's memory: after a restart, a session the store
holds is ``ready`` and a build that had not committed is gone (create it again).
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, Literal, Protocol

from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.service.build_child import process_resident_bytes, run_build
from pmwcm.service.connections import Connections
from pmwcm.service.limits import BuildLimits
from pmwcm.service.store import SessionRecord, StateStore, StoreError

__all__ = ["BuildRunner", "BuildState", "BuildStatus"]

_log = logging.getLogger("pmwcm.service")

BuildState = Literal["building", "ready", "failed", "cancelled"]
#: A running build is stopped past this many times its declared memory above its baseline.
MEMORY_ENFORCED = 2.0
#: ... plus this much (the allocator's and the compiled kernels' own).
MEMORY_SLACK = 256 * 2**20
#: How often (seconds) a build's monitor looks at its process.
POLL_SECONDS = 0.1


@dataclass(frozen=True, kw_only=True)
class BuildStatus:
    """What a curator sees of a build (all public)."""

    name: str
    state: BuildState
    reason: str | None = None
    started: float
    finished: float | None = None
    memory_bytes: int | None = None
    seconds: float | None = None


class BuildRefusedBeforeStart(ValueError):
    """The build was refused before it started (the message names the field); nothing
    was measured or charged and no session exists."""


class _Worker(Protocol):
    pid: int | None

    def start(self) -> None: ...
    def is_alive(self) -> bool: ...
    def kill(self) -> None: ...
    def join(self, timeout: float | None = None) -> None: ...


class _ThreadWorker:
    """A build in a thread of the server (Spark): the :class:`_Worker` a process is."""

    pid: int | None = None

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...]) -> None:
        self._thread = threading.Thread(target=target, args=args, name="pmwcm-build", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def kill(self) -> None:
        pass  # a thread cannot be stopped: its result is discarded when it ends

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


def _context() -> Any:
    """The ``forkserver`` context, its server preloaded with the build's modules."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["pmwcm.service.build_child"])
    return context


class _Job:
    """One build: its worker, its pipe and its status, advanced by its monitor thread."""

    def __init__(
        self, name: str, worker: _Worker, pipe: Connection, commit: Callable[..., None]
    ) -> None:
        self.status = BuildStatus(name=name, state="building", started=time.time())
        self.worker = worker
        self.pipe = pipe
        self.started = threading.Event()  # the first message (started or refused) came
        self.done = threading.Event()
        self.cancel = threading.Event()
        self.refusal: str | None = None
        self._commit = commit

    def monitor(self) -> None:
        """Follows the build to its end (module docstring); never raises."""
        try:
            self._follow()
        except Exception:
            _log.exception("session build monitor failed")
            self._end("failed", "The build failed; the server's log has the cause.")
        finally:
            if self.worker.pid is not None:  # a process: done means its memory is freed
                if self.worker.is_alive():
                    self.worker.kill()
                self.worker.join(30)
            self.pipe.close()
            self.started.set()
            self.done.set()

    def _follow(self) -> None:
        deadline, memory_limit = float("inf"), None
        while True:
            if self.cancel.is_set():
                self._end("cancelled", "Cancelled by the curator.")
                return
            if self.pipe.poll(POLL_SECONDS):
                try:
                    message = self.pipe.recv()
                except (EOFError, OSError):
                    message = ("failed", "The build process ended before it reported.")
                kind = message[0]
                if kind == "started":
                    _, memory, seconds, baseline = message
                    self.status = replace(self.status, memory_bytes=memory, seconds=seconds)
                    deadline = time.monotonic() + seconds
                    if baseline is not None and self.worker.pid is not None:
                        memory_limit = baseline + MEMORY_ENFORCED * memory + MEMORY_SLACK
                    self.started.set()
                    continue
                if kind == "refused":
                    self.refusal = message[1]
                    self._end("failed", message[1])
                elif kind == "built":
                    try:
                        self._commit(message[1], message[2], message[3])
                    except StoreError as err:  # e.g. another process took the name meanwhile
                        self._end("failed", f"The built session could not be stored: {err}")
                    else:
                        self._end("ready", None)
                else:
                    self._end("failed", message[1])
                return
            if not self.worker.is_alive() and not self.pipe.poll(0):
                self._end("failed", "The build process ended before it reported.")
                return
            if time.monotonic() > deadline:
                limit = self.status.seconds or 0.0
                self._end("failed", f"The build passed its time limit of {limit:,.0f} s.")
                return
            if memory_limit is not None and self.worker.pid is not None:
                rss = process_resident_bytes(self.worker.pid)
                if rss is not None and rss > memory_limit:
                    declared = (self.status.memory_bytes or 0) / 2**20
                    self._end(
                        "failed",
                        f"The build passed its memory limit ({MEMORY_ENFORCED:g} x its declared "
                        f"{declared:,.0f} MiB).",
                    )
                    return

    def _end(self, state: BuildState, reason: str | None) -> None:
        if state != "ready" and self.worker.pid is not None and self.worker.is_alive():
            self.worker.kill()  # before the state says so: a cancelled build is stopped
            self.worker.join(30)
        self.status = replace(self.status, state=state, reason=reason, finished=time.time())


class BuildRunner:
    """Runs session builds off the request path (module docstring).

    Args:
        store: where a finished build's session is committed.
        noise_factory: each build's random source (picklable: it is sent to the
            build's process).
        connections: the operator's named connections.
        limits: the operator's limits on a build.

    Raises:
        ValueError: ``noise_factory`` cannot be sent to a process (a lambda: use a
            module-level function or :func:`functools.partial`).
    """

    def __init__(
        self,
        store: StateStore,
        *,
        noise_factory: Callable[[], NoiseSource],
        connections: Connections | None = None,
        limits: BuildLimits | None = None,
    ) -> None:
        try:
            pickle.dumps(noise_factory)
        except Exception as err:
            raise ValueError(
                "noise_factory must be picklable (builds run in their own process); "
                "use a module-level function or functools.partial."
            ) from err
        self.store = store
        self.limits = limits or BuildLimits()
        self._noise_factory = noise_factory
        self._connections = connections
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def start(self, name: str, config: dict[str, Any], *, wait: float) -> BuildStatus:
        """Starts building session ``name``; returns once the build has started (or
        after ``wait`` seconds, still building).

        Raises:
            StoreError: the name is taken (a session, or a build under way).
            BuildRefusedBeforeStart: the data or parameters cannot be built (nothing
                was measured or charged).
        """
        with self._lock:
            running = self._jobs.get(name)
            if running is not None and running.status.state in ("building", "ready"):
                raise StoreError(f"Session {name!r} exists or is being built.")
            if self.store.get_session(name) is not None:
                raise StoreError(f"Session {name!r} exists.")
            job = self._launch(name, config)
            self._jobs[name] = job
        job.started.wait(wait)
        if job.refusal is not None:
            job.done.wait(30)
            with self._lock:
                if self._jobs.get(name) is job:
                    del self._jobs[name]
            raise BuildRefusedBeforeStart(job.refusal)
        return job.status

    def _launch(self, name: str, config: dict[str, Any]) -> _Job:
        args: tuple[Any, ...]
        if config.get("engine") == "spark":
            receiving, sending = multiprocessing.Pipe(duplex=False)
            args = (sending, config, self._noise_factory, self._connections, self.limits)
            worker: _Worker = _ThreadWorker(run_build, args)
        else:
            context = _context()
            receiving, sending = context.Pipe(duplex=False)
            args = (sending, config, self._noise_factory, self._connections, self.limits)
            worker = context.Process(target=run_build, args=args, name="pmwcm-build", daemon=True)
        job = _Job(name, worker, receiving, lambda c, d, s: self._commit(name, c, d, s))
        worker.start()
        if not isinstance(worker, _ThreadWorker):
            sending.close()  # the child holds its end: the parent's copy would hide its exit
        threading.Thread(target=job.monitor, name=f"pmwcm-build-{name}", daemon=True).start()
        return job

    def _commit(self, name: str, config: dict[str, Any], debits: Any, snapshot: Any) -> None:
        record = SessionRecord(name=name, config=config, created=time.time())
        self.store.add_session(record, debits, snapshot)

    def status(self, name: str) -> BuildStatus | None:
        """The build of ``name``: this process's record of it, else ``ready`` if the store
        holds the session, else ``None``."""
        job = self._jobs.get(name)
        if job is not None:
            return job.status
        record = self.store.get_session(name)
        if record is None:
            return None
        return BuildStatus(name=name, state="ready", started=record.created)

    def wait(self, name: str, timeout: float) -> BuildStatus | None:
        """:meth:`status` once the build has ended, or after ``timeout`` seconds."""
        job = self._jobs.get(name)
        if job is not None:
            job.done.wait(timeout)
        return self.status(name)

    def cancel(self, name: str, *, timeout: float = 60.0) -> BuildStatus | None:
        """Stops the build of ``name`` (its process is killed) and returns its status;
        a build already ended is left as it is."""
        job = self._jobs.get(name)
        if job is None:
            return self.status(name)
        job.cancel.set()
        job.done.wait(timeout)
        return job.status

    def process_id(self, name: str) -> int | None:
        """The build process's id (for the operator and the tests), ``None`` if none."""
        job = self._jobs.get(name)
        return None if job is None else job.worker.pid

    def close(self) -> None:
        """Cancels every build under way (the server is stopping)."""
        for job in list(self._jobs.values()):
            job.cancel.set()
        for job in list(self._jobs.values()):
            job.done.wait(30)
