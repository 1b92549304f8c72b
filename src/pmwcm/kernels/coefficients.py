"""The names of a CM query's coefficients, and their natural scale.

``theta`` is a plain vector; this module says what each coordinate means, in
the order :meth:`~pmwcm.kernels.queries.CMQuery.compile` lays the features out
(the ``pmwcm run`` encoding contract, :mod:`pmwcm.kernels.queries`):

* a binary feature ``a`` with values ``(v0, v1)`` is one coordinate named
  ``"a=v1"``: the feature is ``+1`` when ``a`` is ``v1`` and ``-1`` when it is ``v0``;
* a one-hot feature is one coordinate per value, ``"a=v"`` (1 when ``a`` is ``v``);
* an ordinal feature is one coordinate ``"a (ordinal)"``: its code scaled onto ``[-1, 1]``;
* an interaction is the product of its members' coordinates, named by joining
  theirs with ``" * "``;
* the intercept, last, is ``"intercept"``.

Natural scale: the feature vector is divided by ``sqrt(blocks)`` (features,
interactions and intercept, one block each) so that ``||phi|| <= 1``. The
model's score is ``<theta, phi(x)> = <theta / sqrt(blocks), raw(x)>``, so
:func:`natural_coefficients` (``theta / sqrt(blocks)``) are the weights on the
raw ``+/-1``, one-hot and ordinal features above, as a scikit-learn model or a
textbook would write them. For a regression target the prediction is the
target's code scaled onto ``[-1, 1]``: code ``(prediction + 1) (s - 1) / 2``.

>>> from pmwcm.kernels.domain import Domain
>>> from pmwcm.kernels.queries import CMQuery
>>> d = Domain.from_values({"sex": ["female", "male"], "race": ["a", "b", "c"], "y": ["0", "1"]})
>>> q = CMQuery(loss="logistic", target="y", features=("sex", "race"),
...             interactions=(("sex", "race"),))
>>> coefficient_names(q, d)
('sex=male', 'race=a', 'race=b', 'race=c', 'sex=male * race=a', 'sex=male * race=b', \
'sex=male * race=c', 'intercept')
>>> natural_coefficients(q, [2.0] * 8)[0]
1.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery

__all__ = [
    "BOUNDARY_TOLERANCE",
    "block_count",
    "coefficient_names",
    "natural_coefficients",
    "on_boundary",
]

INTERCEPT = "intercept"
#: ``||theta||`` at or above ``(1 - BOUNDARY_TOLERANCE) R`` counts as on the boundary.
BOUNDARY_TOLERANCE = 1e-6


def _block_names(query: CMQuery, domain: Domain, name: str) -> list[str]:
    values = domain.values_of(name)
    if len(values) <= 2:
        return [f"{name}={values[-1]}"]
    if query.encodings.get(name, "auto") == "ordinal":
        return [f"{name} (ordinal)"]
    return [f"{name}={v}" for v in values]


def coefficient_names(query: CMQuery, domain: Domain) -> tuple[str, ...]:
    """One name per coordinate of ``theta``, in order (module docstring).

    Raises:
        QueryError: an attribute the domain does not have.
    """
    query.canonical(domain)  # refuses unknown attributes with the query's own message
    blocks = {name: _block_names(query, domain, name) for name in query.features}
    names = [n for name in query.features for n in blocks[name]]
    for group in query.interactions:
        combined = blocks[group[0]]
        for member in group[1:]:  # row-major, as the Kronecker product in compile
            combined = [f"{a} * {b}" for a in combined for b in blocks[member]]
        names.extend(combined)
    if query.intercept:
        names.append(INTERCEPT)
    return tuple(names)


def block_count(query: CMQuery) -> int:
    """The number of blocks ``phi`` is divided by ``sqrt`` of: features, interactions, intercept."""
    return len(query.features) + len(query.interactions) + int(query.intercept)


def natural_coefficients(query: CMQuery, theta: Sequence[float]) -> list[float]:
    """``theta / sqrt(blocks)``: the weights on the raw features (module docstring)."""
    scale = math.sqrt(block_count(query))
    return [float(v) / scale for v in theta]


def on_boundary(query: CMQuery, theta: Sequence[float]) -> bool:
    """Whether ``||theta||`` reached the radius ``R`` (relative :data:`BOUNDARY_TOLERANCE`).

    Then the constraint ``||theta|| <= R`` binds: the unconstrained fit has
    larger coefficients, and a larger ``radius`` may fit better, at a cost in
    accuracy for the same privacy (every noise scale grows with ``R``). Reads
    only the public query and the released ``theta``.

    >>> q = CMQuery(loss="logistic", target="y", features=("a",))
    >>> on_boundary(q, [0.6, 0.8]), on_boundary(q, [0.3, 0.4])
    (True, False)
    """
    norm = math.sqrt(sum(float(v) ** 2 for v in theta))
    return norm >= (1.0 - BOUNDARY_TOLERANCE) * float(query.radius)
