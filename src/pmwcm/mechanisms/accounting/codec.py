"""JSON round-trip of the privacy events the ledger records.

A durable ledger (the HTTP service's, a saved engine) stores each spend as a
plain JSON object and rebuilds the ``dp_accounting`` event from it, so that a
restart recomputes exactly the same composition.

>>> import dp_accounting
>>> e = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 5)
>>> event_from_dict(event_to_dict(e)) == e
True
"""

from __future__ import annotations

from typing import Any

import dp_accounting

from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent


def event_to_dict(event: dp_accounting.DpEvent) -> dict[str, Any]:
    """A JSON-ready description of ``event``.

    Raises:
        ValueError: for an event kind the ledger never records.
    """
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return {"kind": "gaussian", "noise_multiplier": float(event.noise_multiplier)}
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return {"kind": "laplace", "noise_multiplier": float(event.noise_multiplier)}
    if isinstance(event, EpsilonDeltaDpEvent):
        return {"kind": "epsilon_delta", "epsilon": event.epsilon, "delta": event.delta}
    if isinstance(event, dp_accounting.ZCDpEvent):
        return {"kind": "zcdp", "rho": float(event.rho), "xi": float(event.xi)}
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return {"kind": "self_composed", "event": event_to_dict(event.event), "count": event.count}
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return {"kind": "composed", "events": [event_to_dict(e) for e in event.events]}
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return {"kind": "noop"}
    raise ValueError(f"Cannot serialise privacy event {event!r}.")


def event_from_dict(data: dict[str, Any]) -> dp_accounting.DpEvent:
    """The inverse of :func:`event_to_dict`.

    Raises:
        ValueError: for an unknown ``kind`` or missing fields.
    """
    kind = data.get("kind")
    try:
        if kind == "gaussian":
            return dp_accounting.GaussianDpEvent(float(data["noise_multiplier"]))
        if kind == "laplace":
            return dp_accounting.LaplaceDpEvent(float(data["noise_multiplier"]))
        if kind == "epsilon_delta":
            return EpsilonDeltaDpEvent(epsilon=float(data["epsilon"]), delta=float(data["delta"]))
        if kind == "zcdp":
            return dp_accounting.ZCDpEvent(float(data["rho"]), float(data.get("xi", 0.0)))
        if kind == "self_composed":
            return dp_accounting.SelfComposedDpEvent(
                event_from_dict(data["event"]), int(data["count"])
            )
        if kind == "composed":
            return dp_accounting.ComposedDpEvent([event_from_dict(e) for e in data["events"]])
        if kind == "noop":
            return dp_accounting.NoOpDpEvent()
    except KeyError as err:
        raise ValueError(f"Privacy event {data!r} is missing field {err}.") from None
    raise ValueError(f"Unknown privacy event kind {kind!r}.")
