"""Saving and restoring an engine's whole state, for durable services and resumable runs.

A snapshot holds everything the engine's future behaviour depends on: the
hypothesis histogram, the update history (queries and private answers, for the
post-processing sweeps), every released answer (so repeats are answered from
the log, never with fresh noise), the sparse vector's state *including its
secret threshold noise*, and the ledger's entries. Restoring it into a freshly
built engine (same data, same configuration) continues the interaction
exactly; nothing is re-drawn. Snapshots are secret: they must be stored where
only the curator can read them.

The JSON part is :attr:`EngineSnapshot.state`; the histogram travels separately
as an array (it can be millions of cells).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmwcm.engine.online import Answer, OnlinePMW, UpdateRecord, query_key
from pmwcm.engine.rounds import LinearRound
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.histogram import DenseHistogram, FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.accounting.codec import event_from_dict, event_to_dict

STATE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class EngineSnapshot:
    """A JSON-ready state plus the hypothesis histogram."""

    state: dict[str, Any]
    hypothesis: FloatArray


def query_to_dict(query: CMQuery | LinearQuery) -> dict[str, Any]:
    """A JSON description of a CM or linear query."""
    if isinstance(query, LinearQuery):
        return {
            "kind": "linear",
            "clique": list(query.clique),
            "values": list(query.values),
            "shape": list(query.shape),
        }
    return {"kind": "cm", "spec": query.to_dict()}


def query_from_dict(data: dict[str, Any]) -> CMQuery | LinearQuery:
    """The inverse of :func:`query_to_dict`."""
    if data.get("kind") == "linear":
        return LinearQuery(
            clique=tuple(data["clique"]),
            values=tuple(float(v) for v in data["values"]),
            shape=tuple(int(s) for s in data["shape"]),
        )
    if data.get("kind") == "cm":
        return CMQuery.from_dict(data["spec"])
    raise ValueError(f"Unknown query kind {data.get('kind')!r}.")


def _value_to_json(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else float(value)


def _value_from_json(value: Any) -> Any:
    return np.asarray(value, dtype=np.float64) if isinstance(value, list) else float(value)


def answer_to_dict(answer: Answer) -> dict[str, Any]:
    """A JSON description of a released answer."""
    return {
        "index": answer.index,
        "value": _value_to_json(answer.value),
        "source": answer.source,
        "updates": answer.updates,
        "epsilon_spent": answer.epsilon_spent,
        "delta": answer.delta,
        "repeated": answer.repeated,
    }


def answer_from_dict(data: dict[str, Any]) -> Answer:
    """The inverse of :func:`answer_to_dict`."""
    return Answer(
        index=int(data["index"]),
        value=_value_from_json(data["value"]),
        source=data["source"],
        updates=int(data["updates"]),
        epsilon_spent=float(data["epsilon_spent"]),
        delta=float(data["delta"]),
        repeated=bool(data["repeated"]),
    )


def snapshot(engine: OnlinePMW) -> EngineSnapshot:
    """Everything needed to continue ``engine`` later (secret; see the module docstring)."""
    released = {key: answer.index for key, answer in engine.released.items()}
    state = {
        "version": STATE_VERSION,
        "updates": [
            {"query": query_to_dict(u.query), "private": _value_to_json(u.private)}
            for u in engine.updates
        ],
        "answers": [answer_to_dict(a) for a in engine.answers],
        "released": released,
        "sv_paid": engine.sv_paid,
        "sparse_vector": engine.sparse_vector.export_state(),
        "ledger": [
            {"label": e.label, "event": event_to_dict(e.event)} for e in engine.ledger.entries
        ],
    }
    return EngineSnapshot(state=state, hypothesis=engine.hypothesis.to_array())


def restore(engine: OnlinePMW, snap: EngineSnapshot) -> None:
    """Loads ``snap`` into a freshly built ``engine`` (same data and configuration).

    Build that engine with ``prior=DenseHistogram(domain, snap.hypothesis)``: a
    public starting point, so construction measures nothing from the data again
    (a prior measured while rebuilding would be discarded unreleased, which is
    safe but wasteful). The snapshot's ledger replaces the fresh engine's.

    Raises:
        ValueError: if the engine has already been used, or the snapshot does not fit it.
    """
    if engine.answers or engine.updates or engine.sv_paid:
        raise ValueError("restore() needs a freshly built engine.")
    state = snap.state
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"Unsupported engine state version {state.get('version')!r}.")
    # The snapshot's ledger replaces whatever construction charged (e.g. a prior
    # measured again while rebuilding): its entries are what was really spent.
    old = engine.ledger
    ledger = PrivacyLedger(epsilon=old.epsilon, delta=old.delta, accountant=old.accountant)
    for entry in state["ledger"]:
        ledger.spend(event_from_dict(entry["event"]), label=entry["label"])
    engine.ledger = ledger
    engine.sparse_vector.import_state(state["sparse_vector"])
    engine.sv_paid = bool(state["sv_paid"])
    engine.hypothesis = DenseHistogram(engine.domain, np.asarray(snap.hypothesis))
    for item in state["updates"]:
        query = query_from_dict(item["query"])
        round_: Any
        if isinstance(query, LinearQuery):
            round_ = LinearRound(
                clique=query.clique,
                table=query.table(engine.domain),
                learning_rate=engine.settings.learning_rate,
            )
        else:
            round_ = engine.cm_round(query)
        engine.updates.append(
            UpdateRecord(query=query, round=round_, private=_value_from_json(item["private"]))
        )
    engine.answers.extend(answer_from_dict(a) for a in state["answers"])
    for key, index in state["released"].items():
        engine.released[_canonical_key(key, engine)] = engine.answers[int(index)]


def _canonical_key(key: str, engine: OnlinePMW) -> str:
    """Re-keys a stored CM key canonically (snapshots from before canonical keys).

    A snapshot written when keys were the spec as typed may hold two spellings
    of one problem; both now map to one key and the later answer (the same
    problem, released twice) is kept, so no third draw can be made.
    """
    if not key.startswith("cm:"):
        return key
    return query_key(CMQuery.from_dict(json.loads(key.removeprefix("cm:"))), engine.domain)


__all__ = [
    "EngineSnapshot",
    "answer_from_dict",
    "answer_to_dict",
    "query_from_dict",
    "query_key",
    "query_to_dict",
    "restore",
    "snapshot",
]
