"""Saving and restoring an engine's whole state, for durable services and resumable runs.

A snapshot holds everything the engine's future behaviour depends on: the
hypothesis histogram, the update history (queries and private answers, for the
post-processing sweeps), the paid prior's released marginals (for the refit
after each update), every released answer (so repeats are answered from the
log, never with fresh noise), the sparse vector's state *including its
secret threshold noise*, and the ledger's entries: the JSON encoding of an
:class:`~pmwcm.engine.online.EngineState`. Restoring it with the ingredients of a
freshly built engine (same data, same configuration) continues the interaction
exactly; nothing is re-drawn. Snapshots are secret: they must be stored where
only the curator can read them.

The JSON part is :attr:`EngineSnapshot.state`; the histogram travels separately
as an array (it can be millions of cells). This module only encodes and
decodes: the engine itself builds and takes its state
(:meth:`~pmwcm.engine.online.OnlinePMW.state`,
:meth:`~pmwcm.engine.online.OnlinePMW.restore`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, fields
from types import MappingProxyType
from typing import Any

import numpy as np

from pmwcm.engine.online import Answer, EngineState, OnlinePMW, PastUpdate, query_key
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, FloatArray, Histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import LedgerEntry, PrivacyLedger
from pmwcm.mechanisms.accounting.codec import event_from_dict, event_to_dict
from pmwcm.mechanisms.priors.marginals import Measurement

STATE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class EngineSnapshot:
    """A JSON-ready state plus the hypothesis (any backend; bytes via
    :func:`~pmwcm.kernels.histogram_codec.encode_histogram`)."""

    state: dict[str, Any]
    hypothesis: Histogram


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


def _encode_updates(updates: tuple[PastUpdate, ...]) -> list[dict[str, Any]]:
    return [
        {"query": query_to_dict(u.query), "private": _value_to_json(u.private)} for u in updates
    ]


def _decode_updates(items: list[dict[str, Any]], domain: Domain) -> tuple[PastUpdate, ...]:
    del domain
    return tuple(
        PastUpdate(query=query_from_dict(item["query"]), private=_value_from_json(item["private"]))
        for item in items
    )


def _decode_released(items: dict[str, Any], domain: Domain) -> dict[str, int]:
    """Released keys, re-keyed canonically (snapshots from before canonical keys;
    see :func:`_canonical_key`)."""
    return {_canonical_key(key, domain): int(index) for key, index in items.items()}


def _decode_ledger(items: list[dict[str, Any]], domain: Domain) -> tuple[LedgerEntry, ...]:
    """The JSON keeps no running totals, so ``epsilon_after`` is NaN: the restoring
    ledger composes the events again and records its own."""
    del domain
    return tuple(
        LedgerEntry(label=e["label"], event=event_from_dict(e["event"]), epsilon_after=math.nan)
        for e in items
    )


def _encode_measurements(measurements: tuple[Measurement, ...]) -> list[dict[str, Any]]:
    return [
        {"clique": list(m.clique), "values": m.values.tolist(), "sigma": m.sigma}
        for m in measurements
    ]


def _decode_measurements(items: list[dict[str, Any]], domain: Domain) -> tuple[Measurement, ...]:
    del domain
    return tuple(
        Measurement(
            clique=tuple(m["clique"]),
            values=np.asarray(m["values"], dtype=np.float64),
            sigma=float(m["sigma"]),
        )
        for m in items
    )


@dataclass(frozen=True)
class _Codec:
    """How one field of :class:`EngineState` is written as JSON and read back."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any, Domain], Any]


#: The JSON codec of every field of :class:`EngineState` but the ``APART`` hypothesis
#: (a field without one fails the first snapshot and ``tests/test_engine_state.py``).
FIELD_CODECS: Mapping[str, _Codec] = MappingProxyType(
    {
        "updates": _Codec(_encode_updates, _decode_updates),
        "answers": _Codec(
            lambda answers: [answer_to_dict(a) for a in answers],
            lambda items, _: tuple(answer_from_dict(a) for a in items),
        ),
        "released": _Codec(dict, _decode_released),
        "sv_paid": _Codec(bool, lambda value, _: bool(value)),
        "sparse_vector": _Codec(dict, lambda value, _: dict(value)),
        "ledger": _Codec(
            lambda entries: [{"label": e.label, "event": event_to_dict(e.event)} for e in entries],
            _decode_ledger,
        ),
        "prior_measurements": _Codec(_encode_measurements, _decode_measurements),
    }
)


