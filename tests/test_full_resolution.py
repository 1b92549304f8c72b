"""Issue 13's machinery: sparse clique tables, block designs, the backend choice,
the support prior and support snapshots, each checked against its dense twin."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pmwcm.data.bundled import load_adult
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.snapshot import restore, snapshot
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE, choose_backend
from pmwcm.kernels.clique_table import (
    DENSE_CLIQUE_CELLS,
    DIRECT_CELLS_PER_CODE,
    CliqueTable,
    is_dense,
    occupied_cells,
    position_bits,
    sort_keys_by_code,
)
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.design import BlockDesign, DenseDesign
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.histogram_codec import decode_histogram, encode_histogram
from pmwcm.kernels.queries import CMQuery, QueryError
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors import support as support_prior_module
from pmwcm.mechanisms.priors.marginals import fit_histogram, measure_marginals, pairwise_cliques
from pmwcm.mechanisms.priors.support import (
    PRECISE_FIT_SIGMA,
    fit_support,
    support_fit_budget,
    support_iterations,
    support_marginal_prior,
)
from pmwcm.mechanisms.priors.support_proposal import tree_edges, tree_proposal
from pmwcm.mechanisms.private_data import PrivateData

SETTINGS = settings(derandomize=True, deadline=None, max_examples=40)

#: Five attributes of 6 values and a binary target: the 5-feature clique has
#: 6^5 * 2 = 15,552 cells, over DENSE_CLIQUE_CELLS, while X stays enumerable.
WIDE = Domain.from_sizes({"a": 6, "b": 6, "c": 6, "d": 6, "e": 6, "y": 2})


def wide_records(seed: int, n: int = 3000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size=(n, 5))
    logit = 0.6 * (x[:, 0] - 2.5) - 0.4 * (x[:, 2] - 2.5) + 0.3 * (x[:, 4] > 3)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return np.column_stack([x, y])


WIDE_QUERIES = [
    CMQuery(loss="logistic", target="y", features=("a", "b", "c", "d", "e")),
    CMQuery(
        loss="logistic",
        target="y",
        features=("a", "c", "e"),
        encodings={"a": "ordinal"},
        interactions=(("a", "c"),),
    ),
    CMQuery(loss="squared", target="e", features=("a", "b", "c", "d"), encodings={"b": "ordinal"}),
    CMQuery(loss="hinge", target="y", features=("b", "d")),
]


# --- sparse clique tables ---


def test_the_dense_rule_reads_only_the_clique_shape() -> None:
    assert is_dense((DENSE_CLIQUE_CELLS,)) and not is_dense((DENSE_CLIQUE_CELLS + 1,))
    clique = ("a", "b", "c", "d", "e", "y")
    assert not is_dense(WIDE.project(clique).sizes)


def test_a_sparse_table_holds_exactly_the_occupied_cells() -> None:
    data = PrivateData.from_records(WIDE, wide_records(0))
    clique = ("a", "b", "c", "d", "e", "y")
    table = data.clique_table(clique)
    assert not table.is_dense and table.codes is not None
    dense = data.marginal(clique)
    np.testing.assert_array_equal(np.flatnonzero(dense), table.codes)
    np.testing.assert_allclose(table.mass, dense.reshape(-1)[table.codes], atol=1e-15)
    np.testing.assert_allclose(table.table(), dense, atol=1e-15)
    assert table.cells().shape == (table.codes.size, len(clique))
    np.testing.assert_array_equal(
        table.cells(), np.stack(np.unravel_index(table.codes, table.shape), axis=1)
    )


@pytest.mark.parametrize("query", WIDE_QUERIES, ids=lambda q: q.loss)
def test_losses_and_gradients_agree_on_the_sparse_and_the_dense_table(query: CMQuery) -> None:
    data = PrivateData.from_records(WIDE, wide_records(1))
    full = query.compile(WIDE)
    dense = CliqueTable.dense(data.marginal(query.clique))
    occupied = data.clique_table(query.clique)
    if occupied.is_dense:
        occupied = CliqueTable.from_codes(
            dense.shape, np.flatnonzero(dense.mass), dense.mass[dense.mass > 0]
        )
    assert occupied.codes is not None
    on_cells = full.on_cells(occupied.cells())
    assert (on_cells.lipschitz, on_cells.scale, on_cells.smoothness) == (
        full.lipschitz,
        full.scale,
        full.smoothness,
    )
    theta = np.random.default_rng(2).normal(size=full.dim) * 0.3
    assert on_cells.objective(theta, occupied.mass) == pytest.approx(
        full.objective(theta, dense.mass), abs=1e-13
    )
    np.testing.assert_allclose(
        on_cells.gradient(theta, occupied.mass), full.gradient(theta, dense.mass), atol=1e-13
    )


def test_clique_cells_beyond_int64_codes_are_refused_from_the_spec() -> None:
    huge = Domain.from_sizes({f"x{i}": 1000 for i in range(7)} | {"y": 2})
    data = PrivateData.from_records(huge, np.zeros((5, 8), dtype=int))
    engine = build_engine(
        data,
        PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", support_size=MIN_SUPPORT_SIZE),
        noise=NumpyNoise(seed=0),
    )
    before = engine.ledger.spent_epsilon()
    with pytest.raises(QueryError, match="cells"):
        engine.answer(CMQuery(loss="logistic", target="y", features=tuple(huge.names[:7])))
    assert engine.ledger.spent_epsilon() == before and not engine.answers


# --- block designs ---


@SETTINGS
@given(
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    ordinal=st.lists(st.booleans(), min_size=4, max_size=4),
    interact=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_block_designs_are_their_dense_matrices(
    sizes: list[int], ordinal: list[bool], interact: bool, seed: int
) -> None:
    names = [f"f{i}" for i in range(len(sizes))]
    domain = Domain.from_sizes(dict(zip(names, sizes, strict=True)) | {"y": 2})
    encodings = {n: "ordinal" for n, o in zip(names, ordinal, strict=False) if o}
    groups = ((names[0], names[1]),) if interact and len(names) > 1 else ()
    query = CMQuery(
        loss="logistic", target="y", features=tuple(names), encodings=encodings, interactions=groups
    )
    problem = query.compile(domain)
    cells = np.indices(domain.project(query.clique).shape).reshape(len(query.clique), -1).T
    built = query._features(domain.project(query.clique), cells)[0]
    block = built if isinstance(built, BlockDesign) else None
    rng = np.random.default_rng(seed)
    matrix = problem.features
    theta, v, w = rng.normal(size=problem.dim), rng.normal(size=len(cells)), rng.random(len(cells))
    designs: list[Any] = [problem.design, DenseDesign(matrix), block]
    for design in designs:
        if design is None:
            continue
        np.testing.assert_allclose(design.matvec(theta), matrix @ theta, atol=1e-12)
        np.testing.assert_allclose(design.rmatvec(v), matrix.T @ v, atol=1e-12)
        np.testing.assert_allclose(design.gram(w), (matrix.T * w) @ matrix, atol=1e-12)
        np.testing.assert_allclose(design.row_norms(), np.linalg.norm(matrix, axis=1), atol=1e-12)
        np.testing.assert_array_equal(design.dense(), matrix)
    # B over the whole clique, whatever cells a problem holds
    assert problem.feature_bound == pytest.approx(np.linalg.norm(matrix, axis=1).max(), abs=1e-12)


def test_a_wide_one_hot_query_uses_the_block_form() -> None:
    domain = load_adult("full").domain
    query = CMQuery(loss="logistic", target="income>50K", features=("age", "native-country"))
    problem = query.compile(domain)
    assert isinstance(problem.design, BlockDesign) and problem.dim == 85 + 42 + 1


# --- the backend choice ---


def test_the_backend_is_dense_while_it_fits_and_a_support_beyond() -> None:
    small = choose_backend(Domain.from_sizes({"a": 2, "b": 3}))
    assert small.kind == "dense" and small.support_size == 0 and "dense" in small.reason
    full = choose_backend(load_adult("full").domain)
    assert full.kind == "support" and full.support_size == 2**18
    assert "6.41e+17" in full.reason and "M = 262,144" in full.reason
    capped = choose_backend(load_adult("full").domain, memory_budget=2**20)
    assert capped.kind == "support" and capped.support_size < 2**18
    assert capped.memory_bytes <= 2**20
    assert json.loads(json.dumps(capped.to_dict()))["kind"] == "support"


def test_the_default_support_size_follows_the_records_and_the_pair_cells() -> None:
    narrow = Domain.from_sizes({f"a{i}": 8 for i in range(14)})  # pairs of 64 cells
    sizes = {n: choose_backend(narrow, n=n).support_size for n in (100, 39_073, 65_536, 10**7)}
    assert sizes == {100: 2**14, 39_073: 2**16, 65_536: 2**16, 10**7: 2**18}
    assert "for n = 39,073 records)" in choose_backend(narrow, n=39_073).reason
    domain = load_adult("full").domain  # pairs of 1,628 cells: 52,093 records at 32 a cell
    sizes = {n: choose_backend(domain, n=n).support_size for n in (100, 39_073, 65_536, 10**7)}
    assert sizes == {100: 2**16, 39_073: 2**16, 65_536: 2**16, 10**7: 2**18}
    reason = choose_backend(domain, n=8000).reason
    assert "for n = 8,000 records and pair marginals of 1,628 cells" in reason
    assert "for n = 39,073 records)" in choose_backend(domain, n=39_073).reason
    assert "chosen from n" in choose_backend(domain).reason  # n not known yet: the most M
    assert choose_backend(domain, n=39_073, support_size=5000).support_size == 5000
    with pytest.raises(ValueError, match="n must be a positive integer"):
        choose_backend(domain, n=0)


def test_the_engine_reports_the_support_size_it_holds() -> None:
    adult = load_adult("full")
    rng = np.random.default_rng(0)
    records = adult.records[rng.choice(adult.n, 3000, replace=False)]
    data = PrivateData.from_records(adult.domain, records)
    engine = build_engine(data, PMWConfig(epsilon=1.0, delta=1e-6), noise=NumpyNoise(seed=0))
    assert isinstance(engine.hypothesis, SupportHistogram)
    assert engine.backend is not None and engine.backend.support_size == 2**16
    assert engine.hypothesis.size == 2**16


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"backend": "dense"}, "backend='dense' needs"),
        ({"backend": "gpu"}, "backend must be one of"),
        ({"memory_budget": 1000}, "holds only"),
        ({"memory_budget": -1}, "memory_budget"),
        ({"support_size": -5}, "support_size"),
        ({"support_size": 256}, "support_size=256 is below"),
    ],
)
def test_impossible_backend_settings_are_refused_by_name(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        choose_backend(load_adult("full").domain, **kwargs)


def test_a_refused_backend_spends_nothing() -> None:
    adult = load_adult("full")
    data = PrivateData.from_records(adult.domain, adult.records)
    config = PMWConfig(epsilon=1.0, delta=1e-6, backend="dense")
    with pytest.raises(ValueError, match="backend='dense'"):
        build_engine(data, config, noise=NumpyNoise(seed=0))


# --- the support prior ---


def test_the_support_fit_on_every_cell_is_the_dense_fit() -> None:
    domain = Domain.from_sizes({"a": 3, "b": 2, "c": 4, "d": 2})
    rng = np.random.default_rng(0)
    data = PrivateData.from_records(
        domain, np.column_stack([rng.integers(0, s, 800) for s in (3, 2, 4, 2)])
    )
    measured = measure_marginals(
        data, pairwise_cliques(domain), noise_multiplier=0.5, noise=NumpyNoise(seed=1)
    )
    dense = fit_histogram(domain, measured, iterations=60)
    support = fit_support(SupportHistogram.full(domain), measured, iterations=60)
    np.testing.assert_allclose(support.to_array(), dense.to_array(), atol=1e-10)


def test_the_tree_proposal_follows_the_released_dependence() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, 20_000)
    b = (a + (rng.random(20_000) < 0.1)) % 5  # b copies a, 10% shifted
    c = rng.integers(0, 4, 20_000)  # independent
    domain = Domain.from_sizes({"a": 5, "b": 5, "c": 4})
    data = PrivateData.from_records(domain, np.column_stack([a, b, c]))
    measured = measure_marginals(
        data, pairwise_cliques(domain), noise_multiplier=1.0, noise=NumpyNoise(seed=2)
    )
    assert (0, 1) in tree_edges(domain, measured)
    records = tree_proposal(domain, measured, size=50_000, rng=np.random.default_rng(4))
    assert records.shape == (50_000, 3) and records.max(axis=0).tolist() <= [4, 4, 3]
    agree = float(np.mean(records[:, 0] == records[:, 1]))
    assert agree > 0.7  # independent sampling would give 0.2
    # every value of every attribute stays reachable (the uniform mixing)
    assert all(np.unique(records[:, i]).size == s for i, s in enumerate(domain.sizes))


@pytest.mark.parametrize("multiplier", [2.0, 0.002])
def test_the_support_prior_fits_as_long_as_its_own_noise_asks(
    multiplier: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fit's length is read from the released tables' sigma (public), not the data."""
    data = PrivateData.from_records(WIDE, wide_records(4))
    asked: list[int] = []

    def spy(start: Any, measurements: Any, *, iterations: int, **kw: Any) -> Any:
        asked.append(iterations)
        return fit_support(start, measurements, iterations=0, **kw)

    monkeypatch.setattr(support_prior_module, "fit_support", spy)
    release = support_marginal_prior(
        data, noise_multiplier=multiplier, noise=NumpyNoise(seed=5), size=3000
    )
    sigma = release.measurements[0].sigma
    assert sigma == multiplier * math.sqrt(2 * len(pairwise_cliques(WIDE))) / data.n
    assert asked == [support_fit_budget(3000, len(release.measurements), sigma=sigma)[0]]
    assert (asked[0] > support_iterations(3000, len(release.measurements))) == (
        sigma < PRECISE_FIT_SIGMA
    )


