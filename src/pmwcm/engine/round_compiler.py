"""Compiling a query into the round the engine runs, from public inputs only, once.

A CM query's round (:class:`~pmwcm.engine.rounds.CMRound`) holds its compiled
problem, the hypothesis solve's tolerance and the planned real-data solve
(:func:`~pmwcm.kernels.fixed_budget.plan_solve`, for the gap
``tau = rho c S / n``): all of it reads the spec, the domain, ``n`` and the
settings, never the data. :class:`RoundCompiler` compiles each problem once and
keeps the last few (:data:`ROUND_CACHE_ENTRIES`), so that a query is compiled
once however often it is planned, answered or certified.
"""

from __future__ import annotations

import math

import numpy as np

from pmwcm.engine.rounds import CMRound, LinearRound
from pmwcm.engine.settings import EngineSettings
from pmwcm.engine.state import query_key
from pmwcm.errors import Refused
from pmwcm.kernels.clique_table import MAX_CLIQUE_CELLS, is_dense
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fixed_budget import plan_solve
from pmwcm.kernels.lru import LRUCache
from pmwcm.kernels.queries import MAX_RADIUS, CMQuery, QueryError
from pmwcm.mechanisms.oracles.base import Oracle

__all__ = ["ROUND_CACHE_ENTRIES", "RadiusRefused", "RoundCompiler", "check_radius"]

#: Compiled rounds kept. Few: a query is planned and answered back to back, a
#: released one is answered from the released answers, and a round holds its
#: problems compiled on the tables it has read (megabytes on a full-resolution
#: clique; 256 entries kept 2.8 GB alive over 10,000 Adult queries).
ROUND_CACHE_ENTRIES = 16


class RadiusRefused(Refused, ValueError):
    """A query whose radius is over the cap (refused before anything is spent)."""


def check_radius(query: CMQuery) -> None:
    """Refuses a radius over :data:`~pmwcm.kernels.queries.MAX_RADIUS`, from the spec.

    The one cap the command line, the library and the service apply: every noise
    scale grows with ``R``, and past it the real-data solve's objective range leaves
    float64's resolution for common losses.
    """
    if query.radius > MAX_RADIUS:
        raise RadiusRefused(
            f"radius must be at most {MAX_RADIUS:g}, got radius={query.radius:g}: every "
            "noise scale grows with the radius, and beyond it the answers carry no signal."
        )


class RoundCompiler:
    """Compiles queries into rounds for one engine's domain, ``n``, settings and oracle.

    Args:
        domain: the data universe.
        n: the number of records (public).
        settings: the engine's settings.
        oracle: the engine's single-query oracle (each CM round calls it).
    """

    def __init__(self, *, domain: Domain, n: int, settings: EngineSettings, oracle: Oracle) -> None:
        self._domain, self._n, self._settings, self._oracle = domain, n, settings, oracle
        self._rounds: LRUCache[str, CMRound] = LRUCache(maxsize=ROUND_CACHE_ENTRIES)

    def __len__(self) -> int:
        """How many compiled rounds are kept."""
        return len(self._rounds)

    def linear_round(self, query: LinearQuery) -> LinearRound:
        """The round of a counting query (Hardt-Rothblum PMW on the same loop)."""
        return LinearRound(
            clique=query.clique,
            table=query.table(self._domain),
            learning_rate=self._settings.learning_rate,
        )

    def cm_round(self, query: CMQuery) -> CMRound:
        """The round of ``query``, compiled once per :func:`query_key` and coordinate order.

        The round depends on the canonical spec, the order, the domain, ``n`` and the
        settings alone. A query in another coordinate order than its canonical form
        (the engine's door compiles the canonical one) is the same problem permuted:
        it gets a round of its own.

        Raises:
            QueryError: the spec is invalid for this domain.
            SolveRefused: the query's constants need more than
                ``max_solver_iterations`` for a bounded real-data solve.
        """
        key = query_key(query, self._domain)  # memoised on the query (canonical_json)
        order = query.coordinate_order(self._domain)
        if order is not None:
            key = f"{key} in order {order}"
        cached = self._rounds.get(key)
        if cached is not None:
            return cached
        round_ = self._compile(query)
        self._rounds.put(key, round_)
        return round_

    def _compile(self, query: CMQuery) -> CMRound:
        """:meth:`cm_round` without the cache."""
        settings = self._settings
        shape = self._domain.sizes_of(query.clique)
        if math.prod(shape) >= MAX_CLIQUE_CELLS:
            raise QueryError(
                f"The query's clique {list(query.clique)} has {math.prod(shape):.3g} cells; "
                f"at most {MAX_CLIQUE_CELLS:.3g} can be addressed. Use fewer or coarser attributes."
            )
        # A large clique is never enumerated: its tables are sparse and the
        # problem is compiled on their cells (CMRound.problem_on); here only its constants.
        cells = None if is_dense(shape) else np.zeros((0, len(shape)), dtype=np.int64)
        problem = query.compile(self._domain, cells=cells)
        hypothesis_tol = settings.solver_tol
        if problem.smoothness is None:
            hypothesis_tol = max(hypothesis_tol, settings.nonsmooth_tol)
        tau = settings.data_gap_fraction * settings.sensitivity_factor * problem.scale / self._n
        return CMRound(
            problem=problem,
            oracle=self._oracle,
            hypothesis_tol=hypothesis_tol,
            data_solve=plan_solve(problem, gap=tau, max_iterations=settings.max_solver_iterations),
            sensitivity_factor=settings.sensitivity_factor,
            learning_rate=settings.learning_rate,
        )
