"""Query workloads for demos and benchmarks: random and adaptively chosen CM queries.

Pure library code: no I/O, and every random choice comes from an explicit
:class:`numpy.random.Generator` passed in by keyword (STYLE 6).

* :func:`random_query` / :func:`random_queries` -- a catalogue loss, a target
  and 2..4 feature attributes drawn at random (classification losses only get
  binary targets).
* :class:`StepwiseAnalyst` -- forward stepwise feature selection for one
  target. Each round asks one query per remaining candidate (the features
  chosen so far plus that candidate) and keeps the candidate whose
  coefficient in the *released* answer is largest in magnitude. It sees
  nothing but the answers, so its queries are adaptively chosen in the
  paper's sense: they depend on earlier private outputs.
* :class:`MixedStream` -- interleaves random queries with several stepwise
  analysts into one online stream of ``total`` queries.

>>> import numpy as np
>>> from pmwcm.kernels.domain import Domain
>>> d = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "y": 2})
>>> analyst = StepwiseAnalyst(d, "y", max_features=1)
>>> [q.features for q in analyst.round_queries()]
[('a',), ('b',), ('c',)]
>>> for q, coef in zip(analyst.round_queries(), [0.1, -0.7, 0.3]):
...     analyst.observe(q, np.array([coef, 0.0]))
>>> analyst.selected, analyst.done
(('b',), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.losses import make_loss
from pmwcm.kernels.queries import CMQuery

DEFAULT_LOSSES = ("logistic", "squared", "smoothed_hinge")


def _targets_for(domain: Domain, loss: str) -> tuple[str, ...]:
    """The attributes that can be ``loss``'s label (binary ones for classification)."""
    if make_loss(loss).label_kind != "binary":
        return domain.names
    return tuple(n for n, s in zip(domain.names, domain.sizes, strict=True) if s == 2)


def random_query(
    domain: Domain,
    *,
    rng: np.random.Generator,
    losses: Sequence[str] = DEFAULT_LOSSES,
    min_features: int = 2,
    max_features: int = 4,
    radius: float = 1.0,
) -> CMQuery:
    """One random catalogue query: a loss, a fitting target, then 2..4 other features.

    Args:
        domain: the data universe (at least two attributes).
        rng: the random source.
        losses: catalogue names to draw from, uniformly.
        min_features: fewest features (capped by the attributes available).
        max_features: most features.
        radius: ``R`` of every query.

    Raises:
        ValueError: for an empty ``losses``, bad feature counts, a domain with
            one attribute, or a classification loss and no binary attribute.
    """
    if not losses:
        raise ValueError("losses must name at least one catalogue loss, got none.")
    if not 1 <= min_features <= max_features:
        raise ValueError(
            f"need 1 <= min_features <= max_features, got {min_features} and {max_features}."
        )
    if len(domain) < 2:
        raise ValueError(f"a query needs a target and a feature; the domain has {len(domain)}.")
    loss = str(losses[int(rng.integers(len(losses)))])
    targets = _targets_for(domain, loss)
    if not targets:
        raise ValueError(f"the {loss} loss needs a binary target; the domain has none.")
    target = str(targets[int(rng.integers(len(targets)))])
    others = [n for n in domain.names if n != target]
    hi = min(max_features, len(others))
    m = int(rng.integers(min(min_features, hi), hi + 1))
    features = tuple(str(f) for f in rng.choice(others, size=m, replace=False))
    return CMQuery(loss=loss, target=target, features=features, radius=radius)


def random_queries(
    domain: Domain,
    k: int,
    *,
    rng: np.random.Generator,
    losses: Sequence[str] = DEFAULT_LOSSES,
) -> list[CMQuery]:
    """``k`` independent :func:`random_query` draws.

    >>> d = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
    >>> qs = random_queries(d, 3, rng=np.random.default_rng(0))
    >>> len(qs), all(q.target not in q.features for q in qs)
    (3, True)
    """
    if not (isinstance(k, int) and k >= 0):
        raise ValueError(f"k must be a non-negative integer, got k={k!r}.")
    return [random_query(domain, rng=rng, losses=losses) for _ in range(k)]


