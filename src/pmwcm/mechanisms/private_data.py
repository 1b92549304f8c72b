"""The private dataset, seen only through its clique marginals.

Every read of the real data ``D`` by the engines, oracles and baselines goes
through :class:`PrivateData`, so that the places where privacy is spent are
easy to audit: the sparse vector's query ``err_l(D, Dhat)`` and the oracle's
solve both need only ``D_C``, the marginal of ``D`` on the query's clique.

``D`` can be given as records (a :class:`~pmwcm.data.table.Dataset` or an integer
array) or directly as a histogram with a stated ``n`` -- the latter lets tests
reproduce the paper's theorems at ``n`` far beyond what records would allow.
Marginals are cached per clique: the data never changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import CliqueTable, cell_codes, is_dense
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, FloatArray
from pmwcm.kernels.lru import LRUCache


class PrivateData:
    """Read-only access to the real data's marginals.

    Args:
        domain: the data universe.
        n: number of records (public, as in the paper).
        records: integer codes, shape ``(n, len(domain))``; or
        histogram: the normalised histogram ``D`` (with ``n`` given).
    """

    def __init__(
        self,
        *,
        domain: Domain,
        n: int,
        records: NDArray[np.integer] | None = None,
        histogram: DenseHistogram | None = None,
    ) -> None:
        if (records is None) == (histogram is None):
            raise ValueError("PrivateData needs exactly one of records= or histogram=.")
        if not (isinstance(n, int | np.integer) and n >= 1):
            raise ValueError(f"n must be a positive integer, got n={n!r}.")
        if records is not None:
            records = np.asarray(records)
            if records.ndim != 2 or records.shape[1] != len(domain):
                raise ValueError(
                    f"records must have shape (n, {len(domain)}), got {records.shape}."
                )
            if records.shape[0] != n:
                raise ValueError(f"n={n} but {records.shape[0]} records were given.")
        if histogram is not None and histogram.domain != domain:
            raise ValueError("histogram is over a different domain.")
        self.domain = domain
        self.n = int(n)
        self._records = records
        self._histogram = histogram
        self._cache: LRUCache[tuple[str, ...], FloatArray] = LRUCache()
        # Sparse tables of large cliques can hold up to n cells each: keep the recent ones.
        self._tables: LRUCache[tuple[str, ...], CliqueTable] = LRUCache()

    @classmethod
    def from_records(cls, domain: Domain, records: NDArray[np.integer]) -> PrivateData:
        """Wraps integer-coded records (``n`` is their number)."""
        records = np.asarray(records)
        return cls(domain=domain, n=int(records.shape[0]), records=records)

    def marginal(self, clique: Sequence[str]) -> FloatArray:
        """``D_C``: the normalised marginal on ``clique`` (axes in the order given)."""
        key = tuple(clique)
        table = self._cache.get(key)
        if table is None:
            if self._histogram is not None:
                table = self._histogram.marginal(key)
            else:
                assert self._records is not None
                axes = self.domain.axes(key)
                shape = tuple(self.domain.sizes[a] for a in axes)
                if axes:
                    flat = np.ravel_multi_index(tuple(self._records[:, list(axes)].T), shape)
                    counts = np.bincount(flat, minlength=int(np.prod(shape, dtype=np.int64)))
                    table = counts.reshape(shape).astype(np.float64) / self.n
                else:  # the empty clique: all the mass in one cell, as for histograms
                    table = np.ones(())
            table.setflags(write=False)
            self._cache.put(key, table)
        return table

    def clique_table(self, clique: Sequence[str]) -> CliqueTable:
        """``D_C`` as the engine's rounds read it: dense on a small clique, on the
        occupied cells (at most ``n``) of a large one (the rule of
        :func:`~pmwcm.kernels.clique_table.is_dense`, public)."""
        key = tuple(clique)
        table = self._tables.get(key)
        if table is None:
            axes = self.domain.axes(key)
            shape = tuple(self.domain.sizes[a] for a in axes)
            if is_dense(shape) or self._records is None:
                table = CliqueTable.of_marginal(self.marginal(key))
            else:
                table = CliqueTable.from_codes(shape, cell_codes(self._records, axes, shape))
            table.mass.setflags(write=False)
            self._tables.put(key, table)
        return table

    def histogram(self) -> DenseHistogram:
        """The full histogram ``D`` (dense; for baselines and tests)."""
        if self._histogram is not None:
            return self._histogram.copy()
        assert self._records is not None
        return DenseHistogram.from_records(self.domain, self._records)
