"""CM query specs and their compiled form on a clique's marginal table.

A :class:`CMQuery` is the declarative spec an analyst sends: a catalogue loss,
a target attribute, feature attributes, encodings, intercept, radius ``R`` and
L2 strength ``lambda``. Compiling it against a :class:`~pmwcm.kernels.domain.Domain`
gives a :class:`GLMProblem`: the loss restricted to its clique
``C = features + {target}`` (docs/design.md section 2, "key observation"), with one
row per cell ``x_C`` of the marginal table:

* ``features``: ``phi(x_C)``, shape ``(cells, d)``, ``||phi||_2 <= 1``;
* ``labels``: ``y(x_C)``, shape ``(cells,)``.

Encoding (fixed by the ``pmwcm run`` contract): a binary attribute is ``-1``
for its first value and ``+1`` for its second; a non-binary feature is one-hot
(default) or ordinal (code scaled to ``[-1, 1]``); each interaction (a group
of two or more features) adds one block after the features: the Kronecker
product of its members' blocks, so a product of ``+/-1`` binaries is their
parity and a product of one-hots is the one-hot of the joint value, and its
norm is the product of norms, at most 1; an intercept ``1`` comes last; the
vector is divided by ``sqrt(number of blocks)`` (features, interactions,
intercept), so ``||phi||_2 <= B = 1``. Interactions only involve features, so
the clique (and the marginal the loss reads) is unchanged. A classification
loss needs a binary target (second value ``+1``); a regression target is its
code scaled to ``[-1, 1]``.

The constants the privacy proofs use are derived from the spec, never typed
in: ``G = f.derivative_bound(R B)``, gradient bound ``G B`` of the data term,
scale ``S = 2 R G B``, strong convexity ``lambda``.

>>> from pmwcm.kernels.domain import Domain
>>> d = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
>>> p = CMQuery(loss="logistic", target="y", features=("a", "b")).compile(d)
>>> p.clique, p.features.shape, p.scale
(('a', 'b', 'y'), (8, 3), 2.0)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from pmwcm.errors import InvalidQuery
from pmwcm.kernels.design import DenseDesign, Design, design_for
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.losses import LOSSES, GLMLoss, make_loss, resolved_loss_param
from pmwcm.kernels.problem import ConvexProblem, FloatArray

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


_T = TypeVar("_T")

#: ``json.dumps(spec, sort_keys=True)``'s encoder, made once (``dumps`` builds one per
#: call when given options); the engine keys every query with it.
_KEY_ENCODER = json.JSONEncoder(sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class CMQuery:
    """A declarative convex-minimisation query from the GLM catalogue.

    Attributes:
        loss: catalogue name (``logistic``, ``squared``, ``huber``,
            ``smoothed_hinge``, ``hinge``, ``quantile``, ``absolute``).
        target: the label attribute.
        features: feature attributes, in the order of ``theta``.
        radius: ``R``, the radius of the L2 ball ``Theta``.
        l2: ``lambda >= 0``, the L2 regularisation strength.
        intercept: append a constant feature (last coordinate of ``theta``).
        loss_param: Huber ``delta``, smoothed-hinge ``gamma``, quantile ``tau``.
        encodings: per-feature ``"onehot"`` or ``"ordinal"`` for non-binary
            attributes (binary attributes are always ``+/-1``).
        interactions: groups of two or more distinct features whose product is
            an extra feature block (after the features, before the intercept).
    """

    loss: str
    target: str
    features: tuple[str, ...]
    radius: float = 1.0
    l2: float = 0.0
    intercept: bool = True
    loss_param: float | None = None
    encodings: Mapping[str, str] = field(default_factory=dict)
    interactions: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "encodings", dict(self.encodings))
        object.__setattr__(self, "interactions", tuple(tuple(g) for g in self.interactions))
        if self.loss not in LOSSES:
            raise QueryError(f"Unknown loss {self.loss!r}; the catalogue has {sorted(LOSSES)}.")
        if not (isinstance(self.radius, int | float) and math.isfinite(self.radius)):
            raise QueryError(
                f"radius must be a positive finite number, got radius={self.radius!r}."
            )
        if self.radius < MIN_RADIUS:
            raise QueryError(
                f"radius must be at least {MIN_RADIUS:g}, got radius={self.radius}: the "
                "real-data solve's accuracy is a fraction of S / n with S proportional to "
                "the radius, and below this it leaves float64's range."
            )
        if not (isinstance(self.l2, int | float) and math.isfinite(self.l2) and self.l2 >= 0):
            raise QueryError(f"l2 must be a non-negative finite number, got l2={self.l2!r}.")
        if len(set(self.features)) != len(self.features):
            raise QueryError(f"features must be distinct, got features={list(self.features)}.")
        if self.target in self.features:
            raise QueryError(f"target {self.target!r} must not also be a feature.")
        if not self.features and not self.intercept:
            raise QueryError("A query needs at least one feature or an intercept.")
        self._check_interactions()
        for name, enc in self.encodings.items():
            if name not in self.features:
                raise QueryError(f"encodings names {name!r}, which is not a feature.")
            _check_encoding(name, enc)
        try:
            make_loss(self.loss, self.loss_param)
        except ValueError as err:
            raise QueryError(str(err)) from None

    def _check_interactions(self) -> None:
        seen: set[frozenset[str]] = set()
        for group in self.interactions:
            if len(group) < 2 or len(set(group)) != len(group):
                raise QueryError(
                    f"An interaction needs two or more distinct features, got {list(group)}."
                )
            outside = [a for a in group if a not in self.features]
            if outside:
                raise QueryError(
                    f"interaction {list(group)} names {outside}, which are not features; "
                    "list them in features too."
                )
            if frozenset(group) in seen:
                raise QueryError(f"interaction {list(group)} is listed twice.")
            seen.add(frozenset(group))

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> CMQuery:
        """Builds a query from a JSON-like mapping; unknown keys are an error."""
        allowed = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(spec) - allowed - {"id"})
        if unknown:
            raise QueryError(f"Unknown query field(s) {unknown}; allowed: {sorted(allowed)}.")
        missing = [k for k in ("loss", "target", "features") if k not in spec]
        if missing:
            raise QueryError(f"Query is missing required field(s) {missing}.")
        _check_json_types(spec)
        kwargs = {k: v for k, v in spec.items() if k != "id"}
        kwargs["features"] = tuple(spec["features"])
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready spec (inverse of :meth:`from_dict`)."""
        return self._spec(self.radius, self.l2, self.loss_param, self.encodings)

    def _spec(
        self, radius: float, l2: float, loss_param: float | None, encodings: Mapping[str, str]
    ) -> dict[str, Any]:
        """:meth:`to_dict` with these four fields (:meth:`canonical_json` gives them resolved)."""
        out: dict[str, Any] = {
            "loss": self.loss,
            "target": self.target,
            "features": list(self.features),
            "radius": radius,
            "l2": l2,
            "intercept": self.intercept,
        }
        if loss_param is not None:
            out["loss_param"] = loss_param
        if encodings:
            out["encodings"] = dict(encodings)
        if self.interactions:
            # Omitted when empty, so specs (and query keys) without interactions
            # are the same as before interactions existed.
            out["interactions"] = [list(g) for g in self.interactions]
        return out

    @property
    def clique(self) -> tuple[str, ...]:
        """The attributes the loss depends on: features then target."""
        return (*self.features, self.target)

    def _check_attributes(self, domain: Domain) -> None:
        for name in self.clique:
            if name not in domain:
                raise QueryError(
                    f"Unknown attribute {name!r} in query; the domain has {list(domain.names)}."
                )

    def canonical(self, domain: Domain) -> CMQuery:
        """The one spelling of the problem this query compiles to on ``domain``.

        Resolves everything the compiled problem does not distinguish: the loss
        parameter's default (``huber`` is ``huber`` with ``loss_param=1.0``),
        ``"auto"`` encodings (one-hot for a non-binary feature; a binary feature
        is always ``+/-1``, so its encoding entry is dropped), numbers to floats
        (``radius=1`` is ``radius=1.0``), and the order of the coordinates: the
        features in the domain's attribute order, each interaction's members
        likewise, and the interactions by their members' positions. Two queries
        with the same canonical form pose the same problem up to a permutation of
        ``theta``'s coordinates (:meth:`coordinate_order`), so they are the same
        query for the engine: one key, one oracle draw, answered in the canonical
        order and returned in each query's own.

        Raises:
            QueryError: an attribute the domain does not have.

        >>> from pmwcm.kernels.domain import Domain
        >>> d = Domain.from_sizes({"a": 2, "c": 3, "y": 2})
        >>> a = CMQuery(loss="huber", target="y", features=("a", "c"), radius=1)
        >>> b = CMQuery(loss="huber", target="y", features=("c", "a"), loss_param=1.0,
        ...             encodings={"a": "ordinal", "c": "onehot"})
        >>> a.canonical(d) == b.canonical(d)
        True
        >>> b.coordinate_order(d)  # b's theta: c's three one-hot coordinates, a, intercept
        (1, 2, 3, 0, 4)
        """
        return self._memoised("_canonical", domain, lambda: self._build_canonical(domain))

    def _build_canonical(self, domain: Domain) -> CMQuery:
        """The canonical query, whose own canonical form and key are itself (memo seeded)."""
        fields = self._fields(domain)
        variant = self._checked_variant(**fields)
        key = _KEY_ENCODER.encode(variant._spec(**_key_fields(fields)))
        mutable = variant._mutable_part()
        object.__setattr__(variant, "_canonical", (domain, mutable, variant))
        object.__setattr__(variant, "_canonical_json", (domain, mutable, key))
        object.__setattr__(variant, "_fields_memo", (domain, mutable, fields))
        return variant

    def _fields(self, domain: Domain) -> dict[str, Any]:
        """:meth:`_canonical_fields`, memoised: a query is canonicalised once per domain."""
        return self._memoised("_fields_memo", domain, lambda: self._canonical_fields(domain))

    def coordinate_order(self, domain: Domain) -> tuple[int, ...] | None:
        """Where each coordinate of this query's ``theta`` sits in the canonical form's
        (:meth:`canonical`), or ``None`` when the orders agree.

        A coordinate is named by what it multiplies: a feature's code (one column of
        its block), a product of its members' codes (an interaction), the intercept;
        the canonical order lists the same names in another order.

        Raises:
            QueryError: an attribute the domain does not have.
        """
        return self._memoised("_order", domain, lambda: self._coordinate_order(domain))

    def _coordinate_order(self, domain: Domain) -> tuple[int, ...] | None:
        canonical = self.canonical(domain)
        if (canonical.features, canonical.interactions) == (self.features, self.interactions):
            return None
        position = {name: i for i, name in enumerate(_coordinate_names(canonical, domain))}
        return tuple(position[name] for name in _coordinate_names(self, domain))

    def _memoised(self, name: str, domain: Domain, build: Callable[[], _T]) -> _T:
        """``build()``, memoised on the instance under ``name`` for this ``domain`` and
        the current encodings (the one field a frozen query can still change).

        Outside the dataclass fields, so equality, repr and the spec are untouched:
        the engine, the command line and the coefficient names each ask for the
        canonical form and key, several times per query.
        """
        memo = self.__dict__.get(name)
        mutable = self._mutable_part()
        if memo is not None and (memo[0] is domain or memo[0] == domain) and memo[1] == mutable:
            return cast(_T, memo[2])  # this query's, on this very domain
        value = build()
        object.__setattr__(self, name, (domain, mutable, value))
        return value

    def _canonical_fields(self, domain: Domain) -> dict[str, Any]:
        """The fields :meth:`canonical` resolves, resolved on ``domain``.

        Raises:
            QueryError: an attribute the domain does not have, or an unknown encoding.
        """
        self._check_attributes(domain)
        encodings = {}
        for name in self.features:
            if domain.size_of(name) > 2:
                chosen = self.encodings.get(name, "auto")
                _check_encoding(name, chosen)  # the dict is the one field that can change
                encodings[name] = "onehot" if chosen == "auto" else chosen
        index = {name: i for i, name in enumerate(domain.names)}
        groups = [tuple(sorted(group, key=index.__getitem__)) for group in self.interactions]
        return {
            "features": tuple(sorted(self.features, key=index.__getitem__)),
            "interactions": tuple(sorted(groups, key=lambda g: [index[a] for a in g])),
            "radius": float(self.radius),
            "l2": float(self.l2),
            "loss_param": resolved_loss_param(self.loss, self.loss_param),
            "encodings": encodings,
        }

    def _checked_variant(self, **changes: Any) -> CMQuery:
        """This query with ``changes`` to fields, without running the checks again.

        For :meth:`canonical` only, whose changes keep a valid query valid (a number
        as a float, the loss's default parameter, encodings resolved from valid ones):
        constructing anew would repeat every check of ``__post_init__``, a few
        microseconds on each of the engine's queries.
        """
        variant = object.__new__(CMQuery)
        for name in self.__dataclass_fields__:
            object.__setattr__(variant, name, changes.get(name, getattr(self, name)))
        return variant

    def _mutable_part(self) -> tuple[tuple[str, str], ...]:
        """The one field a frozen query can still change (its ``encodings`` dict)."""
        return tuple(self.encodings.items())

    def canonical_json(self, domain: Domain) -> str:
        """:meth:`canonical`'s spec as sorted-key JSON (the engine's query key),
        memoised likewise. Built from the resolved fields without building the
        canonical query (the engine keys every query, and compiles the query itself)."""
        return self._memoised(
            "_canonical_json",
            domain,
            lambda: self.canonical(domain).canonical_json(domain),
        )

    def check(self, domain: Domain) -> GLMLoss:
        """That the query compiles on ``domain`` (what :meth:`compile` checks, without
        building the problem); its loss.

        Raises:
            QueryError: unknown attribute, or a classification loss on a non-binary target.
        """
        self._check_attributes(domain)
        loss = make_loss(self.loss, self.loss_param)
        t_size = domain.size_of(self.target)
        if loss.label_kind == "binary" and t_size != 2:
            raise QueryError(
                f"The {self.loss} loss needs a binary target, but {self.target!r} has "
                f"{t_size} values."
            )
        return loss

    def compile(self, domain: Domain, *, cells: NDArray[np.int64] | None = None) -> GLMProblem:
        """The query as a :class:`GLMProblem` on its clique's marginal table.

        Args:
            domain: the universe.
            cells: the clique cells the problem is evaluated on, as per-attribute
                codes ``(cells, |C|)``; ``None`` for every cell in C-order (a dense
                table). The constants (``B``, hence ``G``, ``S``, the smoothness)
                are the same either way: they bound every cell of the clique.

        Raises:
            QueryError: unknown attribute, or a classification loss on a non-binary target.
        """
        loss = self.check(domain)
        sizes = domain.sizes_of(self.clique)
        if cells is None:  # every cell: the layout's problem, this query's copy
            layout = self._layout(sizes)
            radius, l2 = float(self.radius), float(self.l2)
            return _dense_problem(layout, loss, radius, l2).for_query(self)
        # ``B`` over the whole clique: every block's norm is largest at the all-zero
        # cell (one-hot: 1 everywhere; ordinal/binary: |-1| at code 0; products multiply).
        sub = domain.project(self.clique)
        design, labels = self._features(sub, cells)
        corner, _ = self._features(sub, np.zeros((1, len(sub)), dtype=np.int64))
        bound = float(corner.row_norms()[0])
        return GLMProblem(
            query=self,
            clique=self.clique,
            sizes=sizes,
            loss=loss,
            design=design,
            labels=labels,
            radius=float(self.radius),
            l2=float(self.l2),
            feature_norm_bound=bound,
        )

    def _features(
        self, sub: Domain, cells: NDArray[np.int64], *, block_form: bool = False
    ) -> tuple[Design, FloatArray]:
        """The design ``phi(x_C)`` (:mod:`pmwcm.kernels.design`) and labels ``y(x_C)`` of ``cells``.

        Each block is one entry per row (a column within the block and a value),
        blocks in order: the features, the interactions, the intercept; all
        divided by ``sqrt(blocks)`` so that ``||phi|| <= 1``.
        """
        columns, values, width, widths = self._entries(sub, cells)
        design = design_for(columns, values, width, blocks=block_form, block_widths=widths)
        return design, _scaled(cells[:, -1], sub.sizes[-1])

    def _entries(
        self, sub: Domain, cells: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], FloatArray, int, tuple[int, ...]]:
        """:meth:`_features`' block-major ``(columns, values)``, shape ``(B, cells)``, the
        width, and each block's width."""
        return _layout_entries(self._layout(sub.sizes), cells)

    def _layout(self, sizes: tuple[int, ...]) -> _Layout:
        """What the design reads of this query on a clique of ``sizes`` (features, target)."""
        features, encodings = self.features, self.encodings
        groups: tuple[tuple[int, ...], ...] = ()
        if self.interactions:  # most queries have none (and no encodings): skip the loops
            position = {a: i for i, a in enumerate(features)}
            groups = tuple(tuple(position[a] for a in group) for group in self.interactions)
        return _Layout(
            sizes=sizes,
            encodings=(
                tuple([encodings.get(a, "auto") for a in features])
                if encodings
                else ("auto",) * len(features)
            ),
            interactions=groups,
            intercept=self.intercept,
        )