class StepwiseAnalyst:
    """Forward stepwise feature selection for one target, from released answers only.

    Round ``r`` asks, for each remaining candidate ``c``, the query with
    features ``selected + (c,)``; the answer's coefficient of ``c`` (position
    ``len(selected)`` of ``theta``) measures it. After the round, the candidate
    with the largest ``|coefficient|`` (first in candidate order on ties) is
    selected. Features of a query are scaled alike, so the coefficients of
    one round are comparable.

    Args:
        domain: the data universe.
        target: the label attribute.
        loss: the catalogue loss of every query.
        max_features: stop after selecting this many features.
        candidates: the attributes to choose from (default: all but the target).
        radius: ``R`` of every query.

    Raises:
        ValueError: if the target or a candidate is not in the domain, the
            loss cannot use the target, or ``max_features < 1``.
    """

    def __init__(
        self,
        domain: Domain,
        target: str,
        *,
        loss: str = "logistic",
        max_features: int = 3,
        candidates: Sequence[str] | None = None,
        radius: float = 1.0,
    ) -> None:
        if target not in domain:
            raise ValueError(f"target {target!r} is not in the domain {list(domain.names)}.")
        if target not in _targets_for(domain, loss):
            raise ValueError(f"the {loss} loss needs a binary target; {target!r} is not binary.")
        pool = tuple(n for n in domain.names if n != target) if candidates is None else candidates
        for c in pool:
            if c not in domain or c == target:
                raise ValueError(
                    f"candidate {c!r} must be a domain attribute other than {target!r}."
                )
        if not (isinstance(max_features, int) and max_features >= 1):
            raise ValueError(f"max_features must be a positive integer, got {max_features!r}.")
        self.target = target
        self.loss = loss
        self.radius = radius
        self.max_features = min(max_features, len(pool))
        self._remaining = list(pool)
        self._selected: list[str] = []
        self._scores: dict[str, float] = {}

    @property
    def selected(self) -> tuple[str, ...]:
        """The features chosen so far, in the order chosen."""
        return tuple(self._selected)

    @property
    def done(self) -> bool:
        """Whether ``max_features`` features have been selected."""
        return len(self._selected) >= self.max_features

    def _query(self, candidate: str) -> CMQuery:
        features = (*self._selected, candidate)
        return CMQuery(loss=self.loss, target=self.target, features=features, radius=self.radius)

    def round_queries(self) -> list[CMQuery]:
        """All queries of the current round (empty when done)."""
        return [] if self.done else [self._query(c) for c in self._remaining]

    def next_query(self) -> CMQuery | None:
        """The first query of the current round not yet observed, or ``None`` when done."""
        if self.done:
            return None
        pending = [c for c in self._remaining if c not in self._scores]
        return self._query(pending[0])

    def observe(self, query: CMQuery, theta: np.ndarray) -> None:
        """Records the released answer ``theta`` to one query of the current round.

        Raises:
            ValueError: if ``query`` is not an unanswered query of this round.
        """
        pos = len(self._selected)
        candidate = query.features[-1] if len(query.features) == pos + 1 else None
        if self.done or candidate is None or self._query(candidate) != query:
            raise ValueError(f"{query} is not a query of the current stepwise round.")
        if candidate not in self._remaining or candidate in self._scores:
            raise ValueError(f"candidate {candidate!r} was already observed in this round.")
        self._scores[candidate] = abs(float(np.asarray(theta, dtype=np.float64)[pos]))
        if len(self._scores) == len(self._remaining):
            best = max(self._remaining, key=lambda c: self._scores[c])  # first on ties
            self._selected.append(best)
            self._remaining.remove(best)
            self._scores.clear()


@dataclass(frozen=True)
class StreamItem:
    """One query of a :class:`MixedStream` and where it came from.

    Attributes:
        query: the query.
        kind: ``"random"`` or ``"stepwise"``.
        analyst: index of the stepwise analyst that asked it (``None`` for random).
    """

    query: CMQuery
    kind: str
    analyst: int | None = None


class MixedStream:
    """An online stream of ``total`` queries mixing random ones and stepwise analysts.

    Each query is, with probability ``adaptive_share`` (while some analyst is
    still selecting), the next query of an active analyst picked uniformly at
    random; otherwise a :func:`random_query`. The caller must :meth:`observe`
    the released answer of each query before asking for the next one, exactly
    as an online analyst would.

    Args:
        domain: the data universe.
        total: the number of queries in the stream.
        rng: the random source (for the mix and the random queries).
        analysts: the adaptive analysts.
        losses: catalogue losses of the random queries.
        adaptive_share: the probability of an adaptive query while one is available.
    """

    def __init__(
        self,
        domain: Domain,
        total: int,
        *,
        rng: np.random.Generator,
        analysts: Sequence[StepwiseAnalyst] = (),
        losses: Sequence[str] = DEFAULT_LOSSES,
        adaptive_share: float = 0.5,
    ) -> None:
        if not (isinstance(total, int) and total >= 0):
            raise ValueError(f"total must be a non-negative integer, got total={total!r}.")
        if not 0.0 <= adaptive_share <= 1.0:
            raise ValueError(f"adaptive_share must lie in [0, 1], got {adaptive_share}.")
        self.domain = domain
        self.total = total
        self.analysts = tuple(analysts)
        self._rng = rng
        self._losses = tuple(losses)
        self._share = adaptive_share
        self._asked = 0
        self._pending: StreamItem | None = None

    @property
    def asked(self) -> int:
        """How many queries the stream has produced so far."""
        return self._asked

    def next_item(self) -> StreamItem | None:
        """The next query, or ``None`` once ``total`` queries were asked.

        Raises:
            RuntimeError: if the previous query's answer was not observed.
        """
        if self._pending is not None:
            raise RuntimeError("observe() the answer to the previous query first.")
        if self._asked >= self.total:
            return None
        active = [i for i, a in enumerate(self.analysts) if not a.done]
        item: StreamItem
        if active and self._rng.random() < self._share:
            i = active[int(self._rng.integers(len(active)))]
            query = self.analysts[i].next_query()
            assert query is not None
            item = StreamItem(query=query, kind="stepwise", analyst=i)
        else:
            query = random_query(self.domain, rng=self._rng, losses=self._losses)
            item = StreamItem(query=query, kind="random")
        self._pending = item
        self._asked += 1
        return item

    def observe(self, theta: np.ndarray) -> None:
        """Gives the stream the released answer to its last query.

        Raises:
            RuntimeError: if there is no query awaiting an answer.
        """
        item = self._pending
        if item is None:
            raise RuntimeError("no query is awaiting an answer.")
        self._pending = None
        if item.analyst is not None:
            self.analysts[item.analyst].observe(item.query, theta)
