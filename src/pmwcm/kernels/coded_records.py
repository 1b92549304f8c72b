"""Records as integer codes, column by column, each with a count: the data an engine answers from.

A dataset on a universe ``X = s_1 x ... x s_m`` is, for every query the engine
can ask, its multiset of coded records: the count of each distinct record. This
module holds that multiset in memory, one contiguous column per attribute in the
narrowest unsigned dtype, plus one count per row:

* records read into memory are rows of count 1;
* a table read where it lives (DuckDB, PostgreSQL, Spark) is reduced, in the one
  scan made when it is opened, to its distinct coded records and their counts
  (``GROUP BY`` every coded attribute). That is the **pinned snapshot** of the
  data: every later clique is counted from it, never from the live source, so a
  table replaced, appended to or deleted from after the open changes nothing the
  engine answers from (docs/design.md section 8, "Pinned data").

Every clique table counted here is a marginal of the same counts, so its total
mass is ``n = sum(counts)`` by construction: integer counts below ``2^53`` sum
exactly in float64 in any order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import CliqueTable, is_dense, occupied_cells
from pmwcm.kernels.domain import Domain

__all__ = ["CodedRecords", "code_dtype"]

FloatArray = NDArray[np.float64]


def code_dtype(cells: int) -> np.dtype:
    """The narrowest unsigned dtype holding the codes ``0..cells-1``.

    >>> code_dtype(256), code_dtype(257)
    (dtype('uint8'), dtype('uint16'))
    """
    return np.min_scalar_type(max(cells - 1, 0))


class CodedRecords:
    """Distinct (or repeated) coded records with their counts.

    Args:
        domain: the universe (public).
        columns: one array of codes per attribute of ``domain``, all of one length;
            every code must lie in ``0..size-1`` (the caller validated them).
        counts: how many records each row stands for (non-negative integers), or
            ``None`` for one record per row.

    The arrays are copied into read-only storage owned here: nothing the caller
    holds can change them afterwards.
    """

    def __init__(
        self,
        domain: Domain,
        columns: Sequence[NDArray[np.integer]],
        counts: NDArray[np.integer] | None = None,
    ) -> None:
        if len(columns) != len(domain):
            raise ValueError(f"{len(columns)} columns for a domain of {len(domain)} attributes.")
        rows = len(columns[0]) if columns else 0
        stored = []
        for column, size in zip(columns, domain.sizes, strict=True):
            array = np.array(column, dtype=code_dtype(size), copy=True)
            if array.shape != (rows,):
                raise ValueError("the columns must be one-dimensional and of one length.")
            array.setflags(write=False)
            stored.append(array)
        self.domain = domain
        self._columns = tuple(stored)
        self._counts: FloatArray | None = None
        if counts is not None:
            weights = np.array(counts, dtype=np.float64, copy=True)
            if weights.shape != (rows,):
                raise ValueError("counts must have one entry per row.")
            weights.setflags(write=False)
            self._counts = weights
            self.n = int(np.sum(counts, dtype=np.int64))
        else:
            self.n = rows

    @property
    def rows(self) -> int:
        """The number of stored rows (distinct records for a snapshot, ``n`` for records)."""
        return len(self._columns[0]) if self._columns else 0

    @property
    def columns(self) -> tuple[NDArray[np.unsignedinteger], ...]:
        """The code columns (read-only)."""
        return self._columns

    @property
    def counts(self) -> FloatArray | None:
        """Each row's count (read-only), or ``None`` when each row is one record."""
        return self._counts

    @property
    def nbytes(self) -> int:
        """The memory the snapshot holds."""
        held = sum(c.nbytes for c in self._columns)
        return held + (self._counts.nbytes if self._counts is not None else 0)

    def cell_codes(self, axes: Sequence[int]) -> NDArray[np.unsignedinteger]:
        """Each row's flat (C-order) cell code on the clique of ``axes`` (Horner's rule)."""
        sizes = [self.domain.sizes[a] for a in axes]
        dtype = code_dtype(math.prod(sizes))
        codes = np.zeros(self.rows, dtype=dtype)
        for axis, size in zip(axes, sizes, strict=True):
            codes *= dtype.type(size)
            codes += self._columns[axis]
        return codes

    def _bincount(self, codes: NDArray[np.integer], minlength: int) -> FloatArray:
        return np.bincount(codes, weights=self._counts, minlength=minlength).astype(np.float64)

    def count_table(self, clique: Sequence[str]) -> CliqueTable:
        """The record counts on ``clique`` (axes in the order given), in the form
        :func:`~pmwcm.kernels.clique_table.is_dense` gives the clique's shape.

        The masses sum to :attr:`n` exactly (integer counts, summed in float64).
        """
        axes = self.domain.axes(tuple(clique))
        shape = tuple(self.domain.sizes[a] for a in axes)
        if not axes:
            return CliqueTable.dense(np.full((), float(self.n)))
        codes = self.cell_codes(axes)
        if is_dense(shape):
            return CliqueTable.dense(self._bincount(codes, math.prod(shape)).reshape(shape))
        cells, inverse = occupied_cells(codes, math.prod(shape))
        return CliqueTable(shape=shape, codes=cells, mass=self._bincount(inverse, cells.size))

    def full_counts(self) -> FloatArray:
        """Counts on every cell of ``X`` (for a universe small enough to hold)."""
        codes = self.cell_codes(tuple(range(len(self.domain))))
        return self._bincount(codes, self.domain.size).reshape(self.domain.shape)

    def records(self) -> NDArray[np.int64]:
        """One row per record (a row of count ``c`` repeated ``c`` times), shape ``(n, m)``."""
        matrix = np.stack(self._columns, axis=1).astype(np.int64)
        if self._counts is None:
            return matrix
        return np.repeat(matrix, self._counts.astype(np.int64), axis=0)

    def fingerprint(self) -> str:
        """A SHA-256 of the multiset of records (the same for any row order or split of
        equal rows): stored by a service to tell, when it opens the data again, that the
        data is still the data its session answered from. Never released."""
        if self.rows == 0:
            return hashlib.sha256(b"empty").hexdigest()
        order = np.lexsort(self._columns[::-1])
        sorted_columns = [c[order] for c in self._columns]
        # Equal records are adjacent once sorted; each run merges into one row (counts summed).
        starts = np.zeros(self.rows, dtype=bool)
        starts[0] = True
        for column in sorted_columns:
            starts[1:] |= column[1:] != column[:-1]
        weights = self._counts[order] if self._counts is not None else np.ones(self.rows)
        merged = np.add.reduceat(weights, np.flatnonzero(starts))
        sha = hashlib.sha256()
        sha.update(np.asarray(self.domain.sizes, dtype=np.int64).tobytes())
        for column in sorted_columns:
            sha.update(column[starts].astype(np.int64).tobytes())
        sha.update(merged.astype(np.int64).tobytes())
        return sha.hexdigest()