@dataclass(frozen=True)
class _Layout:
    """Everything a query's design depends on: the clique's sizes (features, then the
    target), each feature's encoding, the interactions as feature positions, and
    whether there is an intercept. Attribute names do not enter: on Adult's binary
    schema every query with ``k`` features and the same options has the same design."""

    sizes: tuple[int, ...]
    encodings: tuple[str, ...]
    interactions: tuple[tuple[int, ...], ...]
    intercept: bool


@functools.lru_cache(maxsize=256)
def _dense_layout(layout: _Layout) -> tuple[Design, FloatArray, float]:
    """The design and labels on every cell of the clique (C order), and ``B``.

    Cached by layout: compiling a query is then mostly a dictionary look-up. The
    arrays are shared by every problem of that layout, which only read them.
    ``B`` is the norm of the first cell's row: in C order it is the all-zero cell,
    where every block's norm is largest (:meth:`CMQuery.compile`), and its design
    is built from the same entries a one-cell compile of that cell computes.
    """
    sizes = layout.sizes
    cells = np.indices(sizes).reshape(len(sizes), -1).T  # (cells, |C|), C order
    columns, values, width, widths = _layout_entries(layout, cells)
    corner = design_for(columns[:, :1], values[:, :1], width)
    return (
        design_for(columns, values, width, block_widths=widths),
        _scaled(cells[:, -1], sizes[-1]),
        float(corner.row_norms()[0]),
    )


