"""CM query specs and their compiled form on a clique's marginal table.

A :class:`CMQuery` is the declarative spec an analyst sends: a catalogue loss,
a target attribute, feature attributes, encodings, intercept, radius ``R`` and
L2 strength ``lambda``. Compiling it against a :class:`~pmwcm.kernels.domain.Domain`
gives a :class:`GLMProblem`: the loss restricted to its clique
``C = features + {target}`` (docs/design.md section 2, "key observation"), with one
row per cell ``x_C`` of the marginal table:

* ``features``: ``phi(x_C)``, shape ``(cells, d)``, ``||phi||_2 <= 1``;
* ``labels``: ``y(x_C)``, shape ``(cells,)``.

The encoding ``phi`` is :mod:`pmwcm.kernels.encoding`'s, the compiled problem
:mod:`pmwcm.kernels.glm_problem`'s, the checks on a spec
:mod:`pmwcm.kernels.query_checks`' (whose names are re-exported here).

>>> from pmwcm.kernels.domain import Domain
>>> d = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
>>> p = CMQuery(loss="logistic", target="y", features=("a", "b")).compile(d)
>>> p.clique, p.features.shape, p.scale
(('a', 'b', 'y'), (8, 3), 2.0)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.design import Design
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.encoding import Layout, encode_cells
from pmwcm.kernels.glm_problem import GLMProblem, dense_problem
from pmwcm.kernels.losses import GLMLoss, make_loss, resolved_loss_param
from pmwcm.kernels.problem import FloatArray
from pmwcm.kernels.query_checks import (
    ENCODINGS,
    MAX_RADIUS,
    MIN_RADIUS,
    QueryError,
    check_encoding,
    check_fields,
    check_spec,
)

__all__ = ["ENCODINGS", "MAX_RADIUS", "MIN_RADIUS", "CMQuery", "GLMProblem", "QueryError"]

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
        check_fields(self)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> CMQuery:
        """Builds a query from a JSON-like mapping; unknown keys are an error."""
        check_spec(spec, set(cls.__dataclass_fields__))
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
                check_encoding(name, chosen)  # the dict is the one field that can change
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
            return dense_problem(layout, loss, radius, l2).for_query(self)
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
        self, sub: Domain, cells: NDArray[np.integer], *, block_form: bool = False
    ) -> tuple[Design, FloatArray]:
        """The design ``phi(x_C)`` and labels ``y(x_C)`` of ``cells`` on the clique
        ``sub`` (:func:`~pmwcm.kernels.encoding.encode_cells`)."""
        return encode_cells(self._layout(sub.sizes), cells, block_form=block_form)

    def _layout(self, sizes: tuple[int, ...]) -> Layout:
        """What the design reads of this query on a clique of ``sizes`` (features, target)."""
        features, encodings = self.features, self.encodings
        groups: tuple[tuple[int, ...], ...] = ()
        if self.interactions:  # most queries have none (and no encodings): skip the loops
            position = {a: i for i, a in enumerate(features)}
            groups = tuple(tuple(position[a] for a in group) for group in self.interactions)
        return Layout(
            sizes=sizes,
            encodings=(
                tuple([encodings.get(a, "auto") for a in features])
                if encodings
                else ("auto",) * len(features)
            ),
            interactions=groups,
            intercept=self.intercept,
        )


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
