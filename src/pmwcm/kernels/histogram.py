"""Histograms over a domain: the engine's hypothesis ``Dhat`` and the data's ``D``.

A histogram is a non-negative float64 tensor of shape ``domain.shape`` summing
to one (docs/design.md section 1). The engine needs four operations, all behind the
:class:`Histogram` protocol so that other backends (JAX/GPU, sharded, factored)
can replace the dense one without touching the engine:

* ``marginal(C)``: ``D_C(x_C) = sum_{x : x_C fixed} D(x)``, shape ``sizes(C)`` in
  the order ``C`` is given;
* ``reweight(C, log_factor)``: ``D(x) <- D(x) exp(log_factor(x_C)) / Z``, the
  multiplicative-weights update, whose factor depends on ``x`` only through the
  clique ``C``;
* ``sample(n)``: ``n`` records drawn from ``D`` (the synthetic dataset);
* ``to_array()``: the dense tensor.

**Speed.** Both the marginal and the reweight are one streaming pass over the
``|X|`` cells: the marginal's passes are planned in
:mod:`pmwcm.kernels.dense_marginal`, the reweight's multiply in
:mod:`pmwcm.kernels.clique_scale` (``benchmarks/histogram.py`` measures both).

>>> from pmwcm.kernels.domain import Domain
>>> h = DenseHistogram.uniform(Domain.from_sizes({"a": 2, "b": 3}))
>>> h.marginal(["b"]).round(3).tolist()
[0.333, 0.333, 0.333]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.clique_scale import scale_by_clique
from pmwcm.kernels.clique_table import CliqueTable, FloatArray
from pmwcm.kernels.dense_marginal import planned_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.logspace import logsumexp
from pmwcm.kernels.lru import CellBudgetCache

#: The largest log-factor a reweight applies to a cell without mass (``e^700`` is finite).
MAX_LOG_SCALE = 700.0


@runtime_checkable
class Histogram(Protocol):
    """The operations the engine needs from a histogram backend."""

    domain: Domain

    def marginal(self, attrs: Sequence[str]) -> FloatArray:
        """The marginal table on ``attrs``, axes in the order given."""
        ...

    def reweight(
        self, attrs: Sequence[str], log_factor: FloatArray, *, marginal: FloatArray | None = None
    ) -> None:
        """In place: ``D(x) <- D(x) exp(log_factor[x_attrs]) / Z``."""
        ...

    def clique_table(self, attrs: Sequence[str]) -> CliqueTable:
        """The marginal on ``attrs`` as the engine's rounds read it (dense or sparse)."""
        ...

    def reweight_table(
        self, attrs: Sequence[str], table: CliqueTable, log_factor: FloatArray
    ) -> None:
        """:meth:`reweight` by a factor given on ``table``'s cells (``table`` is the
        current :meth:`clique_table` on ``attrs``)."""
        ...

    def sample(self, n: int, *, rng: np.random.Generator) -> NDArray[np.int64]:
        """``n`` records drawn from the histogram, shape ``(n, len(domain))``."""
        ...

    def to_array(self) -> FloatArray:
        """The dense tensor (a copy)."""
        ...

    def copy(self) -> Histogram:
        """An independent copy."""
        ...


CACHED_MARGINAL_CELLS = 4096
CACHED_MARGINAL_TOTAL = 2**20