@functools.lru_cache(maxsize=256)
def _dense_problem(layout: _Layout, loss: GLMLoss, radius: float, l2: float) -> GLMProblem:
    """The problem on every cell of a clique of ``layout`` (C order), for no query.

    :meth:`CMQuery.compile` hands each query a copy with its own query and clique
    (:meth:`GLMProblem.for_query`). Everything else a problem holds, and every
    constant it computes (``B``, ``G``, ``S``, the smoothness, computed here once),
    is a function of these four arguments: on Adult's binary schema the queries of
    a stream share a few dozen of them.
    """
    design, labels, bound = _dense_layout(layout)
    problem = GLMProblem(
        query=None,
        clique=(),
        sizes=layout.sizes,
        loss=loss,
        design=design,
        labels=labels,
        radius=radius,
        l2=l2,
        feature_norm_bound=bound,
    )
    for constant in ("feature_bound", "derivative_bound", "lipschitz", "scale", "smoothness"):
        getattr(problem, constant)  # cached on the problem, so on every copy
    return problem


def _layout_entries(
    layout: _Layout, cells: NDArray[np.int64]
) -> tuple[NDArray[np.int64], FloatArray, int, tuple[int, ...]]:
    """Block-major ``(columns, values)``, shape ``(B, cells)``, the width, and each
    block's width (see :meth:`CMQuery._features`)."""
    blocks = [
        _encode(cells[:, i], layout.sizes[i], encoding)
        for i, encoding in enumerate(layout.encodings)
    ]
    for group in layout.interactions:
        column, value, width = blocks[group[0]]
        for index in group[1:]:
            other_column, other_value, other_width = blocks[index]
            # Row-wise Kronecker product: coordinate (i, j) at i * width_j + j.
            column = column * other_width + other_column
            value = value * other_value
            width = width * other_width
        blocks.append((column, value, width))
    if layout.intercept:
        blocks.append((np.zeros(len(cells), dtype=np.int64), np.ones(len(cells)), 1))
    offsets = np.cumsum([0] + [width for _, _, width in blocks])
    columns = np.stack([c + o for (c, _, _), o in zip(blocks, offsets, strict=False)])
    values = np.stack([v for _, v, _ in blocks]) / math.sqrt(len(blocks))
    widths = tuple(int(width) for _, _, width in blocks)
    return columns.astype(np.int64), values, int(offsets[-1]), widths