def test_the_support_prior_is_reproducible_from_seeded_noise() -> None:
    data = PrivateData.from_records(WIDE, wide_records(4))
    kwargs: dict[str, Any] = {"noise_multiplier": 2.0, "size": 3000, "iterations": 20}
    one = support_marginal_prior(data, noise=NumpyNoise(seed=5), **kwargs).hypothesis
    two = support_marginal_prior(data, noise=NumpyNoise(seed=5), **kwargs).hypothesis
    np.testing.assert_array_equal(one.records, two.records)
    np.testing.assert_array_equal(one.log_weights, two.log_weights)
    # the fit moves the prior towards the data's pairs (the release's signal)
    start = SupportHistogram(WIDE, one.records)
    err = [
        sum(np.abs(h.marginal(c) - data.marginal(c)).sum() for c in pairwise_cliques(WIDE))
        for h in (start, one)
    ]
    assert err[1] < err[0]


# --- engines on the support backend ---


def wide_engine(seed: int = 0, **config: Any) -> Any:
    data = PrivateData.from_records(WIDE, wide_records(seed))
    settings: dict[str, Any] = {
        "epsilon": 4.0,
        "delta": 1e-6,
        "backend": "support",
        "support_size": 4000,
    }
    return build_engine(data, PMWConfig(**(settings | config)), noise=NumpyNoise(seed=seed))


