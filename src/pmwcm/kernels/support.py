"""A hypothesis on a weighted support of records: histograms beyond dense universes.

A dense histogram stores one float per cell of ``X``, so ``X`` must be
enumerable. The engine never needs that: every operation it asks of its
hypothesis reads a record only through a query's clique ``C`` (docs/design.md
section 2). A :class:`SupportHistogram` is a distribution on ``M`` records
``x_1..x_M`` (integer codes, one row each) with log-weights ``w_i``:

    Dhat(x) = sum_{i : x_i = x} p_i,    p_i = exp(w_i) / sum_j exp(w_j).

* ``marginal(C)``: a weighted bincount of the records' codes on ``C``, cost
  ``O(M |C|)`` whatever ``|X|``;
* ``reweight(C, f)``: ``w_i <- w_i + f(x_i,C)``, the multiplicative-weights
  update restricted to the support (exact on it: ``Dhat exp(f) / Z`` keeps its
  support);
* ``sample(n)``: records drawn by ``p``.

The dense histogram is the special case "support = all of ``X``", which is how
``tests/test_support_histogram.py`` checks every operation against
:class:`~pmwcm.kernels.histogram.DenseHistogram` to ``1e-12``. Probabilities are
kept normalised after every update, in log space (``logsumexp``), so no weight
underflows however many updates a cell receives.

**Devices.** Given an :class:`~pmwcm.kernels.array_device.ArrayDevice`
(``--device cuda``), a support keeps its code columns, log-weights and
probabilities on that device and runs the marginal, reweight and sampling in
the array API standard (:mod:`pmwcm.kernels.support_array`); marginals and
factors (``|C|`` cells) cross to the host, the records' ``M``-long arrays stay.
Without one (the default) every operation is the NumPy code below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels import support_array
from pmwcm.kernels.array_device import ArrayDevice
from pmwcm.kernels.clique_table import (
    CliqueTable,
    FloatArray,
    cell_codes,
    is_dense,
)
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.logspace import logsumexp
from pmwcm.kernels.lru import CellBudgetCache, LRUCache
from pmwcm.kernels.support_cells import clique_mass, index_mass, occupied_index, occupied_mass
from pmwcm.kernels.support_passes import columns_of

IndexArray = NDArray[np.int32]

#: Memory for the per-clique record-to-cell indexes kept across reweights (4 bytes
#: per record and clique): 64 cliques at the default M = 2^18.
CELL_INDEX_BYTES = 64 * 2**20
#: The clique tables kept until the next reweight hold at most this many cells per
#: support record (and at least :data:`MIN_TABLE_CELLS`). A large clique's table has up
#: to ``M`` cells of about ``16 + |C|`` bytes (code, mass, attribute codes), so at ``M =
#: 2^23`` a count of 256 tables alone let a stream of fresh wide cliques hold gigabytes
#: between two updates; two large tables' worth is what a round and its successor use.
TABLE_CELLS_PER_RECORD = 2
#: ... so that the many small tables of a stream over narrow cliques (up to 4,096
#: cells each) stay cached at any ``M``.
MIN_TABLE_CELLS = 2**20

__all__ = ["SupportHistogram"]


def smallest_code_dtype(domain: Domain) -> np.dtype:
    """The narrowest unsigned integer type that holds every attribute's codes."""
    return np.min_scalar_type(max(max(domain.sizes) - 1, 0))


