"""What one query kind contributes to a round of the online PMW engine.

The engine (``pmwcm.engine.online``) runs the paper's loop once per query; what
differs between CM queries (Ullman 2015, Figure "Online Private Multiplicative
Weights for CM Queries") and linear queries (Hardt, Rothblum 2010) is captured
by a :class:`QueryRound`:

* ``hypothesis_answer(Dhat_C)``: the answer computed on the public hypothesis;
* ``error(D_C, answer)``: the sparse vector's query ``q(D)`` (its value on the
  real data, with the hypothesis answer held fixed) and its ``sensitivity(n)``;
  ``error_against(D_C)`` does the part that does not need the answer (a CM
  round's real-data solve) and returns ``answer -> q(D)``, so that part can run
  while the hypothesis answer is being computed;
* ``private_answer(D_C)``: the oracle's answer (privacy event given separately);
* ``log_factor(Dhat_C, hyp, priv)``: the multiplicative-weights factor on the
  clique, ``-eta u(x_C)``.

CM rounds (:class:`CMRound`):

    theta_hat = argmin L_Dhat        (certified solve; public: Dhat is public)
    q(D) = max(0, L_D(theta_hat) - L_D(theta_D)),   theta_D from a fixed-budget solve
    sensitivity = c S / n + tau      (c = 2 by docs/design.md section 3, or the paper's 3)

``theta_D`` comes from :func:`pmwcm.kernels.fixed_budget.fixed_budget_minimize`: a
method whose iteration count is fixed from public constants before the data is
read and whose gap ``L_D(theta_D) - min L_D <= tau`` holds a priori for every
dataset. So the real-data side of a round never raises, never stops early and
never branches on the data; ``q`` lies in ``[err - tau, err]`` for the exact
``err = L_D(theta_hat) - min L_D``, whose sensitivity is ``c S / n``, hence the
``+ tau`` (clipping at 0 is 1-Lipschitz and ``err >= 0``, so it keeps both).
    u(x_C) = <theta_priv - theta_hat, grad l_x(theta_hat)>     (data term only)
    Dhat_{t+1}(x) ∝ exp(-eta u(x_C)) Dhat_t(x)

The sign is ``-eta u``: the paper's figure prints ``+eta u``, a typo; its
Claim "potential drop" shows ``<u, Dhat_t> >= 0 >= <u, D> + err``, so ``u`` is a
loss and weights must move against it (docs/design.md section 3). The regulariser's
gradient is the same for every ``x``, so it shifts ``u`` by a constant, which
the normalisation removes; dropping it keeps ``|u| <= S``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import dp_accounting
import numpy as np

from pmwcm.engine.settings import HYPOTHESIS_SOLVE
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.fixed_budget import FixedSolve, fixed_budget_minimum
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.solvers import minimizer
from pmwcm.mechanisms.noise import NoiseSource, add_laplace
from pmwcm.mechanisms.oracles.base import Oracle, OracleInput


class QueryRound(Protocol):
    """One query, ready to be run through the engine's loop."""

    @property
    def clique(self) -> tuple[str, ...]:
        """The attributes the query depends on."""
        ...

    def hypothesis_answer(self, dhat_marginal: FloatArray | CliqueTable) -> Any:
        """The answer computed on the hypothesis's clique marginal."""
        ...

    def error(self, data_marginal: FloatArray | CliqueTable, answer: Any) -> float:
        """``q(D)``: how badly ``answer`` does on the real data (>= 0 up to tau)."""
        ...

    def error_against(self, data_marginal: FloatArray | CliqueTable) -> Callable[[Any], float]:
        """``answer -> error(data_marginal, answer)``, the answer-free work done first."""
        ...

    def sensitivity(self, n: int) -> float:
        """A bound on ``|q(D) - q(D')|`` for replace-one neighbours."""
        ...

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        """The cost of one private answer at ``noise_level``; raises if it cannot be served."""
        ...

    def private_answer(
        self,
        data_marginal: FloatArray | CliqueTable,
        *,
        n: int,
        noise_level: float,
        noise: NoiseSource,
    ) -> Any:
        """A fresh private answer from the real data (already paid for)."""
        ...

    def log_factor(
        self, dhat_marginal: FloatArray | CliqueTable, answer: Any, private: Any
    ) -> FloatArray:
        """``-eta u(x_C)`` on the clique for the update ``Dhat <- Dhat exp(.)``."""
        ...


