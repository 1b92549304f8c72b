"""The data's records for a mechanism that counts rows (AIM and MST), whatever holds them.

mbi counts rows, so a
:class:`~pmwcm.mechanisms.private_data.PrivateData` held as records, or read from
a source into its pinned snapshot of records and counts, hands them over (the
mechanisms see only the multiset). One built from a histogram (tests that state
``n``) is turned back into ``n`` records by rounding ``n * D`` with the largest
remainders, which is ``D``'s own records when ``n * D`` is a table of counts and
never refuses: whether it may is decided from what kind of data this is, its
universe (:data:`REBUILD_CELLS`) and ``n`` (:data:`REBUILD_RECORDS`), all public.
A check of ``n * D``'s integrality would depend on the counts' rounding: above
``n`` near ``5 * 10^9`` it accepted one dataset and refused its neighbour.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pmwcm.mechanisms.private_data import PrivateData

__all__ = ["REBUILD_CELLS", "REBUILD_RECORDS", "largest_remainder_counts", "records_of"]

#: The largest universe whose records are rebuilt from a histogram of counts (the
#: dense backend's scale); beyond it the data must be held as records.
REBUILD_CELLS = 2**24
#: The most records rebuilt from a histogram (int64 codes: 8 bytes per attribute each).
REBUILD_RECORDS = 10**8


def records_of(data: PrivateData) -> NDArray[np.int64]:
    """The data's ``n`` records (integer codes): as held, or rebuilt from ``n * D``
    (module docstring).

    Raises:
        ValueError: the data is a histogram on a universe beyond
            :data:`REBUILD_CELLS` or with ``n`` beyond :data:`REBUILD_RECORDS`.
            Decided from what kind of data this is, its schema and ``n``, which
            are public, before the data is read.
    """
    held = data.held_records()
    if held is not None:
        return held
    if data.domain.size > REBUILD_CELLS or data.n > REBUILD_RECORDS:
        raise ValueError(
            f"The AIM/MST priors read the data's records; this data is a histogram on "
            f"{data.domain.size:.3g} cells with n = {data.n:.3g} (records are rebuilt for at "
            f"most {REBUILD_CELLS:.3g} cells and n <= {REBUILD_RECORDS:.3g}). Load it as "
            "records (PrivateData.from_records) or use prior='marginals'."
        )
    counts = largest_remainder_counts(data.histogram().to_array().ravel(), data.n)
    cells = np.repeat(np.arange(data.domain.size), counts)
    return np.stack(np.unravel_index(cells, data.domain.shape), axis=1).astype(np.int64)


def largest_remainder_counts(distribution: NDArray[np.float64], n: int) -> NDArray[np.int64]:
    """``n * distribution`` rounded to non-negative integers that sum to exactly ``n``
    (Hamilton's method: floors, then one more to the largest remainders, ties by index).

    Never refuses: a table of counts ``c / n`` comes back as ``c`` (each remainder is then
    a rounding error far below 1/2), anything else as the nearest such table.

    >>> largest_remainder_counts(np.array([0.5, 0.25, 0.25]), 4).tolist()
    [2, 1, 1]
    >>> largest_remainder_counts(np.array([1, 1, 1]) / 3, 2).tolist()
    [1, 1, 0]
    """
    scaled = np.clip(np.asarray(distribution, dtype=np.float64), 0.0, None)
    scaled *= n / max(float(scaled.sum()), 1e-300)
    floors = np.floor(scaled)
    counts = floors.astype(np.int64)
    # The floors sum to at most n (each is at most its share); a count stored as
    # c - 1e-12 floors to c - 1 with a remainder near 1, and is topped up first.
    missing = max(int(n - counts.sum()), 0)
    order = np.argsort(-(scaled - floors), kind="stable")
    counts[order[:missing]] += 1
    return counts
