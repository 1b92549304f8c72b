"""Searching for neighbouring datasets that move the sparse vector's query the most.

The engine feeds the sparse vector ``q(D) = max(0, L_D(theta_hat) - L_D(theta_D))``
(``theta_hat`` minimises ``L_Dhat``; ``theta_D`` comes from the fixed-budget
real-data solve, whose a-priori gap is ``tau``) divided by
:meth:`pmwcm.engine.rounds.CMRound.sensitivity`, ``c S / n + tau`` with the engine's
tau rule ``tau = rho c S / n`` (``rho`` is
:attr:`~pmwcm.engine.settings.EngineSettings.data_gap_fraction`). If some replace-one
neighbours move ``q`` by more, the sparse vector's privacy proof fails.
:func:`max_sensitivity_search` looks for such pairs on the query's clique
marginal (``q`` depends on ``D`` only through it, and replacing one record
moves one count of the marginal from a cell to another):

* **rounds** are the engine's own: for every dataset the search builds an
  :class:`~pmwcm.engine.online.OnlinePMW` on it (:func:`search_engine`, settings from
  the :class:`~pmwcm.engine.settings.EngineSettings` defaults) and asks its
  :meth:`~pmwcm.engine.online.OnlinePMW.cm_round` for the round, so the plan of the
  real-data solve (:func:`~pmwcm.kernels.fixed_budget.plan_solve`), ``tau`` and the
  bound are whatever the engine uses; the data are read through
  :class:`~pmwcm.mechanisms.private_data.PrivateData`;
* **datasets** ``D``: random counts (Dirichlet with small concentration, so
  many cells are empty) and all records in one or two cells;
* **hypotheses** ``Dhat``: uniform, point masses on random cells, random
  Dirichlet, and the *mirror* of ``D`` (the target's codes reversed), which
  puts ``theta_hat`` against ``theta_D``: the case where the bound is attained;
* **neighbours**: every move of one record from a non-empty cell to any cell.

**Refusals are outputs.** Whatever the engine raises on a dataset (building
the round, e.g. :class:`~pmwcm.kernels.fixed_budget.SolveRefused`, or computing ``q``)
is that dataset's outcome, compared with its neighbour's like any value: two
identical refusals differ by 0, a refusal against a value (or another refusal)
by ``inf``, which no bound covers. Nothing is skipped. A query that the engine
refuses from its public constants is refused on every dataset alike.

**Model and cross-check.** ``q`` of a neighbour is computed from one
fixed-budget solve per dataset, ``max(0, F_D(theta_hat) - F_D(theta_D))``
for every ``theta_hat`` (the engine solves once per call, which would repeat
each solve per hypothesis); on every base dataset and hypothesis the real
:meth:`~pmwcm.engine.rounds.CMRound.error` is called as well and any difference is
counted in :attr:`SensitivityReport.mismatches`, which must be 0.

A search can only find violations, never prove their absence; the report
gives the largest change seen and its ratio to the bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.rounds import CMRound
from pmwcm.engine.settings import EngineSettings
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.evaluator import evaluator
from pmwcm.kernels.fixed_budget import fixed_budget_minimize
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PLDAccountant, PrivacyLedger
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import NoisyGradientDescent
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import LyuSuLiSparse

__all__ = [
    "EngineBuild",
    "SensitivityReport",
    "data_of",
    "engine_settings",
    "max_sensitivity_search",
    "search_engine",
]

FloatArray = NDArray[np.float64]
Outcome = float | str
"""What the engine produced on one dataset: ``q``, or the name of what it raised."""

EngineBuild = Callable[[PrivateData, EngineSettings], OnlinePMW]
"""``build(data, settings) -> OnlinePMW``: the engine whose rounds are searched."""


def engine_settings(**overrides: Any) -> EngineSettings:
    """The :class:`~pmwcm.engine.settings.EngineSettings` defaults, with ``overrides``.

    The loop-only fields (``max_updates``, ``learning_rate``, ``threshold``) do
    not enter the sparse vector's query and are set to 1, 1, 0; every field that
    does (``sensitivity_factor``, ``data_gap_fraction``, ``max_solver_iterations``,
    the hypothesis tolerances) is the dataclass default unless overridden.

    >>> s = engine_settings(sensitivity_factor=1.0)
    >>> s.sensitivity_factor, s.data_gap_fraction == EngineSettings.data_gap_fraction
    (1.0, True)
    """
    return replace(EngineSettings(max_updates=1, learning_rate=1.0, threshold=0.0), **overrides)


def search_engine(data: PrivateData, settings: EngineSettings) -> OnlinePMW:
    """A fresh engine on ``data`` (the rounds it compiles are what the search measures).

    The sparse vector, oracle, ledger and noise are never used by
    :meth:`~pmwcm.engine.online.OnlinePMW.cm_round`; they are there because the
    engine needs them to exist.
    """
    noise = NumpyNoise(seed=0)
    return OnlinePMW(
        data,
        settings=settings,
        sparse_vector=LyuSuLiSparse.from_total(1.0, settings.max_updates, noise=noise),
        oracle=NoisyGradientDescent(),
        oracle_noise_level=1.0,
        ledger=PrivacyLedger(epsilon=math.inf, delta=0.0, accountant=PLDAccountant()),
        noise=noise,
    )


@dataclass(frozen=True, kw_only=True)
class SensitivityReport:
    """The largest change of ``q(D)`` found over replace-one neighbours.

    Attributes:
        query: the query searched.
        n: records per dataset.
        bound: the sensitivity the engine uses, ``c S / n + tau`` (``inf`` if the
            engine refused the query on every dataset: then nothing depends on
            the data).
        tau: the engine's a-priori gap of the real-data solve (``nan`` if refused).
        max_change: the largest ``|q(D) - q(D')|`` found (``inf`` for a refusal on
            one side only, or different refusals).
        pairs: (neighbour pair, hypothesis) combinations evaluated; none is skipped.
        refusals: those in which the engine raised on at least one side.
        mismatches: base datasets and hypotheses where the search's ``q`` differed
            from the engine's :meth:`~pmwcm.engine.rounds.CMRound.error` (must be 0).
        worst: a description of the pair that attained ``max_change``.
    """

    query: CMQuery
    n: int
    bound: float
    tau: float
    max_change: float
    pairs: int
    refusals: int
    mismatches: int
    worst: str

    @property
    def ratio(self) -> float:
        """``max_change / bound`` (a value above 1 is a sensitivity bug)."""
        return self.max_change / self.bound if self.max_change > 0 else 0.0

    @property
    def within_bound(self) -> bool:
        """Whether no pair exceeded the bound and the search agreed with the engine."""
        return self.max_change <= self.bound and self.mismatches == 0


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


def data_of(counts: FloatArray, domain: Domain, clique: tuple[str, ...]) -> PrivateData:
    """A dataset of ``n = sum(counts)`` records whose clique marginal is ``counts / n``.

    ``counts`` are per clique cell (C order); the records' other attributes are
    all 0. Given as a histogram with its ``n`` (:class:`~pmwcm.mechanisms.private_data.PrivateData`
    reads marginals from it as from records), so ``n`` may be large.

    >>> d = Domain.from_sizes({"a": 2, "z": 3, "y": 2})
    >>> data = data_of(np.array([0.0, 2.0, 1.0, 0.0]), d, ("a", "y"))
    >>> (data.n, data.marginal(("a", "y")).ravel().tolist())
    (3, [0.0, 0.6666666666666666, 0.3333333333333333, 0.0])
    """
    axes = domain.axes(clique)
    shape = tuple(domain.size_of(a) for a in clique)
    table = np.zeros(domain.shape)
    at = tuple(slice(None) if i in axes else 0 for i in range(len(domain)))
    table[at] = np.transpose(counts.reshape(shape), np.argsort(axes))
    return PrivateData(domain=domain, n=int(counts.sum()), histogram=DenseHistogram(domain, table))


@dataclass
class _View:
    """One dataset as the engine sees it: its round (or what building it raised)."""

    data: PrivateData
    round: CMRound | str
    best: FloatArray | None = None  # the fixed-budget solve, once per dataset


def _raised(err: Exception) -> str:
    return f"raised {type(err).__name__}"


class _Search:
    def __init__(
        self, query: CMQuery, domain: Domain, n: int, settings: EngineSettings, build: EngineBuild
    ) -> None:
        self.query, self.domain, self.n = query, domain, n
        self.settings, self.build = settings, build
        self.views: dict[bytes, _View] = {}
        self.mismatches = 0

    def view(self, counts: FloatArray) -> _View:
        key = counts.tobytes()
        if key not in self.views:
            data = data_of(counts, self.domain, self.query.clique)
            try:
                round_: CMRound | str = self.build(data, self.settings).cm_round(self.query)
            except Exception as err:  # a refusal is an outcome, never skipped
                round_ = _raised(err)
            self.views[key] = _View(data=data, round=round_)
        return self.views[key]

    def modelled(self, view: _View, theta_hat: FloatArray) -> Outcome:
        """``q`` from the dataset's one fixed-budget solve (what ``error`` computes).

        Only :class:`~pmwcm.engine.rounds.CMRound`'s own ``error`` is modelled; a round of
        any other type (a subclass overriding it) is asked directly.
        """
        if isinstance(view.round, str):
            return view.round
        if type(view.round).error is not CMRound.error:
            return self._asked(view, theta_hat)
        p = view.round.problem
        weights = view.data.marginal(view.round.clique).ravel()
        if view.best is None:
            view.best = fixed_budget_minimize(p, weights, view.round.data_solve)
        objective = evaluator(p, weights).objective  # the round's arithmetic for F
        return max(0.0, objective(theta_hat) - objective(view.best))

    def real(self, view: _View, theta_hat: FloatArray) -> Outcome:
        """The engine's own ``q``; counts a mismatch with :meth:`modelled`."""
        value = self._asked(view, theta_hat)
        self.mismatches += value != self.modelled(view, theta_hat)
        return value

    @staticmethod
    def _asked(view: _View, theta_hat: FloatArray) -> Outcome:
        if isinstance(view.round, str):
            return view.round
        try:
            return view.round.error(view.data.marginal(view.round.clique), theta_hat)
        except Exception as err:  # a refusal is an outcome, never skipped
            return _raised(err)


