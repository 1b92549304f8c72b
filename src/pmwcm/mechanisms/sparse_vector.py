"""The online sparse vector: one private bit per query, halting after ``c`` positives.

Both variants answer ``above(value, threshold=T_i)`` for a stream of
``Delta``-sensitive queries (``value`` is the query's *true* value on the
private data) with ``noisy value >= T_i + noisy offset`` and stop after
``cutoff`` positive answers; they release nothing but the bit (the noisy value
and the threshold noise never leave the object). Thresholds may change from
query to query if they are public and data-independent (both proofs allow it).

* :class:`DworkRothSparse`: Dwork & Roth 2014 Alg. 2 "Sparse", ``c`` fresh
  AboveThreshold runs of ``eps'`` each; composed by the accountant.
* :class:`LyuSuLiSparse`: Lyu, Su & Li 2017 Alg. 1, threshold noise drawn once,
  ``(eps1 + eps2)``-DP in total; better for ``c`` larger than a few.

Noise is drawn lazily (threshold noise at the first query of a run), so an
engine can build the object and charge :meth:`privacy_event` to its ledger
before any noise exists.

**Query noise in blocks (production source).** Every comparison needs a fresh
``nu ~ Lap(b)``. From :class:`~pmwcm.mechanisms.noise.OpenDPNoise` one call costs
about 80 us plus 26 us per draw (its exact sampler), so the ``nu`` are drawn
:data:`QUERY_NOISE_BLOCK` at a time, the first time a query finds none left, and
used in order, each once. This is exactly as private as drawing each at its
query: the proofs (LSL17 Thm. 2; DR14 Thm. 3.23) use only that the ``nu_i`` are
i.i.d. ``Lap(b)``, independent of ``rho`` and of the data. A block is drawn
before the queries that use it are asked, from the same sampler at the same
scale (OpenDP draws a vector's coordinates independently), so ``nu_i`` is
still independent of ``rho``, of ``nu_j`` (``j != i``) and of query ``i``, which
depends on the data and on earlier bits only; the joint law of ``(rho, nu_1,
nu_2, ...)``, hence of every released bit for every dataset and adaptive
analyst, is unchanged. When a block is drawn depends on the number of queries
only. Unused draws are dropped with the object (or by :meth:`import_state`) and
never reused. A seeded source (tests, experiments) still draws one ``nu`` per
query, so that a stream it shares with other mechanisms replays as recorded.

>>> from pmwcm.mechanisms.noise import NumpyNoise
>>> sv = LyuSuLiSparse.from_total(1e9, 2, noise=NumpyNoise(seed=0))
>>> [sv.above(v, threshold=0.5) for v in (0.1, 0.9, 0.2, 0.7)], sv.halted
([False, True, False, True], True)
"""

from __future__ import annotations

import math
import operator
from typing import Protocol, runtime_checkable

from dp_accounting import dp_event

from pmwcm.errors import Halted
from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent
from pmwcm.mechanisms.noise import NoiseSource, OpenDPNoise

__all__ = [
    "QUERY_NOISE_BLOCK",
    "DworkRothSparse",
    "LyuSuLiSparse",
    "SparseVector",
    "SparseVectorHalted",
]

#: How many query noises ``nu`` one OpenDP call draws (module docstring): the
#: call's fixed cost (about 80 us) then adds about 1 us to a query's 26 us draw.
QUERY_NOISE_BLOCK = 64


class SparseVectorHalted(Halted, RuntimeError):
    """The sparse vector has given all ``cutoff`` positive answers; its budget is spent."""


@runtime_checkable
class SparseVector(Protocol):
    """An online sparse vector (see the module docstring)."""

    @property
    def cutoff(self) -> int:
        """``c``: the mechanism halts after ``c`` positive answers."""
        ...

    @property
    def positives(self) -> int:
        """Positive answers given so far."""
        ...

    @property
    def halted(self) -> bool:
        """Whether ``positives == cutoff`` (every later query is refused)."""
        ...

    def above(self, value: float, *, threshold: float) -> bool:
        """One noisy comparison of a ``Delta``-sensitive query's true value with ``threshold``."""
        ...

    def close(self) -> None:
        """Halts now, as though the positives left had been given: every later query is
        refused. Post-processing (fewer tests cost nothing more); ``positives`` reads
        ``cutoff`` from then on, so the halt survives :meth:`export_state`."""
        ...

    def privacy_event(self) -> dp_event.DpEvent:
        """The whole mechanism's worst-case cost, to be charged before the first query."""
        ...

    def accuracy_margin(self, *, queries: int, beta: float) -> float:
        """``alpha`` (in units of ``Delta``): with probability ``>= 1 - beta`` over
        ``queries`` queries, every answer is right when ``|value - threshold| >= alpha``."""
        ...

    def export_state(self) -> dict[str, float | int | None]:
        """The mutable state, for durable storage (secret: holds the threshold noise)."""
        ...

    def import_state(self, state: dict[str, float | int | None]) -> None:
        """Restores :meth:`export_state`'s output."""
        ...


