"""The real-data side of the engine's rounds, on worker threads, optionally ahead of time.

A round of a CM query does two independent things: the certified solve on the
public hypothesis (``theta_hat``), and the fixed-budget solve on the private
data (``L_D(theta_D)``, :meth:`~pmwcm.engine.rounds.CMRound.error_against`),
whose work is fixed by public constants and does not depend on ``theta_hat``.
The second is most of a round's cost on a large clique, and its compiled loop
(:mod:`pmwcm.kernels.fista`) releases the GIL, so it runs on a worker thread
while the main thread solves the hypothesis.

**Ahead of time.** When the caller knows the next queries (a batch: ``pmwcm
run``'s query file, a benchmark's stream), :meth:`DataSide.expect` takes them
and the data side of the next :data:`LOOKAHEAD` large-clique queries starts
before they are asked, on more workers. The data side of a query depends on
the query and the data only, never on the hypothesis or on earlier answers, so
a result computed ahead is the one the round would compute; it is used by the
round of the same query and released by nothing else. Work done for a query
that is then answered without it (a repeat, a halted engine) is dropped, and
which queries are started ahead depends only on the announced queries and the
public state (released keys). Nothing here changes what is computed, only
when.

**Thread safety.** Only this class reads the private data for the engine
(:meth:`table`), under one lock, so the data's clique cache is never used by
two threads at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pmwcm.engine.rounds import CMRound
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.mechanisms.private_data import PrivateData

__all__ = ["LOOKAHEAD", "DataSide", "DataSolve"]

#: How many announced queries' data sides may run ahead of the current one. On
#: full-resolution Adult two gave 120-126 answers/s against 118-121 one query at a
#: time (4 quiet runs each, benchmarks/support_scale.py): since the data side got
#: cheaper (about 7 ms of CPU against 4-5 on the main thread) the gain is small.
LOOKAHEAD = 2
#: How far past the current query :meth:`DataSide.expect`'s queue is scanned for
#: queries worth starting ahead (small cliques are solved inline, not ahead).
SCAN_WINDOW = 8

#: A round's data table and ``theta_hat -> L_D(theta_hat) - L_D(theta_D)``.
DataSolve = tuple[CliqueTable, Callable[[Any], float]]
#: Plans an announced query from its key and itself: its round if its data side
#: should start ahead (a large clique, not yet released), else ``None``. Public inputs only.
Planner = Callable[[str, Any], "CMRound | None"]


class DataSide:
    """Runs rounds' real-data solves on worker threads; reads the data under a lock."""

    def __init__(self, data: PrivateData) -> None:
        self._data = data
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._expected: deque[tuple[str | None, Any]] = deque()
        self._planner: Planner | None = None
        self._ahead: dict[str, Future[DataSolve]] = {}

    def table(self, clique: tuple[str, ...]) -> CliqueTable:
        """The data's table on ``clique`` (its cache is shared by the worker threads)."""
        with self._lock:
            return self._data.clique_table(clique)

    def solve(self, round_: CMRound) -> DataSolve:
        """The round's data table and the error function of its fixed-budget solve."""
        table = self.table(round_.clique)
        return table, round_.error_against(table)

    def start(self, key: str, round_: CMRound) -> Future[DataSolve]:
        """The data side of the round of query ``key``: started ahead, or now.

        Announced queries before ``key`` were answered without their data side
        (repeats, a halted engine): their work is dropped. A ``key`` that was not
        announced next ends the announcement.
        """
        pending = self._take(key)
        if pending is None:
            pending = self._executor().submit(self.solve, round_)
        self._top_up()
        return pending

    def expect(self, queries: Iterable[tuple[str | None, Any]], planner: Planner) -> None:
        """Announces the queries to be answered next, in order, each with its key
        (``None`` for one that will be refused), replacing any earlier announcement."""
        self.forget()
        self._expected.extend(queries)
        self._planner = planner

    def forget(self) -> None:
        """Drops the announcement and the work started ahead."""
        for pending in self._ahead.values():
            pending.cancel()
        self._ahead.clear()
        self._expected.clear()
        self._planner = None

    def _take(self, key: str) -> Future[DataSolve] | None:
        """The work started ahead for ``key``, after the announced queries before it."""
        while self._expected:
            announced, _ = self._expected.popleft()
            if announced == key:
                return self._ahead.pop(key, None)
        if self._planner is not None:  # ``key`` was not announced: the caller moved on
            self.forget()
        return None

    def _top_up(self) -> None:
        """Starts the next announced large-clique queries, up to :data:`LOOKAHEAD` ahead."""
        planner = self._planner
        if planner is None:
            return
        for key, query in _first(self._expected, SCAN_WINDOW):
            if len(self._ahead) >= LOOKAHEAD:
                return
            if key is None or key in self._ahead:
                continue
            round_ = planner(key, query)
            if round_ is not None:
                self._ahead[key] = self._executor().submit(self.solve, round_)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            # One worker for the current round, one per query started ahead.
            self._pool = ThreadPoolExecutor(1 + LOOKAHEAD, thread_name_prefix="pmwcm-data")
        return self._pool


def _first(items: deque[tuple[str | None, Any]], count: int) -> Iterator[tuple[str | None, Any]]:
    for index, item in enumerate(items):
        if index >= count:
            return
        yield item
