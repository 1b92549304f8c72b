"""Output events, families of candidate events, and the search that picks one.

An audit bounds ``log((P_a(E) - delta) / P_b(E))`` for one event ``E`` and one
ordering ``(a, b)`` of the two neighbouring inputs. A good ``E`` is rarely
known in advance, so a family proposes candidates from a *search* sample and
:func:`search_event` keeps the one whose bound would be largest on the final
sample. The final bound is then computed on fresh trials only: the selection
never sees them, so the Clopper-Pearson confidence stays exact (a bound
computed on the samples that chose the event would be optimistically biased).

Outputs are NumPy arrays whose first axis indexes trials; an event maps such an
array to a boolean vector of the same length.

* :class:`ThresholdFamily`: ``{s(o) >= t}`` and ``{s(o) <= t}`` for a scalar
  statistic ``s`` (e.g. a 1-D projection of a released vector) and ``t`` on a
  grid of quantiles of the pooled search sample.
* :class:`CategoricalFamily`: for discrete outputs coded by ``key``, the
  Neyman-Pearson sets: the codes sorted by their estimated likelihood ratio,
  and every prefix of that order (the optimal tests for each level).
* :class:`FixedFamily` and :func:`combine` for hand-written events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from scipy import stats

__all__ = [
    "Candidate",
    "CategoricalFamily",
    "Event",
    "EventFamily",
    "FixedFamily",
    "ThresholdFamily",
    "combine",
    "row_codes",
    "search_event",
]

BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, kw_only=True)
class Event:
    """An output event and the input it favours.

    Attributes:
        description: human-readable, recorded in the audit result.
        indicator: ``outputs -> bool array`` (one entry per trial).
        favours: ``0`` bounds ``log P0(E) / P1(E)``, ``1`` bounds ``log P1(E) / P0(E)``.
    """

    description: str
    indicator: Callable[[Any], BoolArray]
    favours: int = 0

    def __post_init__(self) -> None:
        if self.favours not in (0, 1):
            raise ValueError(f"favours must be 0 or 1, got favours={self.favours!r}.")

    def count(self, outputs: Any) -> int:
        """How many trials of ``outputs`` fall in the event."""
        hits = np.asarray(self.indicator(outputs), dtype=bool)
        if hits.shape != (len(outputs),):
            raise ValueError(
                f"the indicator must return shape ({len(outputs)},), got {hits.shape}."
            )
        return int(hits.sum())


Candidate = tuple[Event, int, int]
"""An event with its counts on the two search samples."""


@runtime_checkable
class EventFamily(Protocol):
    """Proposes candidate events from the search samples of both inputs."""

    def candidates(self, outputs0: Any, outputs1: Any) -> Sequence[Candidate]:
        """Candidate events (each with the input it favours) and their search counts."""
        ...


def _both(
    description: str, indicator: Callable[[Any], BoolArray], k0: int, k1: int
) -> list[Candidate]:
    return [
        (Event(description=description, indicator=indicator, favours=f), k0, k1) for f in (0, 1)
    ]


@dataclass(frozen=True, kw_only=True)
class FixedFamily:
    """A given list of events, each tried in both directions."""

    events: tuple[tuple[str, Callable[[Any], BoolArray]], ...]

    def candidates(self, outputs0: Any, outputs1: Any) -> Sequence[Candidate]:
        """Every event, favouring ``D0`` and favouring ``D1``."""
        out: list[Candidate] = []
        for desc, ind in self.events:
            probe = Event(description=desc, indicator=ind)
            out += _both(desc, ind, probe.count(outputs0), probe.count(outputs1))
        return out


@dataclass(frozen=True, kw_only=True)
class ThresholdFamily:
    """Events ``{s >= t}`` and ``{s <= t}`` on a scalar statistic ``s``.

    Attributes:
        statistic: ``outputs -> float array``; NaN marks "not in any event".
        name: how ``s`` is described in results.
        grid: number of thresholds (quantiles of the pooled search statistics).
    """

    statistic: Callable[[Any], NDArray[np.float64]]
    name: str = "s"
    grid: int = 64

    def candidates(self, outputs0: Any, outputs1: Any) -> Sequence[Candidate]:
        """Thresholds at evenly spaced quantiles (tails included) of the pooled sample."""
        s0, s1 = (np.sort(self.statistic(o)) for o in (outputs0, outputs1))
        s0, s1 = s0[~np.isnan(s0)], s1[~np.isnan(s1)]
        pooled = np.concatenate([s0, s1])
        if pooled.size == 0:
            return []
        levels = np.linspace(0.0, 1.0, self.grid + 1)
        cuts = np.unique(np.quantile(pooled, levels, method="inverted_cdf"))
        ge0 = s0.size - np.searchsorted(s0, cuts, side="left")
        ge1 = s1.size - np.searchsorted(s1, cuts, side="left")
        le0 = np.searchsorted(s0, cuts, side="right")
        le1 = np.searchsorted(s1, cuts, side="right")
        out: list[Candidate] = []
        for i, t in enumerate(cuts.tolist()):
            out += _both(f"{self.name} >= {t:.6g}", _ge(self.statistic, t), ge0[i], ge1[i])
            out += _both(f"{self.name} <= {t:.6g}", _le(self.statistic, t), le0[i], le1[i])
        return out


def _ge(statistic: Callable[[Any], NDArray[np.float64]], t: float) -> Callable[[Any], BoolArray]:
    return lambda outputs: np.asarray(statistic(outputs) >= t)


def _le(statistic: Callable[[Any], NDArray[np.float64]], t: float) -> Callable[[Any], BoolArray]:
    return lambda outputs: np.asarray(statistic(outputs) <= t)


@dataclass(frozen=True, kw_only=True)
class CategoricalFamily:
    """Neyman-Pearson sets of a discrete output coded by ``key``.

    Codes are sorted by ``(c_a + 1/2) / (c_b + 1/2)`` on the search sample (``c``
    the counts, ``a`` the favoured input) and every prefix of the order, up to
    ``max_codes`` codes, is a candidate; for pure DP the best set is usually one
    code, for ``delta > 0`` a union.

    Attributes:
        key: ``outputs -> int array`` of codes (see :func:`row_codes`).
        name: how the code is described in results.
        max_codes: the longest prefix tried.
        describe: turns one code into text for the result (default ``str``).
    """

    key: Callable[[Any], NDArray[np.int64]]
    name: str = "output"
    max_codes: int = 64
    describe: Callable[[int], str] = str

    def candidates(self, outputs0: Any, outputs1: Any) -> Sequence[Candidate]:
        """Prefixes of the likelihood-ratio order, favouring each input in turn."""
        k0, k1 = np.asarray(self.key(outputs0)), np.asarray(self.key(outputs1))
        codes, inverse = np.unique(np.concatenate([k0, k1]), return_inverse=True)
        c0 = np.bincount(inverse[: k0.size], minlength=codes.size)
        c1 = np.bincount(inverse[k0.size :], minlength=codes.size)
        out: list[Candidate] = []
        for favours, (ca, cb) in enumerate(((c0, c1), (c1, c0))):
            order = np.argsort(-(ca + 0.5) / (cb + 0.5), kind="stable")
            cum0, cum1 = np.cumsum(c0[order]), np.cumsum(c1[order])
            for m in range(1, min(order.size, self.max_codes) + 1):
                chosen = np.sort(codes[order[:m]])
                shown = ", ".join(self.describe(int(c)) for c in chosen[:4])
                more = f", ... ({m} codes)" if m > 4 else ""
                event = Event(
                    description=f"{self.name} in {{{shown}{more}}}",
                    indicator=_member(self.key, chosen),
                    favours=favours,
                )
                out.append((event, int(cum0[m - 1]), int(cum1[m - 1])))
        return out


def _member(
    key: Callable[[Any], NDArray[np.int64]], chosen: NDArray[np.int64]
) -> Callable[[Any], BoolArray]:
    return lambda outputs: np.isin(key(outputs), chosen)


@dataclass(frozen=True)
class _Combined:
    families: tuple[EventFamily, ...]

    def candidates(self, outputs0: Any, outputs1: Any) -> Sequence[Candidate]:
        return [c for f in self.families for c in f.candidates(outputs0, outputs1)]


def combine(*families: EventFamily) -> EventFamily:
    """One family proposing the candidates of all of ``families``."""
    return _Combined(tuple(families))


def row_codes(rows: NDArray[np.integer], *, low: int, high: int) -> NDArray[np.int64]:
    """Mixed-radix codes of integer rows with entries in ``[low, high]`` (for patterns).

    >>> row_codes(np.array([[-1, 0, 1], [1, 1, 1]]), low=-1, high=1).tolist()
    [5, 26]

    Raises:
        ValueError: an entry outside ``[low, high]``, or codes that overflow int64.
    """
    rows = np.asarray(rows)
    base = high - low + 1
    if rows.ndim != 2 or base < 1 or rows.shape[1] * np.log2(max(base, 2)) >= 62:
        raise ValueError(f"cannot code rows of shape {rows.shape} in base {base} into int64.")
    if rows.size and (rows.min() < low or rows.max() > high):
        raise ValueError(f"row entries must lie in [{low}, {high}].")
    weights = base ** np.arange(rows.shape[1] - 1, -1, -1, dtype=np.int64)
    return (rows.astype(np.int64) - low) @ weights


def search_event(
    family: EventFamily,
    outputs0: Any,
    outputs1: Any,
    *,
    final_trials: int,
    alpha: float,
    delta: float = 0.0,
) -> tuple[Event, float]:
    """The candidate whose bound, projected to the final sample size, is largest.

    The projection scales each search count by ``final_trials / search_trials``
    and applies the same Clopper-Pearson bound the final stage will apply, so
    rare events are penalised as they will be. Uses the search samples only.

    Returns:
        The chosen event and its projected epsilon lower bound.

    Raises:
        ValueError: if the family proposes no candidate.
    """
    found = list(family.candidates(outputs0, outputs1))
    if not found:
        raise ValueError("the event family proposed no candidate on the search sample.")
    events = [c[0] for c in found]
    n = (len(outputs0), len(outputs1))
    counts = np.array([[c[1], c[2]] for c in found], dtype=np.float64)
    fav = np.array([e.favours for e in events])
    top = np.where(fav == 0, counts[:, 0] / n[0], counts[:, 1] / n[1])
    bottom = np.where(fav == 0, counts[:, 1] / n[1], counts[:, 0] / n[0])
    kt, kb = np.round(top * final_trials), np.round(bottom * final_trials)
    a = alpha / 2
    with np.errstate(divide="ignore"):
        p_top = np.where(kt > 0, stats.beta.ppf(a, np.maximum(kt, 1), final_trials - kt + 1), 0.0)
        p_bot = np.where(
            kb < final_trials,
            stats.beta.ppf(1 - a, kb + 1, np.maximum(final_trials - kb, 1)),
            1.0,
        )
        score = np.where(p_top > delta, np.log(np.maximum(p_top - delta, 1e-300) / p_bot), 0.0)
    best = int(np.argmax(score))
    return events[best], float(max(score[best], 0.0))
