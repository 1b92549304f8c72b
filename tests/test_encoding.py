"""The design's entries (:func:`pmwcm.kernels.encoding.layout_entries`) against the
encoding's definition written out in NumPy, block by block (the module docstring): the
compiled row-major pass must give the same columns and the same floats, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pmwcm.kernels.design import BlockDesign
from pmwcm.kernels.encoding import Layout, encode_cells, layout_entries, scaled


def reference_entries(layout: Layout, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Block-major ``(columns, values)`` and the width, one NumPy block at a time."""
    blocks = []
    for i, encoding in enumerate(layout.encodings):
        size = layout.sizes[i]
        if size <= 2 or encoding == "ordinal":
            blocks.append((np.zeros(len(cells), dtype=np.int64), scaled(cells[:, i], size), 1))
        else:
            blocks.append((cells[:, i].astype(np.int64), np.ones(len(cells)), size))
    for group in layout.interactions:
        column, value, width = blocks[group[0]]
        for index in group[1:]:
            other_column, other_value, other_width = blocks[index]
            column, value = column * other_width + other_column, value * other_value
            width *= other_width
        blocks.append((column, value, width))
    if layout.intercept:
        blocks.append((np.zeros(len(cells), dtype=np.int64), np.ones(len(cells)), 1))
    norm, offset = math.sqrt(len(blocks)), 0
    columns, values = [], []
    for column, value, width in blocks:
        columns.append(column + offset)
        values.append(value / norm)
        offset += width
    return np.array(columns), np.array(values), offset


LAYOUTS = [
    Layout(sizes=(2, 3, 2), encodings=("onehot", "onehot"), interactions=(), intercept=True),
    Layout(sizes=(100, 85, 16, 2), encodings=("onehot", "onehot", "ordinal"),
           interactions=((0, 2),), intercept=True),
    Layout(sizes=(2, 2, 2, 2), encodings=("onehot",) * 3, interactions=((0, 1), (0, 1, 2)),
           intercept=False),
    Layout(sizes=(5, 7, 3, 4), encodings=("ordinal", "onehot", "onehot"),
           interactions=((1, 2), (0, 1)), intercept=True),
    Layout(sizes=(1, 4, 2), encodings=("onehot", "onehot"), interactions=((0, 1),), intercept=True),
    Layout(sizes=(9,), encodings=(), interactions=(), intercept=True),
]  # fmt: skip


@pytest.mark.parametrize("layout", LAYOUTS, ids=range(len(LAYOUTS)))
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("rows", [0, 1, 2000])
def test_the_entries_are_the_encodings_definition(layout: Layout, order: str, rows: int) -> None:
    rng = np.random.default_rng(rows)
    stacked = np.stack([rng.integers(0, s, rows) for s in layout.sizes], axis=1)
    cells = (np.asfortranarray if order == "F" else np.ascontiguousarray)(stacked)
    cells = cells.reshape(rows, len(layout.sizes))
    columns, values, width, widths = layout_entries(layout, cells)
    expected_columns, expected_values, expected_width = reference_entries(layout, cells)
    np.testing.assert_array_equal(columns, expected_columns.reshape(columns.shape))
    assert values.tobytes() == np.ascontiguousarray(expected_values).reshape(values.shape).tobytes()
    assert width == expected_width == sum(widths)


def test_the_newton_solve_reads_the_entries_without_a_copy() -> None:
    """The entries are written row-major, so the row-major form is a view of them."""
    layout = LAYOUTS[1]
    cells = np.stack([np.arange(50) % s for s in layout.sizes], axis=1)
    design, _ = encode_cells(layout, cells, block_form=True)
    assert isinstance(design, BlockDesign)
    columns, values = design.row_major
    assert np.shares_memory(columns, design.columns)
    assert np.shares_memory(values, design.values)
