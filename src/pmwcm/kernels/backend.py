"""Which hypothesis backend a universe gets: dense while it fits, a weighted support beyond.

A :class:`~pmwcm.kernels.histogram.DenseHistogram` is exact and fast but holds
``8 |X|`` bytes, several times over (the hypothesis, the copy an update works
on, the prior fit's trial step and gradient: :data:`DENSE_COPIES`). A
:class:`~pmwcm.kernels.support.SupportHistogram` of ``M`` records holds about
``M (m b + 48)`` bytes for ``m`` attributes coded in ``b`` bytes each, whatever
``|X|``. :func:`choose_backend` takes the dense one while its copies fit the
memory budget and the support otherwise, with ``M`` the requested support size
capped by the same budget. The choice reads only the schema and the settings
(public), and says why in words, for ``pmwcm schema``, ``pmwcm run`` and the
service's status (docs/design.md section 7).

>>> from pmwcm.kernels.domain import Domain
>>> choose_backend(Domain.from_sizes({"a": 2, "b": 3})).kind
'dense'
>>> choose_backend(Domain.from_sizes({f"a{i}": 100 for i in range(14)})).kind
'support'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support import smallest_code_dtype

__all__ = [
    "BACKENDS",
    "DEFAULT_HYPOTHESIS_MEMORY",
    "DEFAULT_SUPPORT_SIZE",
    "DENSE_COPIES",
    "MIN_SUPPORT_SIZE",
    "RECORDS_PER_PAIR_CELL",
    "SMALLEST_DEFAULT_SUPPORT",
    "BackendChoice",
    "BackendName",
    "choose_backend",
    "default_support_size",
    "mean_pair_cells",
]

BackendName = Literal["auto", "dense", "support"]
BACKENDS: tuple[BackendName, ...] = get_args(BackendName)
#: The memory the hypothesis may take (bytes), 512 MiB.
DEFAULT_HYPOTHESIS_MEMORY = 512 * 2**20
#: The largest ``M`` the support backend takes when no size is given; with the
#: data's ``n`` known, :func:`default_support_size` takes fewer.
DEFAULT_SUPPORT_SIZE = 2**18
#: The smallest ``M`` :func:`default_support_size` takes.
SMALLEST_DEFAULT_SUPPORT = 2**14
#: The smallest support worth running (below it, refuse rather than mislead).
MIN_SUPPORT_SIZE = 1000
#: Dense float64 tensors alive at once at the peak (hypothesis, update copy, fit trial, gradient).
DENSE_COPIES = 4
#: The fewest support records a cell of the schema's mean pair marginal that the
#: default support size allows (:func:`default_support_size`).
RECORDS_PER_PAIR_CELL = 32
#: Per support record, besides its codes: log-weight, probability, a copy of each, a gather.
SUPPORT_FLOATS_PER_RECORD = 6


@dataclass(frozen=True, kw_only=True)
class BackendChoice:
    """The backend chosen for a universe, and why.

    Attributes:
        kind: ``"dense"`` or ``"support"``.
        support_size: ``M`` for the support backend (0 for dense).
        memory_bytes: the hypothesis's estimated peak memory.
        reason: one sentence a curator can read.
    """

    kind: Literal["dense", "support"]
    support_size: int
    memory_bytes: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        """A JSON description (for the CLI's records and the service's status)."""
        return {
            "kind": self.kind,
            "support_size": self.support_size,
            "memory_bytes": self.memory_bytes,
            "reason": self.reason,
        }


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB" if n < 2**40 else f"{n / 2**30:.3g} GiB"


def dense_bytes(domain: Domain) -> int:
    """Peak memory of the dense backend on ``domain`` (``DENSE_COPIES * 8 |X|``)."""
    return DENSE_COPIES * 8 * domain.size


def support_bytes(domain: Domain, size: int) -> int:
    """Estimated peak memory of a support of ``size`` records on ``domain``."""
    code_bytes = np.dtype(smallest_code_dtype(domain)).itemsize * len(domain)
    return size * (code_bytes + 8 * SUPPORT_FLOATS_PER_RECORD)


def mean_pair_cells(domain: Domain) -> float:
    """The mean cells of a 2-way marginal of ``domain``, ``sum_{i<j} s_i s_j / C(d, 2)``
    (public; a one-attribute schema's own size).

    >>> mean_pair_cells(Domain.from_sizes({"a": 2, "b": 3, "c": 4}))  # (6 + 8 + 12) / 3
    8.666666666666666
    """
    sizes = domain.sizes
    if len(sizes) < 2:
        return float(sizes[0]) if sizes else 1.0
    total = sum(sizes)
    pairs = (total * total - sum(s * s for s in sizes)) // 2
    return pairs / (len(sizes) * (len(sizes) - 1) // 2)


def default_support_size(n: int | None, domain: Domain | None = None) -> int:
    """``M`` for ``n`` records (public) on ``domain``: the smallest power of two at least
    ``n`` and at least :data:`RECORDS_PER_PAIR_CELL` records a cell of ``domain``'s mean
    pair marginal, within ``[2^14, 2^18]``; :data:`DEFAULT_SUPPORT_SIZE` when ``n`` is
    not known yet.

    The support must resolve what ``n`` records can tell apart. On Adult at
    full resolution (``n = 39,073``) the prior fitted to *exact* 2-way
    marginals answers 1,000 random queries with mean excess risk ``4.08e-5``
    on ``2^16`` records and ``4.06e-5`` on ``2^18``; with the default noise,
    ``2^14`` records (``0.4 n``) were twice as bad as ``2^16`` (docs/results.md,
    "support size"). A query's cost on the hypothesis grows with the cells
    the support occupies, about ``M``: ``2^16`` answers 2.6x faster than
    ``2^18`` there and fits 4.5x faster.

    It must also resolve the schema, whatever ``n``: a query is answered from the
    support's records on its clique, and where its attributes have many values few
    records hold each cell. On the measured engine's streams (seeds 0-2,
    ``online_updates.py --support-sizes``; docs/results.md) full Adult's 8,000 rows
    (a mean pair of 1,628 cells: ``2^14`` is 10 records a cell) gave, at ``2^16`` (40 a
    cell), 0.77-0.95x the mean excess risk of ``2^14`` in all six cells (random and
    stepwise, eps 0.5, 1, 4), and at ``epsilon = 1`` on the random stream 0.77x, 0.75x
    and 0.81x at 40, 80 and 161 a cell; TV16's 8,000 rows (67 cells: 243 a cell at
    ``2^14``) moved 0.92-1.06x at ``2^16``; on full Adult's 39,073 training rows (40 a
    cell at ``2^16``) ``2^18`` gave 0.95x the mean (the paragraph above's benchmark). So
    between 10 a cell (too few) and 40 (enough) lies the rule's 32. Loans (a mean pair
    of 50 cells, 328 a cell at ``2^14``) is left as it was: a larger support moved its
    stepwise analyst's mean 0.79x (``2^15``) and 0.65x (``2^16``) at ``epsilon = 1``
    and 0.84x at 4, but 1.19x at ``epsilon = 0.5`` (``2^15``): not the schema's
    resolution at work, and not settled.

    >>> default_support_size(39_073), default_support_size(7_634), default_support_size(10**7)
    (65536, 16384, 262144)
    >>> wide = Domain.from_sizes({f"a{i}": 100 for i in range(8)})  # pairs of 10,000 cells
    >>> default_support_size(8_000, wide)
    262144
    """
    if n is None:
        return DEFAULT_SUPPORT_SIZE
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be a positive integer, got n={n!r}.")
    wanted = n
    if domain is not None:
        wanted = max(n, math.ceil(RECORDS_PER_PAIR_CELL * mean_pair_cells(domain)))
    return min(DEFAULT_SUPPORT_SIZE, max(SMALLEST_DEFAULT_SUPPORT, 1 << (wanted - 1).bit_length()))


def choose_backend(
    domain: Domain,
    *,
    memory_budget: int = DEFAULT_HYPOTHESIS_MEMORY,
    support_size: int = 0,
    backend: BackendName = "auto",
    n: int | None = None,
) -> BackendChoice:
    """Dense while it fits ``memory_budget``, else a support (module docstring).

    Args:
        domain: the universe (public).
        memory_budget: bytes the hypothesis may take.
        support_size: ``M`` for the support backend; 0 for
            :func:`default_support_size` of ``n`` and ``domain`` (capped by the budget).
        backend: ``"auto"``, or force ``"dense"`` / ``"support"``.
        n: the data's number of records (public), when known.

    Raises:
        ValueError: a forced dense backend that does not fit, a budget too small
            for :data:`MIN_SUPPORT_SIZE` records, or a bad argument (named).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got backend={backend!r}.")
    if not (isinstance(memory_budget, int) and memory_budget > 0):
        raise ValueError(f"memory_budget must be a positive integer, got {memory_budget!r}.")
    if not (isinstance(support_size, int) and support_size >= 0):
        raise ValueError(f"support_size must be a non-negative integer, got {support_size!r}.")
    dense = dense_bytes(domain)
    cells = f"|X| = {domain.size:,}" if domain.size < 10**12 else f"|X| = {domain.size:.3g}"
    if backend == "dense" or (backend == "auto" and dense <= memory_budget):
        if dense > memory_budget:
            raise ValueError(
                f"backend='dense' needs {_mib(dense)} for {cells} cells, over the "
                f"hypothesis memory budget of {_mib(memory_budget)}; use backend='auto'."
            )
        return BackendChoice(
            kind="dense",
            support_size=0,
            memory_bytes=dense,
            reason=(
                f"dense: {cells} cells need {_mib(dense)} ({DENSE_COPIES} float64 tensors), "
                f"within the {_mib(memory_budget)} hypothesis budget"
            ),
        )
    if 0 < support_size < MIN_SUPPORT_SIZE:
        raise ValueError(
            f"support_size={support_size} is below the smallest useful support "
            f"({MIN_SUPPORT_SIZE} records)."
        )
    per_record = support_bytes(domain, 1)
    fitting = memory_budget // per_record
    size = min(support_size or default_support_size(n, domain), fitting)
    if size < MIN_SUPPORT_SIZE:
        raise ValueError(
            f"The hypothesis memory budget of {_mib(memory_budget)} holds only {fitting} support "
            f"records ({per_record} bytes each); at least {MIN_SUPPORT_SIZE} are needed."
        )
    why = "requested" if backend == "support" else f"a dense tensor would need {_mib(dense)}"
    capped = " (capped by the budget)" if support_size and size < support_size else ""
    if not support_size and n is None:
        capped = " (at most; fewer for fewer records, chosen from n when the data is opened)"
    elif not support_size and size == default_support_size(n, domain):
        wide = size > default_support_size(n)
        cells = f" and pair marginals of {mean_pair_cells(domain):,.0f} cells" if wide else ""
        capped = f" (for n = {n:,} records{cells})"
    return BackendChoice(
        kind="support",
        support_size=size,
        memory_bytes=support_bytes(domain, size),
        reason=(
            f"support: {cells} cells ({why}); a weighted support of M = {size:,} "
            f"records{capped} takes {_mib(support_bytes(domain, size))} of the "
            f"{_mib(memory_budget)} hypothesis budget"
        ),
    )
