"""Engine state and snapshots continue an engine exactly: same hypothesis, ledger, answers.

The engine owns its state: it is read as one :class:`EngineState` value and
taken back only through :meth:`OnlinePMW.from_parts` (or ``restore``); its
attributes are read-only, and nothing in ``src/`` outside ``pmwcm/engine`` or in
``benchmarks/`` assigns one (an AST scan, shown to fail on planted assignments).
A snapshot round-trips every field of the state (read from ``dataclasses.fields``).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
from pathlib import Path

import dp_accounting
import numpy as np
import pytest

from pmwcm.engine.online import EngineState, OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.snapshot import (
    FIELD_CODECS,
    answer_to_dict,
    decode_state,
    encode_state,
    restore,
    snapshot,
)
from pmwcm.engine.state import query_key
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PrivacyLedger
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
    config = PMWConfig(
        epsilon=4.0, delta=1e-6, max_updates=6, after_halt="synthetic", prior_cliques="pairs"
    )
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
    fresh = restore(fresh, type(snap)(state=json.loads(text), hypothesis=snap.hypothesis))
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
    fresh = restore(fresh, snapshot(engine))
    for q in _queries()[5:]:
        a, b = engine.answer(q), fresh.answer(q)
        assert (a.source, a.updates, a.epsilon_spent) == (b.source, b.updates, b.epsilon_spent)
        np.testing.assert_array_equal(a.value, b.value)


def test_restore_copies_a_hypothesis_not_summing_to_one_exactly(seed: int) -> None:
    """A fitted hypothesis sums to one only within rounding (1 + 2e-16); the restored
    engine holds its values bit for bit (dividing by the total again moved the last bit,
    and with it every later answer: a measured engine's restore failed on seeds 5 and 8
    of ``test_a_snapshot_carries_the_measurements_and_the_restored_engine_goes_on``)."""
    data = _data(seed)
    engine = _engine(data, seed)
    engine.answer(_queries()[0])
    rng = np.random.default_rng(seed)
    values = rng.dirichlet(np.ones(DOMAIN.size)).reshape(DOMAIN.shape)
    base = values / values.sum()
    for ulps in range(1, 64):  # a sum a few ulps off one, as a fit's can be
        values = base * (1.0 + ulps * np.finfo(np.float64).eps)
        if not np.array_equal(values / values.sum(), values):
            break
    assert not np.array_equal(values / values.sum(), values)  # what the old copy did
    off = DenseHistogram.from_normalized(DOMAIN, values)
    snap = snapshot(engine)
    restored = restore(_engine(data, seed), type(snap)(state=snap.state, hypothesis=off))
    np.testing.assert_array_equal(restored.hypothesis.to_array(), values)


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
    fresh = restore(fresh, snapshot(engine))
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


ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "pmwcm"
#: Attributes only an engine has: assigning one on any object but ``self`` is a poke.
ENGINE_ONLY = frozenset(
    {"hypothesis", "released", "sv_paid", "sparse_vector", "oracle_noise_level",
     "prior_measurements", "measured_update"}
)  # fmt: skip
#: Calls that change an engine's containers or its sparse vector in place.
MUTATORS = frozenset({"append", "extend", "insert", "pop", "clear", "update", "import_state"})


def _spelled_as_engine(node: ast.AST) -> bool:
    """Whether ``node`` names an engine: ``engine``, ``self._engine``, ``live.engine``, ..."""
    return "engine" in ast.unparse(node).rsplit(".", 1)[-1].lower()


def _engine_attribute(node: ast.AST) -> str | None:
    """``attr`` if ``node`` is an attribute of an engine seen from outside, else ``None``:
    any attribute of an object spelled as an engine, or an engine-only attribute of any
    object but ``self`` (an engine is never ``self`` outside ``engine/``)."""
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    if isinstance(owner, ast.Name) and owner.id == "self":
        return None
    if node.attr in ENGINE_ONLY or _spelled_as_engine(owner):
        return node.attr
    return None


def _pokes(tree: ast.AST) -> list[tuple[int, str]]:
    """Assignments to (and deletions of) an engine's attributes, ``setattr`` on an engine,
    and in-place changes of an engine's containers."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if _engine_attribute(base) is not None:
                found.append((target.lineno, ast.unparse(target)))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("setattr", "delattr")
            and node.args
            and _spelled_as_engine(node.args[0])
        ):
            found.append((node.lineno, ast.unparse(node)))
        if (
            isinstance(func, ast.Attribute)
            and func.attr in MUTATORS
            and _engine_attribute(func.value) is not None
        ):
            found.append((func.lineno, ast.unparse(func)))
    return found


