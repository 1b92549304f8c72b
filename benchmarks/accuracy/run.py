"""Accuracy benchmark: pmwcm against composition, MST, AIM and the non-private optimum.

One command regenerates ``docs/results.md`` (``make bench-accuracy``)::

    .venv-bench/bin/python benchmarks/accuracy/run.py            # everything
    .venv-bench/bin/python benchmarks/accuracy/run.py --quick    # a smoke run

Each cell of the grid (experiment, method, epsilon, k, n, seed) is stored as
one JSON line in ``benchmarks/accuracy/results/results.jsonl``; a rerun skips
cells already there, so the grid can be grown or resumed. ``report.py`` turns
the file into tables and plots.

Data: bundled Adult (binary schema, |X| = 2^14), split once 80/20 with a fixed
public seed; every method sees only the 80% train split (the private data),
excess risk is measured on it, and logistic answers are also scored for
classification accuracy on the 20% test split.

Query streams use seeds 1000+s; seed 0 (used to choose pmwcm's defaults) is
never evaluated here.

pmwcm is told each stream's length up front, as composition is (``announced_queries``:
the random experiment's one long stream, the adaptive analyst's rounds, each regime's
``k``), so its budget rule may answer the stream in composition mode where that is
more accurate (issue 15; :func:`pmwcm.engine.budget_rule.prefers_composition`); each
pmw row records ``announced_queries``. ``--no-announce`` reproduces the rows from
before (nothing announced: always the hybrid).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from pmwcm.data.bundled import load_adult
from pmwcm.engine.baselines import exact_minimum
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery, GLMProblem
from pmwcm.kernels.workload import StepwiseAnalyst, random_queries
from pmwcm.mechanisms.private_data import PrivateData

sys.path.insert(0, str(Path(__file__).parent))
from methods import build
from workloads import interaction_queries, parity_queries, parity_records, wide_queries

RESULTS = Path(__file__).parent / "results" / "results.jsonl"
KS = (10, 100, 1000, 10_000)
EPSILONS = (0.1, 0.5, 1.0, 4.0)
DELTA = 1e-6
#: Whether pmwcm's methods are told each stream's length (``--no-announce``: not).
ANNOUNCE = True
PMW_METHODS = ("pmw", "pmw-dense", "pmw-support")


def announced(method: str, k: int) -> dict[str, object] | None:
    """The :class:`PMWConfig` options that announce a stream of ``k`` queries to ``method``."""
    return {"announced_queries": k} if ANNOUNCE and method in PMW_METHODS else None


class Evaluator:
    """Excess risk on the train split and accuracy on the test split, cached per query."""

    def __init__(self, train: PrivateData, test: PrivateData) -> None:
        self.domain = train.domain
        self.train = train
        self.test = test
        self._cache: dict[str, tuple[GLMProblem, np.ndarray, float]] = {}

    def _entry(self, query: CMQuery) -> tuple[GLMProblem, np.ndarray, float]:
        key = json.dumps(query.to_dict(), sort_keys=True)
        if key not in self._cache:
            problem = query.compile(self.domain)
            weights = self.train.marginal(problem.clique).ravel()
            self._cache[key] = (problem, weights, exact_minimum(problem, weights))
        return self._cache[key]

    def excess_risk(self, query: CMQuery, theta: np.ndarray) -> float:
        problem, weights, minimum = self._entry(query)
        return max(0.0, problem.objective(theta, weights) - minimum)

    def test_accuracy(self, query: CMQuery, theta: np.ndarray) -> float:
        problem, _, _ = self._entry(query)
        weights = self.test.marginal(problem.clique).ravel()
        predicted = np.where(problem.features @ theta >= 0, 1.0, -1.0)
        return float(weights @ (predicted == problem.labels))


def summary(errors: list[float]) -> dict[str, float]:
    """Mean, 95th percentile and max of a list of excess risks."""
    arr = np.asarray(errors)
    return {
        "mean": float(arr.mean()),
        "p95": float(np.percentile(arr, 95)),
        "max": float(arr.max()),
    }


def done_keys() -> set[str]:
    if not RESULTS.exists():
        return set()
    return {json.loads(line)["key"] for line in RESULTS.read_text().splitlines() if line}


def save(row: dict[str, object]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def run_stream(method, ev, queries, *, epsilon, k, seed, prefixes, base):
    """Answers ``queries`` online on ``ev.train``; one row per prefix length in ``prefixes``."""
    options = announced(method, len(queries))
    answerer, setup = build(
        method, ev.train, epsilon=epsilon, delta=DELTA, k=k, seed=seed, options=options
    )
    start = time.perf_counter()
    errors, accs, calls = [], [], []
    for q in queries:
        theta = answerer.answer(q)
        errors.append(ev.excess_risk(q, theta))
        if q.loss == "logistic":
            accs.append(ev.test_accuracy(q, theta))
        calls.append(answerer.oracle_calls)
    seconds = time.perf_counter() - start + setup
    for p in prefixes:
        row = dict(base, method=method, epsilon=epsilon, k=p, seed=seed, n=ev.train.n)
        row.update(summary(errors[:p]), oracle_calls=calls[p - 1], seconds=seconds, setup=setup)
        if options:
            row.update(options)
        if accs:
            row["test_accuracy"] = float(np.mean(accs[:p]))
        row["key"] = key_of(row)
        save(row)


def key_of(row: dict[str, object]) -> str:
    fields = ("experiment", "workload", "method", "epsilon", "k", "n", "seed")
    return "|".join(str(row.get(f)) for f in fields)


def random_experiment(ev, methods, epsilons, seeds, ks, done, workload="logistic"):
    losses = (workload,)
    for seed in seeds:
        queries = random_queries(
            ev.domain, max(ks), rng=np.random.default_rng(1000 + seed), losses=losses
        )
        for eps in epsilons:
            for method in methods:
                base = {"experiment": "random", "workload": workload}
                # Online methods answer one long stream: its prefixes are the smaller k.
                # Composition and the one-shot synthesizers are rebuilt per k (composition
                # must know k; synthetic data does not, so one release serves every k).
                groups = (
                    [(k, [k]) for k in ks] if method == "composition" else [(max(ks), list(ks))]
                )
                for k, prefixes in groups:
                    last = dict(base, method=method, epsilon=eps, k=prefixes[-1], seed=seed)
                    if key_of(dict(last, n=ev.train.n)) in done:
                        continue
                    print(f"random/{workload} {method} eps={eps} k={k} seed={seed}", flush=True)
                    run_stream(
                        method,
                        ev,
                        queries[:k],
                        epsilon=eps,
                        k=k,
                        seed=seed,
                        prefixes=prefixes,
                        base=base,
                    )


def adaptive_experiment(ev, methods, epsilons, seeds, done, max_features=4):
    """Forward stepwise selection for every binary target, driven by each method's answers."""
    targets = [a for a, s in zip(ev.domain.names, ev.domain.sizes, strict=True) if s == 2]
    rounds = sum(len(ev.domain) - 1 - i for i in range(max_features))
    k = rounds * len(targets)
    for seed in seeds:
        for eps in epsilons:
            for method in methods:
                base = {"experiment": "adaptive", "workload": "stepwise"}
                row = dict(base, method=method, epsilon=eps, k=k, seed=seed, n=ev.train.n)
                if key_of(row) in done:
                    continue
                print(f"adaptive {method} eps={eps} seed={seed}", flush=True)
                options = announced(method, k)
                answerer, setup = build(
                    method, ev.train, epsilon=eps, delta=DELTA, k=k, seed=seed, options=options
                )
                start, errors, picks = time.perf_counter(), [], {}
                for target in targets:
                    analyst = StepwiseAnalyst(ev.domain, target, max_features=max_features)
                    while (q := analyst.next_query()) is not None:
                        theta = answerer.answer(q)
                        errors.append(ev.excess_risk(q, theta))
                        analyst.observe(q, theta)
                    picks[target] = list(analyst.selected)
                row.update(
                    summary(errors),
                    oracle_calls=answerer.oracle_calls,
                    seconds=time.perf_counter() - start + setup,
                    setup=setup,
                    selected=picks,
                    queries=len(errors),
                    **(options or {}),
                )
                row["key"] = key_of(row)
                save(row)


