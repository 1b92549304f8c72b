"""Auditing the online sparse vector: a vectorised replica, checked against the real classes.

:class:`~pmwcm.mechanisms.sparse_vector.DworkRothSparse` and
:class:`~pmwcm.mechanisms.sparse_vector.LyuSuLiSparse` draw one scalar per call, far too
slow for 10^6 trials. :class:`SparseVectorModel` replays their decision rule
on whole arrays of trials,

    answer_j = [v_j + nu_j >= T_j + rho_r]   while fewer than c positives,

with ``rho ~ Lap(threshold_scale)`` (redrawn after each positive for
Dwork-Roth, drawn once for Lyu-Su-Li), ``nu ~ Lap(query_scale)``; the scales
and the cutoff are *read from the real object* (:meth:`SparseVectorModel.of`),
so a wrong calibration in the class is a wrong calibration in the audit.
:func:`crosscheck` feeds the real class the very draws the model used (a
replaying :class:`~pmwcm.mechanisms.noise.NoiseSource` that serves each scale's stream and
refuses any other scale) and counts disagreements; the audit is only meaningful
when there are none.

**Neighbours.** A common shift of all queries is absorbed by the threshold
noise and hides bugs, so :func:`opposite_shifts` moves ``up`` queries by ``+1``
and ``down`` queries by ``-1`` (the structure of the counterexamples of Lyu, Su,
Li 2017, Sec. 3): ``D0 = (-1/2, ..., +1/2, ...)``, ``D1 = (+1/2, ..., -1/2, ...)``,
threshold 0, in units of the sensitivity. Outputs are coded ``1`` above,
``0`` below, ``-1`` refused (halted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import CategoricalFamily, EventFamily, ThresholdFamily, combine, row_codes
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse, SparseVectorHalted

__all__ = [
    "ReplayNoise",
    "Scenario",
    "SparseVectorMechanism",
    "SparseVectorModel",
    "crosscheck",
    "opposite_shifts",
    "sparse_vector_case",
    "sparse_vector_family",
]

Sparse = DworkRothSparse | LyuSuLiSparse
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class SparseVectorModel:
    """The decision rule of the online sparse vector, vectorised over trials.

    Attributes:
        threshold_scale: Laplace scale of ``rho``.
        query_scale: Laplace scale of each ``nu`` (0: no query noise).
        cutoff: ``c``, positives before halting.
        fresh_threshold: redraw ``rho`` after each positive (Dwork-Roth "Sparse").
    """

    threshold_scale: float
    query_scale: float
    cutoff: int
    fresh_threshold: bool

    @classmethod
    def of(cls, sv: Sparse) -> SparseVectorModel:
        """The model of a real sparse vector (its scales, cutoff and variant)."""
        return cls(
            threshold_scale=sv.threshold_scale,
            query_scale=sv.query_scale,
            cutoff=sv.cutoff,
            fresh_threshold=isinstance(sv, DworkRothSparse),
        )

    def draw(
        self, trials: int, queries: int, rng: np.random.Generator
    ) -> tuple[FloatArray, FloatArray]:
        """``rho`` (trials, runs) and ``nu`` (trials, queries)."""
        runs = self.cutoff if self.fresh_threshold else 1
        rho = rng.laplace(0.0, self.threshold_scale, (trials, runs))
        nu = rng.laplace(0.0, self.query_scale, (trials, queries)) if self.query_scale > 0 else None
        return rho, np.zeros((trials, queries)) if nu is None else nu

    def decide(
        self, values: FloatArray, thresholds: FloatArray, rho: FloatArray, nu: FloatArray
    ) -> NDArray[np.int8]:
        """Answers (trials, queries): ``1`` above, ``0`` below, ``-1`` refused."""
        trials, queries = nu.shape
        rows = np.arange(trials)
        positives = np.zeros(trials, dtype=np.int64)
        out = np.empty((trials, queries), dtype=np.int8)
        for j in range(queries):
            active = positives < self.cutoff
            run = np.minimum(positives, rho.shape[1] - 1)
            above = active & (values[j] + nu[:, j] >= thresholds[j] + rho[rows, run])
            out[:, j] = np.where(active, above, -1)
            positives += above
        return out


@dataclass(frozen=True, kw_only=True)
class SparseVectorMechanism:
    """``mechanism(values, trials, rng)``: the model's answers to fixed queries."""

    model: SparseVectorModel
    thresholds: tuple[float, ...]

    def __call__(self, values: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """Answers of ``trials`` independent runs on the query values ``values``."""
        v, t = np.asarray(values, dtype=np.float64), np.asarray(self.thresholds)
        return self.model.decide(v, t, *self.model.draw(trials, v.size, rng))


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """Query values on two neighbours (in units of the sensitivity) and thresholds."""

    name: str
    values0: tuple[float, ...]
    values1: tuple[float, ...]
    thresholds: tuple[float, ...]
    up: int
    down: int


def opposite_shifts(up: int, down: int) -> Scenario:
    """``up`` queries moving ``-1/2 -> +1/2`` then ``down`` queries ``+1/2 -> -1/2``."""
    if up < 0 or down < 0 or up + down < 1:
        raise ValueError(f"need up, down >= 0 and at least one query, got {up}, {down}.")
    return Scenario(
        name=f"{up} up / {down} down",
        values0=(-0.5,) * up + (0.5,) * down,
        values1=(0.5,) * up + (-0.5,) * down,
        thresholds=(0.0,) * (up + down),
        up=up,
        down=down,
    )


def sparse_vector_family(scenario: Scenario) -> EventFamily:
    """Answer patterns (Neyman-Pearson sets) and ``#above(down) - #above(up)``."""
    up = scenario.up

    def balance(out: Any) -> FloatArray:
        above = np.asarray(out) == 1
        return (above[:, up:].sum(axis=1) - above[:, :up].sum(axis=1)).astype(np.float64)

    return combine(
        CategoricalFamily(key=lambda o: row_codes(o, low=-1, high=1), name="pattern code"),
        ThresholdFamily(statistic=balance, name="#above(down) - #above(up)"),
    )


def sparse_vector_case(make: Callable[..., Sparse], scenario: Scenario, *, label: str) -> AuditCase:
    """Audit case of the real sparse vector ``make(noise=...)`` on ``scenario``."""
    sv = make(noise=NumpyNoise(seed=0))  # read only: scales, cutoff, privacy event
    scale = sv.sensitivity
    return AuditCase(
        name=f"{label}, {scenario.name}",
        guarantee=f"pure DP, event {sv.privacy_event()}",
        mechanism=SparseVectorMechanism(
            model=SparseVectorModel.of(sv), thresholds=tuple(t * scale for t in scenario.thresholds)
        ),
        dataset0=tuple(v * scale for v in scenario.values0),
        dataset1=tuple(v * scale for v in scenario.values1),
        events=sparse_vector_family(scenario),
        claimed_epsilon=claimed_epsilon(sv.privacy_event(), delta=0.0),
    )


class ReplayNoise:
    """A NoiseSource serving pre-drawn Laplace values, one stream per scale.

    Raises ``AssertionError`` on a scale with no stream, an exhausted stream or
    any Gaussian / uniform draw: the real class asked for noise the model does
    not have.
    """

    def __init__(self, streams: dict[float, FloatArray]) -> None:
        self._streams = {s: list(v.tolist()) for s, v in streams.items()}

    @property
    def name(self) -> str:
        """``"replay"``."""
        return "replay"

    def laplace(self, scale: float, size: int) -> FloatArray:
        """The next ``size`` values of the stream of ``scale``."""
        stream = self._streams.get(float(scale))
        assert stream is not None, f"unexpected Laplace scale {scale}"
        assert len(stream) >= size, f"stream of scale {scale} exhausted"
        return np.array([stream.pop(0) for _ in range(size)], dtype=np.float64)

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        """Not expected from a sparse vector."""
        raise AssertionError("unexpected Gaussian draw")

    def uniform(self, size: int) -> FloatArray:
        """Not expected from a sparse vector."""
        raise AssertionError("unexpected uniform draw")


def crosscheck(
    make: Callable[..., Sparse],
    values: Any,
    thresholds: Any,
    *,
    trials: int,
    rng: np.random.Generator,
) -> int:
    """Trials on which the model and the real class disagree, on identical draws.

    Each trial builds a fresh ``make(noise=ReplayNoise(...))`` and asks it every
    query in turn (``-1`` once it has halted, which it must signal by
    :class:`~pmwcm.mechanisms.sparse_vector.SparseVectorHalted`).
    """
    v, t = np.asarray(values, dtype=np.float64), np.asarray(thresholds, dtype=np.float64)
    model = SparseVectorModel.of(make(noise=NumpyNoise(seed=0)))
    if model.query_scale == model.threshold_scale:
        raise ValueError("equal threshold and query scales: the replay cannot tell them apart.")
    rho, nu = model.draw(trials, v.size, rng)
    expected = model.decide(v, t, rho, nu)
    mismatches = 0
    for i in range(trials):
        sv = make(noise=ReplayNoise({model.threshold_scale: rho[i], model.query_scale: nu[i]}))
        got = []
        for j in range(v.size):
            try:
                got.append(int(sv.above(float(v[j]), threshold=float(t[j]))))
            except SparseVectorHalted:
                got.append(-1)
        mismatches += bool(np.any(np.array(got) != expected[i]))
    return mismatches