class SupportHistogram:
    """A distribution on ``M`` support records with log-weights.

    Args:
        domain: the universe the records live in.
        records: integer codes, shape ``(M, len(domain))``, each column within
            its attribute's size (stored in the smallest dtype that holds them).
        log_weights: ``w``, shape ``(M,)`` (host or ``device`` array); ``None`` for
            uniform weights.
        device: the array device the support lives on; ``None`` for NumPy on the host.

    Raises:
        ValueError: for records outside the domain, an empty support, or
            non-finite log-weights.

    >>> d = Domain.from_sizes({"a": 2, "b": 3})
    >>> h = SupportHistogram(d, np.array([[0, 0], [1, 2], [1, 2]]))
    >>> h.marginal(["a"]).tolist()
    [0.3333333333333333, 0.6666666666666666]
    """

    def __init__(
        self,
        domain: Domain,
        records: NDArray[np.integer],
        log_weights: FloatArray | Any | None = None,
        *,
        device: ArrayDevice | None = None,
    ) -> None:
        records = np.asarray(records)
        if records.ndim != 2 or records.shape[1] != len(domain):
            raise ValueError(f"records must have shape (M, {len(domain)}), got {records.shape}.")
        if records.shape[0] == 0:
            raise ValueError("A support needs at least one record.")
        if records.size and (records.min() < 0 or np.any(records.max(axis=0) >= domain.shape)):
            raise ValueError("records hold codes outside the domain's value sets.")
        weights = (
            np.zeros(records.shape[0])
            if log_weights is None
            else np.asarray(
                log_weights if device is None else device.to_numpy(log_weights), dtype=np.float64
            )
        )
        if weights.shape != (records.shape[0],):
            raise ValueError(
                f"log_weights must have shape ({records.shape[0]},), got {weights.shape}."
            )
        if not np.all(np.isfinite(weights)):
            raise ValueError("log_weights must be finite.")
        self.domain = domain
        self._records = records.astype(smallest_code_dtype(domain), copy=False)
        self.device = device
        self._columns: Any = None if device is None else device.asarray(columns_of(self._records))
        # Which cell of a large clique each record sits in depends on the records
        # only, so it outlives every reweight (and is shared with copies).
        self._cell_index: LRUCache[tuple[str, ...], tuple[NDArray[np.int64], Any]] = LRUCache(
            max(4, CELL_INDEX_BYTES // (4 * records.shape[0]))
        )
        self._set_log_weights(weights)

    def _set_log_weights(self, weights: FloatArray | Any) -> None:
        """Normalises ``weights`` in log space and drops every cached marginal."""
        if self.device is None:
            self._log_weights = weights - logsumexp(weights)
            self._probabilities = np.exp(self._log_weights)
        else:
            on_device = self.device.asarray(weights)
            self._log_weights, self._probabilities = support_array.normalised(
                self.device, on_device
            )
        # Marginals and clique tables by clique, valid until the next reweight.
        self._marginals: LRUCache[tuple[str, ...], FloatArray] = LRUCache()
        self._tables: CellBudgetCache[tuple[str, ...], CliqueTable] = CellBudgetCache(
            max(MIN_TABLE_CELLS, TABLE_CELLS_PER_RECORD * self._records.shape[0])
        )

    @classmethod
    def from_normalized(
        cls,
        domain: Domain,
        records: NDArray[np.integer],
        log_weights: FloatArray,
        *,
        device: ArrayDevice | None = None,
    ) -> SupportHistogram:
        """A support holding ``log_weights`` exactly, for weights already normalised.

        The constructor renormalises in log space, which can move the last bit of
        weights read back from a snapshot, and with it every later answer.
        """
        support = cls(domain, records, log_weights, device=device)
        exact = np.array(log_weights, dtype=np.float64)
        if abs(float(logsumexp(exact))) > 1e-9:
            raise ValueError("log_weights must be normalised (logsumexp 0).")
        if device is None:
            support._log_weights, support._probabilities = exact, np.exp(exact)
        else:
            support._log_weights = device.asarray(exact)
            support._probabilities = device.xp.exp(support._log_weights)
        return support

    @classmethod
    def full(cls, domain: Domain, values: FloatArray | None = None) -> SupportHistogram:
        """Every cell of ``X`` as a record (only for enumerable ``X``); ``values`` its masses.

        With ``values`` given (a non-negative tensor of ``domain.shape``), cells of
        zero mass are kept out of the support.
        """
        cells = np.indices(domain.shape).reshape(len(domain), -1).T
        if values is None:
            return cls(domain, cells)
        mass = np.asarray(values, dtype=np.float64).reshape(-1)
        keep = mass > 0
        return cls(domain, cells[keep], np.log(mass[keep]))

    @classmethod
    def uniform(
        cls,
        domain: Domain,
        size: int,
        *,
        rng: np.random.Generator,
        device: ArrayDevice | None = None,
    ) -> SupportHistogram:
        """``size`` records drawn uniformly from ``X``, equal weights: the uniform start
        on a support (an unbiased ``size``-point approximation of the uniform histogram)."""
        if size < 1:
            raise ValueError(f"size must be positive, got size={size}.")
        # Column by column into the narrow code type: the same draws as stacking
        # int64 columns, without the two M x d int64 copies (2 GB at M = 2^17,
        # d = 1,000).
        records = np.empty((size, len(domain)), dtype=smallest_code_dtype(domain))
        for column, values in enumerate(domain.sizes):
            records[:, column] = rng.integers(0, values, size)
        return cls(domain, records, device=device)

    @property
    def size(self) -> int:
        """``M``, the number of support records."""
        return int(self._records.shape[0])

    @property
    def log_weights(self) -> FloatArray:
        """``log p``, the records' normalised log-weights (a host copy)."""
        return self._host(self._log_weights)

    @property
    def records(self) -> NDArray[np.integer]:
        """The support's records (a read-only view)."""
        view = self._records.view()
        view.flags.writeable = False
        return view

    @property
    def probabilities(self) -> FloatArray:
        """``p``, the records' probabilities (a host copy; sums to one)."""
        return self._host(self._probabilities)

    def _host(self, values: Any) -> FloatArray:
        """A host copy of one of the support's ``M``-long arrays."""
        return values.copy() if self.device is None else self.device.to_numpy(values)

    def marginal(self, attrs: Sequence[str]) -> FloatArray:
        """The marginal table on ``attrs``: a weighted bincount of the records' codes."""
        key = tuple(attrs)
        cached = self._marginals.get(key)
        if cached is not None:
            return cached.copy()
        table = self._marginal(attrs)
        self._marginals.put(key, table)
        return table.copy()

    def _marginal(self, attrs: Sequence[str]) -> FloatArray:
        """The weighted bincount of :meth:`marginal`, uncached."""
        if self.device is not None:
            axes = self.domain.axes(attrs)
            sizes = tuple(self.domain.shape[a] for a in axes)
            return support_array.marginal(
                self.device, self._columns, self._probabilities, axes, sizes
            )
        axes = self.domain.axes(attrs)
        sizes = tuple(self.domain.shape[a] for a in axes)
        return clique_mass(self._records, axes, sizes, self._probabilities).reshape(sizes)

    def _occupied(self, attrs: Sequence[str]) -> tuple[NDArray[np.int64], IndexArray | Any]:
        """A large clique's occupied cells and each record's index among them (cached;
        the index on the support's device, where it has one)."""
        key = tuple(attrs)
        cached = self._cell_index.get(key)
        if cached is None:
            axes = self.domain.axes(attrs)
            sizes = tuple(self.domain.shape[a] for a in axes)
            if self.device is not None:  # a sort on the device; only the cells cross
                cached = support_array.occupied(self.device, self._columns, axes, sizes)
            else:
                cached = occupied_index(self._records, axes, sizes)
            self._cell_index.put(key, cached)
        return cached

    def _summed_by_index(self, index: IndexArray | Any, count: int) -> FloatArray:
        """The records' probabilities summed by ``index`` (on the support's device,
        where it has one: only the ``count`` sums cross)."""
        if self.device is None:
            return index_mass(index, self._probabilities, count)
        on_device = self.device.scatter_add(index, self._probabilities, count)
        return self.device.to_numpy(on_device, copy=False)  # this call's own

    def _occupied_mass(self, attrs: Sequence[str]) -> tuple[NDArray[np.int64], FloatArray]:
        """A large clique's occupied cells and their masses: from the cached index where
        there is one (a reweight on the clique made it), else, on the host and for a
        clique of few cells (:data:`~pmwcm.kernels.support_cells.BY_CODE_MAX_CELLS`, and
        about one a record at most), in one pass without the index
        (:func:`~pmwcm.kernels.support_cells.occupied_mass`: the same sums)."""
        if self.device is None and self._cell_index.get(tuple(attrs)) is None:
            axes = self.domain.axes(attrs)
            sizes = tuple(self.domain.shape[a] for a in axes)
            found = occupied_mass(self._records, axes, sizes, self._probabilities)
            if found is not None:
                return found
        cells, inverse = self._occupied(attrs)
        return cells, self._summed_by_index(inverse, cells.size)

    def clique_table(self, attrs: Sequence[str]) -> CliqueTable:
        """Dense for a small clique; on a large one, the support's occupied cells only."""
        key = tuple(attrs)
        cached = self._tables.get(key)
        if cached is not None:
            return cached
        sizes = tuple(self.domain.shape[a] for a in self.domain.axes(attrs))
        if is_dense(sizes):
            table = CliqueTable.dense(self.marginal(attrs))
        else:
            cells, mass = self._occupied_mass(attrs)
            table = CliqueTable(shape=sizes, codes=cells, mass=mass)
        self._tables.put(key, table, table.mass.size)
        return table

    def reweight_table(
        self, attrs: Sequence[str], table: CliqueTable, log_factor: FloatArray
    ) -> None:
        """:meth:`reweight` by a factor on ``table``'s cells (every record's cell is one)."""
        if table.is_dense:
            self.reweight(attrs, np.asarray(log_factor).reshape(table.shape))
            return
        assert table.codes is not None
        log_factor = np.asarray(log_factor, dtype=np.float64)
        if log_factor.shape != table.codes.shape or not np.all(np.isfinite(log_factor)):
            raise ValueError("log_factor must be finite, one value per cell of the table.")
        cells, inverse = self._occupied(attrs)
        if not np.array_equal(table.codes, cells):
            raise ValueError("The table's cells are not this support's cells on the clique.")
        if self.device is None:
            factor = log_factor[inverse]
        else:
            factor = self.device.xp.take(self.device.asarray(log_factor), inverse)
        self._set_log_weights(self._log_weights + factor)

    def reweight(
        self, attrs: Sequence[str], log_factor: FloatArray, *, marginal: FloatArray | None = None
    ) -> None:
        """In place: ``w_i <- w_i + log_factor[x_i,attrs]``, then renormalised in log space.

        ``marginal`` is accepted for the :class:`~pmwcm.kernels.histogram.Histogram`
        contract and not needed: the normaliser is a ``logsumexp`` over the support.
        """
        axes = self.domain.axes(attrs)
        sizes = tuple(self.domain.shape[a] for a in axes)
        log_factor = np.asarray(log_factor, dtype=np.float64)
        if log_factor.shape != sizes:
            raise ValueError(f"log_factor has shape {log_factor.shape}, expected {sizes}.")
        if not np.all(np.isfinite(log_factor)):
            raise ValueError("log_factor must be finite.")
        if self.device is not None:
            self._set_log_weights(
                support_array.plus_gathered(
                    self.device, self._log_weights, self._columns, axes, sizes, log_factor
                )
            )
            return
        codes = cell_codes(self._records, axes, sizes)
        self._set_log_weights(self._log_weights + log_factor.reshape(-1)[codes])

    def sample(self, n: int, *, rng: np.random.Generator) -> NDArray[np.int64]:
        """``n`` records drawn from the support by their probabilities."""
        if n < 0:
            raise ValueError(f"n must be non-negative, got n={n}.")
        if self.device is not None:
            return support_array.sample(
                self.device, self._columns, self._probabilities, rng.random(n)
            )
        cdf = np.cumsum(self._probabilities)
        index = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        index = np.minimum(index, cdf.size - 1)
        return self._records[index].astype(np.int64)

    def to_array(self) -> FloatArray:
        """The dense tensor over ``X`` (only for enumerable ``X``)."""
        return self._marginal(self.domain.names)

    def copy(self) -> SupportHistogram:
        """An independent copy (records shared: they are never written)."""
        twin = SupportHistogram.__new__(SupportHistogram)
        twin.domain = self.domain
        twin._records = self._records
        twin.device = self.device
        twin._columns = self._columns
        if self.device is None:
            twin._log_weights = self._log_weights.copy()
            twin._probabilities = self._probabilities.copy()
        else:
            xp = self.device.xp
            twin._log_weights = xp.asarray(self._log_weights, copy=True)
            twin._probabilities = xp.asarray(self._probabilities, copy=True)
        twin._marginals = self._marginals.copy()  # cached tables are never written
        twin._tables = self._tables.copy()
        twin._cell_index = self._cell_index
        return twin
