"""The write-ahead protocol and recovery, with crashes simulated in-process.

A "crash" raises inside the store at a chosen instant; a "restart" closes the
store and opens a new one on the same directory (fresh engine, nothing kept in
memory). The real kill -9 runs are in ``test_service_crash.py``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pmwcm.engine.online import query_key
from pmwcm.engine.practical import make_accountant
from pmwcm.errors import Halted
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.accounting.codec import event_from_dict
from pmwcm.mechanisms.noise import FloatArray, NumpyNoise
from pmwcm.service import SQLiteStore, StateStore, StoreError
from pmwcm.service.build import SessionUnavailable, session_config
from pmwcm.service.sessions import LiveSession, SessionManager
from service.svc_support import write_tiny


class Crash(RuntimeError):
    """Stands for the process dying at this instant."""


class CountingNoise(NumpyNoise):
    """Seeded noise that counts its draws (tests only; the service uses OpenDP)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.calls: Counter[str] = Counter()

    def laplace(self, scale: float, size: int) -> FloatArray:
        self.calls["laplace"] += 1
        return super().laplace(scale, size)

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        self.calls["gaussian"] += 1
        return super().gaussian(sigma, size)


def q(*features: str, loss: str = "logistic") -> CMQuery:
    return CMQuery(loss=loss, target="y", features=features)


class Node:
    """One "process": a store and a session manager over a state directory (or the
    store ``open_store`` opens)."""

    def __init__(
        self, state: Path, seed: int, open_store: Callable[[], StateStore] | None = None
    ) -> None:
        self.noise = CountingNoise(seed)
        self.store = SQLiteStore(state) if open_store is None else open_store()
        self.manager = SessionManager(self.store, noise_factory=lambda: self.noise)

    def session(self, name: str = "s") -> LiveSession:
        return self.manager.get(name)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def make_node(
    tmp_path: Path, tiny: tuple[Path, Path], seed: int, open_store: Callable[[], StateStore]
) -> Any:
    """Makes the next "process" over the test's store (each test runs on both stores)."""
    nodes: list[Node] = []

    def make(**parameters: Any) -> Node:
        if nodes:
            nodes[-1].close()
        node = Node(tmp_path / "state", seed + len(nodes), open_store)
        if parameters:
            config = session_config(
                data_path=str(tiny[0]),
                schema_path=str(tiny[1]),
                epsilon=1.0,
                delta=1e-6,
                parameters={"prior": "uniform"} | parameters,
            )
            node.manager.create("s", config)
        nodes.append(node)
        return node

    yield make
    if nodes:
        nodes[-1].close()


def engine_state(live: LiveSession) -> dict[str, Any]:
    live.status()  # loads
    engine = live._engine
    assert engine is not None
    return {
        "sv": engine.sparse_vector.export_state(),
        "sv_paid": engine.sv_paid,
        "hypothesis": engine.hypothesis.to_array().tolist(),
        "ledger": [(e.label, e.event, e.epsilon_after) for e in engine.ledger.entries],
        "released": {k: a.value.tolist() for k, a in engine.released.items()},
        "updates": len(engine.updates),
        "answers": len(engine.answers),
        "noise_level": engine.oracle_noise_level,
    }


def composed(store: StateStore, name: str = "s") -> PrivacyLedger:
    """The committed debits composed afresh (raises if they exceed the budget)."""
    config = store.get_session(name).config  # type: ignore[union-attr]
    ledger = PrivacyLedger(
        epsilon=config["epsilon"],
        delta=config["delta"],
        accountant=make_accountant(config["parameters"]["accountant"]),
    )
    for debit in store.debits(name):
        ledger.spend(event_from_dict(debit.event), label=debit.label)
    return ledger


