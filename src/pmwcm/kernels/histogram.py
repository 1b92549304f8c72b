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
``|X|`` cells. NumPy's ``sum(axis=...)`` is slow when the kept axes are
trailing (short inner loops), so :func:`dense_marginal` reduces each run of
dropped axes with a BLAS matrix-vector product against a ones vector, which
stays memory-bound whatever the axis order (see ``benchmarks/histogram.py``).

>>> from pmwcm.kernels.domain import Domain
>>> h = DenseHistogram.uniform(Domain.from_sizes({"a": 2, "b": 3}))
>>> h.marginal(["b"]).round(3).tolist()
[0.333, 0.333, 0.333]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.clique_table import CliqueTable, FloatArray
from pmwcm.kernels.domain import Domain


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


def _runs(shape: tuple[int, ...], kept: set[int]) -> list[tuple[int, bool]]:
    """Merges consecutive axes into runs ``(size, is_kept)``."""
    runs: list[tuple[int, bool]] = []
    for axis, size in enumerate(shape):
        keep = axis in kept
        if runs and runs[-1][1] == keep:
            runs[-1] = (runs[-1][0] * size, keep)
        else:
            runs.append((size, keep))
    return runs


def dense_marginal(array: FloatArray, axes: Sequence[int]) -> FloatArray:
    """Sums ``array`` over every axis not in ``axes``; result axes in ``axes`` order.

    Runs of dropped axes are reduced largest first, each by a matrix-vector
    product with a ones vector (one memory pass, any axis order).
    """
    axes = tuple(axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"Marginal axes must be distinct, got {axes}.")
    kept_sorted = sorted(axes)
    runs = _runs(array.shape, set(axes))
    flat = array.reshape(-1)
    while any(not keep for _, keep in runs):
        j = max((i for i, (_, keep) in enumerate(runs) if not keep), key=lambda i: runs[i][0])
        pre = int(np.prod([s for s, _ in runs[:j]], dtype=np.int64))
        size = runs[j][0]
        post = int(np.prod([s for s, _ in runs[j + 1 :]], dtype=np.int64))
        ones = np.ones(size)
        block = flat.reshape(pre, size, post)
        if pre == 1:
            flat = ones @ block[0]
        elif post == 1:
            flat = block[:, :, 0] @ ones
        elif pre <= 64:
            flat = np.concatenate([ones @ block[i] for i in range(pre)])
        else:
            flat = block.sum(axis=1).reshape(-1)
        runs = runs[:j] + runs[j + 1 :]
        merged: list[tuple[int, bool]] = []
        for run in runs:
            if merged and merged[-1][1] == run[1]:
                merged[-1] = (merged[-1][0] * run[0], run[1])
            else:
                merged.append(run)
        runs = merged
    table = flat.reshape([array.shape[a] for a in kept_sorted])
    order = [kept_sorted.index(a) for a in axes]
    # ascontiguousarray turns a 0-d table (empty clique) into shape (1,): reshape back.
    result = np.ascontiguousarray(table.transpose(order)).reshape([array.shape[a] for a in axes])
    # With no axis dropped, the table is a view of ``array``: never hand out an alias.
    return result.copy() if np.may_share_memory(result, array) else result


def broadcast_factor(shape: tuple[int, ...], axes: Sequence[int], factor: FloatArray) -> FloatArray:
    """A view of a clique table (axes in ``axes`` order) broadcastable to ``shape``."""
    axes = tuple(axes)
    order = np.argsort(axes)
    table = np.asarray(factor).transpose(order)
    expanded = [1] * len(shape)
    for a in sorted(axes):
        expanded[a] = shape[a]
    return table.reshape(expanded)


class DenseHistogram:
    """A dense float64 histogram: one cell per element of the universe.

    Memory is ``8 |X|`` bytes; suitable up to ``|X|`` of a few times ``10^8`` cells.
    """

    def __init__(self, domain: Domain, values: FloatArray) -> None:
        values = np.asarray(values, dtype=np.float64)
        if values.shape != domain.shape:
            raise ValueError(
                f"Histogram values have shape {values.shape}, the domain needs {domain.shape}."
            )
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("Histogram values must be finite and non-negative.")
        total = float(values.sum())
        if total <= 0:
            raise ValueError(f"Histogram must have positive mass, got total={total}.")
        self.domain = domain
        self._values = values / total

    @classmethod
    def from_normalized(cls, domain: Domain, values: FloatArray) -> DenseHistogram:
        """A histogram holding ``values`` exactly, for values already summing to one.

        The constructor divides by the total, which can move the last bit of a
        histogram that was normalised before (a snapshot read back from JSON), and
        with it every later answer. This keeps the values as they are; they are
        still checked, and must sum to one within float64 rounding.
        """
        histogram = cls(domain, values)
        exact = np.array(values, dtype=np.float64)
        if abs(float(exact.sum()) - 1.0) > 1e-9:
            raise ValueError(f"values must sum to one, got {float(exact.sum())}.")
        histogram._values = exact
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

    def marginal(self, attrs: Sequence[str]) -> FloatArray:
        return dense_marginal(self._values, self.domain.axes(attrs))

    def reweight(
        self, attrs: Sequence[str], log_factor: FloatArray, *, marginal: FloatArray | None = None
    ) -> None:
        """In place ``D(x) <- D(x) exp(log_factor[x_C]) / Z``.

        ``Z = sum_{x_C} D_C(x_C) exp(log_factor(x_C))`` is computed on the clique
        from ``marginal`` (the current marginal on ``attrs``, if the caller has it)
        so that the update is a single pass. The factor is shifted by its maximum
        over the cells that carry mass, so ``exp`` never overflows and ``Z`` never
        underflows to zero (a zero-mass cell holding the global maximum would
        otherwise flush every other factor to zero).
        """
        axes = self.domain.axes(attrs)
        log_factor = np.asarray(log_factor, dtype=np.float64)
        expected = tuple(self.domain.shape[a] for a in axes)
        if log_factor.shape != expected:
            raise ValueError(f"log_factor has shape {log_factor.shape}, expected {expected}.")
        if not np.all(np.isfinite(log_factor)):
            raise ValueError("log_factor must be finite.")
        if marginal is None:
            marginal = self.marginal(attrs)
        marginal = np.asarray(marginal, dtype=np.float64)
        if marginal.shape != expected:
            raise ValueError(f"marginal has shape {marginal.shape}, expected {expected}.")
        support = marginal > 0
        shift = float(log_factor[support].max() if support.any() else log_factor.max())
        factor = np.exp(np.minimum(log_factor - shift, 0.0))
        z = float((marginal * factor).sum())
        np.multiply(
            self._values, broadcast_factor(self.domain.shape, axes, factor / z), out=self._values
        )

    def clique_table(self, attrs: Sequence[str]) -> CliqueTable:
        """The marginal in its clique's form (:meth:`CliqueTable.of_marginal`)."""
        return CliqueTable.of_marginal(self.marginal(attrs))

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
        return DenseHistogram(self.domain, self._values.copy())
