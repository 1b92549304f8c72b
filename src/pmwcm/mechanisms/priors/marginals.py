"""A private starting hypothesis: noisy low-order marginals fitted into a histogram.

The paper starts from the uniform histogram. Every query on real data shares
its low-order structure (each attribute's frequency, each pair's correlation),
and the online algorithm's ``T`` updates are a poor way to learn it one query
at a time. So, as MST/AIM do (McKenna et al. 2021, 2022), we *measure* the
1- and 2-way marginals once with the Gaussian mechanism and fit a histogram to
them; the online engine then starts from that histogram and spends its updates
on what the marginals miss (docs/design.md section 6, "a promising practical design").

**Measurement and its guarantee.** For cliques ``C_1..C_K`` we release
``y_k = D_{C_k} + N(0, sigma^2 I)``. Under replace-one, one record moves mass
``1/n`` from one cell of each marginal to another, so the concatenated vector
of all ``K`` marginals has L2 sensitivity ``sqrt(2K) / n``. With ``sigma = m
sqrt(2K) / n`` the release is one Gaussian mechanism with noise multiplier
``m`` (``(1/m)``-GDP): its event is ``GaussianDpEvent(m)``, charged to the
engine's ledger before any noise is drawn.

**Fitting (post-processing, free).** Entropic mirror descent on the simplex
minimising ``sum_k ||Dhat_{C_k} - y_k||^2 / 2`` (the multiplicative-weights fit
of MWEM; Hardt, Ligett, McSherry 2012), which keeps the histogram in the
maximum-entropy family of the measured cliques. It touches only the released
``y_k``. (L-BFGS on the clique potentials was tried and converged slower.)
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import dp_accounting
import numpy as np

from pmwcm.kernels.clique_scale import broadcast_factor
from pmwcm.kernels.dense_marginal import dense_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, FloatArray, Histogram
from pmwcm.mechanisms.noise import NoiseSource, add_gaussian
from pmwcm.mechanisms.private_data import PrivateData

State = TypeVar("State")
#: The backend a :class:`PriorRelease` was fitted on.
Fitted = TypeVar("Fitted", bound=Histogram, covariant=True)

#: A fit whose loss is above this multiple of :func:`noise_energy` after its
#: iteration budget goes on (:func:`entropic_descent`): Morozov's ``tau``, which
#: must exceed 1 (the data's own marginals sit at 1 in expectation).
DISCREPANCY = 2.0
#: ... for up to this many times its budget in all (a precise prior at n = 10^7
#: needs about 60x on Adult's 2^14 cells).
CONTINUATION = 100


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """A released noisy marginal: ``values = D_C + N(0, sigma^2)`` on ``clique``."""

    clique: tuple[str, ...]
    values: FloatArray
    sigma: float


@dataclass(frozen=True)
class PriorRelease(Generic[Fitted]):
    """A paid prior: the fitted starting hypothesis and the released marginals behind it.

    The measurements are public once released; the engine keeps them to pull
    its hypothesis back onto them after each update (:mod:`pmwcm.mechanisms.priors.refit`).
    """

    hypothesis: Fitted
    measurements: tuple[Measurement, ...]


def pairwise_cliques(domain: Domain, *, order: int = 2) -> list[tuple[str, ...]]:
    """All cliques of ``order`` attributes (and, below them, nothing else: lower
    orders are implied by the higher ones' marginals)."""
    if not 1 <= order <= len(domain):
        raise ValueError(f"order must lie in [1, {len(domain)}], got order={order}.")
    return [tuple(c) for c in itertools.combinations(domain.names, order)]


def measurement_event(noise_multiplier: float) -> dp_accounting.DpEvent:
    """The privacy event of one :func:`measure_marginals` call."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ValueError(f"noise_multiplier must be positive, got {noise_multiplier}.")
    return dp_accounting.GaussianDpEvent(noise_multiplier)


def measure_marginals(
    data: PrivateData,
    cliques: Sequence[tuple[str, ...]],
    *,
    noise_multiplier: float,
    noise: NoiseSource,
) -> list[Measurement]:
    """Releases every clique's marginal with Gaussian noise (see the module docstring).

    The caller must have charged :func:`measurement_event` to its ledger first.
    """
    measurement_event(noise_multiplier)
    if not cliques:
        raise ValueError("measure_marginals needs at least one clique.")
    sigma = noise_multiplier * math.sqrt(2 * len(cliques)) / data.n
    tables = [data.marginal(c) for c in cliques]
    # add_gaussian, not table + noise.gaussian(...): the float sum leaks (Mironov 2012).
    noisy = add_gaussian(np.concatenate([t.ravel() for t in tables]), sigma, noise=noise)
    out, offset = [], 0
    for clique, table in zip(cliques, tables, strict=True):
        values = noisy[offset : offset + table.size].reshape(table.shape)
        offset += table.size
        out.append(Measurement(clique=tuple(clique), values=values, sigma=sigma))
    return out


def entropic_descent(
    start: State,
    measurements: Sequence[Measurement],
    *,
    marginals: Callable[[State], list[FloatArray]],
    moved: Callable[[State, list[FloatArray], float], State],
    iterations: int,
    step: float = 1.0,
    rtol: float = 1e-5,
    continuation: int | None = None,
) -> State:
    """Entropic mirror descent onto ``measurements``, for any representation of ``Dhat``.

    Minimises ``L(Dhat) = sum_k ||Dhat_{C_k} - y_k||^2 / 2`` over the simplex with
    ``Dhat <- Dhat exp(-s g) / Z``, ``g(x) = sum_k (Dhat_{C_k} - y_k)(x_{C_k})``
    (the gradient of ``L``), growing ``s`` by 10% after an accepted step and
    halving it (and undoing the step) when ``L`` increases. Stops after
    ``iterations`` or when ``L`` stalls (``rtol``, read over a window: below).

    **Unless the fit is visibly short of its measurements** (Morozov's
    discrepancy principle). The data's own marginals would leave the residual
    ``E L(D) = sum_k |C_k| sigma_k^2 / 2`` (:func:`noise_energy`), the noise's
    expected energy. A fit still above :data:`DISCREPANCY` times that has not
    used what the measurements say. It then goes on, up to ``continuation``
    (default :data:`CONTINUATION`) times ``iterations`` in all, until its
    residual is within that bound. The step follows the same rule; ``rtol``
    no longer stops it (near the optimum of precise measurements the descent
    is slow but still far from them). A fit that ends within the bound is
    returned as it is, unchanged.

    ``rtol`` is read over the last :data:`STALL_WINDOW` accepted steps, never one:
    the loss then fell by at most ``STALL_WINDOW * rtol`` relative. A single flat
    step is no sign of a stall (mirror descent's steps are uneven), and at
    eps = 4 on full-resolution Adult, where the fit is inside the bound within a
    step or two, a one-step test ended fits after 60 of 300 iterations, 7% above
    the noise, with the loss still falling 0.1% a step. Those priors answered
    4-5x worse (``benchmarks/accuracy/prior_support.py``).

    Only public values decide this: the released ``y_k`` and their ``sigma``.
    With a large ``n`` the noise is small and a fit of a few hundred iterations
    stops far above it. On Adult resampled to 10^6 records at eps = 1, the
    300-iteration fit ends 100x above the bound. Going on to within it
    (2,600-2,900 iterations) cut a 300-query panel's mean excess risk 33-40x.
    At 10^7 it takes about 17,000 iterations (13 s on 2^14 cells), and the
    panel falls 30x more than where a 10x cap and ``rtol`` had stopped it. At
    eps = 4 on the 39,073-row split (2.5-2.9x above the bound) it cut the
    panel 20-34%. On that split at eps <= 1, and on the full-resolution support
    priors, the fit already ends within the bound
    (``benchmarks/accuracy/updates.py``, docs/design.md section 6).

    ``marginals(state)`` gives ``Dhat_{C_k}`` for every measurement and
    ``moved(state, residuals, s)`` the state after one step (a new object): the
    dense fit (:func:`fit_histogram`) and the support fit
    (:func:`pmwcm.mechanisms.priors.support.fit_support`) are this loop with two
    representations, and agree when the support is all of ``X``.
    """
    if iterations < 0:
        raise ValueError(f"iterations must be non-negative, got iterations={iterations}.")
    if not measurements:
        raise ValueError("the fit needs at least one measurement.")

    def residuals(state: State) -> tuple[float, list[FloatArray]]:
        tables = marginals(state)
        res = [t - m.values for t, m in zip(tables, measurements, strict=True)]
        return 0.5 * sum(float((r * r).sum()) for r in res), res

    bound = DISCREPANCY * noise_energy(measurements)
    limit = (CONTINUATION if continuation is None else continuation) * iterations
    state = start
    current, res = residuals(state)
    # The loss after the last STALL_WINDOW accepted steps, and the one before them.
    accepted = deque([current], maxlen=STALL_WINDOW + 1)
    done = 0
    while done < limit:
        trial = moved(state, res, step)
        value, trial_res = residuals(trial)
        done += 1
        if value <= current:
            state, current, res = trial, value, trial_res
            accepted.append(current)
            step *= 1.1
            # rtol ends the budget early only for a fit within the bound; past the
            # budget only the bound stops the fit (a slow but steady descent there
            # is still short of what the measurements say).
            stalled = (
                len(accepted) > STALL_WINDOW
                and accepted[0] - current <= STALL_WINDOW * rtol * current
            )
            if stalled and done <= iterations and current <= bound:
                break
        else:
            step *= 0.5
            if step < 1e-10:
                break
        if done >= iterations and current <= bound:
            break  # the budget is spent and the fit is within the noise
    return state


#: Accepted steps over which :func:`entropic_descent` reads ``rtol``.
STALL_WINDOW = 10


def noise_energy(measurements: Sequence[Measurement]) -> float:
    """``sum_k |C_k| sigma_k^2 / 2``: the fit's loss ``L`` at the data's own marginals,
    in expectation over the measurement noise (the discrepancy principle's scale)."""
    return 0.5 * sum(m.values.size * m.sigma**2 for m in measurements)


#: From this many cells on (Adult's binary 2^14 included), a fit on 1- and 2-way
#: cliques runs in :class:`_PairwiseFit`'s matrix form (two passes per marginal
#: sweep, one per step, whatever the clique count); Adult's default fit takes 0.27 s
#: of CPU instead of 0.90 s.
PAIRWISE_MIN_CELLS = 2**12


def fit_histogram(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    iterations: int = 300,
    step: float = 1.0,
    rtol: float = 1e-5,
    start: DenseHistogram | None = None,
    continuation: int | None = None,
) -> DenseHistogram:
    """:func:`entropic_descent` on a dense histogram (post-processing only).

    Below :data:`PAIRWISE_MIN_CELLS`, or with a clique of three or more
    attributes, each iteration is ``2K`` streaming passes over the histogram.
    Otherwise :class:`_PairwiseFit` computes all ``K`` marginals of a trial
    step in one blocked pass and writes an accepted step in another, in one
    histogram-sized buffer (the same iterates up to floating-point summation
    order).
    """
    axes = [domain.axes(m.clique) for m in measurements]
    if start is not None:
        p = start.to_array()
    else:  # DenseHistogram.uniform's values, bit for bit, without its second array
        p = np.full(domain.shape, 1.0 / domain.size)
        p /= p.sum()
    if domain.size >= PAIRWISE_MIN_CELLS and len(domain) >= 2 and all(len(a) <= 2 for a in axes):
        pairwise = _PairwiseFit(domain, axes, p)
        last = entropic_descent(
            _Iterate(),
            measurements,
            marginals=pairwise.marginals,
            moved=pairwise.moved,
            iterations=iterations,
            step=step,
            rtol=rtol,
            continuation=continuation,
        )
        return DenseHistogram.from_normalized(domain, pairwise.result(last), copy=False)

    def marginals(q: FloatArray) -> list[FloatArray]:
        return [dense_marginal(q, ax) for ax in axes]

    def moved(q: FloatArray, res: list[FloatArray], s: float) -> FloatArray:
        g = np.zeros(domain.shape)
        for ax, r in zip(axes, res, strict=True):
            g += broadcast_factor(domain.shape, ax, r)
        z = -s * g
        out = q * np.exp(z - z.max())
        return out / out.sum()

    fitted = entropic_descent(
        p,
        measurements,
        marginals=marginals,
        moved=moved,
        iterations=iterations,
        step=step,
        rtol=rtol,
        continuation=continuation,
    )
    return DenseHistogram(domain, fitted)


#: Cells per block of :class:`_PairwiseFit`'s streaming passes: a block's exponent
#: (512 KiB) stays in cache, and no pass needs a second histogram-sized array.
FIT_BLOCK_CELLS = 2**16


@dataclass
class _Iterate:
    """An iterate of :class:`_PairwiseFit`: the fit's one buffer ``Q``, times a step
    not yet written into it.

    The step is ``Q exp(F_rows F_cols' - m_b) c_b`` on each row block ``b``:
    ``F_rows F_cols' = -s g`` is the gradient step, ``m_b`` the block's maximum
    (so ``exp`` cannot overflow) and ``c_b = exp(m_b - max_b m_b) / Z`` the block's
    share of the normalisation. ``shifts`` and ``scales`` (``m_b``, ``c_b``) are
    set by the pass that evaluates the step's marginals.
    """

    factors: tuple[FloatArray, FloatArray] | None = None
    shifts: FloatArray | None = None
    scales: FloatArray | None = None


class _PairwiseFit:
    """The dense fit's marginals and steps for 1- and 2-way cliques, as matrix products.

    The histogram is viewed as a matrix ``Q`` (rows: the leading attributes
    ``L``, columns: the others ``R``, split near ``sqrt|X|``). With ``E_L``, ``E_R``
    the one-hot indicators of every attribute value on each side:

    * a cross pair's marginal is a block of ``E_L' (Q E_R)``, a pair within ``L``
      (or one attribute) a marginal of the row sums ``Q 1`` (the blocks of
      ``Q E_R`` summed), one within ``R`` of the column sums ``1' Q``;
    * the step's gradient ``g(x) = sum_k r_k(x_{C_k})`` is ``[E_L W, g_L, 1] [E_R, 1,
      g_R]'`` with ``W`` the cross residuals, ``g_L``/``g_R`` the one-sided ones
      broadcast: one matrix product of two thin factors.

    A trial step is never written out. Its marginals are taken block by block of
    rows (:data:`FIT_BLOCK_CELLS`): the block's ``exp(-s g)``, times ``Q``, summed
    into ``Q E_R``, ``1' Q`` and ``Z`` while in cache. An accepted step is written
    into ``Q`` in place when the next step is formed (the same block products
    again), and a rejected one is dropped. So the fit holds one histogram, not
    the state and the trial: at 2^24 cells its peak memory is about one
    histogram plus the thin factors, for one more ``exp`` pass per accepted step.
    """

    def __init__(self, domain: Domain, axes: list[tuple[int, ...]], start: FloatArray) -> None:
        shape = domain.shape
        split, rows = 1, shape[0]
        while split < len(shape) - 1 and rows * shape[split] <= math.isqrt(domain.size):
            rows *= shape[split]
            split += 1
        self.shape = shape
        self.split = split
        self.rows, self.columns = rows, domain.size // rows
        self.left_shape, self.right_shape = shape[:split], shape[split:]
        self.offsets = np.concatenate([[0], np.cumsum(shape)]).astype(int)
        self.left_width = int(self.offsets[split])
        self.right_width = int(self.offsets[-1]) - self.left_width
        self.left_onehot = self._onehot(self.left_shape)  # (rows, left_width)
        self.right_onehot = self._onehot(self.right_shape)  # (columns, right_width)
        self.axes = axes
        self.matrix = start.reshape(self.rows, self.columns)
        block = max(1, FIT_BLOCK_CELLS // self.columns)
        self.blocks = [slice(b, min(b + block, self.rows)) for b in range(0, self.rows, block)]

    @staticmethod
    def _onehot(shape: tuple[int, ...]) -> FloatArray:
        cells = np.indices(shape).reshape(len(shape), -1)
        out = np.zeros((cells.shape[1], sum(shape)))
        offset = 0
        for codes, size in zip(cells, shape, strict=True):
            out[np.arange(cells.shape[1]), offset + codes] = 1.0
            offset += size
        return out

    def _block(self, axis: int) -> slice:
        start = int(self.offsets[axis]) - (0 if axis < self.split else self.left_width)
        return slice(start, start + self.shape[axis])

    def marginals(self, iterate: _Iterate) -> list[FloatArray]:
        """Every clique's marginal of ``iterate`` (a pending step: one blocked pass)."""
        if iterate.factors is None:
            by_right = self.matrix @ self.right_onehot  # (rows, right_width)
            column_sums = np.ones(self.rows) @ self.matrix
        else:
            by_right, column_sums = self._step_sums(iterate)
        row_sums = by_right[:, self._block(self.split)].sum(axis=1)
        cross = self.left_onehot.T @ by_right  # (left_width, right_width)
        left = row_sums.reshape(self.left_shape)
        right = column_sums.reshape(self.right_shape)
        out = []
        for ax in self.axes:
            sides = [a < self.split for a in ax]
            if all(sides):
                out.append(dense_marginal(left, ax))
            elif not any(sides):
                out.append(dense_marginal(right, tuple(a - self.split for a in ax)))
            else:
                i, j = (ax[0], ax[1]) if sides[0] else (ax[1], ax[0])
                table = cross[self._block(i), self._block(j)]
                out.append(np.ascontiguousarray(table if sides[0] else table.T))
        return out

    def _step_sums(self, iterate: _Iterate) -> tuple[FloatArray, FloatArray]:
        """``Q' E_R`` and ``1' Q'`` of the stepped ``Q'``, and the step's ``m_b``, ``c_b``.

        The column sums are kept at the running maximum shift (rescaled when a
        later block's ``m_b`` is larger), so they take one row of memory, not one
        per block.
        """
        by_right = np.empty((self.rows, self.right_width))
        column_sums = np.zeros(self.columns)
        shifts = np.empty(len(self.blocks))
        totals = np.empty(len(self.blocks))
        running = -math.inf  # the largest m_b so far, the column sums' shift
        for b, rows in enumerate(self.blocks):
            stepped, shifts[b] = self._stepped_block(iterate, rows)
            totals[b] = stepped.sum()
            np.matmul(stepped, self.right_onehot, out=by_right[rows])
            if shifts[b] > running:
                column_sums *= math.exp(running - shifts[b])
                running = float(shifts[b])
            column_sums += math.exp(shifts[b] - running) * stepped.sum(axis=0)
        relative = np.exp(shifts - shifts.max())
        scales = relative / float(relative @ totals)
        iterate.shifts, iterate.scales = shifts, scales
        by_right *= np.repeat(scales, [r.stop - r.start for r in self.blocks])[:, None]
        return by_right, column_sums * float(scales.max())

    @staticmethod
    def _block_tilt(
        iterate: _Iterate, rows: slice, shift: float | None = None
    ) -> tuple[FloatArray, float]:
        """``exp(F_rows,b F_cols' - m)`` of one row block and ``m``: the block's
        maximum, or ``shift`` when the step's ``m_b`` is already known."""
        assert iterate.factors is not None
        factor_rows, factor_columns = iterate.factors
        exponent = factor_rows[rows] @ factor_columns.T
        if shift is None:
            shift = float(exponent.max())
        exponent -= shift
        np.exp(exponent, out=exponent)
        return exponent, shift

    def _stepped_block(self, iterate: _Iterate, rows: slice) -> tuple[FloatArray, float]:
        """``Q_b exp(F_rows,b F_cols' - m_b)`` of one row block, and ``m_b``."""
        tilt, shift = self._block_tilt(iterate, rows)
        tilt *= self.matrix[rows]
        return tilt, shift

    def _write(self, iterate: _Iterate) -> None:
        """Writes a pending (evaluated, accepted) step into ``Q``, block by block."""
        if iterate.factors is None:
            return
        assert iterate.shifts is not None and iterate.scales is not None
        for b, rows in enumerate(self.blocks):
            tilt, _ = self._block_tilt(iterate, rows, float(iterate.shifts[b]))
            tilt *= iterate.scales[b]
            self.matrix[rows] *= tilt
        iterate.factors = None

    def moved(self, iterate: _Iterate, res: list[FloatArray], s: float) -> _Iterate:
        """The step ``Dhat exp(-s g) / Z`` from ``iterate``, pending (nothing written yet)."""
        self._write(iterate)
        left = np.zeros(self.left_shape)
        right = np.zeros(self.right_shape)
        cross = np.zeros((self.left_width, self.right_width))
        for ax, r in zip(self.axes, res, strict=True):
            sides = [a < self.split for a in ax]
            if all(sides):
                left += broadcast_factor(self.left_shape, ax, r)
            elif not any(sides):
                right += broadcast_factor(self.right_shape, tuple(a - self.split for a in ax), r)
            else:
                i, j = (ax[0], ax[1]) if sides[0] else (ax[1], ax[0])
                cross[self._block(i), self._block(j)] += r if sides[0] else r.T
        # -s folded into the (small) row factors: the product is -s g directly.
        factor_rows = -s * np.column_stack(
            [self.left_onehot @ cross, left.reshape(-1), np.ones(self.rows)]
        )
        factor_columns = np.column_stack(
            [self.right_onehot, np.ones(self.columns), right.reshape(-1)]
        )
        return _Iterate(factors=(factor_rows, factor_columns))

    def result(self, iterate: _Iterate) -> FloatArray:
        """The fitted histogram (the fit's buffer, with ``iterate``'s step written in)."""
        self._write(iterate)
        return self.matrix.reshape(self.shape)


def default_iterations(domain: Domain, cliques: int) -> int:
    """A public work budget for the fit: ``1e9`` cell operations, 30 to 300 iterations.

    Each iteration costs ``2K |X|`` cell operations, so large domains get fewer
    (on Adult's 2^14-cell binary domain: 300; on its 1.2M-cell categorical one: 30).
    """
    return int(min(300, max(30, 1e9 // (2 * cliques * domain.size))))


def marginal_prior(
    data: PrivateData,
    *,
    noise_multiplier: float,
    noise: NoiseSource,
    cliques: Sequence[tuple[str, ...]] | None = None,
    iterations: int | None = None,
) -> PriorRelease[DenseHistogram]:
    """Measure (default: all 2-way) marginals and fit a starting hypothesis.

    The caller charges ``measurement_event(noise_multiplier)`` first;
    ``iterations`` defaults to :func:`default_iterations`.
    """
    chosen = list(cliques) if cliques is not None else pairwise_cliques(data.domain)
    measured = measure_marginals(data, chosen, noise_multiplier=noise_multiplier, noise=noise)
    if iterations is None:
        iterations = default_iterations(data.domain, len(chosen))
    fitted = fit_histogram(data.domain, measured, iterations=iterations)
    return PriorRelease(fitted, tuple(measured))


def public_prior(
    domain: Domain, records: np.ndarray, *, uniform_weight: float = 0.01
) -> DenseHistogram:
    """A starting hypothesis from *public* records (no privacy cost).

    The empirical histogram of ``records``, mixed with ``uniform_weight`` of
    the uniform one: multiplicative-weights updates only rescale cells, so a
    cell the public sample never saw would stay at zero forever; the mixture
    keeps every cell reachable (and costs at most ``ln(1 / (1 - w))`` in KL to
    the empirical one, 0.01 at the default). Public means not derived from the
    private data; a prior computed from it must instead be paid for.
    """
    if not 0 < uniform_weight <= 1:
        raise ValueError(f"uniform_weight must lie in (0, 1], got {uniform_weight}.")
    empirical = DenseHistogram.from_records(domain, records).to_array()
    return DenseHistogram(domain, (1 - uniform_weight) * empirical + uniform_weight / domain.size)