def population(domain: Domain, records: np.ndarray, n: int, seed: int = 7) -> PrivateData:
    """The first ``n`` records, or (``n`` above their number) ``n`` drawn with replacement.

    Resampling is a proxy for a larger population with the same distribution;
    it is drawn as multinomial cell counts, which is the same distribution as
    ``n`` records resampled one by one, without holding ``n`` records.
    """
    if n <= len(records):
        return PrivateData.from_records(domain, records[:n])
    empirical = DenseHistogram.from_records(domain, records).to_array().ravel()
    counts = np.random.default_rng(seed).multinomial(n, empirical)
    histogram = DenseHistogram(domain, counts.reshape(domain.shape).astype(np.float64))
    return PrivateData(domain=domain, n=n, histogram=histogram)


def scaling_n_experiment(domain, train, test, methods, seeds, sizes, done, k=1000, eps=1.0):
    held_out = PrivateData.from_records(domain, test)
    for n in sizes:
        ev = Evaluator(population(domain, train, n), held_out)
        for seed in seeds:
            queries = random_queries(
                domain, k, rng=np.random.default_rng(1000 + seed), losses=("logistic",)
            )
            for method in methods:
                base = {"experiment": "scaling-n", "workload": "logistic"}
                if key_of(dict(base, method=method, epsilon=eps, k=k, seed=seed, n=n)) in done:
                    continue
                print(f"scaling-n {method} n={n} seed={seed}", flush=True)
                run_stream(
                    method, ev, queries, epsilon=eps, k=k, seed=seed, prefixes=[k], base=base
                )


