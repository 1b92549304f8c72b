"""The service's public limits, in one place (stated in the OpenAPI descriptions).

Every limit is decided from the request alone, before any data is read or any
budget is touched, so a refusal says nothing about the data. The engine keeps
its own, data-independent refusals on top
(:class:`pmwcm.kernels.fixed_budget.SolveRefused`: a real-data solve over
:data:`pmwcm.engine.settings.DATA_SOLVE_MAX_ITERATIONS` iterations, or past
float64's resolution).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pmwcm.errors import InvalidQuery, Refused
from pmwcm.kernels.queries import MAX_RADIUS as LIBRARY_MAX_RADIUS

#: The default request body limit (bytes): a larger body is refused with 413 unread.
MAX_BODY_BYTES = 1_000_000
#: The largest ``radius`` a query may ask for: the library's cap (the command line and
#: the engine refuse the same radii).
MAX_RADIUS = LIBRARY_MAX_RADIUS
#: The most features a query may name.
MAX_FEATURES = 8
#: The most interactions a query may list.
MAX_INTERACTIONS = 8
#: The longest attribute name (target, feature, encoding key, interaction member).
MAX_NAME_CHARS = 200
#: The longest message in an error response.
MAX_MESSAGE_CHARS = 500
#: The longest field name quoted in an error's location.
MAX_LOC_CHARS = 64
#: The longest loss or encoding name (the catalogue's are far shorter).
MAX_KEYWORD_CHARS = 32

#: The default limit on a session build's declared memory (bytes above the build
#: process's own before it opens the data): 6 GiB, above the 4 GiB hypothesis cap plus
#: its released tables, so that by default only the time limit binds.
MAX_BUILD_MEMORY = 6 * 2**30
#: The default limit on a session build's declared time (seconds).
MAX_BUILD_SECONDS = 3600.0


@dataclass(frozen=True, kw_only=True)
class BuildLimits:
    """The operator's limits on one session build (``pmwcm serve``): a build whose
    declared cost (:func:`pmwcm.engine.build_cost.build_cost`) is over either is refused
    before it starts, and a running build is stopped when it passes them."""

    max_memory: int = MAX_BUILD_MEMORY
    max_seconds: float = MAX_BUILD_SECONDS

    def __post_init__(self) -> None:
        if not (isinstance(self.max_memory, int) and self.max_memory > 0):
            raise ValueError(f"max_memory must be a positive integer, got {self.max_memory!r}.")
        if not (isinstance(self.max_seconds, int | float) and self.max_seconds > 0):
            raise ValueError(f"max_seconds must be positive, got {self.max_seconds!r}.")


QUERY_LIMITS = (
    f"Limits on this service: radius at most {MAX_RADIUS:g}, at most {MAX_FEATURES} features "
    f"and {MAX_INTERACTIONS} interactions, attribute names (target, features, encoding keys, "
    f"interaction members) at most {MAX_NAME_CHARS} characters; a query over them is refused "
    "(422) before any data or budget is touched."
)
"""The limits as the OpenAPI description states them."""


class LimitRefused(Refused):
    """A query over one of the service's public limits."""


def _name_error(field: str, value: Any) -> InvalidQuery | None:
    if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
        return InvalidQuery(f"{field}: an attribute name is at most {MAX_NAME_CHARS} characters.")
    return None


_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "loss": ("a string", lambda v: isinstance(v, str)),
    "target": ("a string", lambda v: isinstance(v, str)),
    "features": (
        "a list of attribute names",
        lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v),
    ),
    "radius": ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "l2": ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "loss_param": (
        "a number or null",
        lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool)),
    ),
    "intercept": ("a boolean", lambda v: isinstance(v, bool)),
    "encodings": ("an object", lambda v: isinstance(v, dict)),
    "interactions": (
        "a list of lists of feature names",
        lambda v: (
            isinstance(v, list)
            and all(isinstance(g, list) and all(isinstance(a, str) for a in g) for g in v)
        ),
    ),
}


def _unquotable(spec: dict[str, Any]) -> InvalidQuery | None:
    """A field of the wrong type whose value is too long to quote (the library's message
    would quote it; a short one is left to that message)."""
    for field, (kind, ok) in _KINDS.items():
        if field in spec and not ok(spec[field]) and len(repr(spec[field])) > MAX_LOC_CHARS:
            return InvalidQuery(f"{field} must be {kind}.")
    return None


def check_query(spec: Any) -> None:
    """Refuses a query spec over the public limits, from the spec alone.

    Types are left to :meth:`pmwcm.kernels.queries.CMQuery.from_dict`; this only
    bounds what it would otherwise quote (names, keys, lists) and the work the
    query may ask for (radius, features, interactions).

    Raises:
        InvalidQuery: a name or key too long, too many encodings, or an unknown field.
        LimitRefused: radius, features or interactions over the limits.
    """
    if not isinstance(spec, dict):
        raise InvalidQuery("A query is a JSON object.")
    unknown = [k for k in spec if k not in _QUERY_FIELDS]
    if len(unknown) > 8 or any(len(k) > MAX_LOC_CHARS for k in unknown):
        raise InvalidQuery(
            f"Unknown query field(s): {len(unknown)}, some of them long; allowed: "
            f"{sorted(_QUERY_FIELDS - {'id'})}."
        )
    wrong = _unquotable(spec)
    if wrong is not None:
        raise wrong
    loss = spec.get("loss")
    if isinstance(loss, str) and len(loss) > MAX_KEYWORD_CHARS:
        raise InvalidQuery("loss: not a loss of the catalogue.")
    problem = _name_error("target", spec.get("target"))
    features = spec.get("features")
    if isinstance(features, list):
        if len(features) > MAX_FEATURES:
            raise LimitRefused(
                f"a query may have at most {MAX_FEATURES} features on this service, "
                f"got {len(features)}."
            )
        problem = problem or next(
            (e for f in features if (e := _name_error("features", f)) is not None), None
        )
    encodings = spec.get("encodings")
    if isinstance(encodings, dict):
        if len(encodings) > MAX_FEATURES:
            raise InvalidQuery(f"encodings: at most {MAX_FEATURES} entries, one per feature.")
        for key, value in encodings.items():
            problem = problem or _name_error("encodings", key)
            if isinstance(value, str) and len(value) > MAX_KEYWORD_CHARS:
                problem = problem or InvalidQuery("encodings: use 'auto', 'onehot' or 'ordinal'.")
    interactions = spec.get("interactions")
    if isinstance(interactions, list):
        if len(interactions) > MAX_INTERACTIONS:
            raise LimitRefused(
                f"a query may have at most {MAX_INTERACTIONS} interactions on this service, "
                f"got {len(interactions)}."
            )
        for group in interactions:
            if isinstance(group, list):
                if len(group) > MAX_FEATURES:
                    raise InvalidQuery(f"interactions: at most {MAX_FEATURES} features each.")
                for member in group:
                    problem = problem or _name_error("interactions", member)
    if problem is not None:
        raise problem
    radius = spec.get("radius")
    if isinstance(radius, int | float) and not isinstance(radius, bool) and radius > MAX_RADIUS:
        raise LimitRefused(f"radius is over this service's limit of {MAX_RADIUS:g}.")


_QUERY_FIELDS = frozenset(
    {
        "loss",
        "target",
        "features",
        "radius",
        "l2",
        "intercept",
        "loss_param",
        "encodings",
        "interactions",
        "id",
    }
)