@dataclass(frozen=True, kw_only=True, eq=False)
class CMRound:
    """A convex-minimisation query in the engine.

    Attributes:
        problem: the loss on its clique.
        oracle: the single-query oracle ``M'`` for above-threshold rounds.
        hypothesis_tol: the gap requested of the certified solve on the public
            hypothesis (utility only: the sparse vector checks ``theta_hat``
            on the real data whatever its quality).
        data_solve: the real-data solve, planned from public constants; its
            a-priori gap ``tau`` enters the sensitivity.
        sensitivity_factor: ``c`` in ``c S / n + tau``; 2 (docs/design.md) or 3 (paper).
        learning_rate: ``eta S`` -- the step is ``eta = learning_rate / S``, the
            scaling under which the paper's regret lemma reads ``2 S sqrt(log|X|/T)``.
    """

    problem: ConvexProblem
    oracle: Oracle
    hypothesis_tol: float
    data_solve: FixedSolve
    sensitivity_factor: float
    learning_rate: float
    #: the problems compiled on sparse tables' cells, by table (see :meth:`problem_on`).
    _on_cells: dict[int, tuple[CliqueTable, ConvexProblem]] = field(
        default_factory=dict, repr=False
    )

    @property
    def clique(self) -> tuple[str, ...]:
        return self.problem.clique

    @property
    def scale(self) -> float:
        """``S``, the query's scale (it sets the sensitivity and the step ``eta``)."""
        return self.problem.scale

    @property
    def tau(self) -> float:
        """The a-priori gap of the real-data solve (it enters the sensitivity)."""
        return self.data_solve.gap

    def problem_on(self, table: CliqueTable) -> ConvexProblem:
        """The problem evaluated on ``table``'s cells (its weights are ``table.mass``).

        A dense table is read by :attr:`problem` itself (compiled on every cell of
        the clique); a sparse one by the same problem on its occupied cells
        (:meth:`~pmwcm.kernels.queries.GLMProblem.on_cells`), with the same
        constants. Compiled once per table.
        """
        if table.is_dense:
            return self.problem
        cached = self._on_cells.get(id(table))
        if cached is not None and cached[0] is table:
            return cached[1]
        problem = self.problem.on_cells(table.cells())
        if len(self._on_cells) >= 8:
            self._on_cells.clear()
        self._on_cells[id(table)] = (table, problem)
        return problem

    def hypothesis_answer(self, dhat_marginal: FloatArray | CliqueTable) -> FloatArray:
        """``theta_hat``, the certified minimiser on the public hypothesis.

        Never raises: should the certificate not be reached, the best point found
        is still a public function of the hypothesis, and the sparse vector
        measures its excess risk on the real data like any other ``theta_hat``.
        """
        table = as_table(dhat_marginal)
        return minimizer(
            self.problem_on(table),
            table.mass,
            tol=self.hypothesis_tol,
            max_iter=HYPOTHESIS_SOLVE.max_iter,
        )

    def error(self, data_marginal: FloatArray | CliqueTable, answer: FloatArray) -> float:
        """``max(0, L_D(theta_hat) - L_D(theta_D))``, ``theta_D`` from the fixed-budget solve."""
        return self.error_against(data_marginal)(answer)

    def error_against(
        self, data_marginal: FloatArray | CliqueTable
    ) -> Callable[[FloatArray], float]:
        """Runs the fixed-budget solve for ``L_D(theta_D)``; returns :meth:`error`'s
        function of ``theta_hat`` (one objective evaluation).

        Both values are the problem's :func:`~pmwcm.kernels.evaluator.evaluator`
        objective (compiled for a catalogue loss: equal to
        :meth:`ConvexProblem.objective` up to rounding, 1.5 us a call against 4.5 on
        Adult's small cliques), the first computed with the solve
        (:func:`~pmwcm.kernels.fixed_budget.fixed_budget_minimum`); the path is chosen
        by the problem's type, never by the data. The sensitivity audit
        (:mod:`pmwcm.audit.sensitivity`) models ``q`` with the evaluator, apart.
        """
        table = as_table(data_marginal)
        p = self.problem_on(table)
        best, objective = fixed_budget_minimum(p, table.mass, self.data_solve)

        def error(answer: FloatArray) -> float:
            return max(0.0, objective(answer) - best)

        return error

    def sensitivity(self, n: int) -> float:
        """``c S / n + tau`` (Ullman 2015, proof of Theorem "dp"; docs/design.md section 3)."""
        return self.sensitivity_factor * self.problem.scale / n + self.tau

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        self.oracle.check(self.problem)
        return self.oracle.privacy_event(noise_level)

    def private_answer(
        self,
        data_marginal: FloatArray | CliqueTable,
        *,
        n: int,
        noise_level: float,
        noise: NoiseSource,
    ) -> FloatArray:
        table = as_table(data_marginal)
        data = OracleInput(problem=self.problem_on(table), weights=table.mass, n=n)
        return self.oracle.answer(data, noise_level=noise_level, noise=noise)

    def direction(
        self, answer: FloatArray, private: FloatArray, table: CliqueTable | None = None
    ) -> FloatArray:
        """``u(x_C) = <theta_priv - theta_hat, grad l_x(theta_hat)>`` per clique cell.

        For a non-smooth loss the gradient is that of the Moreau surrogate the
        solver minimised (:meth:`ConvexProblem.smoothed` at the solver's ``mu``
        for weights summing to one): ``theta_hat`` is first-order optimal for it
        up to ``hypothesis_tol``, so ``<u, Dhat_t> >= -tau`` for every ``theta_priv``, the
        first half of the Claim "potential drop"; convexity of the surrogate and
        ``f - mu G^2 / 2 <= f_mu <= f`` give the second half up to ``tau / 2``.
        An arbitrary subgradient at a kink (``cell_gradients``) does not: for the
        absolute loss ``<u, Dhat>`` reached -0.26. Its slopes stay within ``G``,
        so ``|u| <= S`` still holds.
        """
        problem = self.problem if table is None else self.problem_on(table)
        return self._gradient_problem(problem).cell_directional(answer, private - answer)

    def _gradient_problem(self, problem: ConvexProblem) -> ConvexProblem:
        """The problem whose gradient defines ``u``: the loss, or its solver surrogate."""
        if problem.smoothness is not None:
            return problem
        try:
            surrogate, unit_slack = problem.smoothed(1.0)
        except NotImplementedError:
            return problem
        if unit_slack <= 0:
            return surrogate
        # The solver's choice (pmwcm.kernels.solvers.minimize):
        # slack(mu) * total = tol / 2, total = 1.
        return problem.smoothed(self.hypothesis_tol / (2.0 * unit_slack))[0]

    def log_factor(
        self, dhat_marginal: FloatArray | CliqueTable, answer: FloatArray, private: FloatArray
    ) -> FloatArray:
        """``-eta u`` on the table's cells: shaped like a dense table, flat on a sparse one."""
        table = as_table(dhat_marginal)
        eta = self.learning_rate / self.problem.scale
        u = self.direction(answer, private, table)
        return (-eta * u).reshape(table.shape) if table.is_dense else -eta * u