def _positive(value: float, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {name}={value}.")
    return value


def _finite(value: float, name: str) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {name}={value}.")
    return value


class _Sparse:
    """Shared mechanics: noisy comparison, counting, halting."""

    _threshold_scale: float
    _query_scale: float

    def __init__(self, *, cutoff: int, sensitivity: float, noise: NoiseSource) -> None:
        if isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff < 1:
            raise ValueError(f"cutoff must be an integer >= 1, got cutoff={cutoff!r}.")
        if not isinstance(noise, NoiseSource):
            raise TypeError(f"noise must be a NoiseSource, got {noise!r}.")
        self._cutoff = operator.index(cutoff)
        self._sensitivity = _positive(sensitivity, "sensitivity")
        self._noise = noise
        self._positives = 0
        self._rho: float | None = None  # threshold noise of the current run; never released
        #: query noises drawn ahead and not yet used (module docstring); never released.
        self._block = QUERY_NOISE_BLOCK if isinstance(noise, OpenDPNoise) else 1
        self._nus: list[float] = []

    @property
    def cutoff(self) -> int:
        """``c``: the mechanism halts after ``c`` positive answers."""
        return self._cutoff

    @property
    def sensitivity(self) -> float:
        """``Delta``: the bound on ``|q(D) - q(D')|`` over neighbouring datasets."""
        return self._sensitivity

    @property
    def positives(self) -> int:
        """Positive answers given so far."""
        return self._positives

    @property
    def halted(self) -> bool:
        """Whether all ``cutoff`` positive answers have been given."""
        return self._positives >= self._cutoff

    @property
    def threshold_scale(self) -> float:
        """Laplace scale of the threshold noise."""
        return self._threshold_scale

    @property
    def query_scale(self) -> float:
        """Laplace scale of the per-query noise."""
        return self._query_scale

    def above(self, value: float, *, threshold: float) -> bool:
        """``True`` iff ``value + nu >= threshold + rho`` (fresh ``nu`` for each query).

        Args:
            value: the true value ``q_i(D)`` of a ``Delta``-sensitive query.
            threshold: ``T_i``, public and chosen independently of the data.

        Raises:
            SparseVectorHalted: after ``cutoff`` positive answers.
            ValueError: if ``value`` or ``threshold`` is not finite.
        """
        if self.halted:
            raise SparseVectorHalted(
                f"The sparse vector gave all cutoff={self._cutoff} positive answers and has "
                "halted; its privacy budget is spent, so no further query can be answered."
            )
        value, threshold = _finite(value, "value"), _finite(threshold, "threshold")
        if self._rho is None:
            self._rho = float(self._noise.laplace(self._threshold_scale, 1)[0])
        if not self._nus:
            # Reversed, so that pop() takes them in the order drawn.
            self._nus = self._noise.laplace(self._query_scale, self._block)[::-1].tolist()
        nu = self._nus.pop()
        if value + nu < threshold + self._rho:
            return False
        self._positives += 1
        self._after_positive()
        return True

    def _after_positive(self) -> None:
        """Hook: what a positive answer does to the threshold noise."""

    def close(self) -> None:
        """Halts now (:meth:`SparseVector.close`): the positives left are counted as given,
        with no test and no draw."""
        self._positives = self._cutoff

    def export_state(self) -> dict[str, float | int | None]:
        """The mutable state (positives and the current threshold noise), for durable storage.

        The threshold noise is secret: store it where only the curator can read it.
        """
        return {"positives": self._positives, "rho": self._rho}

    def import_state(self, state: dict[str, float | int | None]) -> None:
        """Restores :meth:`export_state`'s output into a freshly built object.

        Raises:
            ValueError: if the state is malformed or not from a compatible object.
        """
        positives, rho = state.get("positives"), state.get("rho")
        if not isinstance(positives, int) or not 0 <= positives <= self._cutoff:
            raise ValueError(
                f"positives must be an integer in [0, {self._cutoff}], got {positives!r}."
            )
        if rho is not None and not (isinstance(rho, float | int) and math.isfinite(rho)):
            raise ValueError(f"rho must be a finite number or None, got {rho!r}.")
        self._positives = positives
        self._rho = None if rho is None else float(rho)
        self._nus = []  # fresh draws from here on: none is ever used twice

    def accuracy_margin(self, *, queries: int, beta: float) -> float:
        """``alpha`` such that, with probability ``>= 1 - beta`` over ``queries`` queries,
        every answer is correct whenever ``|value - threshold| >= alpha``.

        Union bound with ``P(|Lap(b)| >= t) = exp(-t/b)``: ``beta/2`` over the
        threshold draws, ``beta/2`` over the query draws; ``alpha = t_rho + t_nu``.
        """
        queries = operator.index(queries)
        if queries < 1:
            raise ValueError(f"queries must be at least 1, got queries={queries}.")
        if not 0 < beta < 1:
            raise ValueError(f"beta must lie in (0, 1), got beta={beta}.")
        draws = self._threshold_draws()
        t_rho = self._threshold_scale * math.log(2 * draws / beta)
        return t_rho + self._query_scale * math.log(2 * queries / beta)

    def _threshold_draws(self) -> int:
        return 1


class DworkRothSparse(_Sparse):
    """Dwork & Roth 2014, Alg. 2 "Sparse": ``c`` sequential AboveThreshold runs.

    Each run (Alg. 1) draws ``rho ~ Lap(2 Delta / eps')`` at its start, answers
    ``q_i + Lap(4 Delta / eps') >= T_i + rho`` and ends at its first positive
    answer; the next run redraws ``rho``. Each run is ``eps'``-DP (DR14
    Thm. 3.23), so the mechanism is the adaptive ``c``-fold composition of pure
    ``eps'``-DP mechanisms (DR14 Thm. 3.25/3.26 use the basic / advanced
    composition bounds of exactly this), reported as such by
    :meth:`privacy_event` for the accountant to compose tightly.

    Args:
        epsilon_per_run: ``eps' > 0``.
        cutoff: ``c >= 1``.
        sensitivity: ``Delta > 0``.
        noise: the random source.
    """

    def __init__(
        self,
        *,
        epsilon_per_run: float,
        cutoff: int,
        sensitivity: float = 1.0,
        noise: NoiseSource,
    ) -> None:
        super().__init__(cutoff=cutoff, sensitivity=sensitivity, noise=noise)
        self._eps = _positive(epsilon_per_run, "epsilon_per_run")
        self._threshold_scale = 2 * self._sensitivity / self._eps
        self._query_scale = 4 * self._sensitivity / self._eps

    @property
    def epsilon_per_run(self) -> float:
        """``eps'``, the cost of each AboveThreshold run."""
        return self._eps

    def _after_positive(self) -> None:
        self._rho = None  # a fresh run: fresh threshold noise at its first query

    def _threshold_draws(self) -> int:
        return self._cutoff

    def privacy_event(self) -> dp_event.DpEvent:
        """``c`` x pure ``eps'``-DP: ``SelfComposedDpEvent(EpsilonDeltaDpEvent(eps'), c)``."""
        return dp_event.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=self._eps), self._cutoff)


