"""End-to-end audits of the support backend, sparse clique tables and data sources
(:mod:`pmwcm.audit.reach`), each with a negative control it must catch.

Each row runs the real engine, built afresh per trial, on :func:`wide_parity_pair`
(``|X| = 4,352``, ``n = 4,000``; ``D1`` flips one record into a cell ``D0`` leaves
empty, so the full clique holds 2,176 vs 2,177 occupied cells). Audits use ``alpha =
1e-6`` and 60 final trials per input (+ 15 for the event search): a correct row is
flagged with probability at most 1e-6; a broken one is caught when its event has 60
vs 0 hits (bound 1.30 against the claim 1). The broken rows are deterministic: the
support of the private records never holds the changed cell under ``D0`` and always
under ``D1``; the odd-cell refusal raises on every sparse table of ``D1`` and none of
``D0``; the capped snapshot refuses ``D1`` at open. The DuckDB row reads a Parquet file
written here, the PostgreSQL row a table of a server started here (``postgres_url``),
both through ``open_source`` as ``pmwcm run --data`` opens them; the Spark row reads the
DuckDB row's files with the session's local Spark (``spark``). The long runs are
``pmwcm audit`` rows (docs/audit.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pmwcm.audit import reach
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import RAISED, SOURCES, PipelineMechanism, noiseless
from pmwcm.data.schema import Schema
from pmwcm.data.sources.open import open_source
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

ALPHA = 1e-6
TRIALS = 60


def schema() -> Schema:
    return Schema.from_domain(reach.wide_parity_pair()[0].domain)


@pytest.fixture(scope="module")
def duckdb_source(tmp_path_factory: pytest.TempPathFactory) -> reach.Source:
    d0, d1 = reach.wide_parity_pair()
    folder = tmp_path_factory.mktemp("reach")
    paths = [reach.write_parquet(d, folder / f"d{i}.parquet") for i, d in enumerate((d0, d1))]
    return reach.Source(label="DuckDB, Parquet", dataset0=paths[0], dataset1=paths[1],
                        opener=lambda path: open_source(path, schema()))  # fmt: skip


@pytest.fixture(scope="module")
def postgres_source(postgres_url: str) -> reach.Source:
    d0, d1 = reach.wide_parity_pair()
    tables = [reach.write_postgres(d, postgres_url, f"reach_d{i}") for i, d in enumerate((d0, d1))]

    def opener(table: str) -> Any:
        return open_source(postgres_url, schema(), table=table)

    return reach.Source(label="PostgreSQL", dataset0=tables[0], dataset1=tables[1], opener=opener)


@pytest.fixture(scope="module")
def spark_source(duckdb_source: reach.Source, spark: Any) -> reach.Source:
    """The DuckDB row's Parquet files, read by Spark in local mode (its snapshot comes to
    the driver as Arrow batches: a path of its own)."""

    def opener(path: Path) -> Any:
        return open_source(str(path), schema(), engine="spark", spark=spark)

    return reach.Source(label="Spark, Parquet", dataset0=duckdb_source.dataset0,
                        dataset1=duckdb_source.dataset1, opener=opener)  # fmt: skip


def mechanism(case: AuditCase) -> PipelineMechanism:
    assert isinstance(case.mechanism, PipelineMechanism)
    return case.mechanism


def test_the_pair_differs_in_one_record_and_in_the_parity_of_occupied_cells() -> None:
    d0, d1 = reach.wide_parity_pair()
    assert int(np.sum(np.any(d0.records != d1.records, axis=1))) == 1
    data = [PrivateData.of(d) for d in (d0, d1)]
    assert [reach.distinct_records(d) for d in data] == [2176, 2177]
    for query in reach.wide_stream()[1:]:  # the parity query and the regression
        tables = [d.clique_table(query.clique) for d in data]
        assert all(t.codes is not None for t in tables)  # sparse: 4,352 cells > 2^12
        assert [t.codes.size % 2 for t in tables if t.codes is not None] == [0, 1]
    assert data[0].clique_table(reach.wide_stream()[0].clique).codes is None  # 2-way: dense


def test_the_support_row_runs_the_support_backend(seed: int) -> None:
    m = mechanism(reach.support_case())
    engine = m.build(PrivateData.of(reach.wide_parity_pair()[0]), m.config, NumpyNoise(seed=seed))
    assert engine.backend is not None and engine.backend.kind == "support"
    assert isinstance(engine.hypothesis, SupportHistogram) and engine.hypothesis.size == 2520
    assert [e.label for e in engine.ledger.entries] == ["prior: noisy 2-way marginals"]


def test_the_sparse_row_updates_through_the_sparse_table() -> None:
    case = reach.sparse_table_case()
    m = mechanism(case)
    codes = noiseless(m, case.dataset0)[: m.codes]
    assert codes[2] == SOURCES["oracle"]  # the parity query: an oracle call and an update


def test_the_sources_read_what_memory_holds(
    duckdb_source: reach.Source, postgres_source: reach.Source, spark_source: reach.Source
) -> None:
    for dataset, records in zip(("dataset0", "dataset1"), reach.wide_parity_pair(), strict=True):
        expected = PrivateData.of(records)
        for source in (duckdb_source, postgres_source, spark_source):
            data = source.private_data(getattr(source, dataset))
            assert data.n == expected.n
            for query in reach.wide_stream():
                got, want = data.clique_table(query.clique), expected.clique_table(query.clique)
                assert np.array_equal(got.mass, want.mass), (source.label, query.clique)
            data.close()


def test_the_broken_rows_refuse_as_planted(duckdb_source: reach.Source) -> None:
    sparse = mechanism(reach.sparse_table_case(broken=True))
    d0, d1 = reach.wide_parity_pair()
    assert not np.any(noiseless(sparse, d0)[: sparse.codes] == RAISED)
    assert list(noiseless(sparse, d1)[1 : sparse.codes]) == [0, RAISED, RAISED]
    capped = mechanism(reach.source_case(duckdb_source, broken=True))
    assert noiseless(capped, duckdb_source.dataset0)[0] == 0
    assert noiseless(capped, duckdb_source.dataset1)[0] == RAISED


def run(case: AuditCase, seed: int) -> Any:
    return case.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)


def caught(case: AuditCase, seed: int, event: str) -> None:
    r = run(case, seed)
    assert r.violated and r.event == event and sorted((r.count0, r.count1)) == [0, TRIALS], r


def test_the_support_row(seed: int) -> None:
    assert run(reach.support_case(), seed).verdict == "consistent"
    caught(reach.support_case(broken=True), seed, f"hypothesis holds cell {reach.CHANGED_CELL}")


def test_the_sparse_table_row(seed: int) -> None:
    assert run(reach.sparse_table_case(), seed).verdict == "consistent"
    caught(reach.sparse_table_case(broken=True), seed, "something raised")


def test_the_duckdb_row(duckdb_source: reach.Source, seed: int) -> None:
    assert run(reach.source_case(duckdb_source), seed).verdict == "consistent"
    caught(reach.source_case(duckdb_source, broken=True), seed, "something raised")


def test_the_postgres_row(postgres_source: reach.Source, seed: int) -> None:
    assert run(reach.source_case(postgres_source), seed).verdict == "consistent"
    caught(reach.source_case(postgres_source, broken=True), seed, "something raised")


def test_the_spark_row(spark_source: reach.Source, seed: int) -> None:
    assert run(reach.source_case(spark_source), seed).verdict == "consistent"
    caught(reach.source_case(spark_source, broken=True), seed, "something raised")


def test_sources_are_written_where_asked(tmp_path: Path) -> None:
    d0, _ = reach.wide_parity_pair()
    path = reach.write_parquet(d0, tmp_path / "it's here.parquet")
    assert PrivateData.of(open_source(path, schema())).n == d0.records.shape[0]
