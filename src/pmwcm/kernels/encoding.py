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
from numba import njit
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
        design_for(
            columns,
            values,
            width,
            block_widths=widths,
            block_constants=_entry_plan(layout).constants,
        ),
        scaled(cells[:, -1], sizes[-1]),
        float(corner.row_norms()[0]),
    )


def layout_entries(
    layout: Layout, cells: NDArray[np.integer]
) -> tuple[NDArray[np.int64], FloatArray, int, tuple[int, ...]]:
    """Block-major ``(columns, values)``, shape ``(B, cells)``, the width, and each
    block's width (see :func:`encode_cells`).

    The entries are written row by row in one compiled pass (:func:`_fill_entries`)
    into row-major storage, returned as block-major views: the compiled solvers read
    the design row by row (``BlockDesign.row_major``), and a support's large clique
    has up to ``M`` cells (NumPy's form wrote each block with a stride of ``B``
    entries, a third of a distinct answer's time at ``M = 2^22``). The arithmetic is
    NumPy's, operation for operation: the entries are the same floats.
    """
    plan = _entry_plan(layout)
    columns = np.empty((len(cells), len(plan.widths)), dtype=np.int64)
    values = np.empty((len(cells), len(plan.widths)))
    _fill_entries(
        np.asarray(cells), plan.one_hot, plan.sizes, plan.feature_widths, plan.members,
        plan.ends, layout.intercept, plan.offsets, plan.norm, columns, values,
    )  # fmt: skip
    return columns.T, values.T, sum(plan.widths), plan.widths


@dataclass(frozen=True)
class _EntryPlan:
    """What :func:`_fill_entries` reads of a layout, as arrays (cached per layout)."""

    one_hot: NDArray[np.bool_]
    sizes: NDArray[np.int64]
    feature_widths: NDArray[np.int64]
    members: NDArray[np.int64]
    ends: NDArray[np.int64]
    offsets: NDArray[np.int64]
    norm: float
    widths: tuple[int, ...]
    #: Each block's value where it is the same in every row (a one-hot feature, an
    #: interaction of one-hot features: ``1 / norm``), else ``0``
    #: (``BlockDesign.block_constants``).
    constants: tuple[float, ...]


@functools.lru_cache(maxsize=1024)
def _entry_plan(layout: Layout) -> _EntryPlan:
    """Each feature's encoding (one-hot: a column per value; binary and ordinal: one
    scaled column), each block's width and column offset, the interactions' members."""
    features = len(layout.encodings)
    sizes = layout.sizes[:features]
    one_hot = [size > 2 and encoding != "ordinal"
               for size, encoding in zip(sizes, layout.encodings, strict=True)]  # fmt: skip
    feature_widths = [size if hot else 1 for size, hot in zip(sizes, one_hot, strict=True)]
    widths = list(feature_widths)
    widths += [math.prod(feature_widths[i] for i in group) for group in layout.interactions]
    widths += [1] if layout.intercept else []
    norm = math.sqrt(len(widths))
    constant = [1.0 / norm if hot else 0.0 for hot in one_hot]
    constant += [1.0 / norm if all(one_hot[i] for i in group) else 0.0
                 for group in layout.interactions]  # fmt: skip
    constant += [1.0 / norm] if layout.intercept else []
    return _EntryPlan(
        one_hot=np.array(one_hot, dtype=np.bool_),
        sizes=np.array(sizes, dtype=np.int64),
        feature_widths=np.array(feature_widths, dtype=np.int64),
        members=np.array([i for group in layout.interactions for i in group], dtype=np.int64),
        ends=np.cumsum([len(group) for group in layout.interactions], dtype=np.int64),
        offsets=np.concatenate([[0], np.cumsum(widths[:-1])]).astype(np.int64),
        norm=norm,
        widths=tuple(int(w) for w in widths),
        constants=tuple(constant),
    )


@njit(cache=True, nogil=True)
def _fill_entries(
    cells: NDArray[np.integer],
    one_hot: NDArray[np.bool_],
    sizes: NDArray[np.int64],
    feature_widths: NDArray[np.int64],
    members: NDArray[np.int64],
    ends: NDArray[np.int64],
    intercept: bool,
    offsets: NDArray[np.int64],
    norm: float,
    columns: NDArray[np.int64],
    values: FloatArray,
) -> None:
    """Each row's entries (each feature's block: a one-hot ``1`` at its code, or one
    column of the code as :func:`scaled` maps it, in the same operations; then each
    interaction's row-wise Kronecker product of its members, then the intercept), the
    columns shifted by their block's offset and the values divided by ``norm``."""
    features = one_hot.size
    column = np.empty(features, dtype=np.int64)
    value = np.empty(features)
    for r in range(cells.shape[0]):
        for i in range(features):
            code = cells[r, i]
            if one_hot[i]:
                column[i], value[i] = code, 1.0
            else:
                column[i] = 0
                value[i] = 2.0 * float(code) / (sizes[i] - 1) - 1.0 if sizes[i] > 1 else 0.0
            columns[r, i] = column[i] + offsets[i]
            values[r, i] = value[i] / norm
        block, begin = features, 0
        for end in ends:
            joint_column, joint_value = column[members[begin]], value[members[begin]]
            for k in range(begin + 1, end):
                # Row-wise Kronecker product: coordinate (i, j) at i * width_j + j.
                joint_column = joint_column * feature_widths[members[k]] + column[members[k]]
                joint_value = joint_value * value[members[k]]
            columns[r, block] = joint_column + offsets[block]
            values[r, block] = joint_value / norm
            block, begin = block + 1, end
        if intercept:
            columns[r, block] = offsets[block]
            values[r, block] = 1.0 / norm


def encode_cells(
    layout: Layout, cells: NDArray[np.integer], *, block_form: bool = False
) -> tuple[Design, FloatArray]:
    """The design ``phi(x_C)`` and labels ``y(x_C)`` of ``cells`` (per-attribute codes
    ``(cells, |C|)``, the target last) for a query of ``layout``.

    Each block is one entry per row (a column within the block and a value),
    blocks in order: the features, the interactions, the intercept; all
    divided by ``sqrt(blocks)`` so that ``||phi|| <= 1``. ``block_form`` asks for a
    :class:`~pmwcm.kernels.design.BlockDesign` whatever the width.
    """
    columns, values, width, widths = layout_entries(layout, cells)
    design = design_for(
        columns, values, width, blocks=block_form, block_widths=widths,
        block_constants=_entry_plan(layout).constants,
    )  # fmt: skip
    return design, scaled(cells[:, -1], layout.sizes[-1])


def scaled(codes: np.ndarray, size: int) -> FloatArray:
    """Codes ``0..size-1`` mapped linearly onto ``[-1, 1]`` (binary: -1, +1)."""
    if size == 1:
        return np.zeros(codes.shape[0])
    return 2.0 * codes.astype(np.float64) / (size - 1) - 1.0
