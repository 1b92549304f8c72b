"""The fast paths of issue 18 give the reference numbers.

* :func:`~pmwcm.kernels.dense_marginal.dense_marginal` (planned BLAS / reduce passes)
  equals NumPy's ``sum`` over the dropped axes to 1e-12 relative, for every
  clique shape: leading, trailing, spread, permuted, size-1 axes, none, all;
* :func:`~pmwcm.kernels.clique_scale.scale_by_clique` equals the broadcast multiply
  bit for bit (each cell meets the same factor value);
* :func:`~pmwcm.kernels.evaluator.evaluator` equals
  :meth:`~pmwcm.kernels.problem.ConvexProblem.objective` and ``gradient`` bit
  for bit for every catalogue loss (and Moreau surrogate) it evaluates with
  NumPy, and to 1e-12 for those it evaluates with the compiled kernels
  (logistic, squared, Huber; ``tests/test_compiled.py`` tests those further);
* (the engine's recorded transcripts are ``tests/test_transcripts.py``'s);
* a query is compiled once (:meth:`~pmwcm.engine.online.OnlinePMW.cm_round`'s
  cache), and again when the engine's settings are replaced;
* the prior fit's matrix form (:class:`~pmwcm.mechanisms.priors.pairwise_fit.PairwiseFit`)
  gives the pass-per-clique fit's histogram to 1e-10 relative.

No timing here: speed is measured by ``benchmarks/histogram.py`` and
``benchmarks/throughput.py``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import TOY_DOMAIN, toy_records
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.round_compiler import RoundCompiler
from pmwcm.kernels.clique_scale import broadcast_factor, scale_by_clique
from pmwcm.kernels.dense_marginal import dense_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.evaluator import CompiledGLMEvaluator, evaluator
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors import marginals as marginals_module
from pmwcm.mechanisms.priors import pairwise_fit as pairwise_fit_module
from pmwcm.mechanisms.priors.marginals import Measurement, fit_histogram, pairwise_cliques
from pmwcm.mechanisms.private_data import PrivateData
from transcripts import ALL_LOSSES

DATA = Path(__file__).parent / "data"

SHAPES = [
    (2,) * 10,
    (2,) * 18,
    (3, 5, 2, 4, 7, 2, 3, 6),
    (1, 4, 1, 3, 2),
    (5,),
    (2, 300, 2),
]


def _cliques(m: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    spread = tuple(sorted({round(i * (m - 1) / 2) for i in range(3)}))
    out = [(), tuple(range(m)), (0,), (m - 1,), spread, tuple(range(min(3, m)))]
    out.append(tuple(range(max(0, m - 3), m)))
    for _ in range(6):
        k = int(rng.integers(1, min(m, 5) + 1))
        out.append(tuple(int(a) for a in rng.permutation(m)[:k]))
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dense_marginal_equals_numpy_sum(shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.random(shape)
    for axes in _cliques(len(shape), rng):
        dropped = tuple(a for a in range(len(shape)) if a not in axes)
        kept = sorted(axes)
        expected = values.sum(axis=dropped).transpose([kept.index(a) for a in axes])
        got = dense_marginal(values, axes)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
        assert not np.may_share_memory(got, values)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_scale_by_clique_is_the_broadcast_multiply_bit_for_bit(
    shape: tuple[int, ...], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.random(shape)
    for axes in _cliques(len(shape), rng):
        factor = rng.random(tuple(shape[a] for a in axes)) + 0.5
        got = values.copy()
        scale_by_clique(got, axes, factor)
        np.testing.assert_array_equal(got, values * broadcast_factor(shape, axes, factor))


DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "c": 2, "y": 2, "r": 4})


@pytest.mark.parametrize("loss", ALL_LOSSES)
@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_evaluator_matches_the_problem(loss: str, l2: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    target = "y" if loss in ("logistic", "smoothed_hinge", "hinge") else "r"
    problem = CMQuery(loss=loss, target=target, features=("a", "b", "c"), l2=l2).compile(DOMAIN)
    weights = rng.dirichlet(np.ones(problem.design.rows))
    candidates = [problem]
    if problem.smoothness is None:
        candidates.append(problem.smoothed(0.01)[0])
    for p in candidates:
        fast = evaluator(p, weights)
        compiled = isinstance(fast, CompiledGLMEvaluator)
        assert compiled == (loss in ("logistic", "squared", "huber"))
        for _ in range(5):
            theta = rng.normal(size=p.dim)
            if compiled:
                expected = p.objective(theta, weights)
                assert math.isclose(fast.objective(theta), expected, rel_tol=1e-12)
                np.testing.assert_allclose(
                    fast.gradient(theta), p.gradient(theta, weights), rtol=1e-12, atol=1e-15
                )
            else:
                assert fast.objective(theta) == p.objective(theta, weights)
                np.testing.assert_array_equal(fast.gradient(theta), p.gradient(theta, weights))


@pytest.mark.parametrize("block_cells", [pairwise_fit_module.FIT_BLOCK_CELLS, 300, 1])
@pytest.mark.parametrize("sizes", [(2,) * 16, (3, 5, 2, 4, 7, 2, 3, 6, 3)], ids=str)
def test_pairwise_prior_fit_matches_the_pass_per_clique_fit(
    sizes: tuple[int, ...], block_cells: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matrix-form fit (1- and 2-way cliques, either order) gives the reference iterates,
    in one block of rows, in several, or one row at a time (each block with its own shift)."""
    monkeypatch.setattr(pairwise_fit_module, "FIT_BLOCK_CELLS", block_cells)
    # These domains are small enough for the fused fit: take it out of both runs.
    monkeypatch.setattr(marginals_module, "FUSED_MAX_CELLS", 0)
    rng = np.random.default_rng(seed)
    domain = Domain.from_sizes({f"x{i}": s for i, s in enumerate(sizes)})
    truth = rng.gamma(1.0, 1.0, domain.shape)
    truth /= truth.sum()
    names = domain.names
    cliques = [*pairwise_cliques(domain), (names[-1],), (names[3], names[0]), (names[-1], names[1])]
    measurements = [
        Measurement(
            clique=c,
            values=dense_marginal(truth, domain.axes(c)) + rng.normal(0, 1e-3, (1,)),
            sigma=1e-3,
        )
        for c in cliques
    ]
    assert domain.size >= marginals_module.PAIRWISE_MIN_CELLS
    fast = fit_histogram(domain, measurements, iterations=8).to_array()
    monkeypatch.setattr(marginals_module, "PAIRWISE_MIN_CELLS", 2**62)
    reference = fit_histogram(domain, measurements, iterations=8).to_array()
    np.testing.assert_allclose(fast, reference, rtol=1e-10, atol=0)


