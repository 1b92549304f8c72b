"""The dense fit's 1- and 2-way marginals and steps as matrix products (:class:`PairwiseFit`).

:func:`pmwcm.mechanisms.priors.marginals.fit_histogram` runs the entropic fit in
this form on large domains whose cliques have at most two attributes: two
streaming passes per step whatever the clique count, in one histogram-sized
buffer (the same iterates as the generic loop up to summation order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pmwcm.kernels.clique_scale import broadcast_factor
from pmwcm.kernels.clique_table import FloatArray
from pmwcm.kernels.dense_marginal import dense_marginal
from pmwcm.kernels.domain import Domain

__all__ = ["FIT_BLOCK_CELLS", "PairwiseFit", "PairwiseIterate"]


#: Cells per block of :class:`PairwiseFit`'s streaming passes: a block's exponent
#: (512 KiB) stays in cache, and no pass needs a second histogram-sized array.
FIT_BLOCK_CELLS = 2**16


@dataclass
class PairwiseIterate:
    """An iterate of :class:`PairwiseFit`: the fit's one buffer ``Q``, times a step
    not yet written into it.

    The step is ``Q exp(F_rows F_cols' - m_b) c_b`` on each row block ``b``:
    ``F_rows F_cols' = -s g`` is the gradient step, ``m_b`` the block's maximum
    (so ``exp`` cannot overflow) and ``c_b = exp(m_b - max_b m_b) / Z`` the block's
    share of the normalisation. ``shifts`` and ``scales`` (``m_b``, ``c_b``) are
    set by the pass that evaluates the step's marginals. ``on_mass``: ``m_b`` is the
    maximum over the cells with mass only, and the exponent is capped at 0 (set where
    the plain shifts left no mass at all: :meth:`PairwiseFit._step_sums`).
    """

    factors: tuple[FloatArray, FloatArray] | None = None
    shifts: FloatArray | None = None
    scales: FloatArray | None = None
    on_mass: bool = False


class PairwiseFit:
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

    @staticmethod
    def _split(domain: Domain) -> tuple[int, int]:
        """``(split, rows)``: the leading attributes ``L = shape[:split]`` whose cells
        (``rows``) stay within ``sqrt|X|`` (at least one attribute)."""
        shape = domain.shape
        split, rows = 1, shape[0]
        while split < len(shape) - 1 and rows * shape[split] <= math.isqrt(domain.size):
            rows *= shape[split]
            split += 1
        return split, rows

    @staticmethod
    def factor_cells(domain: Domain) -> int:
        """The cells of the one-hot indicators ``E_L`` and ``E_R`` (public: the schema's).

        About ``2 sqrt|X| sum_a |X_a|``, far below ``|X|`` on many small attributes; one
        attribute with a million values makes them ``10^12`` cells, where the plain
        passes over the histogram are the fit to run.
        """
        split, rows = PairwiseFit._split(domain)
        shape = domain.shape
        return rows * sum(shape[:split]) + (domain.size // rows) * sum(shape[split:])

    def __init__(self, domain: Domain, axes: list[tuple[int, ...]], start: FloatArray) -> None:
        shape = domain.shape
        split, rows = self._split(domain)
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

    def marginals(self, iterate: PairwiseIterate) -> list[FloatArray]:
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

    def _step_sums(self, iterate: PairwiseIterate) -> tuple[FloatArray, FloatArray]:
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
        total = float(relative @ totals)
        if not total >= np.finfo(np.float64).tiny and not iterate.on_mass:
            # Q sits on a few cells (a fit on very noisy measurements) and the step pushes
            # away from them: every product underflowed. Shifted by the exponent's largest
            # value on the cells with mass instead, the step keeps a distribution (as the
            # fused form's :func:`~pmwcm.mechanisms.priors.marginals.tilted` does).
            iterate.on_mass = True
            return self._step_sums(iterate)
        scales = relative / total
        iterate.shifts, iterate.scales = shifts, scales
        by_right *= np.repeat(scales, [r.stop - r.start for r in self.blocks])[:, None]
        return by_right, column_sums * float(scales.max())

    def _block_tilt(
        self, iterate: PairwiseIterate, rows: slice, shift: float | None = None
    ) -> tuple[FloatArray, float]:
        """``exp(F_rows,b F_cols' - m)`` of one row block and ``m``: the block's
        maximum, or ``shift`` when the step's ``m_b`` is already known."""
        assert iterate.factors is not None
        factor_rows, factor_columns = iterate.factors
        exponent = factor_rows[rows] @ factor_columns.T
        if shift is None and iterate.on_mass:
            carried = self.matrix[rows] > 0
            # a block without mass steps to zeros whatever its shift: one far below every
            # other keeps it out of the normalisation's running maximum
            shift = float(exponent[carried].max()) if carried.any() else -1e300
        elif shift is None:
            shift = float(exponent.max())
        exponent -= shift
        if iterate.on_mass:  # 0 on the cells with mass; the others hold none to scale
            np.minimum(exponent, 0.0, out=exponent)
        np.exp(exponent, out=exponent)
        return exponent, shift

    def _stepped_block(self, iterate: PairwiseIterate, rows: slice) -> tuple[FloatArray, float]:
        """``Q_b exp(F_rows,b F_cols' - m_b)`` of one row block, and ``m_b``."""
        tilt, shift = self._block_tilt(iterate, rows)
        tilt *= self.matrix[rows]
        return tilt, shift

    def _write(self, iterate: PairwiseIterate) -> None:
        """Writes a pending (evaluated, accepted) step into ``Q``, block by block."""
        if iterate.factors is None:
            return
        assert iterate.shifts is not None and iterate.scales is not None
        for b, rows in enumerate(self.blocks):
            tilt, _ = self._block_tilt(iterate, rows, float(iterate.shifts[b]))
            tilt *= iterate.scales[b]
            self.matrix[rows] *= tilt
        iterate.factors = None

    def moved(self, iterate: PairwiseIterate, res: list[FloatArray], s: float) -> PairwiseIterate:
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
        return PairwiseIterate(factors=(factor_rows, factor_columns))

    def result(self, iterate: PairwiseIterate) -> FloatArray:
        """The fitted histogram (the fit's buffer, with ``iterate``'s step written in)."""
        self._write(iterate)
        return self.matrix.reshape(self.shape)
