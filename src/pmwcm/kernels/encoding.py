"""The feature map ``phi`` and labels ``y`` of a query on its clique's cells: the design.

Encoding (fixed by the ``pmwcm run`` contract): a binary attribute is ``-1``
for its first value and ``+1`` for its second; a non-binary feature is one-hot
(default) or ordinal (code scaled to ``[-1, 1]``); each interaction (a group
of two or more features) adds one block after the features: the Kronecker
product of its members' blocks, so a product of ``+/-1`` binaries is their
parity and a product of one-hots is the one-hot of the joint value, and its
norm is the product of norms, at most 1; an intercept ``1`` comes last; the
vector is divided by ``sqrt(number of blocks)`` (features, interactions,
intercept), so ``||phi||_2 <= B = 1``. Interactions only involve features, so
the clique (and the marginal the loss reads) is unchanged. A classification
loss needs a binary target (second value ``+1``); a regression target is its
code scaled to ``[-1, 1]`` (:func:`scaled`).

Each block is one entry per row (a column within the block and a value), so a
design is held in block form (:mod:`pmwcm.kernels.design`). What the design
depends on is a query's :class:`Layout`, never its attribute names.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.design import Design, design_for
from pmwcm.kernels.problem import FloatArray

__all__ = ["Layout", "dense_layout", "encode_cells", "layout_entries", "scaled"]


@dataclass(frozen=True)
class Layout:
    """Everything a query's design depends on: the clique's sizes (features, then the
    target), each feature's encoding, the interactions as feature positions, and
    whether there is an intercept. Attribute names do not enter: on Adult's binary
    schema every query with ``k`` features and the same options has the same design."""

    sizes: tuple[int, ...]
    encodings: tuple[str, ...]
    interactions: tuple[tuple[int, ...], ...]
    intercept: bool


@functools.lru_cache(maxsize=256)
def dense_layout(layout: Layout) -> tuple[Design, FloatArray, float]:
    """The design and labels on every cell of the clique (C order), and ``B``.

    Cached by layout: compiling a query is then mostly a dictionary look-up. The
    arrays are shared by every problem of that layout, which only read them.
    ``B`` is the norm of the first cell's row: in C order it is the all-zero cell,
    where every block's norm is largest (:meth:`~pmwcm.kernels.queries.CMQuery.compile`),
    and its design is built from the same entries a one-cell compile of that cell computes.
    """
    sizes = layout.sizes
    cells = np.indices(sizes).reshape(len(sizes), -1).T  # (cells, |C|), C order
    columns, values, width, widths = layout_entries(layout, cells)
    corner = design_for(columns[:, :1], values[:, :1], width)
    return (
        design_for(columns, values, width, block_widths=widths),
        scaled(cells[:, -1], sizes[-1]),
        float(corner.row_norms()[0]),
    )


def layout_entries(
    layout: Layout, cells: NDArray[np.int64]
) -> tuple[NDArray[np.int64], FloatArray, int, tuple[int, ...]]:
    """Block-major ``(columns, values)``, shape ``(B, cells)``, the width, and each
    block's width (see :func:`encode_cells`)."""
    blocks = [
        encode(cells[:, i], layout.sizes[i], encoding)
        for i, encoding in enumerate(layout.encodings)
    ]
    for group in layout.interactions:
        column, value, width = blocks[group[0]]
        for index in group[1:]:
            other_column, other_value, other_width = blocks[index]
            # Row-wise Kronecker product: coordinate (i, j) at i * width_j + j.
            column = column * other_width + other_column
            value = value * other_value
            width = width * other_width
        blocks.append((column, value, width))
    if layout.intercept:
        blocks.append((np.zeros(len(cells), dtype=np.int64), np.ones(len(cells)), 1))
    # Written block by block into block-major views of row-major storage: the compiled
    # solvers read the design row by row (``BlockDesign.row_major``), and a support's
    # large clique has up to M cells (stacking, copying to int64 and transposing made
    # three copies of the design).
    columns = np.empty((len(cells), len(blocks)), dtype=np.int64).T
    values = np.empty((len(cells), len(blocks))).T
    offset, norm = 0, math.sqrt(len(blocks))
    for row, (column, value, width) in enumerate(blocks):
        np.add(column, offset, out=columns[row])
        np.divide(value, norm, out=values[row])
        offset += width
    widths = tuple(int(width) for _, _, width in blocks)
    return columns, values, offset, widths


def encode_cells(
    layout: Layout, cells: NDArray[np.int64], *, block_form: bool = False
) -> tuple[Design, FloatArray]:
    """The design ``phi(x_C)`` and labels ``y(x_C)`` of ``cells`` (per-attribute codes
    ``(cells, |C|)``, the target last) for a query of ``layout``.

    Each block is one entry per row (a column within the block and a value),
    blocks in order: the features, the interactions, the intercept; all
    divided by ``sqrt(blocks)`` so that ``||phi|| <= 1``. ``block_form`` asks for a
    :class:`~pmwcm.kernels.design.BlockDesign` whatever the width.
    """
    columns, values, width, widths = layout_entries(layout, cells)
    design = design_for(columns, values, width, blocks=block_form, block_widths=widths)
    return design, scaled(cells[:, -1], layout.sizes[-1])


def scaled(codes: np.ndarray, size: int) -> FloatArray:
    """Codes ``0..size-1`` mapped linearly onto ``[-1, 1]`` (binary: -1, +1)."""
    if size == 1:
        return np.zeros(codes.shape[0])
    return 2.0 * codes.astype(np.float64) / (size - 1) - 1.0


def encode(
    codes: np.ndarray, size: int, encoding: str
) -> tuple[NDArray[np.int64], FloatArray, int]:
    """One feature block, one entry per row: (column in the block, value, block width).

    Ordinal and binary: the scaled code in one column; one-hot: a 1 at the code.
    Either way the block's Euclidean norm is at most 1.
    """
    if size <= 2 or encoding == "ordinal":
        return np.zeros(len(codes), dtype=np.int64), scaled(codes, size), 1
    return np.asarray(codes, dtype=np.int64), np.ones(len(codes)), size
