"""The real-data side on worker threads (:mod:`pmwcm.engine.data_side`): when, never what.

* With the next queries announced (:meth:`OnlinePMW.expect`), an engine gives
  the same answers, sources, updates and spends, bit for bit, as one answering
  the same stream one query at a time with the same seed: on a support
  hypothesis with large (sparse) cliques, with repeats, refused queries and
  small cliques mixed in, and when the caller leaves the announced order.
* Work started ahead is actually used: the announced stream's large-clique
  rounds find their data side already running.
* Only the data side reads the data, and never from two threads at once.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.errors import PmwcmError
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 60, "b": 70, "c": 3, "d": 5, "y": 2})


@pytest.fixture(scope="module")
def data() -> PrivateData:
    rng = np.random.default_rng(3)
    n = 40_000
    a, b = rng.integers(0, 60, n), rng.integers(0, 70, n)
    c, d = rng.integers(0, 3, n), rng.integers(0, 5, n)
    y = (((c + d) % 2 == 1) ^ (rng.random(n) < 0.1)).astype(np.int64)  # no pair sees it
    return PrivateData.from_records(DOMAIN, np.stack([a, b, c, d, y], axis=1))


def _stream() -> list[CMQuery]:
    big = ("a", "b")  # 60 x 70 x 2 cells: a sparse table
    out = [
        CMQuery(loss="logistic", target="y", features=big, encodings={"a": "ordinal"}),
        CMQuery(loss="logistic", target="y", features=("c", "d")),  # small: inline
        CMQuery(loss="logistic", target="y", features=(*big, "c")),
        CMQuery(loss="logistic", target="y", features=("a", "b")),  # another encoding
        CMQuery(loss="logistic", target="y", features=big, encodings={"a": "ordinal"}),  # repeat
        CMQuery(loss="logistic", target="y", features=("b", "nope")),  # refused
        CMQuery(loss="squared", target="d", features=("a", "b", "c")),
        CMQuery(loss="logistic", target="y", features=("b", "d", "a"), radius=2.0),
        # The label is the parity of c + d: no pair sees it, so the oracle answers.
        CMQuery(
            loss="logistic",
            target="y",
            features=("c", "d", "a", "b"),
            interactions=(("c", "d"),),
            radius=8.0,
        ),
    ]
    return out * 2


def _engine(data: PrivateData) -> Any:
    config = PMWConfig(epsilon=8.0, delta=1e-6, backend="support", support_size=2**12)
    return build_engine(data, config, noise=NumpyNoise(seed=5))


def _answers(engine: Any, queries: list[CMQuery], ahead: list[CMQuery] | None = None) -> list[Any]:
    out: list[Any] = []
    for i, q in enumerate(queries):
        try:
            a = engine.ask(q, ahead=ahead if i == 0 else None)
        except PmwcmError as exc:
            out.append(type(exc).__name__)
            continue
        out.append([a.source, a.updates, a.epsilon_spent, np.asarray(a.value).tolist()])
    return out


def test_announced_stream_gives_the_same_answers_bit_for_bit(data: PrivateData) -> None:
    queries = _stream()
    one_by_one = _answers(_engine(data), queries)
    engine = _engine(data)
    assert _answers(engine, queries, ahead=queries[1:]) == one_by_one
    # The stream exercises what it says: refusals (one query, twice) and both sources.
    assert sum(isinstance(x, str) for x in one_by_one) == 2
    assert {x[0] for x in one_by_one if not isinstance(x, str)} >= {"hypothesis", "oracle"}


def test_leaving_the_announced_order_changes_nothing(data: PrivateData) -> None:
    queries = _stream()
    order = [queries[i] for i in (0, 2, 6, 3, 7, 1, 2)]
    reference = _answers(_engine(data), order)
    engine = _engine(data)
    # announced one order, asked another
    assert _answers(engine, order, ahead=queries[1:]) == reference


def test_work_started_ahead_is_used(data: PrivateData, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _engine(data)
    side = engine._steps.data_side
    submitted: list[tuple[str, ...]] = []
    original = side.solve

    def solve(round_: Any) -> Any:
        submitted.append(round_.clique)
        return original(round_)

    monkeypatch.setattr(side, "solve", solve)
    taken: list[bool] = []
    take = side._take

    def tracked(key: str) -> Any:
        pending = take(key)
        taken.append(pending is not None)
        return pending

    monkeypatch.setattr(side, "_take", tracked)
    queries = [q for q in _stream()[:8] if "nope" not in q.features]
    _answers(engine, queries, ahead=queries[1:])
    # Every large-clique round after the first found its data side started ahead,
    # and no round's data side ran twice.
    assert taken[0] is False and all(taken[1:]) and len(taken) >= 4
    assert len(submitted) == len(taken)


def test_the_data_is_never_read_by_two_threads_at_once(
    data: PrivateData, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(data)
    inside = threading.Semaphore(1)
    overlaps: list[bool] = []
    original = type(data).clique_table

    def guarded(self: PrivateData, clique: tuple[str, ...]) -> Any:
        got = inside.acquire(blocking=False)
        overlaps.append(not got)
        try:
            return original(self, clique)
        finally:
            if got:
                inside.release()

    monkeypatch.setattr(type(data), "clique_table", guarded)
    queries = _stream()
    _answers(engine, queries, ahead=queries[1:])
    assert overlaps and not any(overlaps)
