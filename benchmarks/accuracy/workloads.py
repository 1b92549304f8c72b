"""Query streams for issue 7's regimes: many attributes, interactions, a high-order label.

Every generator is seeded by the caller (streams use seeds ``1000 + s``, as in
``run.py``) and draws from public information only (the domain's names).

* :func:`wide_queries` -- logistic queries on 8 to 13 of the 13 other
  attributes: the loss reads an 9- to 14-way marginal, far beyond the 2-way
  marginals a prior (ours, MST's, AIM's default workload) measures.
* :func:`interaction_queries` -- 3 to 5 features plus 1 to 3 products of
  pairs or triples of them (:class:`~pmwcm.kernels.queries.CMQuery` ``interactions``).
* :func:`parity_records` / :func:`parity_queries` -- the stress case: the
  label is replaced by the parity of three attributes (with 5% of labels
  flipped), and every query includes the three-way product. The parity is a
  third-order interaction: a model fitted to 2-way marginals puts the label
  nearly independent of the product, so the prior's answers are far off and
  only the online corrections (or a measurement of the 4-way marginal) can fix them.
* :func:`mixed_queries` -- issue 13's full-resolution workload: a binary target
  and 2 to 5 other attributes, each non-binary one one-hot if it has at most
  :data:`ONEHOT_MAX` values and ordinal otherwise.
"""

from __future__ import annotations

import numpy as np

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery

PARITY_PARTS = ("married", "education-num>=10", "hours>=40")
PARITY_LABEL = "income>50K"


def _binary(domain: Domain) -> list[str]:
    return [a for a, s in zip(domain.names, domain.sizes, strict=True) if s == 2]


def _target_and_features(
    domain: Domain, rng: np.random.Generator, *, low: int, high: int
) -> tuple[str, tuple[str, ...]]:
    """A random binary target and ``low`` to ``high - 1`` distinct other attributes."""
    target = str(rng.choice(_binary(domain)))
    others = [a for a in domain.names if a != target]
    size = int(rng.integers(low, high))
    return target, tuple(str(a) for a in rng.choice(others, size=size, replace=False))


def wide_queries(domain: Domain, k: int, *, rng: np.random.Generator) -> list[CMQuery]:
    """``k`` logistic queries, each on a random binary target and 8-13 other attributes."""
    out = []
    for _ in range(k):
        target, features = _target_and_features(domain, rng, low=8, high=len(domain))
        out.append(CMQuery(loss="logistic", target=target, features=features))
    return out


def _groups(features: tuple[str, ...], rng: np.random.Generator) -> tuple[tuple[str, ...], ...]:
    """1 to 3 distinct products of 2 or 3 of ``features``."""
    chosen: dict[frozenset[str], tuple[str, ...]] = {}
    for _ in range(int(rng.integers(1, 4))):
        order = int(rng.integers(2, min(3, len(features)) + 1))
        group = tuple(str(a) for a in rng.choice(features, size=order, replace=False))
        chosen.setdefault(frozenset(group), group)
    return tuple(chosen.values())


def interaction_queries(domain: Domain, k: int, *, rng: np.random.Generator) -> list[CMQuery]:
    """``k`` logistic queries with 3-5 features and 1-3 interaction terms among them."""
    out = []
    for _ in range(k):
        target, features = _target_and_features(domain, rng, low=3, high=6)
        groups = _groups(features, rng)
        out.append(CMQuery(loss="logistic", target=target, features=features, interactions=groups))
    return out


def parity_records(
    records: np.ndarray, domain: Domain, *, flip: float = 0.05, seed: int = 5
) -> np.ndarray:
    """Records with :data:`PARITY_LABEL` replaced by the parity of :data:`PARITY_PARTS`."""
    out = records.copy()
    parts = [domain.index(a) for a in PARITY_PARTS]
    parity = out[:, parts].sum(axis=1) % 2
    flipped = np.random.default_rng(seed).random(len(out)) < flip
    out[:, domain.index(PARITY_LABEL)] = parity ^ flipped
    return out


def parity_queries(domain: Domain, k: int, *, rng: np.random.Generator) -> list[CMQuery]:
    """``k`` logistic queries for the parity label: its parts, 0-2 others, the 3-way product."""
    others = [a for a in domain.names if a not in (*PARITY_PARTS, PARITY_LABEL)]
    out = []
    for _ in range(k):
        extra = tuple(
            str(a) for a in rng.choice(others, size=int(rng.integers(0, 3)), replace=False)
        )
        features = (*PARITY_PARTS, *extra)
        groups: tuple[tuple[str, ...], ...] = (PARITY_PARTS,)
        if extra and rng.random() < 0.5:
            groups += ((PARITY_PARTS[int(rng.integers(0, 3))], extra[0]),)
        out.append(
            CMQuery(
                loss="logistic",
                target=PARITY_LABEL,
                features=features,
                radius=float(rng.choice([1.0, 2.0, 4.0])),
                interactions=groups,
            )
        )
    return out


#: A non-binary feature with at most this many values is one-hot, otherwise ordinal.
ONEHOT_MAX = 16


def mixed_queries(domain: Domain, k: int, *, rng: np.random.Generator) -> list[CMQuery]:
    """``k`` logistic queries: a binary target, 2-5 features, one-hot or ordinal by size."""
    sizes = dict(zip(domain.names, domain.sizes, strict=True))
    out = []
    for _ in range(k):
        target, features = _target_and_features(domain, rng, low=2, high=6)
        encodings = {
            a: ("onehot" if sizes[a] <= ONEHOT_MAX else "ordinal") for a in features if sizes[a] > 2
        }
        out.append(CMQuery(loss="logistic", target=target, features=features, encodings=encodings))
    return out
