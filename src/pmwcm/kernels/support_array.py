"""A support hypothesis's passes in the array API standard: one code path for NumPy,
CuPy and PyTorch (:mod:`pmwcm.kernels.array_device`).

The same arithmetic as :class:`~pmwcm.kernels.support.SupportHistogram`'s host
path and :mod:`pmwcm.kernels.support_passes`, on ``m`` code columns of ``M``
records held on a device (shape ``(m, M)``) and their normalised log-weights
``w``:

* :func:`cell_codes`: a record's C-order cell on a clique by Horner's rule,
  ``c = (x_{a_1} s_2 + x_{a_2}) s_3 + ...``;
* :func:`marginal`: ``Dhat_C(c) = sum_{i : c_i = c} p_i``, a weighted bincount
  (:meth:`~pmwcm.kernels.array_device.ArrayDevice.scatter_add`);
* :func:`normalised`: ``w - logsumexp(w)`` and ``p = exp(w)``, the shift by
  ``max w`` keeping every ``exp`` finite;
* :func:`sample`: inverse-CDF draws, ``searchsorted(cumsum(p), u)``, from host
  uniforms (the generator's stream is the host path's);
* :func:`descend`: the prior fit's step ``w'_i = w_i - s sum_k r_k(c_{i,k})``.

Tables (``|C|`` cells) cross to the host; records and weights (``M`` each) stay.
Where the device has fused kernels (:mod:`pmwcm.kernels.cuda_kernels`), the
marginal and the gather run as one pass each, the codes never stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.array_device import ArrayDevice

__all__ = [
    "cell_codes",
    "descend",
    "device_marginal",
    "gathered",
    "marginal",
    "normalised",
    "occupied",
    "plus_gathered",
    "sample",
]

FloatArray = NDArray[np.float64]


def cell_codes(dev: ArrayDevice, columns: Any, axes: Sequence[int], sizes: Sequence[int]) -> Any:
    """Each record's flat C-order cell on the clique of ``axes`` (sizes ``sizes``), int64."""
    xp = dev.xp
    codes = xp.zeros(columns.shape[1], dtype=xp.int64, device=dev.device)
    for axis, size in zip(axes, sizes, strict=True):
        codes = codes * size + xp.astype(columns[axis, :], xp.int64)
    return codes


def normalised(dev: ArrayDevice, weights: Any) -> tuple[Any, Any]:
    """``(w - logsumexp(w), exp(w - logsumexp(w)))`` for finite ``w``."""
    xp = dev.xp
    top = xp.max(weights)
    log_w = weights - (top + xp.log(xp.sum(xp.exp(weights - top))))
    return log_w, xp.exp(log_w)


def device_marginal(
    dev: ArrayDevice, columns: Any, probabilities: Any, axes: Sequence[int], sizes: Sequence[int]
) -> Any:
    """The marginal table on the clique, flat (C order) and on the device."""
    cells = math.prod(sizes)
    if dev.fused is not None:  # one pass: codes in registers, weights added by atomics
        table = dev.xp.zeros(cells, dtype=dev.xp.float64, device=dev.device)
        dev.fused.clique_marginal(table, columns, probabilities, axes, sizes)
        return table
    return dev.scatter_add(cell_codes(dev, columns, axes, sizes), probabilities, cells)


def marginal(
    dev: ArrayDevice, columns: Any, probabilities: Any, axes: Sequence[int], sizes: Sequence[int]
) -> FloatArray:
    """The marginal table on the clique (host, shape ``sizes``)."""
    table = device_marginal(dev, columns, probabilities, axes, sizes)
    host = dev.to_numpy(table, copy=False)  # the table is this call's own
    return np.asarray(host, dtype=np.float64).reshape(tuple(sizes))


def plus_gathered(
    dev: ArrayDevice,
    base: Any,
    columns: Any,
    axes: Sequence[int],
    sizes: Sequence[int],
    table: FloatArray,
    *,
    in_place: bool = False,
) -> Any:
    """``base_i + table[c_i]`` for every record, ``table`` a host table on the clique.

    With ``in_place=True`` (the caller owns ``base``) the fused kernel adds into
    ``base`` itself, one pass and no new ``M``-long array; use the return value
    either way.
    """
    flat = dev.asarray(np.ascontiguousarray(table, dtype=np.float64).reshape(-1))
    if dev.fused is not None:
        out = base if in_place else dev.xp.asarray(base, copy=True)
        dev.fused.gather_add(out, columns, flat, axes, sizes)
        return out
    return base + dev.xp.take(flat, cell_codes(dev, columns, axes, sizes))


def gathered(
    dev: ArrayDevice, columns: Any, axes: Sequence[int], sizes: Sequence[int], table: FloatArray
) -> Any:
    """``table[c_i]`` for every record, ``table`` a host table on the clique."""
    zeros = dev.xp.zeros(columns.shape[1], dtype=dev.xp.float64, device=dev.device)
    return plus_gathered(dev, zeros, columns, axes, sizes, table, in_place=True)


def occupied(
    dev: ArrayDevice, columns: Any, axes: Sequence[int], sizes: Sequence[int]
) -> tuple[NDArray[np.int64], Any]:
    """A large clique's occupied cells (host, int64, increasing) and each record's index
    among them (int32, on the device): a sort on the device, only the cells cross."""
    xp = dev.xp
    found = xp.unique_inverse(cell_codes(dev, columns, axes, sizes))
    cells = np.asarray(dev.to_numpy(found.values, copy=False), dtype=np.int64)
    return cells, xp.astype(found.inverse_indices, xp.int32)  # at most M < 2^31 cells


def sample(dev: ArrayDevice, columns: Any, probabilities: Any, uniforms: FloatArray) -> Any:
    """Records (host, int64, shape ``(n, m)``) at the first ``cdf >= u cdf[-1]`` position."""
    xp = dev.xp
    cdf = xp.cumulative_sum(probabilities)
    targets = dev.asarray(uniforms, dtype=xp.float64) * cdf[-1]
    index = xp.searchsorted(cdf, targets, side="right")
    index = xp.minimum(index, xp.asarray(cdf.shape[0] - 1, dtype=index.dtype, device=dev.device))
    rows = xp.take(columns, index, axis=1)
    return dev.to_numpy(rows).T.astype(np.int64)


def descend(
    dev: ArrayDevice,
    columns: Any,
    log_w: Any,
    cliques: Sequence[tuple[Sequence[int], Sequence[int]]],
    residuals: Sequence[FloatArray],
    step: float,
) -> tuple[Any, Any, list[FloatArray]]:
    """One step of the prior fit: the normalised ``w' = w - step g``, ``g_i = sum_k r_k(c_{i,k})``,
    its probabilities, and every clique's marginal of ``w'`` (host tables).

    ``cliques`` holds each measured clique's ``(axes, sizes)``, ``residuals`` its
    residual table ``r_k = Dhat_{C_k} - y_k``.
    """
    xp = dev.xp
    gradient = xp.zeros_like(log_w)
    for (axes, sizes), table in zip(cliques, residuals, strict=True):
        gradient = plus_gathered(dev, gradient, columns, axes, sizes, table, in_place=True)
    trial, probabilities = normalised(dev, log_w - step * gradient)
    tables = [marginal(dev, columns, probabilities, axes, sizes) for axes, sizes in cliques]
    return trial, probabilities, tables