def test_an_engine_on_a_support_with_sparse_cliques_answers_and_updates() -> None:
    engine = wide_engine(threshold=-1e9, max_updates=2, after_halt="synthetic")
    assert engine.backend.kind == "support"
    assert isinstance(engine.hypothesis, SupportHistogram)
    assert [e.label for e in engine.ledger.entries] == ["prior: noisy 2-way marginals"]
    answers = [engine.answer(q) for q in WIDE_QUERIES]
    assert [a.source for a in answers] == ["oracle", "oracle", "synthetic", "synthetic"]
    assert all(np.all(np.isfinite(a.value)) for a in answers)


def test_the_full_support_engine_matches_the_dense_one_on_sparse_cliques() -> None:
    """Sparse tables change the summation order only, so the certified solves stop at
    slightly different points: the transcripts agree to the solvers' tolerance."""
    data = PrivateData.from_records(WIDE, wide_records(6))
    config = PMWConfig(
        epsilon=2.0, delta=1e-6, prior="uniform", max_updates=2, threshold=-1.0,
        after_halt="synthetic",
    )  # fmt: skip
    runs = []
    for prior in (DenseHistogram.uniform(WIDE), SupportHistogram.full(WIDE)):
        engine = build_engine(data, config, noise=NumpyNoise(seed=3), prior=prior)
        runs.append([engine.answer(q) for q in WIDE_QUERIES])
    for dense, support in zip(*runs, strict=True):
        assert (dense.source, dense.updates) == (support.source, support.updates)
        np.testing.assert_allclose(support.value, dense.value, atol=1e-5)


