"""Auditing the workload-aware start's selection
(:func:`pmwcm.mechanisms.priors.workload.select_clique`, issue 35 item 4).

**The guarantee audited.** One round picks a candidate clique ``C`` with
probability ``exp(eps_0 q(C) / (2 Delta))``, ``q(C) = ||D_C - Dhat_C||_1 - bias``,
``Delta = 2/n``: the exponential mechanism, pure ``eps_0``-DP (McSherry, Talwar
2007; ``eps_0^2/8``-zCDP, Cesar, Rogers 2021), charged as
``EpsilonDeltaDpEvent(eps_0)``. The audit's claim is ``eps_0`` at ``delta = 0``.

**Worst-case neighbours** (:func:`selection_pair`). Six binary attributes,
``n = 8``, the uniform hypothesis, candidates ``(a, b, c)`` and ``(d, e, f)``.
In ``D0`` the first clique's marginal is uniform (one record per cell: its
``L1`` gap is 0) and the second's holds every record in one cell (gap
``2 - 2/n``), so the first is the unlikely pick. The replaced record leaves a
cell of each, and its replacement lands on an occupied cell of the first and
an empty cell of the second: the first quality rises by ``2/n`` and the second
falls by ``2/n``, the full sensitivity in opposite directions, so the log-odds
move by the whole ``eps_0`` and the unlikely pick's probability ratio is
``(1 + e^{3.5 eps_0}) / (1 + e^{2.5 eps_0})``, ``e^{0.95}`` at ``eps_0 = 1``.

**Trials** call the real :func:`select_clique` once each, with a
:class:`~pmwcm.mechanisms.noise.NumpyNoise` on the audit's generator; events
are sets of picks (:class:`~pmwcm.audit.events.CategoricalFamily`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import CategoricalFamily
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.workload import select_clique
from pmwcm.mechanisms.private_data import PrivateData

__all__ = ["CANDIDATES", "SelectFn", "selection_pair", "workload_selection_case"]

SelectFn = Callable[..., int]
"""``select(data, hypothesis, candidates, *, epsilon, sigma, noise)``, as :func:`select_clique`."""

#: The audited round's two candidate cliques.
CANDIDATES = (("a", "b", "c"), ("d", "e", "f"))


def selection_pair() -> tuple[PrivateData, PrivateData]:
    """``D0`` and its neighbour ``D1`` (module docstring), 8 records on 6 binary attributes."""
    domain = Domain.from_sizes({name: 2 for name in "abcdef"})
    first = np.array([[(c >> 2) & 1, (c >> 1) & 1, c & 1] for c in range(8)])
    second = np.zeros((8, 3), dtype=np.int64)  # every record in cell 0: far from uniform
    records0 = np.column_stack([first, second])
    records1 = records0.copy()
    records1[0] = [1, 1, 1, 1, 1, 1]  # record 0 (cells 0 and 0) moves to cells 7 and 7
    return (
        PrivateData.from_records(domain, records0),
        PrivateData.from_records(domain, records1),
    )


def workload_selection_case(
    *,
    label: str = "workload selection",
    epsilon: float = 1.0,
    select: SelectFn = select_clique,
) -> AuditCase:
    """The round of :func:`selection_pair` run by ``select`` at ``eps_0 = epsilon``."""
    d0, d1 = selection_pair()
    hypothesis = DenseHistogram.uniform(d0.domain)
    sigma = 0.01  # public; the same bias for both candidates (equal cells)

    def mechanism(data: PrivateData, trials: int, rng: np.random.Generator, /) -> Any:
        noise = NumpyNoise(generator=rng)
        picks = [
            select(data, hypothesis, CANDIDATES, epsilon=epsilon, sigma=sigma, noise=noise)
            for _ in range(trials)
        ]
        return np.asarray(picks, dtype=np.int64)

    return AuditCase(
        name=f"{label} (2 cliques, n=8)",
        guarantee=f"exponential mechanism, pure eps_0 = {epsilon:g}",
        mechanism=mechanism,
        dataset0=d0,
        dataset1=d1,
        events=CategoricalFamily(key=lambda o: np.asarray(o, dtype=np.int64), name="pick"),
        claimed_epsilon=epsilon,
        delta=0.0,
    )
