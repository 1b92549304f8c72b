"""The data universe ``X = prod_i [s_i]``: attribute names and their value sets.

A :class:`Domain` is a frozen value: an ordered tuple of attribute names, the
size ``s_i`` of each attribute's value set and, optionally, the human-readable
labels of those values. Records are integer codes ``0..s_i-1`` per attribute,
and every histogram over the domain is a tensor of shape ``domain.shape``.

>>> d = Domain.from_sizes({"sex": 2, "age": 3})
>>> d.shape, d.size
((2, 3), 6)
>>> d.axes(["age"])
(1,)
>>> d.project(["age"]).names
('age',)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Domain:
    """An ordered, finite data universe.

    Attributes:
        names: attribute names, in axis order.
        sizes: number of values of each attribute (``s_i >= 1``).
        values: for each attribute, the labels of its codes ``0..s_i-1``
            (strings); defaults to ``("0", "1", ...)``.
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    values: tuple[tuple[str, ...], ...] = field(default=())
    #: ``name -> axis``: the engine looks attributes up several times a query, and a
    #: tuple's ``index`` is a scan of every name (derived from ``names``; not compared).
    _axis_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = tuple(self.names)
        sizes = tuple(int(s) for s in self.sizes)
        if len(names) != len(sizes):
            raise ValueError(
                f"Domain needs one size per attribute, got {len(names)} names and "
                f"{len(sizes)} sizes."
            )
        if len(set(names)) != len(names):
            dupes = sorted({a for a in names if names.count(a) > 1})
            raise ValueError(f"Domain attribute names must be unique, got duplicates {dupes}.")
        for name, size in zip(names, sizes, strict=True):
            if not isinstance(name, str) or not name:
                raise ValueError(f"Domain attribute names must be non-empty strings, got {name!r}.")
            if size < 1:
                raise ValueError(
                    f"Attribute {name!r} must have at least one value, got size={size}."
                )
        values = tuple(tuple(str(v) for v in vs) for vs in self.values)
        if not values:
            values = tuple(tuple(str(i) for i in range(s)) for s in sizes)
        if len(values) != len(sizes):
            raise ValueError(
                f"Domain needs one value list per attribute, got {len(values)} lists for "
                f"{len(sizes)} attributes."
            )
        for name, size, vs in zip(names, sizes, values, strict=True):
            if len(vs) != size:
                raise ValueError(
                    f"Attribute {name!r} has size {size} but {len(vs)} value labels {list(vs)}."
                )
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_axis_of", {name: axis for axis, name in enumerate(names)})

    @classmethod
    def from_sizes(cls, sizes: Mapping[str, int]) -> Domain:
        """Builds a domain from ``{name: size}`` (insertion order is axis order)."""
        return cls(names=tuple(sizes), sizes=tuple(sizes.values()))

    @classmethod
    def from_values(cls, values: Mapping[str, Sequence[object]]) -> Domain:
        """Builds a domain from ``{name: [value labels]}`` (code ``i`` is label ``i``)."""
        return cls(
            names=tuple(values),
            sizes=tuple(len(v) for v in values.values()),
            values=tuple(tuple(str(x) for x in v) for v in values.values()),
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of a histogram over this domain."""
        return self.sizes

    @property
    def size(self) -> int:
        """``|X|``, the number of cells of the universe."""
        return math.prod(self.sizes)

    @property
    def log_size(self) -> float:
        """``log |X|`` (natural log), as it appears in the paper's constants."""
        return float(sum(math.log(s) for s in self.sizes))

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._axis_of
        except TypeError:  # an unhashable value is no attribute name
            return False

    def index(self, name: str) -> int:
        """The axis of attribute ``name``.

        Raises:
            KeyError: if the domain has no such attribute (the message lists them).
        """
        try:
            return self._axis_of[name]
        except (KeyError, TypeError):
            raise KeyError(
                f"Unknown attribute {name!r}; the domain has {list(self.names)}."
            ) from None

    def axes(self, attrs: Iterable[str]) -> tuple[int, ...]:
        """The axes of ``attrs``, in the order given."""
        return tuple(self.index(a) for a in attrs)

    def sizes_of(self, attrs: Iterable[str]) -> tuple[int, ...]:
        """``s_i`` of each attribute of ``attrs``, in the order given (a clique's shape).

        Raises:
            KeyError: for an attribute the domain does not have (as :meth:`index`).
        """
        names = attrs if isinstance(attrs, tuple) else tuple(attrs)  # an iterator, read once
        sizes, axis_of = self.sizes, self._axis_of
        try:
            return tuple([sizes[axis_of[name]] for name in names])
        except (KeyError, TypeError):
            return tuple([sizes[self.index(name)] for name in names])  # names the culprit

    def size_of(self, name: str) -> int:
        """``s_i`` for attribute ``name``."""
        return self.sizes[self.index(name)]

    def values_of(self, name: str) -> tuple[str, ...]:
        """The value labels of attribute ``name``."""
        return self.values[self.index(name)]

    def project(self, attrs: Iterable[str]) -> Domain:
        """The sub-domain on ``attrs``, in the order given (a clique's domain)."""
        idx = self.axes(attrs)
        return Domain(
            names=tuple(self.names[i] for i in idx),
            sizes=tuple(self.sizes[i] for i in idx),
            values=tuple(self.values[i] for i in idx),
        )