def test_a_support_snapshot_is_compact_and_restores_exactly() -> None:
    engine = wide_engine(seed=7, threshold=-1.0, max_updates=3)
    engine.answer(WIDE_QUERIES[0])
    snap = snapshot(engine)
    blob = encode_histogram(snap.hypothesis)
    assert len(blob) < 4000 * (6 + 8) + 2000  # records in one byte per attribute, log-weights
    back = decode_histogram(blob, WIDE)
    assert isinstance(back, SupportHistogram)
    np.testing.assert_array_equal(back.log_weights, engine.hypothesis.log_weights)
    fresh = wide_engine(seed=7, threshold=-1.0, max_updates=3)
    resumed = restore(fresh, type(snap)(state=json.loads(json.dumps(snap.state)), hypothesis=back))
    assert isinstance(resumed.hypothesis, SupportHistogram)
    np.testing.assert_array_equal(resumed.hypothesis.log_weights, engine.hypothesis.log_weights)
    assert resumed.sparse_vector.export_state() == engine.sparse_vector.export_state()
    again = resumed.answer(WIDE_QUERIES[0])  # a repeat comes from the log
    assert again.repeated
    np.testing.assert_array_equal(again.value, engine.answers[0].value)
    clique = WIDE_QUERIES[1].clique
    np.testing.assert_array_equal(
        resumed.hypothesis.clique_table(clique).mass, engine.hypothesis.clique_table(clique).mass
    )
    assert resumed.backend == engine.backend


