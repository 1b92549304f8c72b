"""What a CM query spec may say: the range of each field, checked before anything runs.

A query is refused from its spec alone, with a one-line message that names the
field (:class:`QueryError`): :func:`check_fields` for a built
:class:`~pmwcm.kernels.queries.CMQuery`, :func:`check_spec` for the JSON types
of a mapping (a query file's line, a service request) before one is built.
Nothing here reads data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any

from pmwcm.errors import InvalidQuery
from pmwcm.kernels.losses import LOSSES, make_loss

if TYPE_CHECKING:
    from pmwcm.kernels.queries import CMQuery

__all__ = [
    "ENCODINGS",
    "MAX_RADIUS",
    "MIN_RADIUS",
    "QueryError",
    "check_encoding",
    "check_fields",
    "check_spec",
]

ENCODINGS = ("auto", "onehot", "ordinal")
#: The smallest radius a query may ask for. The fixed-budget solve's gap is a
#: fraction of ``S / n`` with ``S = 2 R G B``, so a radius near float64's
#: smallest numbers makes it underflow to zero (a radius of 5e-324 once reached
#: the engine and failed there instead of being refused from the spec).
MIN_RADIUS = 1e-6
#: The largest radius served, by the command line, the library's engine and the
#: service alike (``OnlinePMW.ask`` refuses more, before anything is spent): every
#: noise scale grows in proportion to ``R``, and past it the real-data solve's
#: objective range leaves float64's resolution for common losses.
MAX_RADIUS = 100.0


class QueryError(InvalidQuery, ValueError):
    """A query spec that cannot be served; the message names the field and value."""


def check_fields(query: CMQuery) -> None:
    """Refuses a query whose fields are out of range or inconsistent.

    Raises:
        QueryError: naming the first offending field.
    """
    if query.loss not in LOSSES:
        raise QueryError(f"Unknown loss {query.loss!r}; the catalogue has {sorted(LOSSES)}.")
    if not (isinstance(query.radius, int | float) and math.isfinite(query.radius)):
        raise QueryError(f"radius must be a positive finite number, got radius={query.radius!r}.")
    if query.radius < MIN_RADIUS:
        raise QueryError(
            f"radius must be at least {MIN_RADIUS:g}, got radius={query.radius}: the "
            "real-data solve's accuracy is a fraction of S / n with S proportional to "
            "the radius, and below this it leaves float64's range."
        )
    if not (isinstance(query.l2, int | float) and math.isfinite(query.l2) and query.l2 >= 0):
        raise QueryError(f"l2 must be a non-negative finite number, got l2={query.l2!r}.")
    if len(set(query.features)) != len(query.features):
        raise QueryError(f"features must be distinct, got features={list(query.features)}.")
    if query.target in query.features:
        raise QueryError(f"target {query.target!r} must not also be a feature.")
    if not query.features and not query.intercept:
        raise QueryError("A query needs at least one feature or an intercept.")
    _check_interactions(query.interactions, query.features)
    for name, enc in query.encodings.items():
        if name not in query.features:
            raise QueryError(f"encodings names {name!r}, which is not a feature.")
        check_encoding(name, enc)
    try:
        make_loss(query.loss, query.loss_param)
    except ValueError as err:
        raise QueryError(str(err)) from None


def _check_interactions(
    interactions: tuple[tuple[str, ...], ...], features: tuple[str, ...]
) -> None:
    seen: set[frozenset[str]] = set()
    for group in interactions:
        if len(group) < 2 or len(set(group)) != len(group):
            raise QueryError(
                f"An interaction needs two or more distinct features, got {list(group)}."
            )
        outside = [a for a in group if a not in features]
        if outside:
            raise QueryError(
                f"interaction {list(group)} names {outside}, which are not features; "
                "list them in features too."
            )
        if frozenset(group) in seen:
            raise QueryError(f"interaction {list(group)} is listed twice.")
        seen.add(frozenset(group))


def check_encoding(name: str, encoding: str) -> None:
    """Refuses an encoding outside :data:`ENCODINGS`, naming it and its feature."""
    if encoding not in ENCODINGS:
        raise QueryError(f"Unknown encoding {encoding!r} for {name!r}; use one of {ENCODINGS}.")


def check_spec(spec: Mapping[str, Any], allowed: Set[str]) -> None:
    """Refuses a JSON-like spec with unknown or missing keys (``id`` is allowed
    besides ``allowed``) or a value of the wrong JSON type."""
    unknown = sorted(set(spec) - allowed - {"id"})
    if unknown:
        raise QueryError(f"Unknown query field(s) {unknown}; allowed: {sorted(allowed)}.")
    missing = [k for k in ("loss", "target", "features") if k not in spec]
    if missing:
        raise QueryError(f"Query is missing required field(s) {missing}.")
    _check_json_types(spec)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_json_types(spec: Mapping[str, Any]) -> None:
    """JSON types of a query spec: strings, a list of strings, numbers, a boolean."""
    for key in ("loss", "target"):
        if not isinstance(spec[key], str):
            raise QueryError(f"{key} must be a string, got {key}={spec[key]!r}.")
    features = spec["features"]
    if not isinstance(features, list | tuple) or not all(isinstance(f, str) for f in features):
        raise QueryError(f"features must be a list of attribute names, got features={features!r}.")
    for key in ("radius", "l2"):
        if key in spec and not _is_number(spec[key]):
            raise QueryError(f"{key} must be a number, got {key}={spec[key]!r}.")
    if spec.get("loss_param") is not None and not _is_number(spec["loss_param"]):
        raise QueryError(f"loss_param must be a number, got loss_param={spec['loss_param']!r}.")
    interactions = spec.get("interactions", [])
    if not isinstance(interactions, list | tuple) or not all(
        isinstance(g, list | tuple) and all(isinstance(a, str) for a in g) for g in interactions
    ):
        raise QueryError(
            f"interactions must be a list of lists of feature names, got {interactions!r}."
        )
    if "intercept" in spec and not isinstance(spec["intercept"], bool):
        raise QueryError(f"intercept must be true or false, got intercept={spec['intercept']!r}.")
    encodings = spec.get("encodings", {})
    if not isinstance(encodings, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in encodings.items()
    ):
        raise QueryError(f"encodings must map feature names to strings, got {encodings!r}.")
