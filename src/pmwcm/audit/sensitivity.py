"""Searching for neighbouring datasets that move the sparse vector's query the most.

The engine feeds ``q(D) = err_l(D, Dhat) = L_D(theta_hat) - L_D(theta_D)``
(``theta_hat`` minimises ``L_Dhat``) to the sparse vector with sensitivity
``c S / n + tau`` (:meth:`pmwcm.rounds.CMRound.sensitivity`). If some
replace-one neighbours move ``q`` by more, the sparse vector's privacy proof
fails. :func:`max_sensitivity_search` looks for such pairs on the query's
clique marginal (``q`` depends on ``D`` only through it, and replacing one
record moves one count of the marginal from a cell to another) with the
engine's own solver and error computation:

* **datasets** ``D``: random counts (Dirichlet with small concentration, so
  many cells are empty) and all records in one or two cells;
* **hypotheses** ``Dhat``: uniform, point masses on random cells, random
  Dirichlet, and the *mirror* of ``D`` (the target's codes reversed), which
  puts ``theta_hat`` against ``theta_D``: the case where the bound is attained;
* **neighbours**: every move of one record from a non-empty cell to any cell.

A search can only find violations, never prove their absence; the report
gives the largest change seen and its ratio to the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pmwcm.domain import Domain
from pmwcm.engine import EngineSettings
from pmwcm.oracles import NoisyGradientDescent
from pmwcm.queries import CMQuery
from pmwcm.rounds import CMRound
from pmwcm.solvers import SolverError

__all__ = ["SensitivityReport", "max_sensitivity_search"]

FloatArray = NDArray[np.float64]
# The engine's default tau for non-smooth losses (read, not copied).
_NONSMOOTH_TOL = EngineSettings(max_updates=1, learning_rate=1.0, threshold=0.0).nonsmooth_tol


@dataclass(frozen=True, kw_only=True)
class SensitivityReport:
    """The largest change of ``err_l(D, Dhat)`` found over replace-one neighbours.

    Attributes:
        query: the query searched.
        n: records per dataset.
        bound: the sensitivity the engine uses, ``c S / n + tau``.
        max_change: the largest ``|q(D) - q(D')|`` found.
        pairs: neighbour pairs evaluated.
        skipped: pairs (or hypotheses) skipped because the solver could not certify ``tau``.
        worst: a description of the pair that attained ``max_change``.
    """

    query: CMQuery
    n: int
    bound: float
    max_change: float
    pairs: int
    skipped: int
    worst: str

    @property
    def ratio(self) -> float:
        """``max_change / bound`` (a value above 1 is a sensitivity bug)."""
        return self.max_change / self.bound

    @property
    def within_bound(self) -> bool:
        """Whether no pair exceeded the bound."""
        return self.max_change <= self.bound


def _datasets(cells: int, n: int, count: int, rng: np.random.Generator) -> list[FloatArray]:
    out = []
    for i in range(count):
        if i % 3 == 2:
            picks = rng.choice(cells, size=2, replace=False)
            c = np.zeros(cells)
            c[picks[0]] = rng.integers(1, n + 1)
            c[picks[1]] += n - c[picks[0]]
        else:
            c = rng.multinomial(n, rng.dirichlet(np.full(cells, 0.3))).astype(np.float64)
        out.append(c)
    return out


def _hypotheses(
    counts: FloatArray, shape: tuple[int, ...], count: int, rng: np.random.Generator
) -> list[FloatArray]:
    cells = counts.size
    mirror = counts.reshape(shape)[..., ::-1].ravel()
    hyps = [np.full(cells, 1.0 / cells), (mirror + 1e-3) / (mirror + 1e-3).sum()]
    for i in range(count):
        if i % 2 == 0:
            h = np.full(cells, 1e-3)
            h[rng.integers(cells)] += 1.0
        else:
            h = rng.dirichlet(np.full(cells, 0.5))
        hyps.append(h / h.sum())
    return hyps


def max_sensitivity_search(
    query: CMQuery,
    domain: Domain,
    *,
    n: int,
    rng: np.random.Generator,
    datasets: int = 6,
    hypotheses: int = 4,
    sensitivity_factor: float = 2.0,
    tol: float = 1e-8,
    nonsmooth_tol: float = _NONSMOOTH_TOL,
) -> SensitivityReport:
    """Searches replace-one neighbours for the largest change of ``err_l(D, Dhat)``.

    Args:
        query: a catalogue query (compiled on ``domain``).
        domain: a small domain (the search enumerates clique cells squared).
        n: records per dataset.
        rng: the search's random source.
        datasets: random datasets ``D`` tried.
        hypotheses: random hypotheses per dataset (plus uniform and mirror).
        sensitivity_factor: ``c`` of the engine's ``c S / n + tau``.
        tol: the engine's certified solver gap ``tau`` (practical default ``1e-8``).
        nonsmooth_tol: ``tau`` for non-smooth losses, which the engine uses when
            larger than ``tol`` (:meth:`pmwcm.engine.OnlinePMW.cm_round`).
            Points where the solver cannot certify it are skipped (the engine
            refuses those queries) and counted in the report.

    Returns:
        A :class:`SensitivityReport`.
    """
    problem = query.compile(domain)
    if problem.smoothness is None:
        tol = max(tol, nonsmooth_tol)
    round_ = CMRound(problem=problem, oracle=NoisyGradientDescent(), tol=tol,
                     sensitivity_factor=sensitivity_factor, learning_rate=1.0)  # fmt: skip
    shape = tuple(domain.size_of(a) for a in problem.clique)
    cells = int(np.prod(shape))
    best, worst, pairs = 0.0, "none", 0
    minima: dict[bytes, float] = {}
    skipped = 0

    def minimum(counts: FloatArray) -> float:
        key = counts.tobytes()
        if key not in minima:
            w = counts / n
            try:
                minima[key] = problem.objective(round_.solve(w), w)
            except SolverError:
                minima[key] = math.nan
        return minima[key]

    for counts in _datasets(cells, n, datasets, rng):
        moves = [(i, j) for i in np.flatnonzero(counts) for j in range(cells) if i != j]
        neighbours = []
        for i, j in moves:
            c1 = counts.copy()
            c1[i] -= 1
            c1[j] += 1
            neighbours.append((i, j, c1, minimum(c1)))
        base = minimum(counts)
        for h in _hypotheses(counts, shape, hypotheses, rng):
            try:
                theta_hat = round_.solve(h)
            except SolverError:
                skipped += 1
                continue
            q0 = problem.objective(theta_hat, counts / n) - base
            for i, j, c1, m1 in neighbours:
                change = abs(problem.objective(theta_hat, c1 / n) - m1 - q0)
                if math.isnan(change):
                    skipped += 1
                    continue
                pairs += 1
                if change > best:
                    best, worst = change, f"counts {counts.astype(int).tolist()}, move {i}->{j}"
    return SensitivityReport(query=query, n=n, bound=round_.sensitivity(n), max_change=best,
                             pairs=pairs, skipped=skipped, worst=worst)  # fmt: skip
