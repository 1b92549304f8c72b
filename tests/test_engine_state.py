"""Snapshots continue an engine exactly: same hypothesis, ledger, sparse vector, answers."""

from __future__ import annotations

import copy
import json

import dp_accounting
import numpy as np
import pytest

from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.snapshot import restore, snapshot
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting.codec import event_from_dict, event_to_dict
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "y": 2})


def _data(seed: int) -> PrivateData:
    rng = np.random.default_rng(seed)
    records = rng.integers(0, 2, size=(5000, 4))
    records[:, 3] = records[:, 0] ^ (rng.random(5000) < 0.1)  # y mostly follows a
    return PrivateData.from_records(DOMAIN, records)


def _queries() -> list[CMQuery]:
    feats = [("a",), ("b",), ("a", "b"), ("c",), ("a", "c"), ("b", "c")]
    return [CMQuery(loss="logistic", target="y", features=f) for f in feats] + [
        CMQuery(loss="squared", target="y", features=f) for f in feats
    ]


def _engine_with(data: PrivateData, noise: NumpyNoise) -> OnlinePMW:
    config = PMWConfig(epsilon=4.0, delta=1e-6, max_updates=6, after_halt="synthetic")
    return build_engine(data, config, noise=noise)


def _engine(data: PrivateData, seed: int) -> OnlinePMW:
    return _engine_with(data, NumpyNoise(seed=seed))


def test_restore_reproduces_state_and_repeats(seed: int) -> None:
    data = _data(seed)
    engine = _engine(data, seed)
    for q in _queries()[:8]:
        engine.answer(q)
    snap = snapshot(engine)
    text = json.dumps(snap.state)  # the state is JSON-ready
    fresh = _engine(data, seed + 1)
    restore(fresh, type(snap)(state=json.loads(text), hypothesis=snap.hypothesis))
    np.testing.assert_array_equal(fresh.hypothesis.to_array(), engine.hypothesis.to_array())
    assert fresh.ledger.spent_epsilon() == engine.ledger.spent_epsilon()
    assert fresh.sparse_vector.export_state() == engine.sparse_vector.export_state()
    assert len(fresh.updates) == len(engine.updates)
    for q in _queries()[:8]:  # repeats come from the log: same values, no new spend
        before = fresh.ledger.spent_epsilon()
        a, b = fresh.answer(q), engine.answer(q)
        assert a.repeated and b.repeated
        np.testing.assert_array_equal(a.value, b.value)
        assert fresh.ledger.spent_epsilon() == before


def test_restored_engine_continues_like_the_original(seed: int) -> None:
    # Both engines consume the same noise stream from the snapshot point on, so a
    # faithful restore must reproduce every later decision and answer.
    data = _data(seed)
    stream = np.random.default_rng(seed)
    engine = _engine_with(data, NumpyNoise(generator=stream))
    for q in _queries()[:5]:
        engine.answer(q)
    fresh = _engine_with(data, NumpyNoise(generator=copy.deepcopy(stream)))
    restore(fresh, snapshot(engine))
    for q in _queries()[5:]:
        a, b = engine.answer(q), fresh.answer(q)
        assert (a.source, a.updates, a.epsilon_spent) == (b.source, b.updates, b.epsilon_spent)
        np.testing.assert_array_equal(a.value, b.value)


def test_restore_needs_a_fresh_engine(seed: int) -> None:
    data = _data(seed)
    engine = _engine(data, seed)
    engine.answer(_queries()[0])
    with pytest.raises(ValueError, match="freshly built"):
        restore(engine, snapshot(engine))


def test_linear_updates_survive_a_snapshot(seed: int) -> None:
    data = _data(seed)
    config = PMWConfig(epsilon=4.0, delta=1e-6, max_updates=3, after_halt="synthetic")
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed), kind="linear")
    for lit in ({"a": 1}, {"a": 1, "y": 1}, {"b": 0, "c": 1}):
        engine.answer_linear(LinearQuery.conjunction(lit))
    fresh = build_engine(data, config, noise=NumpyNoise(seed=seed), kind="linear")
    restore(fresh, snapshot(engine))
    assert [u.query for u in fresh.updates] == [u.query for u in engine.updates]


def test_event_codec_round_trips_every_kind_the_ledger_records() -> None:
    from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent

    events = [
        dp_accounting.GaussianDpEvent(2.5),
        dp_accounting.LaplaceDpEvent(0.7),
        EpsilonDeltaDpEvent(epsilon=0.4, delta=1e-7),
        dp_accounting.ZCDpEvent(0.02),  # an AIM/MST prior under the zCDP accountant
        dp_accounting.ZCDpEvent(0.02, 0.1),
        dp_accounting.NoOpDpEvent(),
    ]
    nested = dp_accounting.ComposedDpEvent(
        [*events, dp_accounting.SelfComposedDpEvent(events[0], 3)]
    )
    for event in [*events, nested]:
        wire = json.loads(json.dumps(event_to_dict(event)))
        assert event_from_dict(wire) == event


def test_event_codec_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="Unknown privacy event kind"):
        event_from_dict({"kind": "wishart"})
    with pytest.raises(ValueError, match="Cannot serialise"):
        event_to_dict(object())