def _saved_fields() -> list[Field[Any]]:
    """The fields of :class:`EngineState` the JSON holds (all but the ``APART`` ones)."""
    return [item for item in fields(EngineState) if item.metadata["kept"] != "apart"]


def encode_state(state: EngineState) -> EngineSnapshot:
    """The JSON form of ``state`` (the format every stored snapshot has): one key per
    field of :class:`EngineState` but the hypothesis, which travels apart."""
    encoded: dict[str, Any] = {"version": STATE_VERSION}
    for item in _saved_fields():
        encoded[item.name] = FIELD_CODECS[item.name].encode(getattr(state, item.name))
    return EngineSnapshot(state=encoded, hypothesis=state.hypothesis)


def decode_state(snap: EngineSnapshot, domain: Domain) -> EngineState:
    """The inverse of :func:`encode_state`, for an engine over ``domain``.

    ``domain`` re-keys released CM queries canonically (snapshots from before
    canonical keys; see :func:`_canonical_key`). A field the JSON lacks (a
    snapshot saved before the field existed, e.g. ``prior_measurements`` before
    the refit) takes its default: an engine without it.

    Raises:
        ValueError: the snapshot's version is unsupported, or it is malformed.
    """
    state = snap.state
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"Unsupported engine state version {state.get('version')!r}.")
    decoded = {
        item.name: FIELD_CODECS[item.name].decode(state[item.name], domain)
        for item in _saved_fields()
        if item.name in state
    }
    return EngineState(hypothesis=_histogram(snap.hypothesis, domain), **decoded)


def _histogram(hypothesis: Histogram | FloatArray, domain: Domain) -> Histogram:
    """The snapshot's hypothesis over ``domain`` (a dense array is read as before)."""
    if isinstance(hypothesis, Histogram):
        if hypothesis.domain != domain:
            raise ValueError("The snapshot's hypothesis is over a different domain.")
        if isinstance(hypothesis, DenseHistogram):
            # DenseHistogram.copy divides by the total again, which can move the last bit
            # of a fitted histogram whose sum is 1 +- 2e-16, and with it every later
            # answer and refit of the restored engine: a restore copies it exactly.
            return DenseHistogram.from_normalized(domain, hypothesis.to_array(), copy=False)
        return hypothesis.copy()
    return DenseHistogram.from_normalized(domain, np.array(hypothesis, dtype=np.float64))


def snapshot(engine: OnlinePMW) -> EngineSnapshot:
    """Everything needed to continue ``engine`` later (secret; see the module docstring)."""
    return encode_state(engine.state())


def restore(engine: OnlinePMW, snap: EngineSnapshot) -> OnlinePMW:
    """An engine continuing ``snap``, built from a fresh ``engine``'s ingredients.

    ``engine`` (same data and configuration, never used) supplies the public
    ingredients, its sparse vector included (whose state the snapshot's
    replaces), so drop it and use the engine returned. Build it with
    ``prior=snap.hypothesis`` or any public prior, so
    construction measures nothing from the data again (a prior measured while
    rebuilding would be discarded unreleased, which is safe but wasteful). The
    snapshot's ledger replaces the fresh engine's: a new ledger with the same
    budget and accountant holds exactly its entries.

    Raises:
        ValueError: if the engine has already been used, or the snapshot does not fit it.
    """
    if engine.answers or engine.updates or engine.sv_paid:
        raise ValueError("restore() needs a freshly built engine.")
    old = engine.ledger
    return engine.resumed(
        decode_state(snap, engine.domain),
        ledger=PrivacyLedger(epsilon=old.epsilon, delta=old.delta, accountant=old.accountant),
    )


def _canonical_key(key: str, domain: Domain) -> str:
    """Re-keys a stored CM key canonically (snapshots from before canonical keys).

    A snapshot written when keys were the spec as typed may hold two spellings
    of one problem; both now map to one key and the later answer (the same
    problem, released twice) is kept, so no third draw can be made.
    """
    if not key.startswith("cm:"):
        return key
    return query_key(CMQuery.from_dict(json.loads(key.removeprefix("cm:"))), domain)


__all__ = [
    "FIELD_CODECS",
    "EngineSnapshot",
    "answer_from_dict",
    "answer_to_dict",
    "decode_state",
    "encode_state",
    "query_from_dict",
    "query_key",
    "query_to_dict",
    "restore",
    "snapshot",
]