def test_old_dense_snapshots_still_decode() -> None:
    domain = Domain.from_sizes({"a": 2, "b": 3})
    dense = DenseHistogram(domain, np.arange(1.0, 7.0).reshape(2, 3))
    back = decode_histogram(encode_histogram(dense), domain)
    np.testing.assert_array_equal(back.to_array(), dense.to_array())


def test_counting_queries_run_on_a_support_too() -> None:
    """Hardt-Rothblum PMW on the same loop: conjunctions answered from a support."""
    data = PrivateData.from_records(WIDE, wide_records(8, n=20_000))
    config = PMWConfig(
        epsilon=2.0, delta=1e-6, prior="uniform", max_updates=20, backend="support",
        support_size=20_000, threshold=0.02 * data.n, learning_rate=0.3,
    )  # fmt: skip
    engine = build_engine(data, config, noise=NumpyNoise(seed=8), kind="linear")
    assert isinstance(engine.hypothesis, SupportHistogram)
    family = [LinearQuery.conjunction({"a": v, "y": 1}) for v in range(6)]
    family += [LinearQuery.conjunction({"c": v, "y": 0}) for v in range(6)]
    errors = []
    for q in family:
        answer = engine.answer_linear(q)
        truth = float((q.table(WIDE) * data.marginal(q.clique)).sum())
        errors.append(abs(answer.value - truth))
    assert max(errors) < 0.05
    assert any(a.source == "oracle" for a in engine.answers)


