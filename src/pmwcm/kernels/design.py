"""A GLM's design matrix ``Phi`` (one row ``phi(x_C)`` per clique cell), dense or by blocks.

Every feature block of a catalogue query has **exactly one entry per row**: a
one-hot block a single 1 (at the cell's value), an ordinal or binary block a
single scaled value, an interaction block the product of its factors' single
entries, the intercept a 1. So ``Phi`` with ``B`` blocks has ``B`` entries per
row whatever its width ``d``: with one-hot features on native attributes
(``d`` in the hundreds, ``B`` at most 7) a dense matrix wastes ``d / B`` of
every product. :class:`BlockDesign` stores the ``(cells, B)`` columns and
values and computes the three products the solvers need in ``O(cells B)``
(``O(cells B^2 / 2)`` for the Gram matrix) instead of ``O(cells d)`` (``O(cells
d^2)``):

* ``matvec(theta) = Phi theta``: a gather and a row sum;
* ``rmatvec(v) = Phi^T v``: a weighted bincount over the columns;
* ``gram(w) = Phi^T diag(w) Phi``: weighted bincounts over the columns (the
  diagonal) and over the column pairs of two blocks (the rest).

:class:`DenseDesign` keeps the dense matrix (small ``d``: its BLAS products
are faster there, and its arithmetic is the one earlier releases used, so
their transcripts stay bit for bit). :func:`design_for` picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

FloatArray = NDArray[np.float64]

__all__ = ["BlockDesign", "DenseDesign", "Design", "design_for"]

#: Widths from which the block form is used (when it saves at least 4x).
BLOCK_MIN_WIDTH = 24


class Design(Protocol):
    """The design matrix operations a GLM needs."""

    @property
    def rows(self) -> int:
        """The number of cells (rows of ``Phi``)."""
        ...

    @property
    def dim(self) -> int:
        """``d``, the number of features (columns of ``Phi``)."""
        ...

    def matvec(self, theta: FloatArray) -> FloatArray:
        """``Phi theta``, shape ``(cells,)``."""
        ...

    def rmatvec(self, v: FloatArray) -> FloatArray:
        """``Phi^T v``, shape ``(d,)``."""
        ...

    def gram(self, weights: FloatArray) -> FloatArray:
        """``Phi^T diag(weights) Phi``, shape ``(d, d)``."""
        ...

    def row_norms(self) -> FloatArray:
        """``||phi(x_C)||_2`` of every cell."""
        ...

    def dense(self) -> FloatArray:
        """``Phi`` as a dense ``(cells, d)`` array."""
        ...


@dataclass(frozen=True, eq=False)
class DenseDesign(Design):
    """A dense ``(cells, d)`` design matrix.

    ``entries``, when the matrix was built from blocks (:func:`design_for`), are
    the block form's ``(columns, values)``, block-major: the compiled kernels
    read a row's ``B`` entries instead of its ``d`` columns; ``block_widths``
    and ``block_constants`` are then the blocks' widths and constant values
    (:class:`BlockDesign`; ``()``: not known).
    """

    matrix: FloatArray
    entries: tuple[NDArray[np.int64], FloatArray] | None = None
    block_widths: tuple[int, ...] = ()
    block_constants: tuple[float, ...] = ()

    @property
    def rows(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def matvec(self, theta: FloatArray) -> FloatArray:
        return self.matrix @ theta

    def rmatvec(self, v: FloatArray) -> FloatArray:
        return self.matrix.T @ v

    def gram(self, weights: FloatArray) -> FloatArray:
        return (self.matrix.T * weights) @ self.matrix

    def row_norms(self) -> FloatArray:
        return np.sqrt((self.matrix**2).sum(axis=1))

    def dense(self) -> FloatArray:
        return self.matrix

    @cached_property
    def row_major(self) -> tuple[NDArray[np.int64], FloatArray]:
        """``(columns, values)`` of every entry, row-major ``(cells, d)`` (compiled kernels)."""
        if self.entries is not None:
            columns, values = self.entries
            return np.ascontiguousarray(columns.T), np.ascontiguousarray(values.T)
        rows, dim = self.matrix.shape
        columns = np.ascontiguousarray(np.broadcast_to(np.arange(dim, dtype=np.int64), (rows, dim)))
        return columns, np.ascontiguousarray(self.matrix, dtype=np.float64)

    @cached_property
    def block_major(self) -> BlockMajor:
        """:attr:`BlockDesign.block_major`; a bare matrix is ``d`` blocks of one column."""
        if self.entries is not None:
            columns, values = self.entries
            return _block_major(columns, values, self.block_widths, self.block_constants)
        rows, dim = self.matrix.shape
        fixed = np.arange(dim, dtype=np.int64)
        columns = np.ascontiguousarray(np.broadcast_to(fixed[:, None], (dim, rows)))
        values = np.ascontiguousarray(self.matrix.T, dtype=np.float64)
        return columns, values, fixed, np.zeros(dim)


@dataclass(frozen=True, eq=False)
class BlockDesign(Design):
    """``Phi`` with one entry per block and row: ``Phi[r, columns[b, r]] = values[b, r]``.

    Shaped block-major (``(B, cells)``), in whichever memory order it was built
    (:func:`design_for`). The blocks occupy disjoint column ranges, so no two
    entries of a row share a column. ``block_widths``, when given, are the
    widths of those ranges in order, and ``block_constants`` each block's value
    where every row has the same one (a one-hot block, or an interaction of one-hot
    blocks: ``1 / sqrt(B)``), else ``0``; both from the query's encodings (public).
    """

    columns: NDArray[np.int64]
    values: FloatArray
    width: int
    block_widths: tuple[int, ...] = ()
    block_constants: tuple[float, ...] = ()

    @property
    def rows(self) -> int:
        return int(self.columns.shape[1])

    @property
    def dim(self) -> int:
        return self.width

    @cached_property
    def _sparse(self) -> sparse.csr_matrix:
        """``Phi`` as a SciPy CSR matrix (compiled sparse products)."""
        rows = np.broadcast_to(np.arange(self.rows), self.columns.shape)
        return sparse.csr_matrix(
            (self.values.ravel(), (rows.ravel(), self.columns.ravel())),
            shape=(self.rows, self.width),
        )

    @cached_property
    def row_major(self) -> tuple[NDArray[np.int64], FloatArray]:
        """``(columns, values)`` transposed to row-major ``(cells, B)`` (compiled kernels)."""
        return np.ascontiguousarray(self.columns.T), np.ascontiguousarray(self.values.T)

    @cached_property
    def block_major(self) -> BlockMajor:
        """``(columns, values, fixed, constants)`` for the compiled kernels: the entries,
        block-major, each block's single column (a block of width one) or ``-1``, and
        each block's constant value or ``0`` (:attr:`block_constants`).

        ``fixed`` and ``constants`` come from :attr:`block_widths` and
        :attr:`block_constants` (the query's public encodings), never from the entries
        a table holds: a one-hot block whose rows happen to share a value is still
        scattered, and a binary block whose rows happen to share a value still reads
        its values.
        """
        return _block_major(self.columns, self.values, self.block_widths, self.block_constants)

    def matvec(self, theta: FloatArray) -> FloatArray:
        return np.asarray(self._sparse @ theta, dtype=np.float64)

    @cached_property
    def _sparse_transpose(self) -> sparse.csr_matrix:
        """``Phi^T`` in CSR form (a row-major product for ``rmatvec``)."""
        return self._sparse.T.tocsr()

    def rmatvec(self, v: FloatArray) -> FloatArray:
        return np.asarray(self._sparse_transpose @ v, dtype=np.float64)

    @cached_property
    def _pairs(self) -> tuple[NDArray[np.int64], FloatArray]:
        """Every row's ``B (B - 1) / 2`` off-diagonal block pairs ``a < b``: the flat
        column pair and the product of the two values, pair-major."""
        upper_a, upper_b = np.triu_indices(self.columns.shape[0], k=1)
        pair = self.columns[upper_a] * self.width + self.columns[upper_b]
        product = self.values[upper_a] * self.values[upper_b]
        return pair, product

    def gram(self, weights: FloatArray) -> FloatArray:
        """``Phi^T diag(w) Phi`` by blocks: ``G[j, k] = sum_r w_r Phi[r, j] Phi[r, k]``.

        A block meets itself only on the diagonal (one entry per row), so the
        diagonal is a bincount of ``w values^2`` over the columns; two blocks
        ``a < b`` give the upper entries ``(columns_a, columns_b)``, and the lower
        ones are their mirror (the blocks' column ranges are disjoint). That is
        ``B (B + 1) / 2`` products per row instead of ``B^2``.
        """
        weights = np.asarray(weights, dtype=np.float64)
        pair, product = self._pairs
        # (An empty bincount is int64 whatever its weights: one block has no pairs.)
        upper = np.bincount(
            pair.ravel(), weights=(product * weights).ravel(), minlength=self.width**2
        ).reshape(self.width, self.width)
        gram = (upper + upper.T).astype(np.float64, copy=False)
        diagonal = np.bincount(
            self.columns.ravel(),
            weights=(self.values * self.values * weights).ravel(),
            minlength=self.width,
        )
        gram[np.diag_indices(self.width)] += diagonal
        return np.asarray(gram, dtype=np.float64)

    def row_norms(self) -> FloatArray:
        return np.sqrt((self.values**2).sum(axis=0))

    def dense(self) -> FloatArray:
        out = np.zeros((self.rows, self.width))
        np.put_along_axis(out, self.columns.T, self.values.T, axis=1)
        return out


#: A design's compiled block form: ``(columns, values, fixed, constants)``
#: (:attr:`BlockDesign.block_major`).
BlockMajor = tuple[NDArray[np.int64], FloatArray, NDArray[np.int64], FloatArray]


def _block_major(
    columns: NDArray[np.int64],
    values: FloatArray,
    widths: tuple[int, ...],
    constants: tuple[float, ...],
) -> BlockMajor:
    """``(columns, values, fixed, constants)``: see :attr:`BlockDesign.block_major`."""
    blocks = columns.shape[0]
    if len(widths) == blocks:
        starts = np.concatenate([[0], np.cumsum(widths[:-1])]).astype(np.int64)
        fixed = np.where(np.asarray(widths) == 1, starts, -1).astype(np.int64)
    else:
        fixed = np.full(blocks, -1, dtype=np.int64)
    constant = (
        np.array(constants, dtype=np.float64) if len(constants) == blocks else np.zeros(blocks)
    )
    return (
        np.ascontiguousarray(columns),
        np.ascontiguousarray(values, dtype=np.float64),
        fixed,
        constant,
    )


def design_for(
    columns: NDArray[np.int64],
    values: FloatArray,
    width: int,
    *,
    blocks: bool = False,
    block_widths: tuple[int, ...] = (),
    block_constants: tuple[float, ...] = (),
) -> Design:
    """The block form for a wide, sparse design, or whenever ``blocks``; else the dense matrix.

    ``columns`` and ``values`` are block-major, shape ``(B, cells)``; ``block_widths``
    the blocks' column ranges in order and ``block_constants`` their constant values
    (:class:`BlockDesign`), when known. A problem on a sparse table's
    occupied cells asks for ``blocks``: the compiled kernels read either form,
    and only the dense one costs a ``(cells, d)`` matrix.

    The entries are kept in the storage they come in: :func:`~pmwcm.kernels.encoding.
    layout_entries` writes block-major views of row-major arrays, which
    :attr:`BlockDesign.row_major` (the Newton solve's form) then reads without a
    copy, and :attr:`BlockDesign.block_major` copies only where a kernel asks for it.
    On a large clique's 10^5-10^6 occupied cells, making them block-major here and
    row-major again there was two copies of the design per query.
    """
    block = BlockDesign(
        columns=np.asarray(columns), values=np.asarray(values), width=width,
        block_widths=block_widths, block_constants=block_constants,
    )  # fmt: skip
    if blocks or (width >= BLOCK_MIN_WIDTH and 4 * columns.shape[0] <= width):
        return block
    return DenseDesign(
        block.dense(),
        entries=(block.columns, block.values),
        block_widths=block_widths,
        block_constants=block_constants,
    )
