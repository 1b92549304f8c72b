"""The audit-side sensitivity search: ``err_l(D, Dhat)`` never moves by more than the
engine's ``2 S / n + tau`` over the neighbours it tries, for every catalogue loss.

(The engine's own sensitivity contract is tested in ``test_sensitivity.py``.)
Deterministic apart from the seed; no statistical failure probability.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.audit.sensitivity import max_sensitivity_search
from pmwcm.domain import Domain
from pmwcm.losses import LOSSES
from pmwcm.queries import CMQuery

DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "y": 2, "t": 3})
BINARY = {"logistic", "hinge", "smoothed_hinge"}


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_no_neighbours_exceed_the_engine_sensitivity(loss: str, seed: int) -> None:
    query = CMQuery(loss=loss, target="y" if loss in BINARY else "t", features=("a", "b"),
                    radius=0.5, l2=0.05)  # fmt: skip
    r = max_sensitivity_search(query, DOMAIN, n=8, rng=np.random.default_rng(seed),
                               datasets=3, hypotheses=2)  # fmt: skip
    assert r.within_bound, r
    assert r.pairs > 200 and r.skipped == 0


def test_search_attains_the_bound_and_catches_s_over_n(seed: int) -> None:
    # On the ball |z| <= 1/2 the absolute loss of a +/-1 target is linear: the mirror
    # hypothesis attains 2S/n, so the search finds ratio ~1, and twice the bound S/n.
    query = CMQuery(loss="absolute", target="t", features=("a",), radius=0.5)
    good = max_sensitivity_search(query, DOMAIN, n=10, rng=np.random.default_rng(seed))
    assert good.within_bound and good.ratio > 0.99
    bad = max_sensitivity_search(query, DOMAIN, n=10, rng=np.random.default_rng(seed),
                                 sensitivity_factor=1.0)  # fmt: skip
    assert not bad.within_bound and bad.ratio > 1.9