def _key_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved fields :meth:`CMQuery._spec` takes (the order is the query's own)."""
    return {k: fields[k] for k in ("radius", "l2", "loss_param", "encodings")}


def _coordinate_names(query: CMQuery, domain: Domain) -> list[object]:
    """A name for each coordinate of ``query``'s ``theta``, independent of the order the
    query lists its features in (see :meth:`CMQuery.coordinate_order`)."""
    canonical = query.canonical(domain)
    width = {
        name: domain.size_of(name) if canonical.encodings.get(name) == "onehot" else 1
        for name in query.features
    }
    names: list[object] = [
        ("feature", name, j) for name in query.features for j in range(width[name])
    ]
    for group in query.interactions:
        codes: list[tuple[tuple[str, int], ...]] = [()]
        for member in group:  # row-major, as the Kronecker product in compile
            codes = [(*c, (member, j)) for c in codes for j in range(width[member])]
        names.extend(("interaction", frozenset(c)) for c in codes)
    if query.intercept:
        names.append(("intercept",))
    return names


def _check_encoding(name: str, encoding: str) -> None:
    """Refuses an encoding outside :data:`ENCODINGS`, naming it and its feature."""
    if encoding not in ENCODINGS:
        raise QueryError(f"Unknown encoding {encoding!r} for {name!r}; use one of {ENCODINGS}.")


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


def _scaled(codes: np.ndarray, size: int) -> FloatArray:
    """Codes ``0..size-1`` mapped linearly onto ``[-1, 1]`` (binary: -1, +1)."""
    if size == 1:
        return np.zeros(codes.shape[0])
    return 2.0 * codes.astype(np.float64) / (size - 1) - 1.0


def _encode(
    codes: np.ndarray, size: int, encoding: str
) -> tuple[NDArray[np.int64], FloatArray, int]:
    """One feature block, one entry per row: (column in the block, value, block width).

    Ordinal and binary: the scaled code in one column; one-hot: a 1 at the code.
    Either way the block's Euclidean norm is at most 1.
    """
    if size <= 2 or encoding == "ordinal":
        return np.zeros(len(codes), dtype=np.int64), _scaled(codes, size), 1
    return np.asarray(codes, dtype=np.int64), np.ones(len(codes)), size


@dataclass(frozen=True, kw_only=True, eq=False)
class GLMProblem(ConvexProblem):
    """A catalogue query on its clique: ``l(theta; x_C) = f(<theta, phi(x_C)>, y(x_C))``.

    The data term only; the engine and solvers add ``(lambda/2)||theta||^2``.
    ``features`` and ``labels`` are given for some cells of the clique (all of
    them for a dense table, the occupied ones for a sparse
    :class:`~pmwcm.kernels.clique_table.CliqueTable`); ``feature_norm_bound``
    bounds ``||phi||`` on *every* cell, so the constants the privacy proofs use
    never depend on which cells a table happens to hold.
    """

    query: CMQuery | None
    clique: tuple[str, ...]
    loss: GLMLoss
    design: Design
    labels: FloatArray
    radius: float
    l2: float
    sizes: tuple[int, ...] = ()
    feature_norm_bound: float | None = None

    @property
    def features(self) -> FloatArray:
        """``Phi`` as a dense ``(cells, d)`` array (the solvers use :attr:`design`)."""
        return self.design.dense()

    @property
    def dim(self) -> int:
        return self.design.dim

    @functools.cached_property
    def feature_bound(self) -> float:
        """``B``: the largest ``||phi(x)||_2`` over the clique (at most 1 by construction).

        Cached: every constant (``G``, ``S``, the smoothness) reads it, and the
        design never changes (a problem on other cells is a new object).
        """
        if self.feature_norm_bound is not None:
            # It bounds every cell of the clique, these included (the encoding's
            # construction, checked by tests/test_queries.py), so no scan is needed.
            return self.feature_norm_bound
        return float(self.design.row_norms().max()) if self.design.rows else 0.0

    def for_query(self, query: CMQuery) -> GLMProblem:
        """This problem as ``query``'s: the same fields and cached constants, with
        ``query`` and its clique. For :func:`_dense_problem`'s shared problems, whose
        fields are the query's by construction; a copy of the instance's ``__dict__``,
        since the dataclass's constructor would compute the constants again."""
        copy = object.__new__(GLMProblem)
        copy.__dict__.update(self.__dict__)
        copy.__dict__["query"] = query
        copy.__dict__["clique"] = query.clique
        return copy

    def on_cells(self, cells: NDArray[np.int64]) -> GLMProblem:
        """The same problem (same constants) evaluated on other cells of the clique.

        Raises:
            ValueError: the problem was not compiled from a query.
        """
        if self.query is None or not self.sizes:
            raise ValueError("on_cells needs a problem compiled from a CMQuery.")
        sub = Domain.from_sizes(dict(zip(self.clique, self.sizes, strict=True)))
        design, labels = self.query._features(sub, cells, block_form=True)
        return dataclasses.replace(self, design=design, labels=labels)

    # The constants below are cached like feature_bound: a round reads them about
    # ten times (the plan, tau, the oracle's check, the sensitivity, the solver's
    # choice), and the loss, radius and design they come from never change.

    @functools.cached_property
    def derivative_bound(self) -> float:
        """``G``: bound on ``|df/dz|`` for ``|z| <= R B``."""
        return self.loss.derivative_bound(self.radius * self.feature_bound)

    @functools.cached_property
    def lipschitz(self) -> float:
        return self.derivative_bound * self.feature_bound

    @functools.cached_property
    def scale(self) -> float:
        return 2.0 * self.radius * self.lipschitz

    @functools.cached_property
    def smoothness(self) -> float | None:
        beta = self.loss.smoothness
        return None if beta is None else beta * self.feature_bound**2

    def cell_losses(self, theta: FloatArray) -> FloatArray:
        return self.loss.value(self.design.matvec(theta), self.labels)

    def cell_gradients(self, theta: FloatArray) -> FloatArray:
        slopes = self.loss.derivative(self.design.matvec(theta), self.labels)
        return slopes[:, None] * self.features

    def cell_directional(self, theta: FloatArray, direction: FloatArray) -> FloatArray:
        if isinstance(self.design, DenseDesign):  # the dense arithmetic, bit for bit as before
            return self.cell_gradients(theta) @ direction
        slopes = self.loss.derivative(self.design.matvec(theta), self.labels)
        return slopes * self.design.matvec(direction)

    def data_gradient(self, theta: FloatArray, weights: FloatArray) -> FloatArray:
        slopes = self.loss.derivative(self.design.matvec(theta), self.labels)
        return self.design.rmatvec(weights * slopes)

    def data_hessian(self, theta: FloatArray, weights: FloatArray) -> FloatArray | None:
        try:
            curv = self.loss.second_derivative(self.design.matvec(theta), self.labels)
        except NotImplementedError:
            return None
        return self.design.gram(weights * curv)

    def smoothed(self, mu: float) -> tuple[GLMProblem, float]:
        if self.loss.smoothness is not None:
            return self, 0.0
        g = self.derivative_bound
        surrogate = dataclasses.replace(self, loss=self.loss.moreau(mu))
        return surrogate, mu * g * g / 2.0