def _change(a: Outcome, b: Outcome) -> float:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b)
    return 0.0 if a == b else math.inf


def max_sensitivity_search(
    query: CMQuery,
    domain: Domain,
    *,
    n: int,
    rng: np.random.Generator,
    datasets: int = 6,
    hypotheses: int = 4,
    settings: EngineSettings | None = None,
    sensitivity_factor: float | None = None,
    build: EngineBuild = search_engine,
) -> SensitivityReport:
    """Searches replace-one neighbours for the largest change of the engine's ``q(D)``.

    Args:
        query: a catalogue query (compiled on ``domain``).
        domain: a small domain (the search enumerates clique cells squared).
        n: records per dataset.
        rng: the search's random source.
        datasets: random datasets ``D`` tried.
        hypotheses: random hypotheses per dataset (plus uniform and mirror).
        settings: the engine's settings (default :func:`engine_settings`).
        sensitivity_factor: overrides ``c`` in ``settings`` (a wrong ``c`` must be caught).
        build: ``build(data, settings) -> OnlinePMW`` (default :func:`search_engine`).

    Returns:
        A :class:`SensitivityReport`.
    """
    settings = settings or engine_settings()
    if sensitivity_factor is not None:
        settings = replace(settings, sensitivity_factor=sensitivity_factor)
    search = _Search(query, domain, n, settings, build)
    problem = query.compile(domain)
    shape = tuple(domain.size_of(a) for a in problem.clique)
    cells = int(np.prod(shape))
    best, worst, pairs, refusals = 0.0, "none", 0, 0
    bound, tau = math.inf, math.nan
    for counts in _datasets(cells, n, datasets, rng):
        base = search.view(counts)
        moves = [(i, j) for i in np.flatnonzero(counts) for j in range(cells) if i != j]
        neighbours = []
        for i, j in moves:
            c1 = counts.copy()
            c1[i] -= 1
            c1[j] += 1
            neighbours.append((i, j, search.view(c1)))
        planned = [v.round for v in (base, *(nb[2] for nb in neighbours))]
        reference = next((r for r in planned if isinstance(r, CMRound)), None)
        if reference is not None:
            bound, tau = reference.sensitivity(n), reference.tau
        for h in _hypotheses(counts, shape, hypotheses, rng):
            # theta_hat is public (a function of Dhat): any round of the query computes it.
            theta_hat = (
                reference.hypothesis_answer(h.reshape(shape))
                if reference is not None
                else np.zeros(problem.dim)
            )
            q0 = search.real(base, theta_hat)
            for i, j, view in neighbours:
                q1 = search.modelled(view, theta_hat)
                change = _change(q0, q1)
                pairs += 1
                refusals += isinstance(q0, str) or isinstance(q1, str)
                if change > best:
                    best = change
                    worst = f"counts {counts.astype(int).tolist()}, move {i}->{j}: {q0} vs {q1}"
    return SensitivityReport(
        query=query,
        n=n,
        bound=bound,
        tau=tau,
        max_change=best,
        pairs=pairs,
        refusals=refusals,
        mismatches=search.mismatches,
        worst=worst,
    )