def as_table(marginal: FloatArray | CliqueTable) -> CliqueTable:
    """A clique table from a marginal array, in its clique's form (tables pass through)."""
    return marginal if isinstance(marginal, CliqueTable) else CliqueTable.of_marginal(marginal)


@dataclass(frozen=True, kw_only=True, eq=False)
class LinearRound:
    """A counting query in the engine (Hardt, Rothblum 2010; :mod:`pmwcm.kernels.counting`)."""

    clique: tuple[str, ...]
    table: FloatArray
    learning_rate: float
    scale: float = 1.0

    def hypothesis_answer(self, dhat_marginal: FloatArray | CliqueTable) -> float:
        table = as_table(dhat_marginal)
        return float(table.gather(self.table) @ table.mass)

    def error(self, data_marginal: FloatArray | CliqueTable, answer: float) -> float:
        return self.error_against(data_marginal)(answer)

    def error_against(self, data_marginal: FloatArray | CliqueTable) -> Callable[[float], float]:
        table = as_table(data_marginal)
        value = float(table.gather(self.table) @ table.mass)
        return lambda answer: abs(value - answer)

    def sensitivity(self, n: int) -> float:
        return 1.0 / n

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        return dp_accounting.LaplaceDpEvent(noise_level)

    def private_answer(
        self,
        data_marginal: FloatArray | CliqueTable,
        *,
        n: int,
        noise_level: float,
        noise: NoiseSource,
    ) -> float:
        table = as_table(data_marginal)
        true = float(table.gather(self.table) @ table.mass)
        # add_laplace, not true + noise.laplace(...): the float sum leaks (Mironov 2012).
        noisy = add_laplace([true], noise_level / n, noise=noise)[0]
        return float(np.clip(noisy, 0.0, 1.0))

    def log_factor(
        self, dhat_marginal: FloatArray | CliqueTable, answer: float, private: float
    ) -> FloatArray:
        table = as_table(dhat_marginal)
        sign = 1.0 if answer > private else -1.0
        factor = -self.learning_rate * sign * table.gather(self.table)
        return factor.reshape(table.shape) if table.is_dense else factor