def test_restart_resumes_the_exact_state(make_node: Any) -> None:
    stream = [q("a"), q("b"), q("a", "c"), q("c", loss="squared"), q("b", "c"), q("a")]
    node = make_node(prior="marginals", max_updates=len(stream), threshold=0.5)
    answers = [node.session().ask(query, token_id=None) for query in stream]
    before = engine_state(node.session())
    assert before["ledger"][0][0].startswith("prior") and before["sv"]["rho"] is not None
    node = make_node()
    after = engine_state(node.session())
    # restore() re-normalises the histogram (DenseHistogram divides by its sum): last-ulp changes
    np.testing.assert_allclose(after.pop("hypothesis"), before.pop("hypothesis"), rtol=1e-13)
    assert after == before
    again = node.session().ask(q("a", "c"), token_id=None)
    assert again.repeated and np.array_equal(again.value, answers[2].value)
    assert node.session().status().epsilon_spent == composed(node.store).spent_epsilon()


def test_orphan_oracle_debit_stays_spent_and_counts_toward_the_cutoff(
    make_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = make_node(max_updates=3, threshold=-1e6)  # every test is "above"
    first = node.session().ask(q("a"), token_id=None)
    spent_before = node.session().status().epsilon_spent

    def crash(*args: Any) -> None:
        raise Crash

    monkeypatch.setattr(node.store, "commit_release", crash)
    with pytest.raises(Crash):
        node.session().ask(q("b"), token_id=None)
    assert [d.label for d in node.store.debits("s")] == [
        "sparse vector",
        "oracle call 1",
        "oracle call 2",
    ]
    node = make_node()  # restart
    live = node.session()
    status = live.status()
    assert status.epsilon_spent > spent_before  # the budget never goes backwards
    assert status.epsilon_spent == composed(node.store).spent_epsilon()
    assert [line.orphan for line in live.ledger()] == [False, False, True]
    state = engine_state(live)
    assert state["sv"]["positives"] == 2 and state["updates"] == 1
    # the orphan's answer never existed
    assert list(state["released"]) == [query_key(q("a"), live._load().domain)]
    repeat = live.ask(q("a"), token_id=None)
    assert repeat.repeated and np.array_equal(repeat.value, first.value)
    live.ask(q("b"), token_id=None)  # asked again: a fresh test, a fresh debit
    with pytest.raises(Halted):  # 3 positives: the cutoff, orphan included
        live.ask(q("c"), token_id=None)
    composed(node.store)  # never over budget
    assert [line.orphan for line in live.ledger()] == [False, False, True, False]


def test_a_synthetic_session_serves_synthetic_answers_after_an_orphan_halts_it(
    make_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16, Found 6: the orphan counts toward the sparse vector's cutoff but has
    no update behind it, so the sparse vector halts before the engine's T updates are
    spent; a session promised ``after_halt="synthetic"`` must then answer from the
    final hypothesis, not refuse every later query."""
    node = make_node(max_updates=2, threshold=-1e6, after_halt="synthetic")
    node.session().ask(q("a"), token_id=None)

    def crash(*args: Any) -> None:
        raise Crash

    monkeypatch.setattr(node.store, "commit_release", crash)
    with pytest.raises(Crash):
        node.session().ask(q("b"), token_id=None)
    node = make_node()  # restart: 2 positives (one orphan), 1 update
    live = node.session()
    assert engine_state(live)["sv"]["positives"] == 2
    spent = live.status().epsilon_spent
    answer = live.ask(q("c"), token_id=None)
    assert answer.source == "synthetic" and answer.updates == 1
    assert live.status().epsilon_spent == spent  # free: post-processing


def test_orphan_sparse_vector_debit_is_not_charged_again(
    make_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = make_node(max_updates=3, threshold=1e6)  # every test is "below"

    def crash(*args: Any) -> None:
        raise Crash

    monkeypatch.setattr(node.store, "commit_release", crash)
    with pytest.raises(Crash):
        node.session().ask(q("a"), token_id=None)
    node = make_node()
    for query in (q("a"), q("b")):
        assert node.session().ask(query, token_id=None).source == "hypothesis"
    assert [d.label for d in node.store.debits("s")] == ["sparse vector"]
    assert node.store.orphans("s") == {0}


def test_a_debit_that_cannot_be_committed_draws_no_noise(
    make_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = make_node(max_updates=3, threshold=-1e6)
    append = node.store.append_debit
    monkeypatch.setattr(node.store, "append_debit", lambda *a: (_ for _ in ()).throw(StoreError()))
    with pytest.raises(StoreError):
        node.session().ask(q("a"), token_id=None)
    assert sum(node.noise.calls.values()) == 0  # the sparse vector's debit failed first
    calls = iter([append, lambda *a: (_ for _ in ()).throw(StoreError())])
    monkeypatch.setattr(node.store, "append_debit", lambda *a: next(calls)(*a))
    with pytest.raises(StoreError):
        node.session().ask(q("a"), token_id=None)
    assert node.noise.calls["laplace"] == 2 and node.noise.calls["gaussian"] == 0
    assert [d.label for d in node.store.debits("s")] == ["sparse vector"]


@pytest.mark.parametrize("store_kind", ["sqlite"])  # reads SQLite directly
def test_session_creation_is_atomic(
    make_node: Any, tiny: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    node = make_node()

    def crash(*args: Any) -> None:
        raise Crash

    monkeypatch.setattr(SQLiteStore, "_put_snapshot", staticmethod(crash))
    config = session_config(
        data_path=str(tiny[0]), schema_path=str(tiny[1]), epsilon=1.0, delta=1e-6, parameters={}
    )
    with pytest.raises(Crash):
        node.manager.create("s", config)  # the marginal prior's debit is part of it
    assert node.store.get_session("s") is None and node.store.debits("s") == []


@pytest.mark.parametrize("store_kind", ["sqlite"])  # reads SQLite directly
def test_tampered_state_is_refused(make_node: Any, tiny: tuple[Path, Path], tmp_path: Path) -> None:
    node = make_node(max_updates=3, threshold=-1e6)
    node.session().ask(q("a"), token_id=None)
    node.close()
    db = sqlite3.connect(tmp_path / "state" / "pmwcm.sqlite3")
    with db:
        db.execute("UPDATE debits SET label = 'forged' WHERE seq = 1")
    db.close()
    node = make_node()
    with pytest.raises(SessionUnavailable, match="prefix"):
        node.session().status()
    node.close()
    db = sqlite3.connect(tmp_path / "state" / "pmwcm.sqlite3")
    with db:
        db.execute("UPDATE debits SET label = 'oracle call 1' WHERE seq = 1")
        config = db.execute("SELECT config FROM sessions").fetchone()[0]
        forged = config.replace('"noise_level": ', '"noise_level": 1')
        db.execute("UPDATE sessions SET config = ?", (forged,))
    db.close()
    node = make_node()
    with pytest.raises(SessionUnavailable, match="calibrates"):
        node.session().status()


def test_public_prior_session_is_free_and_survives_a_restart(
    tmp_path: Path, tiny: tuple[Path, Path], seed: int
) -> None:
    """A public start: no build debit, the same state after a restart, refused if it changes."""
    (tmp_path / "public").mkdir()
    public, _ = write_tiny(tmp_path / "public", n=200, seed=seed + 99)
    moved = tmp_path / "public.csv"
    public.rename(moved)
    config = session_config(
        data_path=str(tiny[0]),
        schema_path=str(tiny[1]),
        epsilon=1.0,
        delta=1e-6,
        parameters={"max_updates": 4, "threshold": 0.5},
        public_data_path=str(moved),
    )
    assert config["parameters"]["prior"] == "public" and "public_data_sha256" in config
    node = Node(tmp_path / "state", seed)
    node.manager.create("s", config)
    assert node.store.debits("s") == []  # nothing measured, nothing paid
    stream = [q("a"), q("b"), q("a", "c"), q("b", "c")]
    for query in stream:
        node.session().ask(query, token_id=None)
    before = engine_state(node.session())
    assert all(not label.startswith("prior") for label, *_ in before["ledger"])
    node.close()
    node = Node(tmp_path / "state", seed + 1)
    after = engine_state(node.session())
    np.testing.assert_allclose(after.pop("hypothesis"), before.pop("hypothesis"), rtol=1e-13)
    assert after == before
    node.close()
    with moved.open("a", encoding="utf-8") as fh:
        fh.write("yes,yes,hi,yes\n")
    node = Node(tmp_path / "state", seed + 2)
    with pytest.raises(SessionUnavailable, match=r"public_data_path"):  # no server path
        node.session().status()
    node.close()


@pytest.mark.parametrize(
    ("parameters", "public", "needle"),
    [
        ({"prior": "public"}, False, "public_data_path"),
        ({"prior": "marginals"}, True, "prior='marginals'"),
    ],
)
def test_public_prior_needs_exactly_its_file(
    tmp_path: Path, tiny: tuple[Path, Path], parameters: dict[str, Any], public: bool, needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        session_config(
            data_path=str(tiny[0]),
            schema_path=str(tiny[1]),
            epsilon=1.0,
            delta=1e-6,
            parameters=parameters,
            public_data_path=str(tiny[0]) if public else None,
        )


def test_changed_data_is_refused(make_node: Any, tiny: tuple[Path, Path]) -> None:
    node = make_node(max_updates=3)
    node.session().ask(q("a"), token_id=None)
    with tiny[0].open("a", encoding="utf-8") as fh:
        fh.write("yes,yes,hi,yes\n")
    node = make_node()
    with pytest.raises(SessionUnavailable, match="changed"):
        node.session().status()


def test_one_process_per_state_directory(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state")
    with pytest.raises(StoreError, match="in use"):
        SQLiteStore(tmp_path / "state")
    store.close()
    SQLiteStore(tmp_path / "state").close()


def test_an_unusable_state_directory_is_released(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "state").close()
    db = sqlite3.connect(tmp_path / "state" / "pmwcm.sqlite3")
    with db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.close()
    for _ in range(2):  # the lock is released after the refusal
        with pytest.raises(StoreError, match="version"):
            SQLiteStore(tmp_path / "state")


@pytest.mark.parametrize("after_halt", ["synthetic", "refuse"])
def test_a_measured_session_halted_past_its_slots_stays_halted_after_a_restart(
    make_node: Any, after_halt: str
) -> None:
    """A measured session expecting one query spends its ``T`` slots on its first ``T``
    distinct queries (paced, no test). Answering after its halt, it tests on; at a
    threshold every test clears, the next query halts it, answered synthetic, and the
    closed sparse vector is committed with that answer, so a restart does not reopen it.
    Refusing after its halt, it halts when its slots are spent, before any test (a
    refusal commits nothing), and stays so."""
    node = make_node(update="measure", expected_queries=1, threshold=-1e6, after_halt=after_halt)
    live = node.session()
    live.status()
    assert live._engine is not None
    cutoff = live._engine.settings.max_updates
    stream = [CMQuery(loss="logistic", target="y", features=("a",), l2=0.01 * (j + 1))
              for j in range(cutoff + 2)]  # fmt: skip
    for query in stream[:cutoff]:
        assert live.ask(query, token_id=None).source == "oracle"
    if after_halt == "synthetic":
        assert live.ask(stream[cutoff], token_id=None).source == "synthetic"
    else:
        with pytest.raises(Halted):
            live.ask(stream[cutoff], token_id=None)
    before = engine_state(live)
    node = make_node()  # restart
    live = node.session()
    after = engine_state(live)
    assert after["sv"] == before["sv"] and after["updates"] == cutoff
    assert live._engine is not None and live._engine.halted
    assert (after["sv"]["positives"] == cutoff) == (after_halt == "synthetic")
    spent = live.status().epsilon_spent
    if after_halt == "synthetic":
        assert live.ask(stream[-1], token_id=None).source == "synthetic"
    else:
        with pytest.raises(Halted):
            live.ask(stream[-1], token_id=None)
    assert engine_state(live)["sv"] == before["sv"] and live.status().epsilon_spent == spent