def test_the_scan_catches_pokes() -> None:
    code = (
        "engine.hypothesis = h\nengine.released[k] = a\nengine.sv_paid = True\n"
        "engine.updates.append(r)\nengine.sparse_vector.import_state(s)\nself.ledger = x\n"
        "live._engine.ledger = y\nruns.answers.append(a)\nx.hypothesis += 1\n"
        "engine.settings = replace(engine.settings, sensitivity_factor=0.2)\n"
        "engine.__class__ = Broken\nsetattr(engine, 'data', decoy)\nthe_engine.oracle = o\n"
        "engine.ledger.spend(e, label='x')\nparts = replace(engine.parts, settings=s)\n"
    )
    assert sorted(line for line, _ in _pokes(ast.parse(code))) == [
        1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13
    ]  # fmt: skip


def _outside_the_engine() -> list[Path]:
    """Every module of ``src/pmwcm`` outside ``engine/``, and every benchmark."""
    src = [path for path in SRC.rglob("*.py") if "engine" not in path.relative_to(SRC).parts[:1]]
    return sorted([*src, *(ROOT / "benchmarks").rglob("*.py")])


def test_nothing_outside_the_engine_assigns_its_attributes() -> None:
    scanned = _outside_the_engine()
    assert any(path.name == "pipeline_controls.py" for path in scanned)
    assert any(path.name == "throughput.py" for path in scanned)
    pokes = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in scanned
        for line, what in _pokes(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert pokes == []


#: The attributes outside code assigned before the engine owned its state (issue 34).
FORMER_PUBLIC = (
    "data", "settings", "sparse_vector", "oracle", "oracle_noise_level", "ledger", "noise",
    "hypothesis", "updates", "answers", "released", "sv_paid", "backend", "mode",
    "measured_update", "prior_measurements",
)  # fmt: skip


def test_the_engine_is_read_only_from_outside(seed: int) -> None:
    data = _data(seed)
    engine = _engine(data, seed)
    engine.answer(_queries()[0])
    for name in FORMER_PUBLIC:
        with pytest.raises(AttributeError):
            setattr(engine, name, getattr(engine, name))
    # Its containers are views: nothing can be appended or replaced in place.
    with pytest.raises(AttributeError):
        engine.updates.append(engine.updates[0])  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        engine.answers.append(engine.answers[0])  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        engine.released["x"] = engine.answers[0]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine.parts.settings = engine.settings  # type: ignore[misc]


def test_a_part_is_varied_by_building_a_new_engine(seed: int) -> None:
    """``from_parts`` with one part replaced continues the state with the new part."""
    data = _data(seed)
    engine = _engine(data, seed)
    first = engine.answer(_queries()[0])
    synthetic = dataclasses.replace(engine.settings, after_halt="refuse")
    varied = OnlinePMW.from_parts(
        dataclasses.replace(engine.parts, settings=synthetic), state=engine.state()
    )
    assert varied.settings.after_halt == "refuse" and engine.settings.after_halt == "synthetic"
    assert varied.hypothesis is engine.hypothesis and varied.ledger is engine.ledger
    repeat = varied.answer(_queries()[0])
    assert repeat.repeated
    np.testing.assert_array_equal(repeat.value, first.value)


def _restored(engine: OnlinePMW, state: EngineState, *, noise: NumpyNoise) -> OnlinePMW:
    old = engine.ledger
    return OnlinePMW.restore(
        engine.data,
        settings=engine.settings,
        sparse_vector=engine.sparse_vector,
        oracle=engine.oracle,
        oracle_noise_level=engine.oracle_noise_level,
        ledger=PrivacyLedger(epsilon=old.epsilon, delta=old.delta, accountant=old.accountant),
        noise=noise,
        state=state,
    )


def _transcript(engine: OnlinePMW, queries: list[CMQuery]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for q in queries:
        a = engine.answer(q)
        out.append((a.index, a.source, a.updates, a.epsilon_spent, a.repeated, a.value.tolist()))
    return out


def test_restore_of_state_answers_like_the_original(seed: int) -> None:
    # One seeded stream, answered straight through and with a restore in the middle
    # (the restored engine takes over the noise generator where the first left it).
    data = _data(seed)
    config = PMWConfig(
        epsilon=4.0, delta=1e-6, max_updates=6, after_halt="synthetic", threshold=0.05
    )
    stream = [*_queries(), *_queries()[:4], *_queries()[::-1]]
    straight = _transcript(build_engine(data, config, noise=NumpyNoise(seed=seed)), stream)
    generator = np.random.default_rng(seed)
    first = build_engine(data, config, noise=NumpyNoise(generator=generator))
    head = _transcript(first, stream[:5])
    assert first.updates, "the first leg should have made an update"
    second = _restored(first, first.state(), noise=NumpyNoise(generator=generator))
    assert _transcript(second, stream[5:]) == straight[5:]
    assert head == straight[:5]


def test_state_is_a_frozen_value(seed: int) -> None:
    data = _data(seed)
    config = PMWConfig(
        epsilon=4.0, delta=1e-6, max_updates=6, after_halt="synthetic", threshold=0.05
    )
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    engine.answer(_queries()[0])
    state = engine.state()
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.sv_paid = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        state.released["x"] = 0  # type: ignore[index]
    answers, entries = len(state.answers), len(state.ledger)
    hypothesis = state.hypothesis.to_array()
    for q in _queries()[1:]:
        engine.answer(q)
    assert engine.updates, "the engine should have updated its hypothesis"
    assert (len(state.answers), len(state.ledger)) == (answers, entries)
    np.testing.assert_array_equal(state.hypothesis.to_array(), hypothesis)


def test_restore_refuses_a_ledger_that_does_not_begin_with_the_states(seed: int) -> None:
    data = _data(seed)
    engine = _engine(data, seed)
    engine.answer(_queries()[0])
    state = engine.state()
    other = PrivacyLedger(
        epsilon=engine.ledger.epsilon,
        delta=engine.ledger.delta,
        accountant=engine.ledger.accountant,
    )
    other.spend(dp_accounting.LaplaceDpEvent(100.0), label="something else")
    with pytest.raises(ValueError, match="do not begin with"):
        OnlinePMW.restore(
            engine.data,
            settings=engine.settings,
            sparse_vector=engine.sparse_vector,
            oracle=engine.oracle,
            oracle_noise_level=engine.oracle_noise_level,
            ledger=other,
            noise=engine.noise,
            state=state,
        )


def test_released_indices_must_point_at_answers() -> None:
    with pytest.raises(ValueError, match="points at no answer"):
        EngineState(hypothesis=DenseHistogram.uniform(DOMAIN), released={"k": 0})


def test_snapshot_json_keeps_its_shape_and_round_trips(seed: int) -> None:
    data = _data(seed)
    engine = _engine(data, seed)
    for q in _queries()[:6]:
        engine.answer(q)
    snap = encode_state(engine.state())
    assert set(snap.state) == {
        "version",
        "updates",
        "answers",
        "released",
        "sv_paid",
        "sparse_vector",
        "ledger",
        "prior_measurements",
    }
    assert snap.state["version"] == 1
    assert all(set(e) == {"label", "event"} for e in snap.state["ledger"])
    wire = json.loads(json.dumps(snap.state))
    back = decode_state(type(snap)(state=wire, hypothesis=snap.hypothesis), DOMAIN)
    state = engine.state()
    assert dict(back.released) == dict(state.released)
    assert [answer_to_dict(a) for a in back.answers] == [answer_to_dict(a) for a in state.answers]
    assert [(e.label, e.event) for e in back.ledger] == [(e.label, e.event) for e in state.ledger]
    assert [u.query for u in back.updates] == [u.query for u in state.updates]
    # the paid prior's released marginals, bit for bit (JSON floats round-trip exactly)
    assert len(state.prior_measurements) == 6  # all pairs of 4 attributes
    for mine, theirs in zip(back.prior_measurements, state.prior_measurements, strict=True):
        assert (mine.clique, mine.sigma) == (theirs.clique, theirs.sigma)
        np.testing.assert_array_equal(mine.values, theirs.values)


def _busy_engine(data: PrivateData, generator: np.random.Generator) -> OnlinePMW:
    """An engine with every field of its state away from the default (a paid prior's
    measurements, updates, repeats, a paid sparse vector), fed by ``generator``."""
    config = PMWConfig(
        epsilon=4.0, delta=1e-6, max_updates=6, after_halt="synthetic", threshold=0.05
    )
    return build_engine(data, config, noise=NumpyNoise(generator=generator))


def _field_json(state: EngineState, name: str) -> object:
    """A field in its JSON form (floats exact), for comparing two states field by field."""
    return json.loads(json.dumps(FIELD_CODECS[name].encode(getattr(state, name))))


def test_every_state_field_has_a_codec_and_a_kind() -> None:
    saved = {f.name for f in dataclasses.fields(EngineState) if f.metadata["kept"] != "apart"}
    assert set(FIELD_CODECS) == saved
    assert all(
        f.metadata["kept"] in ("apart", "log", "grows", "value")
        for f in dataclasses.fields(EngineState)
    )


def test_a_snapshot_round_trips_every_field_and_the_answers_after_it(seed: int) -> None:
    data = _data(seed)
    generator = np.random.default_rng(seed)
    engine = _busy_engine(data, generator)
    stream = [*_queries(), *_queries()[:3]]
    for q in stream[:9]:
        engine.answer(q)
    state = engine.state()
    for item in dataclasses.fields(EngineState):  # the test covers every field
        if item.metadata["kept"] != "apart":
            assert getattr(state, item.name), f"{item.name} is empty: the test would not see it"
    snap = snapshot(engine)
    wire = type(snap)(state=json.loads(json.dumps(snap.state)), hypothesis=snap.hypothesis)
    follower = np.random.default_rng(seed + 1)
    fresh = restore(_busy_engine(data, follower), wire)
    follower.bit_generator.state = generator.bit_generator.state  # the stream from here on
    back = fresh.state()
    for item in dataclasses.fields(EngineState):
        if item.metadata["kept"] == "apart":
            np.testing.assert_array_equal(back.hypothesis.to_array(), state.hypothesis.to_array())
        else:
            assert _field_json(back, item.name) == _field_json(state, item.name), item.name
    assert back.mark() == state.mark()
    for q in stream[9:]:  # the same answers after it (the same noise stream from here)
        a, b = engine.answer(q), fresh.answer(q)
        assert (a.source, a.updates, a.epsilon_spent, a.repeated) == (
            b.source, b.updates, b.epsilon_spent, b.repeated
        )  # fmt: skip
        np.testing.assert_array_equal(a.value, b.value)


def test_durable_recovery_round_trips_every_field(seed: int) -> None:
    """The service's snapshot (no answers: they are its log's rows) plus the log and the
    committed debits give back every field of the state."""
    from pmwcm.engine.snapshot import answer_to_dict
    from pmwcm.service.durable import encode_snapshot, recover, state_mark
    from pmwcm.service.store import DebitRecord, ReleaseRecord

    data = _data(seed)
    engine = _busy_engine(data, np.random.default_rng(seed))
    marks = [state_mark(engine)]
    for q in [*_queries(), *_queries()[:3]][:9]:
        engine.answer(q)
        marks.append(state_mark(engine))
    assert len(set(marks)) > 2  # the mark moves with the state, and not on a repeat
    assert marks[-1] == marks[-2]
    state = engine.state()
    stored = encode_snapshot(engine)
    assert not stored.state["answers"] and not stored.state["released"]
    debits = [
        DebitRecord(seq=i, label=e.label, event=event_to_dict(e.event), sv_state={})
        for i, e in enumerate(engine.ledger.entries)
    ]
    keys = {index: key for key, index in state.released.items()}
    releases = [
        ReleaseRecord(index=a.index, query_key=keys.get(a.index, ""), answer=answer_to_dict(a),
                      token_id=None)
        for a in state.answers
    ]  # fmt: skip
    recovered, orphans = recover(
        _busy_engine(data, np.random.default_rng(seed + 1)), stored, debits, releases
    )
    assert orphans == []
    back = recovered.state()
    for item in dataclasses.fields(EngineState):
        if item.metadata["kept"] == "apart":
            np.testing.assert_array_equal(back.hypothesis.to_array(), state.hypothesis.to_array())
        else:
            assert _field_json(back, item.name) == _field_json(state, item.name), item.name


def test_an_unlogged_repeat_answers_as_a_logged_one_and_leaves_the_log_alone(seed: int) -> None:
    """``ask(..., log_repeat=False)`` (a streamed query file's repeats): the same
    value, source, updates and spend as a logged repeat, in the asked order; the
    answers log does not grow, so it stays bounded by the distinct queries."""
    engine = _engine(_data(seed), seed)
    for q in _queries()[:6]:
        engine.ask(q)
    permuted = CMQuery(loss="logistic", target="y", features=("b", "a"))
    size = len(engine.answers)
    spent = engine.ledger.spent_epsilon()
    unlogged = engine.ask(permuted, log_repeat=False)
    assert len(engine.answers) == size and engine.ledger.spent_epsilon() == spent
    logged = engine.ask(permuted)
    assert len(engine.answers) == size + 1
    assert unlogged.repeated and logged.repeated
    np.testing.assert_array_equal(unlogged.value, logged.value)
    assert (unlogged.source, unlogged.updates, unlogged.epsilon_spent) == (
        logged.source,
        logged.updates,
        logged.epsilon_spent,
    )
    first = engine.released[query_key(permuted, DOMAIN)]
    assert unlogged.index == first.index
    order = permuted.coordinate_order(DOMAIN)
    assert order is not None  # the permutation is asked in another coordinate order
    np.testing.assert_array_equal(unlogged.value, np.asarray(first.value)[list(order)])
