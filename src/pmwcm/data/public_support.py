"""A free start from PUBLIC records on the support backend.

The dense backend starts from :func:`pmwcm.mechanisms.priors.marginals.public_prior`:
the public records' empirical histogram mixed with ``uniform_weight`` of the
uniform one (so no cell is out of the updates' reach). A universe too large for
a tensor gets the same mixture on ``M`` support records
(:class:`~pmwcm.kernels.support.SupportHistogram`): the distinct public records,
weighted by their counts and sharing ``1 - uniform_weight``, and the rest of the
``M`` records drawn uniformly from ``X``, sharing ``uniform_weight``. With more
than ``M / 2`` distinct public records, ``M / 2`` records are resampled from the
public ones first. It reads only the public records and a generator with a
fixed seed: no secret, no privacy cost, and the same start every time.

>>> from pmwcm.kernels.domain import Domain
>>> d = Domain.from_sizes({"a": 2, "b": 3})
>>> h = public_support_start(d, np.array([[0, 0], [0, 0], [1, 2]]), size=1000)
>>> h.size, round(float(h.marginal(["a"])[0]), 1)
(1000, 0.7)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support import SupportHistogram

__all__ = ["public_support_start"]


def public_support_start(
    domain: Domain, records: NDArray[np.integer], *, size: int, uniform_weight: float = 0.01
) -> SupportHistogram:
    """The public records' empirical distribution, mixed with the uniform one, on
    ``size`` support records (module docstring).

    Raises:
        ValueError: ``size < 2`` or ``uniform_weight`` outside ``(0, 1]``.
    """
    if size < 2:
        raise ValueError(f"size must be at least 2, got size={size}.")
    if not 0 < uniform_weight <= 1:
        raise ValueError(f"uniform_weight must lie in (0, 1], got {uniform_weight}.")
    rng = np.random.default_rng(0)
    rows = np.asarray(records, dtype=np.int64).reshape(-1, len(domain))
    if len(rows) == 0 or uniform_weight == 1:
        return SupportHistogram.uniform(domain, size, rng=rng)
    half = size // 2
    if len(np.unique(rows, axis=0)) > half:
        rows = rows[rng.integers(0, len(rows), half)]
    seen, counts = np.unique(rows, axis=0, return_counts=True)
    spare = size - len(seen)
    uniform = np.stack([rng.integers(0, s, spare) for s in domain.sizes], axis=1)
    weights = np.concatenate(
        [(1 - uniform_weight) * counts / counts.sum(), np.full(spare, uniform_weight / spare)]
    )
    return SupportHistogram(domain, np.concatenate([seen, uniform]), np.log(weights))