def test_full_resolution_adult_runs_end_to_end_on_a_small_support() -> None:
    adult = load_adult("full")
    data = PrivateData.from_records(adult.domain, adult.records)
    config = PMWConfig(epsilon=1.0, delta=1e-6, support_size=5000)
    engine = build_engine(data, config, noise=NumpyNoise(seed=9))
    assert engine.backend is not None and engine.backend.kind == "support"
    queries = [
        CMQuery(loss="logistic", target="income>50K", features=("age", "native-country")),
        CMQuery(
            loss="logistic",
            target="income>50K",
            features=("age", "education-num", "hours-per-week", "occupation", "sex"),
            encodings={"age": "ordinal", "education-num": "ordinal", "hours-per-week": "ordinal"},
            interactions=(("age", "sex"),),
        ),
        CMQuery(loss="squared", target="hours-per-week", features=("age", "sex")),
    ]
    for q in queries:
        answer = engine.answer(q)
        assert answer.source in ("hypothesis", "oracle") and np.all(np.isfinite(answer.value))
    samples = engine.synthetic_records(100, rng=np.random.default_rng(0))
    assert samples.shape == (100, 14) and (samples < np.array(adult.domain.sizes)).all()


def test_clique_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream of distinct cliques must not keep every table it saw (memory): the data's
    sparse tables by the cells they may hold (``min(n, |C|)`` each, a public bound:
    :data:`~pmwcm.mechanisms.private_data.SPARSE_TABLE_CELLS_PER_RECORD`), the support's
    by the cells they hold (up to ``M`` each:
    :data:`~pmwcm.kernels.support.TABLE_CELLS_PER_RECORD`), both here with a floor small
    enough to bind; dense ones by the cells they hold."""
    from itertools import combinations

    from pmwcm.kernels import support as support_module
    from pmwcm.kernels.histogram import CACHED_MARGINAL_TOTAL
    from pmwcm.kernels.lru import DEFAULT_ENTRIES
    from pmwcm.mechanisms import private_data as private_data_module

    monkeypatch.setattr(support_module, "MIN_TABLE_CELLS", 20_000)
    monkeypatch.setattr(private_data_module, "MIN_SPARSE_TABLE_CELLS", 20_000)
    domain = Domain.from_sizes({f"a{i}": 3 for i in range(12)})
    records = np.random.default_rng(0).integers(0, 3, size=(500, 12))
    support, data = SupportHistogram(domain, records), PrivateData.from_records(domain, records)
    sparse = list(combinations(domain.names, 8))[: DEFAULT_ENTRIES + 40]  # 6,561 cells each
    for clique in sparse:
        assert not support.clique_table(clique).is_dense
        assert not data.clique_table(clique).is_dense
        assert support._tables.cells <= 20_000 and data._tables.cells <= 20_000
    # Charged n = 500 cells each, whatever they hold (the occupied count is the data's):
    # a table whose records all share one cell is kept exactly as long.
    assert len(data._tables) == 20_000 // 500 < len(sparse)
    constant = PrivateData.from_records(domain, np.zeros_like(records))
    for clique in sparse:
        assert constant.clique_table(clique).mass.size == 1
    assert list(constant._tables._entries) == list(data._tables._entries)
    assert 20_000 // 500 <= len(support._tables) < len(sparse)
    # evicted tables are recomputed, equal to what they were
    np.testing.assert_array_equal(
        support.clique_table(sparse[0]).table(), support.marginal(sparse[0])
    )
    dense = list(combinations(domain.names, 4))  # 81 cells each
    for clique in dense:
        assert data.clique_table(clique).is_dense
    assert len(data._dense_tables) == len(dense) and len(data._tables) == 20_000 // 500
    assert data._dense_tables.cells == 81 * len(dense) <= CACHED_MARGINAL_TOTAL
    assert data._dense_tables.budget == CACHED_MARGINAL_TOTAL
    np.testing.assert_array_equal(data.clique_table(dense[0]).mass, data.marginal(dense[0]).ravel())


def test_the_engine_keeps_few_compiled_rounds() -> None:
    """Each round holds problems compiled on its tables: a long stream of distinct
    queries must not keep them all (10,000 Adult queries held 2.8 GB with 256)."""
    from pmwcm.engine.online import ROUND_CACHE_ENTRIES

    adult = load_adult("full")
    rng = np.random.default_rng(1)
    data = PrivateData.from_records(adult.domain, adult.records[rng.choice(adult.n, 2000)])
    engine = build_engine(
        data, PMWConfig(epsilon=1.0, delta=1e-6, after_halt="synthetic"), noise=NumpyNoise(seed=0)
    )
    features = [a for a in adult.domain.names if a != "income>50K"]
    for pair in list(itertools.combinations(features, 2))[: ROUND_CACHE_ENTRIES + 8]:
        engine.answer(CMQuery(loss="logistic", target="income>50K", features=pair))
    assert len(engine._rounds) == ROUND_CACHE_ENTRIES


@settings(max_examples=80, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([1, 2, 3, 7, 49, 100, 65_536, 999_983, 2**25 - 1, 2**25 + 1, 2**31]),
        min_size=1,
        max_size=6,
    ),
    draws=st.lists(st.integers(0, 2**62), min_size=1, max_size=200),
)
def test_unravelled_cells_are_numpys_unravel_index(sizes: list[int], draws: list[int]) -> None:
    """A sparse table's cells (per-attribute codes of its occupied cells) are
    ``np.unravel_index``'s, on both of ``_unravel``'s paths: the float reciprocal below
    ``2^50`` cells and integer division above. The last cell and its neighbours are
    always among the codes, and so are multiples of the last size: there
    ``code * fl(1 / s)`` truncates one below the quotient for sizes like 49, and a
    reciprocal path without its correction fails here."""
    cell_count = math.prod(sizes)
    assume(cell_count <= 2**62)
    rows = cell_count // sizes[-1]
    multiples = [(d % rows) * sizes[-1] for d in draws]
    edges = [0, cell_count - 1, max(cell_count - 2, 0)]
    codes = np.unique(np.array([d % cell_count for d in draws] + multiples + edges))
    codes = codes.astype(np.int64)
    table = CliqueTable(shape=tuple(sizes), codes=codes, mass=np.ones(codes.size))
    expected = np.stack(np.unravel_index(codes, tuple(sizes)), axis=1)
    np.testing.assert_array_equal(table.cells(), expected)


@settings(max_examples=80, deadline=None)
@given(
    draws=st.lists(st.integers(0, 2**62), min_size=1, max_size=3000),
    cell_count=st.sampled_from([1, 2, 3, 2**11, 2**11 + 1, 2**22 + 5, 2**33, 2**40 - 3]),
)
def test_the_radix_sort_of_keys_is_numpys_sort(draws: list[int], cell_count: int) -> None:
    """:func:`sort_keys_by_code` sorts keys ``code << shift | position`` as ``np.sort``
    does, whatever the number of passes (1 to 4 here; an odd count returns the second
    buffer) and with repeated codes, whose positions must keep their order (a sort
    that is not stable in each pass puts them out of order). A planted bug that
    drops the last pass, or sorts by the position bits, fails here."""
    codes = np.array(draws, dtype=np.int64) % cell_count
    shift = position_bits(cell_count, codes.size)
    assert shift is not None
    keys = (codes << shift) | np.arange(codes.size, dtype=np.int64)
    expected = np.sort(keys)
    np.testing.assert_array_equal(sort_keys_by_code(keys.copy(), shift, cell_count), expected)


@settings(max_examples=60, deadline=None)
@given(
    codes=st.lists(st.integers(0, 999), min_size=1, max_size=300),
    spread=st.sampled_from([1, DIRECT_CELLS_PER_CODE, 10**6, 2**52]),
    dtype=st.sampled_from([np.int64, np.int32, np.uint16]),
)
def test_occupied_cells_are_numpys_unique_on_every_path(
    codes: list[int], spread: int, dtype: type[np.integer]
) -> None:
    """The direct count (a clique of at most 8 cells per code), the sort of keys of
    code and position, and ``np.unique`` itself (a clique too large for such keys:
    spread ``2^52``) give ``np.unique(codes, return_inverse=True)`` exactly, whatever
    the code type."""
    array = np.array(codes, dtype=dtype)
    cell_count = max(1000, len(codes) * spread)  # spread 10^6 takes the keyed sort
    cells, inverse = occupied_cells(array, cell_count)
    expected, expected_inverse = np.unique(array.astype(np.int64), return_inverse=True)
    assert cells.dtype == np.int64 and inverse.dtype == np.intp
    np.testing.assert_array_equal(cells, expected)
    np.testing.assert_array_equal(inverse, expected_inverse.reshape(-1))