class MarginalCache:
    """Marginals of one array of values, by clique, while the values stay as they are.

    Kept in sorted-axis order: the marginal of a clique in any order is the sorted
    one transposed, bit for bit (:func:`planned_marginal` depends on the set of
    kept axes only). Only tables of at most :data:`CACHED_MARGINAL_CELLS` cells are
    kept, at most ``budget`` cells in all (the oldest go first). The owner clears it
    whenever it changes its values in place.
    """

    def __init__(self, budget: int = CACHED_MARGINAL_TOTAL) -> None:
        budget = min(max(budget, CACHED_MARGINAL_CELLS), CACHED_MARGINAL_TOTAL)
        self._tables: CellBudgetCache[tuple[int, ...], FloatArray] = CellBudgetCache(budget)

    def clear(self) -> None:
        """Forgets every table (the owner's values have changed)."""
        self._tables.clear()

    def marginal(self, values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
        """The marginal of ``values`` (C-contiguous float64) on distinct ``axes``, in
        their order: a fresh array, bit for bit :func:`planned_marginal`'s for the
        sorted axes, transposed."""
        table = self.table(values, axes)
        return table if table.flags.writeable else table.copy()

    def table(self, values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
        """:meth:`marginal`, without its copy where it can be spared: read-only (and
        then possibly the cache's own table) or fresh and writeable. For readers that
        only read it, such as a round's clique table."""
        key = tuple(sorted(axes))
        table = self._tables.get(key)
        if table is None:
            table = planned_marginal(values, key)
            if table.size <= CACHED_MARGINAL_CELLS:
                table.flags.writeable = False
                self._tables.put(key, table, table.size)
        if key == axes:
            return table
        # As planned_marginal transposes (a 0-d table never gets here: key == axes).
        # A copy, also when the transpose is already contiguous (size-1 axes).
        return np.array(table.transpose(tuple(key.index(a) for a in axes)), order="C")


def _checked_total(domain: Domain, values: FloatArray) -> float:
    """The total of histogram ``values`` of ``domain``'s shape, finite, non-negative, positive."""
    if values.shape != domain.shape:
        raise ValueError(
            f"Histogram values have shape {values.shape}, the domain needs {domain.shape}."
        )
    # A NaN, an infinity or a negative value shows in the sum or the minimum;
    # unlike isfinite(values), neither makes a temporary array of |X| cells.
    total = float(values.sum())
    if not (math.isfinite(total) and float(values.min()) >= 0):
        raise ValueError("Histogram values must be finite and non-negative.")
    if total <= 0:
        raise ValueError(f"Histogram must have positive mass, got total={total}.")
    return total


class DenseHistogram:
    """A dense float64 histogram: one cell per element of the universe.

    Memory is ``8 |X|`` bytes; suitable up to ``|X|`` of a few times ``10^8`` cells.
    """

    def __init__(self, domain: Domain, values: FloatArray) -> None:
        values = np.asarray(values, dtype=np.float64)
        self._hold(domain, values / _checked_total(domain, values))

    def _hold(self, domain: Domain, values: FloatArray) -> None:
        self.domain = domain
        self._values = values
        self._axes_cache: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._marginals = MarginalCache()

    @classmethod
    def from_normalized(
        cls, domain: Domain, values: FloatArray, *, copy: bool = True
    ) -> DenseHistogram:
        """A histogram holding ``values`` exactly, for values already summing to one.

        The constructor divides by the total, which can move the last bit of a
        histogram that was normalised before (a snapshot read back from JSON), and
        with it every later answer. This keeps the values as they are; they are
        still checked, and must sum to one within float64 rounding. With
        ``copy=False`` the histogram takes ``values`` over (a float64 array the
        caller no longer uses, such as a fit's buffer), so no second array is made.
        """
        exact = np.array(values, dtype=np.float64) if copy else np.asarray(values, np.float64)
        total = _checked_total(domain, exact)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"values must sum to one, got {total}.")
        histogram = cls.__new__(cls)
        histogram._hold(domain, exact)
        return histogram

    @classmethod
    def uniform(cls, domain: Domain) -> DenseHistogram:
        """The uniform histogram, the paper's ``Dhat_1``."""
        return cls(domain, np.full(domain.shape, 1.0 / domain.size))

    @classmethod
    def from_records(
        cls, domain: Domain, records: NDArray[np.integer], *, weights: FloatArray | None = None
    ) -> DenseHistogram:
        """The empirical histogram of integer-coded ``records`` (shape ``(n, m)``)."""
        records = np.asarray(records)
        if records.ndim != 2 or records.shape[1] != len(domain):
            raise ValueError(f"records must have shape (n, {len(domain)}), got {records.shape}.")
        if records.shape[0] == 0:
            raise ValueError("Cannot build a histogram from zero records.")
        flat = np.ravel_multi_index(tuple(records.T), domain.shape)
        counts = np.bincount(flat, weights=weights, minlength=domain.size).astype(np.float64)
        return cls(domain, counts.reshape(domain.shape))

    def _axes(self, attrs: Sequence[str]) -> tuple[int, ...]:
        """``domain.axes(attrs)``, checked distinct and cached per clique (the engine
        repeats cliques)."""
        key = tuple(attrs)
        axes = self._axes_cache.get(key)
        if axes is None:
            axes = self.domain.axes(key)
            if len(set(axes)) != len(axes):
                raise ValueError(f"Marginal axes must be distinct, got {axes}.")
            if len(self._axes_cache) > 4096:
                self._axes_cache.clear()
            self._axes_cache[key] = axes
        return axes

    def marginal(self, attrs: Sequence[str]) -> FloatArray:
        """The marginal on ``attrs`` (axes in ``attrs`` order; a fresh array).

        Small marginals are kept per clique until the values change
        (:class:`MarginalCache`): below-threshold rounds leave the hypothesis as it
        is and ask for the same cliques again.
        """
        return self._marginals.marginal(self._values, self._axes(attrs))

    def reweight(
        self, attrs: Sequence[str], log_factor: FloatArray, *, marginal: FloatArray | None = None
    ) -> None:
        """In place ``D(x) <- D(x) exp(log_factor[x_C]) / Z``.

        ``Z = sum_{x_C} D_C(x_C) exp(log_factor(x_C))`` is computed on the clique
        from ``marginal`` (the current marginal on ``attrs``, if the caller has it)
        so that the update is a single pass. ``log Z`` is a ``logsumexp`` over the
        cells that carry mass, so ``exp`` never overflows there and ``Z`` never
        underflows to zero (a zero-mass cell holding the global maximum would
        otherwise flush every other factor to zero).
        """
        axes = self._axes(attrs)
        log_factor = np.asarray(log_factor, dtype=np.float64)
        expected = tuple([self.domain.shape[a] for a in axes])
        if log_factor.shape != expected:
            raise ValueError(f"log_factor has shape {log_factor.shape}, expected {expected}.")
        if not np.isfinite(log_factor).all():
            raise ValueError("log_factor must be finite.")
        if marginal is None:
            marginal = self.marginal(attrs)
        marginal = np.asarray(marginal, dtype=np.float64)
        if marginal.shape != expected:
            raise ValueError(f"marginal has shape {marginal.shape}, expected {expected}.")
        support = marginal > 0
        carried = bool(support.any())
        if carried:
            # log Z = logsumexp(log D_C + log_factor) over the cells with mass: the
            # factor exp(log_factor - log Z) is normalised in log space, so neither a
            # tiny Z (dividing by it overflows) nor a product below float64's normal
            # range (it loses digits) occurs on a cell that carries mass.
            log_z = logsumexp(np.log(marginal[support]) + log_factor[support])
        else:
            log_z = float(log_factor.max())
        exponent = log_factor - log_z
        # A cell's new mass is its mass times exp(exponent) <= 1, so on a cell with mass
        # the exponent exceeds MAX_LOG_SCALE only when that mass is below e^-700 (it is
        # taking nearly all of it): then the scale is applied in two steps, the second
        # a constant. Cells without mass may hold any factor: capped, it cannot overflow.
        top = float(exponent[support].max()) if carried else 0.0
        head = max(0.0, top - MAX_LOG_SCALE)
        self._marginals.clear()  # the values change in place below
        scale_by_clique(self._values, axes, np.exp(np.minimum(exponent - head, MAX_LOG_SCALE)))
        if head > 0.0:
            self._values *= math.exp(head)

    def clique_table(self, attrs: Sequence[str]) -> CliqueTable:
        """The marginal in its clique's form (:meth:`CliqueTable.of_marginal`), read-only:
        its mass may be the marginal cache's own table (no copy)."""
        table = self._marginals.table(self._values, self._axes(attrs))
        table.flags.writeable = False
        return CliqueTable.of_marginal(table)

    def reweight_table(
        self, attrs: Sequence[str], table: CliqueTable, log_factor: FloatArray
    ) -> None:
        """:meth:`reweight` by a factor on ``table``'s cells; a sparse table's absent
        cells carry no mass, so their factor (0) changes nothing."""
        factor = np.zeros(table.shape)
        factor.reshape(-1)[slice(None) if table.codes is None else table.codes] = np.ravel(
            log_factor
        )
        self.reweight(attrs, factor, marginal=table.table())

    def normalize(self) -> None:
        """Re-normalises to total mass one (removes accumulated rounding)."""
        self._marginals.clear()
        self._values /= self._values.sum()

    def sample(self, n: int, *, rng: np.random.Generator) -> NDArray[np.int64]:
        if n < 0:
            raise ValueError(f"n must be non-negative, got n={n}.")
        cdf = np.cumsum(self._values.reshape(-1))
        idx = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        idx = np.minimum(idx, cdf.size - 1)
        return np.stack(np.unravel_index(idx, self.domain.shape), axis=1).astype(np.int64)

    def to_array(self) -> FloatArray:
        return self._values.copy()

    def copy(self) -> DenseHistogram:
        """An independent copy, normalised as the constructor does (``values / total``).

        The values are already checked, so only the two passes that define the
        copy's numbers remain: the sum and the division into a new array.
        """
        copied = DenseHistogram.__new__(DenseHistogram)
        copied.domain = self.domain
        copied._axes_cache = self._axes_cache  # same domain: shared
        copied._values = self._values / float(self._values.sum())
        copied._marginals = MarginalCache()  # other values: none carry over
        return copied
