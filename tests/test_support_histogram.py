"""The weighted-support hypothesis against the dense one (issue 13's contract suite).

With the support equal to every cell of ``X`` (masses as log-weights),
:class:`SupportHistogram` must be the dense histogram in another representation:
marginals on every clique, multiplicative updates, dense tensors and samples
agree to ``1e-12`` on hypothesis-generated domains, and an engine started from
either gives the same transcript.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TOY_DOMAIN, toy_records
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.support import SupportHistogram, smallest_code_dtype
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

SETTINGS = settings(derandomize=True, deadline=None, max_examples=60)


@st.composite
def worlds(draw: Any) -> tuple[Domain, np.ndarray, np.random.Generator]:
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    domain = Domain.from_sizes({f"a{i}": s for i, s in enumerate(sizes)})
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.dirichlet(np.full(domain.size, 0.5)).reshape(domain.shape)
    values[rng.random(domain.shape) < 0.2] = 0.0  # some empty cells leave the support
    if values.sum() == 0:
        values.flat[0] = 1.0
    return domain, values / values.sum(), rng


def cliques(domain: Domain, rng: np.random.Generator) -> list[list[str]]:
    names = list(domain.names)
    out = [[], names, names[::-1]]
    for _ in range(4):
        k = int(rng.integers(1, len(names) + 1))
        out.append([str(a) for a in rng.choice(names, size=k, replace=False)])
    return out


@SETTINGS
@given(world=worlds())
def test_marginals_and_updates_agree_with_the_dense_histogram(world: Any) -> None:
    domain, values, rng = world
    dense = DenseHistogram(domain, values)
    support = SupportHistogram.full(domain, values)
    assert isinstance(support, Histogram)
    for clique in cliques(domain, rng):
        np.testing.assert_allclose(support.marginal(clique), dense.marginal(clique), atol=1e-12)
    for clique in cliques(domain, rng)[1:]:
        sizes = tuple(domain.size_of(a) for a in clique)
        factor = rng.normal(scale=3.0, size=sizes)
        dense.reweight(clique, factor)
        support.reweight(clique, factor)
        np.testing.assert_allclose(support.to_array(), dense.to_array(), atol=1e-12)
    for clique in cliques(domain, rng):
        np.testing.assert_allclose(support.marginal(clique), dense.marginal(clique), atol=1e-12)


@SETTINGS
@given(world=worlds())
def test_samples_are_the_dense_histograms_samples(world: Any) -> None:
    domain, values, _ = world
    dense = DenseHistogram(domain, values)
    support = SupportHistogram.full(domain, values)
    ours = support.sample(500, rng=np.random.default_rng(7))
    theirs = dense.sample(500, rng=np.random.default_rng(7))
    # the same uniform draws land on the same cells, up to float ties at cell edges
    assert (ours == theirs).all(axis=1).mean() >= 0.99
    assert ours.dtype == np.int64 and ours.shape == (500, len(domain))


def test_copies_are_independent_and_records_compact() -> None:
    domain = Domain.from_sizes({"a": 2, "b": 300})
    h = SupportHistogram(domain, np.array([[0, 0], [1, 299]]))
    assert h.records.dtype == smallest_code_dtype(domain) == np.uint16
    twin = h.copy()
    twin.reweight(["a"], np.array([0.0, 5.0]))
    assert h.marginal(["a"]).tolist() == [0.5, 0.5]
    assert twin.marginal(["a"])[1] > 0.99
    with pytest.raises(ValueError, match="read-only"):
        h.records[0, 0] = 1


@pytest.mark.parametrize(
    ("records", "weights", "match"),
    [
        (np.array([[0, 3]]), None, "outside the domain"),
        (np.array([[-1, 0]]), None, "outside the domain"),
        (np.zeros((0, 2), dtype=int), None, "at least one record"),
        (np.array([[0, 0]]), np.array([np.nan]), "finite"),
        (np.array([[0, 0, 0]]), None, "shape"),
    ],
)
def test_bad_supports_are_refused(records: Any, weights: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SupportHistogram(Domain.from_sizes({"a": 2, "b": 3}), records, weights)


def test_an_engine_on_the_full_support_gives_the_dense_transcript() -> None:
    """The engine's math does not change with the backend (uniform start, updates, sweeps)."""
    data = PrivateData.from_records(TOY_DOMAIN, toy_records(0))
    config = PMWConfig(
        epsilon=2.0,
        delta=1e-6,
        prior="uniform",
        max_updates=3,
        threshold=-1.0,
        after_halt="synthetic",
    )
    queries = [
        CMQuery(loss="logistic", target="y", features=("a", "b")),
        CMQuery(loss="hinge", target="y", features=("c",)),
        CMQuery(loss="logistic", target="y", features=("a", "c", "d")),
        CMQuery(loss="squared", target="c", features=("a", "e")),
        CMQuery(loss="logistic", target="y", features=("b", "e")),
    ]
    transcripts = []
    for prior in (DenseHistogram.uniform(TOY_DOMAIN), SupportHistogram.full(TOY_DOMAIN)):
        engine = build_engine(data, config, noise=NumpyNoise(seed=3), prior=prior)
        transcripts.append([engine.answer(q) for q in queries])
        assert type(engine.hypothesis) is type(prior)
    assert [a.source for a in transcripts[0]] == ["oracle"] * 3 + ["synthetic"] * 2
    for dense, support in zip(*transcripts, strict=True):
        assert (dense.source, dense.updates) == (support.source, support.updates)
        np.testing.assert_allclose(support.value, dense.value, atol=1e-9)
