"""Workloads: random queries are valid and seeded; the stepwise analyst uses answers only."""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.engine.baselines import NonPrivateBaseline
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.losses import make_loss
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.workload import (
    DEFAULT_LOSSES,
    MixedStream,
    StepwiseAnalyst,
    random_queries,
    random_query,
)
from pmwcm.mechanisms.private_data import PrivateData

MIXED = Domain.from_sizes({"a": 2, "b": 3, "c": 2, "d": 4, "y": 2})
BINARY = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "y": 2})


def test_random_queries_compile_and_fit_their_loss(seed: int) -> None:
    queries = random_queries(MIXED, 200, rng=np.random.default_rng(seed))
    assert len(queries) == 200
    assert {q.loss for q in queries} == set(DEFAULT_LOSSES)
    for q in queries:
        problem = q.compile(MIXED)  # raises on an invalid query
        assert q.target not in q.features and len(set(q.features)) == len(q.features)
        assert 2 <= len(q.features) <= 4
        if make_loss(q.loss).label_kind == "binary":
            assert MIXED.sizes[MIXED.index(q.target)] == 2
        widths = [MIXED.sizes[MIXED.index(f)] for f in q.features]
        assert problem.dim == sum(1 if w <= 2 else w for w in widths) + 1  # one-hot, intercept


def test_random_queries_are_reproducible(seed: int) -> None:
    first = random_queries(MIXED, 20, rng=np.random.default_rng(seed))
    again = random_queries(MIXED, 20, rng=np.random.default_rng(seed))
    assert first == again


def test_feature_count_is_capped_by_the_domain() -> None:
    tiny = Domain.from_sizes({"x": 2, "y": 2})
    q = random_query(tiny, rng=np.random.default_rng(0), losses=("logistic",))
    assert q.features == ("x",) and q.target == "y"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"losses": ()}, "at least one"),
        ({"min_features": 3, "max_features": 2}, "min_features"),
    ],
)
def test_random_query_rejects_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        random_query(BINARY, rng=np.random.default_rng(0), **kwargs)


def test_classification_needs_a_binary_target() -> None:
    wide = Domain.from_sizes({"x": 3, "y": 4})
    with pytest.raises(ValueError, match="binary target"):
        random_query(wide, rng=np.random.default_rng(0), losses=("logistic",))
    assert random_query(wide, rng=np.random.default_rng(0), losses=("squared",)).loss == "squared"


def _play(analyst: StepwiseAnalyst, coefs: dict[str, float]) -> None:
    """Answers every query with theta whose newest coefficient is ``coefs[candidate]``."""
    while (q := analyst.next_query()) is not None:
        theta = np.zeros(len(q.features) + 1)
        theta[len(q.features) - 1] = coefs[q.features[-1]]
        analyst.observe(q, theta)


def test_stepwise_selects_by_largest_released_coefficient() -> None:
    analyst = StepwiseAnalyst(BINARY, "y", max_features=2)
    first = analyst.round_queries()
    assert [q.features for q in first] == [("a",), ("b",), ("c",)]
    _play(analyst, {"a": 0.2, "b": -0.9, "c": 0.5})
    assert analyst.selected == ("b", "c") and analyst.done
    assert analyst.next_query() is None and analyst.round_queries() == []


def test_stepwise_ties_go_to_the_first_candidate() -> None:
    analyst = StepwiseAnalyst(BINARY, "y", max_features=1)
    _play(analyst, {"a": 0.5, "b": 0.5, "c": -0.5})
    assert analyst.selected == ("a",)


def test_stepwise_refuses_an_answer_to_another_query() -> None:
    analyst = StepwiseAnalyst(BINARY, "y", max_features=2)
    stranger = CMQuery(loss="logistic", target="y", features=("a", "b"))
    with pytest.raises(ValueError, match="not a query of the current"):
        analyst.observe(stranger, np.zeros(3))
    q = analyst.next_query()
    assert q is not None
    analyst.observe(q, np.zeros(2))
    with pytest.raises(ValueError, match="already observed"):
        analyst.observe(q, np.zeros(2))


def test_stepwise_finds_the_informative_feature_from_exact_answers(seed: int) -> None:
    """With exact answers, the feature that drives the label is picked first."""
    rng = np.random.default_rng(seed)
    records = rng.integers(0, 2, size=(2000, 4))
    noise = rng.random(2000) < 0.1
    records[:, 3] = np.where(noise, 1 - records[:, 1], records[:, 1])  # y = b, 10% flipped
    exact = NonPrivateBaseline(PrivateData.from_records(BINARY, records))
    analyst = StepwiseAnalyst(BINARY, "y", max_features=1)
    while (q := analyst.next_query()) is not None:
        analyst.observe(q, exact.answer(q))
    assert analyst.selected == ("b",)


@pytest.mark.parametrize(
    ("target", "kwargs", "message"),
    [
        ("z", {}, "not in the domain"),
        ("y", {"candidates": ["y"]}, "candidate 'y'"),
        ("y", {"max_features": 0}, "max_features"),
    ],
)
def test_stepwise_validates(target: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StepwiseAnalyst(BINARY, target, **kwargs)


def test_stepwise_rejects_a_non_binary_target_for_classification() -> None:
    with pytest.raises(ValueError, match="binary target"):
        StepwiseAnalyst(MIXED, "d", loss="logistic")


def _drain(stream: MixedStream) -> list:
    items = []
    while (item := stream.next_item()) is not None:
        items.append(item)
        stream.observe(np.ones(len(item.query.features) + 1))
    return items


def test_mixed_stream_interleaves_and_stops_at_total(seed: int) -> None:
    analysts = [StepwiseAnalyst(BINARY, "y", max_features=2)]
    stream = MixedStream(BINARY, 40, rng=np.random.default_rng(seed), analysts=analysts)
    items = _drain(stream)
    assert len(items) == 40 and stream.asked == 40
    assert {i.kind for i in items} == {"random", "stepwise"}
    # Two rounds (3 + 2 queries), then done; fewer than 5 adaptive picks among
    # 40 fair coin flips has probability < 1e-7.
    assert sum(i.kind == "stepwise" for i in items) == 3 + 2
    assert analysts[0].done
    assert all(i.analyst == 0 for i in items if i.kind == "stepwise")


def test_mixed_stream_share_one_serves_analysts_first() -> None:
    analysts = [StepwiseAnalyst(BINARY, t, max_features=1) for t in ("y", "a")]
    stream = MixedStream(
        BINARY, 10, rng=np.random.default_rng(0), analysts=analysts, adaptive_share=1.0
    )
    kinds = [i.kind for i in _drain(stream)]
    assert kinds == ["stepwise"] * 6 + ["random"] * 4


def test_mixed_stream_needs_each_answer_before_the_next_query() -> None:
    stream = MixedStream(BINARY, 3, rng=np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="awaiting"):
        stream.observe(np.zeros(2))
    assert stream.next_item() is not None
    with pytest.raises(RuntimeError, match="observe"):
        stream.next_item()


@pytest.mark.parametrize(("total", "share"), [(-1, 0.5), (3, 1.5)])
def test_mixed_stream_validates(total: int, share: float) -> None:
    with pytest.raises(ValueError):
        MixedStream(BINARY, total, rng=np.random.default_rng(0), adaptive_share=share)