def test_each_query_is_compiled_once_and_again_for_other_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planning, answering and certifying one query compile it once; a repeat (in any
    spelling) compiles nothing; an engine built with other settings compiles it again."""
    engine = build_engine(
        PrivateData.from_records(TOY_DOMAIN, toy_records(0)),
        PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", threshold=1e12),
        noise=NumpyNoise(seed=0),
    )
    compiled: list[CMQuery] = []
    original = RoundCompiler._compile

    def counting(self: RoundCompiler, query: CMQuery) -> Any:
        compiled.append(query)
        return original(self, query)

    monkeypatch.setattr(RoundCompiler, "_compile", counting)
    query = CMQuery(loss="huber", target="y", features=("a", "c"))
    same = CMQuery(loss="huber", target="y", features=("a", "c"), loss_param=1.0, radius=1)
    assert TOY_DOMAIN.size_of("c") == 3
    first = engine.cm_round(query)
    engine.answer(query)
    engine.certified_error(same, beta=0.05, queries=10)
    assert engine.answer(same).repeated
    assert len(compiled) == 1
    assert engine.cm_round(same) is first
    other = dataclasses.replace(engine.settings, sensitivity_factor=3.0)
    engine = OnlinePMW.from_parts(dataclasses.replace(engine.parts, settings=other),
                                  state=engine.state())  # fmt: skip
    assert engine.cm_round(query) is not first
    assert len(compiled) == 2
