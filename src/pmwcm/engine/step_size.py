"""How far one multiplicative-weights update moves: the paper's fixed step, or a calibrated one.

An update multiplies the hypothesis by ``exp(s f)`` on the query's clique, where
``f = -eta u`` is the round's log-factor at the fixed step ``eta``
(:meth:`~pmwcm.engine.rounds.QueryRound.log_factor`; Ullman 2015, Figure "Online
PMW for CM Queries") and ``s`` scales it:

* ``"fixed"`` -- ``s = 1``, the paper's step (theory mode keeps it: the regret
  lemma and so Theorem "accuracy" are stated for it);
* ``"calibrated"`` -- ``s`` minimises the excess risk of the released answer on
  the updated hypothesis::

      s* = argmin_{0 <= s <= s_max} err(Dhat_s, theta~),
      err(Dhat_s, theta~) = L_{Dhat_s}(theta~) - min_theta L_{Dhat_s}(theta),
      Dhat_s(x) ∝ Dhat_t(x) exp(s f(x_C)).

  The update then moves exactly as far as the released answer ``theta~`` says
  and no further: a fixed ``eta`` tuned for one query's scale overshoots on
  another, and an overshoot moves the hypothesis away from the data on the
  queries nobody asked (issue 15 measured the excess risk of below-threshold
  answers rising after each fixed-step update on Adult). ``s = 0`` is allowed:
  if the released answer is already optimal on the hypothesis nothing moves.

  For a CM query the calibrated tilt moves the **label's conditional only**
  (:func:`conditional_factor`): ``exp(s f)`` is divided, in each cell of the
  query's other attributes, by its mean over the label there, so
  ``Dhat(x_{C - y})``, the features' joint that every other query on those
  attributes reads, stays as it was. A loss reads ``D_C`` as features and
  label, and what a released answer says about the data is how the label
  depends on the features; the joint tilt also reshaped the features' own
  distribution along the gradient's direction. On Adult's smoothed-hinge
  stream one update that fixed its query (excess risk 1.8e-4 to 2e-5) raised
  a panel of 300 other queries by 12% with the joint tilt and lowered it by
  5% with the conditional one (``benchmarks/accuracy/updates.py``). A
  counting query has no label and keeps the joint tilt; so does the fixed
  step, which is the paper's.

**Privacy.** ``s*`` reads the hypothesis (public: a function of released
values) and ``theta~`` (released), never the data, so the calibrated update is
post-processing like the fixed one (docs/design.md section 3). The search is a
deterministic function of those inputs (a fixed grid, then golden-section
refinement with a fixed number of evaluations), so a saved state replays to the
same hypothesis.

Both hypothesis backends work unchanged: ``Dhat_s``'s clique marginal is the
clique table reweighted by ``exp(s f)`` and renormalised (the factor depends on
the clique's cells only), so the search never touches the full histogram, and
the chosen step is applied through the ``Histogram`` protocol's
``reweight_table``.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from pmwcm.engine.rounds import CMRound, QueryRound
from pmwcm.engine.settings import StepRule
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.problem import FloatArray
from pmwcm.kernels.solvers import minimize
from pmwcm.mechanisms.noise import NumpyNoise

#: The largest scale of the fixed step the calibrated search considers.
MAX_STEP_SCALE = 8.0
#: The coarse grid (in units of the fixed step) the search starts from.
_GRID = (0.0, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0, 4.0, MAX_STEP_SCALE)
#: Golden-section refinements after the grid (bracket shrinks by 0.618 each).
_REFINEMENTS = 12
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
#: Oracle runs on the hypothesis that estimate the oracle's mean error.
_SIMULATIONS = 8
#: The oracle-noise quantile a discrepancy must clear before an update moves.
_NOISE_QUANTILE = 0.95


def reweighted_mass(table: CliqueTable, log_factor: FloatArray, scale: float) -> FloatArray:
    """The clique marginal of ``Dhat exp(scale f)``, normalised (log-space safe)."""
    flat = np.ravel(log_factor) * scale
    with np.errstate(divide="ignore"):
        logs = np.log(table.mass) + flat
    top = float(np.max(logs))
    mass = np.exp(logs - top)
    return np.asarray(mass / mass.sum(), dtype=np.float64)


def released_answer_error(
    round_: QueryRound,
    table: CliqueTable,
    mass: FloatArray,
    private: Any,
    *,
    minimiser: Any = None,
) -> float:
    """``err(Dhat, theta~)``: the excess risk of the released answer on a hypothesis marginal.

    ``table`` fixes the cells (and so the compiled problem); ``mass`` the
    weights on them. ``minimiser``, if given, is a certified minimiser of the
    loss on ``mass`` (the hypothesis's own answer ``theta_hat`` on the
    unshifted table, within ``hypothesis_tol``): its value stands in for the
    minimum instead of a fresh solve. For a counting query, the distance of
    its value from the released one.
    """
    if isinstance(round_, CMRound):
        problem = round_.problem_on(table)
        if minimiser is not None:
            lower = problem.objective(np.asarray(minimiser, dtype=np.float64), mass)
        else:
            start = np.asarray(private, dtype=np.float64)
            best = minimize(problem, mass, tol=round_.hypothesis_tol, theta0=start)
            lower = best.value - max(best.gap, 0.0)
        return max(0.0, problem.objective(np.asarray(private, dtype=np.float64), mass) - lower)
    shifted = CliqueTable(shape=table.shape, codes=table.codes, mass=mass)
    return abs(float(round_.hypothesis_answer(shifted)) - float(private))


def label_axis(round_: QueryRound) -> int | None:
    """The position of a CM query's target in its clique; ``None`` for a counting
    query or a problem not compiled from a query (those keep the joint tilt)."""
    if not isinstance(round_, CMRound):
        return None
    query = getattr(round_.problem, "query", None)
    if query is None or query.target not in round_.clique:
        return None
    return round_.clique.index(query.target)


def feature_cells(table: CliqueTable, axis: int) -> NDArray[np.intp]:
    """Each cell's index among the distinct cells of the clique's other attributes
    (the label's axis dropped), for :func:`conditional_factor`."""
    stride = math.prod(table.shape[axis + 1 :])
    block = stride * table.shape[axis]
    codes = np.arange(table.mass.size) if table.codes is None else np.asarray(table.codes)
    _, index = np.unique((codes // block) * stride + codes % stride, return_inverse=True)
    return np.asarray(index, dtype=np.intp).ravel()


def conditional_factor(
    table: CliqueTable,
    log_factor: FloatArray,
    axis: int,
    *,
    index: NDArray[np.intp] | None = None,
) -> FloatArray:
    """``f - log E_Dhat[exp f | x_{C - y}]``: the tilt ``exp(f)`` on the label's
    conditional only.

    ``Dhat exp(f)`` renormalised moves every attribute of the clique, the
    features' joint distribution included, and every other query reads those
    features. Subtracting, in each cell of the other attributes
    ``x_{C - y}``, the log of the tilt's mean over the label there makes the
    update change ``Dhat(y | x_{C - y})`` and leave ``Dhat(x_{C - y})`` as it
    was (marginals of attributes outside the clique still move through their
    dependence on the label). It is still a factor on the clique, so the
    histogram applies it as any other. A feature cell with no mass keeps ``f``
    (nothing there to move). ``index``: :func:`feature_cells` of ``table`` and
    ``axis``, if the caller has it (the step search tilts one table many times).
    """
    flat = np.ravel(np.asarray(log_factor, dtype=np.float64))
    if index is None:
        index = feature_cells(table, axis)
    top = float(flat.max()) if flat.size else 0.0
    mass = np.ravel(table.mass)
    tilted = np.bincount(index, weights=mass * np.exp(flat - top))
    held = np.bincount(index, weights=mass)
    log_mean = np.zeros_like(held)
    fine = (held > 0) & (tilted > 0)
    log_mean[fine] = np.log(tilted[fine] / held[fine]) + top
    lost = (held > 0) & ~fine
    if lost.any():
        # exp(f - top) underflowed in every held cell of these feature cells: shift
        # each by its own largest held f instead (never taken on the benchmarks).
        held_cells = mass > 0
        cell_top = np.full(held.size, -np.inf)
        np.maximum.at(cell_top, index[held_cells], flat[held_cells])
        again = np.bincount(index, weights=mass * np.exp(flat - cell_top[index]))
        log_mean[lost] = np.log(again[lost] / held[lost]) + cell_top[lost]
    return np.asarray(flat - log_mean[index], dtype=np.float64)


def calibrated_scale(
    round_: QueryRound,
    table: CliqueTable,
    log_factor: FloatArray,
    target: Any,
    *,
    keep_axis: int | None = None,
) -> float:
    """``s*``: the scale of ``log_factor`` that minimises ``err(Dhat_s, target)`` (module doc).

    A fixed grid over ``[0, MAX_STEP_SCALE]``, then golden-section search in the
    bracket around the grid's best point; ties go to the smaller step. Reads
    only the hypothesis's table and the (public) target. With ``keep_axis``,
    ``Dhat_s`` is the conditional tilt at scale ``s`` (:func:`conditional_factor`).
    """

    index = None if keep_axis is None else feature_cells(table, keep_axis)

    def error(scale: float) -> float:
        factor = np.ravel(log_factor) * scale
        if keep_axis is not None:
            factor = conditional_factor(table, factor, keep_axis, index=index)
        return released_answer_error(round_, table, reweighted_mass(table, factor, 1.0), target)

    values = [error(s) for s in _GRID]
    best = int(np.argmin(values))  # the first minimum: the smallest step among ties
    low = _GRID[max(best - 1, 0)]
    high = _GRID[min(best + 1, len(_GRID) - 1)]
    best_scale, best_value = _GRID[best], values[best]
    left = high - _GOLDEN * (high - low)
    right = low + _GOLDEN * (high - low)
    left_value, right_value = error(left), error(right)
    for _ in range(_REFINEMENTS):
        if left_value <= right_value:
            high, right, right_value = right, left, left_value
            left = high - _GOLDEN * (high - low)
            left_value = error(left)
        else:
            low, left, left_value = left, right, right_value
            right = low + _GOLDEN * (high - low)
            right_value = error(right)
    for scale, value in ((left, left_value), (right, right_value)):
        if value < best_value:
            best_scale, best_value = scale, value
    return best_scale


@dataclass(frozen=True, kw_only=True)
class PublicContext:
    """The public values the calibrated rule reads besides the hypothesis and the answers.

    Attributes:
        n: the number of records (public, as in the paper).
        noise_level: the oracle's calibrated noise level.
    """

    n: int
    noise_level: float


def expected_oracle_error(
    round_: QueryRound,
    table: CliqueTable,
    context: PublicContext,
    private: Any,
    answer: Any,
    *,
    known_above: float | None = None,
) -> float:
    """``e_or``: the oracle's mean error, simulated on the hypothesis (public).

    The oracle is run :data:`_SIMULATIONS` times on the hypothesis's marginal
    (no data: the hypothesis is public) at the engine's public noise level,
    from a generator seeded by the released answer's bytes, so the value is a
    deterministic function of public values and a replay recomputes it exactly.
    ``answer``, the hypothesis's certified minimiser, is the reference point.

    ``known_above``: the caller only needs to know whether ``e_or`` reaches this
    value. The errors are non-negative, so once the runs so far sum to
    ``_SIMULATIONS * known_above`` the mean is certain to reach it; the rest are
    not run and that lower bound of the mean is returned instead (every draw
    comes from this call's own generator, so nothing else changes). A replay of
    a past update on a hypothesis that already fits it mostly ends after one run.
    """
    seed = int.from_bytes(
        hashlib.sha256(np.asarray(private, dtype=np.float64).tobytes()).digest()[:8], "little"
    )
    noise = NumpyNoise(seed=seed)
    enough = math.inf if known_above is None else _SIMULATIONS * known_above * (1.0 + 1e-9)
    errors = []
    for _ in range(_SIMULATIONS):
        draw = round_.private_answer(
            table, n=context.n, noise_level=context.noise_level, noise=noise
        )
        errors.append(released_answer_error(round_, table, table.mass, draw, minimiser=answer))
        total = math.fsum(errors)
        if total >= enough:
            return total / _SIMULATIONS
    return float(np.mean(errors))


@functools.cache
def _chi2_quantile_per_dimension(dim: int) -> float:
    return float(stats.chi2.ppf(_NOISE_QUANTILE, dim) / dim)


def noise_margin(round_: QueryRound) -> float:
    """``q_d = chi2_{d, 0.95} / d``: how far above its mean an oracle's error may fall by chance.

    Near the optimum the excess risk of ``theta_D + xi`` is a quadratic form of
    Gaussian noise ``xi``, about ``e_or chi2_d / d`` for a ``d``-dimensional
    answer, so a discrepancy below ``q_d e_or`` is within the oracle's own noise
    at the 95% level. ``d`` is the answer's dimension (1 for a counting query).
    """
    dim = round_.problem.dim if isinstance(round_, CMRound) else 1
    return _chi2_quantile_per_dimension(dim)


def shrinkage_weight(discrepancy: float, oracle_error: float, margin: float = 1.0) -> float:
    """``w = max(0, 1 - margin e_or / err(Dhat, theta~))``: positive-part James-Stein.

    In the quadratic model around the optimum, ``theta~ = theta_D + xi`` with
    zero-mean oracle noise ``xi`` independent of ``theta_hat`` (fixed before the
    call), so ``E err(Dhat, theta~) ~ err(D, theta_hat) + e_or``: the excess of
    the discrepancy over the oracle's own error ``e_or`` estimates how far the
    hypothesis's answer really is from the data's optimum, and ``w`` is that
    signal's share of the discrepancy. ``margin`` (:func:`noise_margin`) asks
    the excess to clear the oracle's error at its 95th percentile rather than
    its mean, so an unlucky draw on a right hypothesis moves nothing. The sparse
    vector's verdict is not used as evidence of a large error: at practical
    budgets its noise is many times the errors it separates, so most updates
    are triggered by noise, and for those ``w`` is zero.
    """
    if not discrepancy > 0:
        return 0.0
    return max(0.0, 1.0 - margin * oracle_error / discrepancy)


def step_factor(
    rule: StepRule,
    round_: QueryRound,
    table: CliqueTable,
    answer: Any,
    private: Any,
    *,
    context: PublicContext,
) -> FloatArray:
    """The log-factor the update applies under ``rule``.

    ``"fixed"``: the round's ``-eta u`` towards ``theta~``. ``"calibrated"``: the
    target is shrunk, ``theta_w = theta_hat + w (theta~ - theta_hat)``
    (:func:`shrinkage_weight`), and the step towards it is scaled by
    :func:`calibrated_scale`, so the update makes ``theta_w`` (nearly) optimal
    on the hypothesis and moves no further.
    """
    if rule == "fixed":
        return round_.log_factor(table, answer, private)
    discrepancy = released_answer_error(round_, table, table.mass, private, minimiser=answer)
    weight = 0.0  # without a discrepancy, whatever the oracle's error
    if discrepancy > 0:
        # w = 0 as soon as e_or >= discrepancy / margin: the simulations may stop there.
        margin = noise_margin(round_)
        oracle_error = expected_oracle_error(
            round_, table, context, private, answer, known_above=discrepancy / margin
        )
        weight = shrinkage_weight(discrepancy, oracle_error, margin)
    if weight == 0.0:  # the released answer is within its own noise: nothing to learn
        return np.zeros_like(np.asarray(round_.log_factor(table, answer, private), dtype=float))
    target = _shrunk(answer, private, weight)
    factor = np.asarray(round_.log_factor(table, answer, target), dtype=np.float64)
    axis = label_axis(round_)
    scale = calibrated_scale(round_, table, factor, target, keep_axis=axis)
    if axis is None:
        return factor * scale
    return conditional_factor(table, factor * scale, axis).reshape(factor.shape)


def _shrunk(answer: Any, private: Any, weight: float) -> Any:
    """``answer + weight (private - answer)``, for arrays and for floats."""
    if isinstance(private, float | int):
        return float(answer) + weight * (float(private) - float(answer))
    hat = np.asarray(answer, dtype=np.float64)
    return hat + weight * (np.asarray(private, dtype=np.float64) - hat)
