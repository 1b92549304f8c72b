"""The engine's non-privacy settings: the loop's knobs and the solver budgets.

Practical mode (:mod:`pmwcm.engine.practical`) and theory mode
(:mod:`pmwcm.engine.theory`) both build an :class:`EngineSettings`; the engine
only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from pmwcm.kernels.solvers import SolverBudget

AfterHalt = Literal["refuse", "synthetic"]
AFTER_HALT: tuple[AfterHalt, ...] = get_args(AfterHalt)
#: How far an update moves (:mod:`pmwcm.engine.step_size`).
StepRule = Literal["fixed", "calibrated"]
STEP_RULES: tuple[StepRule, ...] = get_args(StepRule)

#: The certified solve on the public hypothesis, smooth losses (utility only).
HYPOTHESIS_SOLVE = SolverBudget(tol=1e-9, max_iter=1000)
#: The same for non-smooth losses, whose Moreau-smoothed solves cannot certify
#: 1e-9 in reasonable time.
NONSMOOTH_HYPOTHESIS_SOLVE = SolverBudget(tol=1e-5, max_iter=1000)
#: Practical mode's hypothesis solve (``PMWConfig.solver_tol``'s default).
PRACTICAL_HYPOTHESIS_SOLVE = SolverBudget(tol=1e-8, max_iter=1000)
#: Theory mode's hypothesis solve.
THEORY_HYPOTHESIS_SOLVE = SolverBudget(tol=1e-10, max_iter=1000)
#: The real-data solve's iteration cap. Not a :class:`SolverBudget`: that solve
#: requests no gap, its gap is planned from public constants
#: (:mod:`pmwcm.kernels.fixed_budget`).
DATA_SOLVE_MAX_ITERATIONS = 100_000


def check_count(name: str, value: object) -> None:
    """Refuses ``value`` unless it is a non-negative ``int`` (``bool`` is not a count).

    Raises:
        ValueError: naming ``name`` and the value given.
    """
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise ValueError(f"{name} must be a non-negative integer, got {name}={value!r}.")


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """The non-privacy knobs of the loop (see :mod:`pmwcm.engine.practical` for defaults).

    Attributes:
        max_updates: ``T``; the sparse vector's cutoff must equal it.
        learning_rate: ``eta S`` for CM rounds.
        threshold: the sparse vector's threshold in units of each query's
            sensitivity (the test is ``q_j / Delta_j`` vs ``threshold``).
        absolute_threshold: if set, a threshold in excess-risk units instead
            (the test is ``q_j / Delta_j`` vs ``absolute_threshold / Delta_j``).
        sensitivity_factor: ``c`` in ``c S / n + tau`` (2 or the paper's 3).
        solver_tol: the certified gap asked of the solve on the public
            hypothesis (smooth losses); utility only.
        nonsmooth_tol: the same for non-smooth losses (hinge, quantile,
            absolute), whose Moreau-smoothed solves cannot certify 1e-9 in
            reasonable time.
        data_gap_fraction: ``rho``: the real-data solve's a-priori gap is
            ``tau = rho c S / n``, so the sparse vector's sensitivity is
            ``(1 + rho) c S / n`` (:mod:`pmwcm.kernels.fixed_budget`).
        max_solver_iterations: the most iterations a real-data solve may take;
            a query that would need more is refused from its public spec.
        after_halt: ``"refuse"`` (the paper) or ``"synthetic"``.
        sweeps: post-processing passes over past updates after each new one.
        sweep_window: how many of the most recent updates (the new one included)
            each sweep revisits; ``None``: all of them. A window makes an oracle
            round's cost independent of how many updates came before it.
        step_rule: ``"fixed"`` (the paper's ``eta``; theory mode) or
            ``"calibrated"`` (the step that minimises the released answer's
            excess risk on the updated hypothesis; :mod:`pmwcm.engine.step_size`).
        refit_iterations: after each update and its sweeps, this many steps of
            the prior's fit from the updated hypothesis back onto the prior's
            released marginals (:mod:`pmwcm.mechanisms.priors.refit`); ``0``
            (or an engine without prior measurements) does none.

    Frozen: derive a variant with :func:`dataclasses.replace`. The solver
    defaults are the named budgets :data:`HYPOTHESIS_SOLVE`,
    :data:`NONSMOOTH_HYPOTHESIS_SOLVE` and :data:`DATA_SOLVE_MAX_ITERATIONS`; every
    hypothesis solve runs at most ``HYPOTHESIS_SOLVE.max_iter`` iterations.
    """

    max_updates: int
    learning_rate: float
    threshold: float
    sensitivity_factor: float = 2.0
    solver_tol: float = HYPOTHESIS_SOLVE.tol
    nonsmooth_tol: float = NONSMOOTH_HYPOTHESIS_SOLVE.tol
    data_gap_fraction: float = 0.1
    max_solver_iterations: int = DATA_SOLVE_MAX_ITERATIONS
    after_halt: AfterHalt = "refuse"
    sweeps: int = 0
    sweep_window: int | None = None
    absolute_threshold: float | None = None
    step_rule: StepRule = "fixed"
    refit_iterations: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.max_updates, int) and self.max_updates >= 1):
            raise ValueError(f"max_updates must be a positive integer, got {self.max_updates!r}.")
        for name in (
            "learning_rate",
            "solver_tol",
            "nonsmooth_tol",
            "sensitivity_factor",
            "data_gap_fraction",
        ):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {name}={value}.")
        if not np.isfinite(self.threshold):
            raise ValueError(f"threshold must be finite, got threshold={self.threshold}.")
        if self.after_halt not in AFTER_HALT:
            raise ValueError(f"after_halt must be one of {AFTER_HALT}, got {self.after_halt!r}.")
        if not (isinstance(self.max_solver_iterations, int) and self.max_solver_iterations >= 1):
            raise ValueError(
                "max_solver_iterations must be a positive integer, got "
                f"max_solver_iterations={self.max_solver_iterations!r}."
            )
        if self.step_rule not in STEP_RULES:
            raise ValueError(f"step_rule must be one of {STEP_RULES}, got {self.step_rule!r}.")
        check_count("refit_iterations", self.refit_iterations)
        if not (isinstance(self.sweeps, int) and self.sweeps >= 0):
            raise ValueError(f"sweeps must be a non-negative integer, got {self.sweeps!r}.")
        if self.sweep_window is not None and not (
            isinstance(self.sweep_window, int) and self.sweep_window >= 1
        ):
            raise ValueError(
                f"sweep_window must be a positive integer or None, got {self.sweep_window!r}."
            )