class LyuSuLiSparse(_Sparse):
    """Lyu, Su & Li 2017 (PVLDB 10(6)), Alg. 1: one threshold noise for all runs.

    Draws ``rho ~ Lap(Delta / eps1)`` once, answers ``q_i + Lap(2 c Delta /
    eps2) >= T_i + rho`` and halts after ``c`` positive answers. It is
    ``(eps1 + eps2)``-DP (their Theorem 2) for arbitrary (not necessarily
    monotonic) ``Delta``-sensitive queries.

    Args:
        epsilon_threshold: ``eps1 > 0``, spent on the threshold.
        epsilon_queries: ``eps2 > 0``, spent on the queries.
        cutoff: ``c >= 1``.
        sensitivity: ``Delta > 0``.
        noise: the random source.
    """

    def __init__(
        self,
        *,
        epsilon_threshold: float,
        epsilon_queries: float,
        cutoff: int,
        sensitivity: float = 1.0,
        noise: NoiseSource,
    ) -> None:
        super().__init__(cutoff=cutoff, sensitivity=sensitivity, noise=noise)
        self._eps1 = _positive(epsilon_threshold, "epsilon_threshold")
        self._eps2 = _positive(epsilon_queries, "epsilon_queries")
        self._threshold_scale = self._sensitivity / self._eps1
        self._query_scale = 2 * self._cutoff * self._sensitivity / self._eps2

    @classmethod
    def from_total(
        cls, epsilon: float, cutoff: int, *, sensitivity: float = 1.0, noise: NoiseSource
    ) -> LyuSuLiSparse:
        """The split ``eps2 / eps1 = (2c)^(2/3)`` (LSL17 Sec. 4.2), with ``eps1 + eps2 <= epsilon``.

        The split minimises the variance of ``nu - rho`` (the comparison noise);
        the sum is rounded down in float64 so the event fits a budget of exactly
        ``epsilon``.
        """
        epsilon = _positive(epsilon, "epsilon")
        if isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff < 1:
            raise ValueError(f"cutoff must be an integer >= 1, got cutoff={cutoff!r}.")
        ratio = (2 * cutoff) ** (2 / 3)
        eps2 = epsilon * ratio / (1 + ratio)
        eps1 = epsilon - eps2
        while eps1 + eps2 > epsilon:
            eps1 = math.nextafter(eps1, 0.0)
        return cls(
            epsilon_threshold=eps1,
            epsilon_queries=eps2,
            cutoff=cutoff,
            sensitivity=sensitivity,
            noise=noise,
        )

    @property
    def epsilon_threshold(self) -> float:
        """``eps1``."""
        return self._eps1

    @property
    def epsilon_queries(self) -> float:
        """``eps2``."""
        return self._eps2

    def privacy_event(self) -> dp_event.DpEvent:
        """One pure ``(eps1 + eps2)``-DP event (LSL17 Thm. 2)."""
        return EpsilonDeltaDpEvent(epsilon=self._eps1 + self._eps2)