def fixed_stream_experiment(name, workload, ev, make_queries, methods, seeds, done, *, k, eps):
    """One stream of ``k`` queries per seed (``make_queries(domain, k, rng)``), every method."""
    for seed in seeds:
        queries = make_queries(ev.domain, k, rng=np.random.default_rng(1000 + seed))
        for method in methods:
            base = {"experiment": name, "workload": workload}
            row = dict(base, method=method, epsilon=eps, k=k, seed=seed, n=ev.train.n)
            if key_of(row) in done:
                continue
            print(f"{name}/{workload} {method} eps={eps} n={ev.train.n} seed={seed}", flush=True)
            run_stream(method, ev, queries, epsilon=eps, k=k, seed=seed, prefixes=[k], base=base)


def regime_experiments(ev, train, test, methods, seeds, done, which, sizes, k=1000, eps=1.0):
    """Issue 7's regimes: many attributes, interactions, and the parity label at each n."""
    run = functools.partial(fixed_stream_experiment, methods=methods, seeds=seeds, done=done)
    if "wide" in which:
        run("wide", "8-13 features", ev, wide_queries, k=k, eps=eps)
    if "interactions" in which:
        run("interactions", "products of 2-3 features", ev, interaction_queries, k=k, eps=eps)
    if "parity" in which:
        domain = ev.domain
        test_p = PrivateData.from_records(domain, parity_records(test, domain))
        for n in sizes:
            ev_p = Evaluator(population(domain, parity_records(train, domain), n), test_p)
            run("parity", "3-way parity label", ev_p, parity_queries, k=k, eps=eps)


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--experiments",
        nargs="*",
        default=["random", "losses", "adaptive", "scaling-n", "wide", "interactions", "parity"],
    )
    parser.add_argument(
        "--methods",
        nargs="*",
        default=["pmw", "pmw-paper", "pmw-mst", "composition", "mst", "aim"],
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilons", type=float, nargs="*", default=list(EPSILONS))
    parser.add_argument("--ks", type=int, nargs="*", default=list(KS))
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[5_000, 10_000, 20_000, 39_073, 1_000_000, 10_000_000],
        help="n for the scaling-n experiment (above 39,073: resampled)",
    )
    parser.add_argument(
        "--parity-sizes", type=int, nargs="*", default=[39_073, 1_000_000, 10_000_000]
    )
    parser.add_argument("--quick", action="store_true", help="one seed, eps=1, k<=1000, no AIM")
    parser.add_argument(
        "--no-announce",
        action="store_true",
        help="do not tell pmwcm the stream's length (the rows from before issue 15's mode rule)",
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="write (and resume) this JSONL file instead"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    global RESULTS, ANNOUNCE
    ANNOUNCE = not args.no_announce
    if args.results is not None:
        RESULTS = args.results
    if args.quick:
        RESULTS = RESULTS.with_name("quick.jsonl")
        args.seeds, args.epsilons, args.ks = 1, [1.0], [10, 100, 1000]
        args.methods = [m for m in args.methods if m != "aim"]
        args.sizes = [10_000, 39_073]
        args.parity_sizes = [39_073]
    data = load_adult()
    order = np.random.default_rng(20261126).permutation(data.n)  # public split seed
    cut = int(0.8 * data.n)
    train, test = data.records[order[:cut]], data.records[order[cut:]]
    domain = data.domain
    ev = Evaluator(PrivateData.from_records(domain, train), PrivateData.from_records(domain, test))
    done = done_keys()
    seeds = range(args.seeds)
    if "random" in args.experiments:
        random_experiment(ev, args.methods, args.epsilons, seeds, args.ks, done)
    if "losses" in args.experiments:
        for workload in ("squared", "smoothed_hinge"):
            random_experiment(ev, args.methods, [1.0], seeds, [1000], done, workload=workload)
    if "adaptive" in args.experiments:
        adaptive_experiment(ev, args.methods, [1.0], seeds, done)
    regimes = {"wide", "interactions", "parity"} & set(args.experiments)
    if regimes:
        regime_experiments(ev, train, test, args.methods, seeds, done, regimes, args.parity_sizes)
    if "scaling-n" in args.experiments:
        methods = [m for m in args.methods if m != "aim"]
        scaling_n_experiment(domain, train, test, methods, seeds, args.sizes, done)


if __name__ == "__main__":
    main()
