"""The tree-prior bound of ``benchmarks/accuracy/tree_prior_bound.py`` (issue 35).

The experiment replaces the prior's pairs by the data's own maximum spanning tree: the
tree must be MST's (the strongest dependences, a spanning tree), the replacement must
reach the engine's plan, and the plan must be the engine's own again afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ACCURACY = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy"
sys.path.insert(0, str(ACCURACY))

import tree_prior_bound  # noqa: E402

from pmwcm.engine.plan import plan_budget  # noqa: E402
from pmwcm.engine.practical import PMWConfig  # noqa: E402
from pmwcm.kernels.domain import Domain  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402


def _chain_data() -> PrivateData:
    """a -> b -> c strongly, d and e nearly independent of everything."""
    rng = np.random.default_rng(11)
    size = 4_000
    a = rng.integers(0, 2, size)
    b = a ^ (rng.random(size) < 0.05)
    c = b ^ (rng.random(size) < 0.1)
    d = rng.integers(0, 3, size)
    e = (d + (rng.random(size) < 0.3)) % 3  # e follows d, more loosely
    domain = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "d": 3, "e": 3})
    return PrivateData.from_records(domain, np.stack([a, b, c, d, e], axis=1))


def test_the_tree_spans_the_attributes_on_the_strongest_dependences() -> None:
    tree = tree_prior_bound.spanning_tree(_chain_data())
    assert len(tree) == 4
    touched = {a for edge in tree for a in edge}
    assert touched == {"a", "b", "c", "d", "e"}
    assert ("a", "b") in tree and ("b", "c") in tree and ("d", "e") in tree
    assert ("a", "c") not in tree  # a cycle through the chain


def test_the_replaced_cliques_reach_the_plan_and_are_restored() -> None:
    data = _chain_data()
    config = PMWConfig(epsilon=1.0, delta=1e-6, update="measure")
    before = plan_budget(config, n=data.n, domain=data.domain).prior_cliques
    cliques = [("a",), ("b",), ("c",), ("d",), ("e",), ("a", "b")]
    with tree_prior_bound.prior_cliques(cliques):
        assert plan_budget(config, n=data.n, domain=data.domain).prior_cliques == tuple(cliques)
    assert plan_budget(config, n=data.n, domain=data.domain).prior_cliques == before
    assert len(before) == 10  # every pair again
