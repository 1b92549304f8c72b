"""Many analysts at once on loopback: requests are serialised per session, no debit is lost
or doubled, and a query raced by several clients gets one answer."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from pmwcm.engine.practical import make_accountant
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.accounting.codec import event_from_dict
from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
from pmwcm.service.client import BudgetExhausted, Client
from service.svc_support import serving

POOL = [
    {"loss": "logistic", "target": "y", "features": f}
    for f in (["a"], ["b"], ["c"], ["a", "b"], ["a", "c"], ["b", "c"], ["a", "b", "c"])
] + [{"loss": "squared", "target": "y", "features": ["a"]}]
THREADS = {"s": 8, "t": 3}
PER_THREAD = 6


def _analyst(url: str, token: str, session: str, seed: int, out: list[Any]) -> None:
    with Client(url, token, timeout=120) as client:
        for i in range(PER_THREAD):
            spec = POOL[(seed * 3 + i * (seed + 1)) % len(POOL)]
            try:
                out.append((session, spec, client.ask(session, spec)))
            except BudgetExhausted:
                out.append((session, spec, None))


def test_concurrent_analysts_lose_and_double_nothing(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    app = create_app(store, data_dirs=[tiny[0].parent])
    with serving(app) as url, Client(url, curator) as admin:
        for name, max_updates in (("s", 4), ("t", 8)):
            admin.create_session(
                name,
                data_path=str(tiny[0]),
                schema_path=str(tiny[1]),
                epsilon=1.0,
                delta=1e-6,
                parameters={"prior": "uniform", "max_updates": max_updates, "threshold": 0.0},
            )
        results: list[Any] = []
        threads = [
            threading.Thread(target=_analyst, args=(url, admin.issue_token(name), name, i, results))
            for name, count in THREADS.items()
            for i in range(count)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads)
        assert len(results) == PER_THREAD * sum(THREADS.values())
        for name in THREADS:
            mine = [(spec, a) for s, spec, a in results if s == name]
            answered = [(spec, a) for spec, a in mine if a is not None]
            by_query: dict[str, set[tuple[float, ...]]] = {}
            for spec, a in answered:
                by_query.setdefault(json.dumps(spec, sort_keys=True), set()).add(a.theta)
            assert all(len(thetas) == 1 for thetas in by_query.values())  # one answer each
            assert sorted(a.index for _, a in answered) == list(range(len(answered)))
            log = admin.answers(name)
            assert len(log) == len(answered)
            assert {r["index"]: tuple(r["theta"]) for r in log} == {
                a.index: a.theta for _, a in answered
            }
            fresh_oracle = sum(a.source == "oracle" and not a.repeated for _, a in answered)
            ledger = admin.ledger(name)
            labels = [e["label"] for e in ledger["entries"]]
            assert labels.count("sparse vector") == 1
            assert labels[1:] == [f"oracle call {i + 1}" for i in range(fresh_oracle)]
            assert not any(e["orphan"] for e in ledger["entries"])
            if any(a is None for _, a in mine):  # refused only once every update was spent
                assert fresh_oracle == admin.status(name)["max_updates"]
            replay = PrivacyLedger(
                epsilon=1.0, delta=1e-6, accountant=make_accountant(ledger["accountant"])
            )
            for entry in ledger["entries"]:
                replay.spend(event_from_dict(entry["event"]), label=entry["label"])
            assert replay.spent_epsilon() == ledger["epsilon_spent"] <= 1.0
