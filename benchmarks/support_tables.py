"""A fresh clique's table on a support: the fused passes against the NumPy path (issue 37).

The support is ``--size`` records on full-resolution Adult's 14 attribute sizes
(uniform codes, byte columns, C- or Fortran-ordered: the proposal draws them
column-major), with normalised random weights. For each clique of ``--cliques`` (by
default a dense one and four large ones: at ``M = 2^23`` one with 20 cells per record
and one with ``2 * 10^4``, which both paths sort: ``np.unique`` against keys of code and
position, :func:`~pmwcm.kernels.clique_table.position_bits`, radix-sorted by their code
bits, :func:`~pmwcm.kernels.clique_table.sort_keys_by_code`) it
times, in the same process, the NumPy path the support used before (``cell_codes`` in
``int64``, ``occupied_cells``, the ``int32`` index, ``bincount``) and
:mod:`pmwcm.kernels.support_cells` (``clique_mass``, or ``occupied_index`` and
``index_mass``), checks that they agree, and prints one JSON line per clique with the
ratio; and, where a round's table can skip the index (:func:`~pmwcm.kernels.
support_cells.occupied_mass`), that one pass's time (its sums checked equal to the index
path's)::

    PYTHONPATH=src python benchmarks/support_tables.py --size 8388608 --order F

Timings are the best of ``--repeats`` after one warm-up, wall clock, on whatever the
machine is doing (its load average is printed with them).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pmwcm.kernels.clique_table import (
    DIRECT_CELLS_PER_CODE,
    cell_codes,
    is_dense,
    occupied_cells,
)
from pmwcm.kernels.support_cells import clique_mass, index_mass, occupied_index, occupied_mass

#: Full-resolution Adult's attribute sizes (the bundled ``full`` schema).
ADULT_FULL_SIZES = (85, 9, 100, 16, 7, 15, 6, 5, 2, 100, 100, 99, 42, 2)
CLIQUES = ("3,5,13", "0,2,13", "0,3,11,13", "0,2,9,11,13", "0,2,9,10,11,13")


def _best_ms(run: Callable[[], Any], repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def numpy_table(records: np.ndarray, weights: np.ndarray, axes: list[int]) -> Any:
    """The NumPy path the support used before: ``int64`` codes, the occupied cells, the
    ``int32`` index and a ``bincount`` (only the ``bincount`` on a dense clique)."""
    sizes = [ADULT_FULL_SIZES[a] for a in axes]
    cells = int(np.prod(sizes))
    codes = cell_codes(records, axes, sizes)
    if is_dense(tuple(sizes)):
        return np.bincount(codes, weights=weights, minlength=cells)
    if cells <= DIRECT_CELLS_PER_CODE * codes.size:  # the direct count, unchanged
        found, index = occupied_cells(codes, cells)
    else:  # past it, the NumPy path sorted with np.unique (occupied_cells now sorts keys)
        found, index = np.unique(codes, return_inverse=True)
    index = index.astype(np.int32)
    return found, index, np.bincount(index, weights=weights, minlength=found.size)


def fused_table(records: np.ndarray, weights: np.ndarray, axes: list[int]) -> Any:
    """The same from :mod:`pmwcm.kernels.support_cells`."""
    sizes = [ADULT_FULL_SIZES[a] for a in axes]
    if is_dense(tuple(sizes)):
        return clique_mass(records, axes, sizes, weights)
    cells, index = occupied_index(records, axes, sizes)
    return cells, index, index_mass(index, weights, cells.size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2**20, help="M, the support's records")
    parser.add_argument("--order", choices=("C", "F"), default="F")
    parser.add_argument("--cliques", nargs="+", default=list(CLIQUES), help="axes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    records = np.empty((args.size, len(ADULT_FULL_SIZES)), dtype=np.uint8, order=args.order)
    for column, values in enumerate(ADULT_FULL_SIZES):
        records[:, column] = rng.integers(0, values, args.size)
    weights = rng.random(args.size)
    weights /= weights.sum()
    for spec in args.cliques:
        axes = [int(a) for a in spec.split(",")]
        before_path = functools.partial(numpy_table, records, weights, axes)
        after_path = functools.partial(fused_table, records, weights, axes)
        expected, got = before_path(), after_path()
        if isinstance(expected, tuple):  # a large clique: cells, index, masses
            np.testing.assert_array_equal(got[0], expected[0])
            np.testing.assert_array_equal(got[1], expected[1])
            np.testing.assert_allclose(got[2], expected[2], rtol=1e-12)
            occupied = int(expected[0].size)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)
            occupied = int(np.count_nonzero(expected))
        before, after = _best_ms(before_path, args.repeats), _best_ms(after_path, args.repeats)
        one_pass = None  # a round's table without the index, where the clique allows it
        one_pass_path = functools.partial(
            occupied_mass, records, axes, [ADULT_FULL_SIZES[a] for a in axes], weights
        )
        found = one_pass_path() if isinstance(got, tuple) else None
        if found is not None:
            np.testing.assert_array_equal(found[0], got[0])
            np.testing.assert_array_equal(found[1], got[2])  # the index path's sums, bit for bit
            one_pass = round(_best_ms(one_pass_path, args.repeats), 1)
        row = {
            "M": args.size, "order": args.order, "clique": spec,
            "cells": int(np.prod([ADULT_FULL_SIZES[a] for a in axes])), "occupied": occupied,
            "numpy_ms": round(before, 1), "fused_ms": round(after, 1),
            "speedup": round(before / after, 2), "one_pass_ms": one_pass,
            "load_average": round(os.getloadavg()[0], 2),
        }  # fmt: skip
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
