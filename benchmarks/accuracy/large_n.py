"""Issue 15 at large n: where the hybrid's certified answers lose to plain composition.

The grid that placed :data:`pmwcm.engine.budget_rule.COMPOSITION_SIGNAL`
(``--tune``) runs on worlds no benchmark evaluates: the Adult train records
**from 10,000 on** (29,073 records; run.py's benchmark populations resample the
whole train split with seed 7), resampled to ``n`` records as multinomial cell
counts with seed :data:`TUNING_RESAMPLE_SEED`, and **streams 0, 1 and 2** (run.py
streams are ``1000 + s``, updates.py's panel ``5000 + s``). Two worlds: random
logistic queries on those records, and the parity world (the label replaced by
a 3-way parity, ``workloads.parity_records``) with its parity stream. Each cell
(world, ``epsilon``, ``n``) answers ``k = 1,000`` queries with pmwcm's hybrid (the
default engine, no announced ``k``) and with the composition baseline (the tuned
oracle, ``k`` announced): stream 0 with noise seeds 0-2, streams 1 and 2 with
noise seed 0. The hybrid's first 100 answers also give the ``k = 100`` cell,
against a composition run at ``k = 100``. A cell's mean and max average the noise
seeds of each stream, then the streams. Rows go to
``results/large_n_tuning.jsonl``; ``--report`` prints the table and the cut that
minimises the worst cell's target score (:func:`fitted_cut`)::

    python benchmarks/accuracy/large_n.py --tune      # the grid (~40 min on 2 cores)
    python benchmarks/accuracy/large_n.py --report
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from methods import CompositionAnswerer  # noqa: E402
from run import DELTA, Evaluator, summary  # noqa: E402
from workloads import parity_queries, parity_records  # noqa: E402

from pmwcm.data.bundled import load_adult  # noqa: E402
from pmwcm.engine.budget_rule import COMPOSITION_SIGNAL, composition_signal  # noqa: E402
from pmwcm.engine.practical import PMWConfig, build_engine  # noqa: E402
from pmwcm.kernels.histogram import DenseHistogram  # noqa: E402
from pmwcm.kernels.workload import random_queries  # noqa: E402
from pmwcm.mechanisms.noise import NumpyNoise  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402

TUNING = HERE / "results" / "large_n_tuning.jsonl"
SPLIT_SEED = 20261126  # run.py's public split seed
OFFSET = 10_000  # the tuning records start here (small_n.py's benchmark table ends here)
TUNING_RESAMPLE_SEED = 11  # run.py's populations use 7
#: (epsilon, sizes) of the grid: around each world's crossover at k = 100 and 1,000.
GRID = (
    (1.0, (100_000, 200_000, 300_000, 500_000, 1_000_000, 2_000_000, 4_000_000)),
    (4.0, (30_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)),
)
NOISE_SEEDS = (0, 1, 2)  # on the seed-0 stream
EXTRA_STREAMS = (1, 2)  # two more streams, noise seed 0 each
K = 1000
PREFIX = 100


def tuning_world(n: int, world: str) -> tuple[PrivateData, PrivateData]:
    """``n`` records resampled from the train records from :data:`OFFSET` on, and the test split."""
    data = load_adult()
    order = np.random.default_rng(SPLIT_SEED).permutation(data.n)
    cut = int(0.8 * data.n)
    train, test = data.records[order[OFFSET:cut]], data.records[order[cut:]]
    if world == "parity":
        train, test = parity_records(train, data.domain), parity_records(test, data.domain)
    empirical = DenseHistogram.from_records(data.domain, train).to_array().ravel()
    counts = np.random.default_rng(TUNING_RESAMPLE_SEED).multinomial(n, empirical)
    histogram = DenseHistogram(data.domain, counts.reshape(data.domain.shape).astype(np.float64))
    population = PrivateData(domain=data.domain, n=n, histogram=histogram)
    return population, PrivateData.from_records(data.domain, test)


def stream(world: str, data: PrivateData, k: int, seed: int = 0) -> list:
    """The world's stream of seed ``seed`` (0-2; benchmark streams are 1000+)."""
    rng = np.random.default_rng(seed)
    if world == "parity":
        return parity_queries(data.domain, k, rng=rng)
    return random_queries(data.domain, k, rng=rng, losses=("logistic",))


def _save(row: dict) -> None:
    print(json.dumps(row), flush=True)
    TUNING.parent.mkdir(parents=True, exist_ok=True)
    with TUNING.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def tune() -> None:
    """The grid (module docstring); cells already in the file are skipped."""
    done = set()
    if TUNING.exists():
        done = {
            (r["world"], r["epsilon"], r["n"], r.get("stream_seed", 0), r["noise_seed"],
             r["method"], r["k"])
            for r in map(json.loads, TUNING.read_text().splitlines())
        }  # fmt: skip
    runs = [(0, seed) for seed in NOISE_SEEDS] + [(s, 0) for s in EXTRA_STREAMS]
    for world in ("parity", "random"):
        for epsilon, sizes in GRID:
            for n in sizes:
                cells = [
                    (world, epsilon, n, s, seed, m, k)
                    for s, seed in runs
                    for m in ("hybrid", "composition")
                    for k in (PREFIX, K)
                ]
                if all(c in done for c in cells):
                    continue
                data, test = tuning_world(n, world)
                ev = Evaluator(data, test)
                for s, seed in runs:
                    queries = stream(world, data, K, s)
                    base = {"world": world, "n": n, "epsilon": epsilon, "noise_seed": seed}
                    if s:
                        base["stream_seed"] = s
                    if (world, epsilon, n, s, seed, "hybrid", K) not in done:
                        _hybrid(data, ev, queries, base)
                    for k in (PREFIX, K):
                        if (world, epsilon, n, s, seed, "composition", k) not in done:
                            _composition(data, ev, queries[:k], base)


def _hybrid(data: PrivateData, ev: Evaluator, queries: list, base: dict) -> None:
    """The default engine (no announced ``k``: the hybrid) on the stream; rows at both k."""
    start = time.perf_counter()
    config = PMWConfig(epsilon=base["epsilon"], delta=DELTA, after_halt="synthetic")
    engine = build_engine(data, config, noise=NumpyNoise(seed=base["noise_seed"]))
    errors = [ev.excess_risk(q, np.asarray(engine.answer(q).value)) for q in queries]
    seconds = time.perf_counter() - start
    for k in (PREFIX, K):
        row = dict(base, method="hybrid", k=k, seconds=seconds)
        row.update(summary(errors[:k]), oracle_calls=len(engine.updates))
        _save(row)


def _composition(data: PrivateData, ev: Evaluator, queries: list, base: dict) -> None:
    """The composition baseline (tuned oracle) with ``k = len(queries)`` announced."""
    start = time.perf_counter()
    k = len(queries)
    answerer = CompositionAnswerer(data, base["epsilon"], DELTA, k, base["noise_seed"])
    errors = [ev.excess_risk(q, answerer.answer(q)) for q in queries]
    row = dict(base, method="composition", k=k, seconds=time.perf_counter() - start)
    row.update(summary(errors))
    _save(row)


def _cells() -> dict[tuple, dict[str, dict[str, float]]]:
    """(world, epsilon, k, n) -> method -> mean and max: averaged over the noise seeds of
    each stream, then over the streams (each stream weighs the same)."""
    rows = [json.loads(line) for line in TUNING.read_text().splitlines() if line]
    grouped: dict[tuple, dict[str, dict[int, list[dict]]]] = {}
    for r in rows:
        key = (r["world"], r["epsilon"], r["k"], r["n"])
        by_stream = grouped.setdefault(key, {}).setdefault(r["method"], {})
        by_stream.setdefault(r.get("stream_seed", 0), []).append(r)

    def average(streams: dict[int, list[dict]], stat: str) -> float:
        return float(np.mean([np.mean([r[stat] for r in got]) for got in streams.values()]))

    return {
        key: {m: {s: average(got, s) for s in ("mean", "max")} for m, got in methods.items()}
        for key, methods in grouped.items()
        if set(methods) == {"hybrid", "composition"}
    }


def signal(key: tuple) -> float:
    """The rule's composition signal of a cell (public values only)."""
    _, epsilon, k, n = key
    return composition_signal(epsilon, DELTA, n, k)


def worst_score(cells: dict[tuple, dict[str, dict[str, float]]], cut: float) -> float:
    """The target's ratio, worst over the cells, if composition answers where the signal
    is at least ``cut``: ``max(mean / best mean / 1.5, max / best max / 2)`` (<= 1 meets it)."""
    worst = 0.0
    for key, got in cells.items():
        chosen = got["composition"] if signal(key) >= cut else got["hybrid"]
        best = {s: min(got["hybrid"][s], got["composition"][s]) for s in ("mean", "max")}
        score = max(chosen["mean"] / best["mean"] / 1.5, chosen["max"] / best["max"] / 2.0)
        worst = max(worst, score)
    return worst


def fitted_cut() -> tuple[float, float, float, float]:
    """The cut that minimises :func:`worst_score` over the grid: ``(low, high, middle,
    score)``, every cut in ``(low, high]`` scoring the same; ``middle`` their geometric mean."""
    cells = _cells()
    signals = sorted({signal(key) for key in cells})
    # Candidate cuts: below every cell, between neighbours (geometric), above every cell.
    edges = [signals[0] / 2, *(math.sqrt(a * b) for a, b in itertools.pairwise(signals))]
    edges.append(signals[-1] * 2)
    scores = [worst_score(cells, cut) for cut in edges]
    best = min(scores)
    i = scores.index(best)
    j = i
    while j + 1 < len(scores) and scores[j + 1] == best:
        j += 1
    low = signals[i - 1] if i > 0 else 0.0
    high = signals[j] if j < len(signals) else math.inf
    middle = math.sqrt(low * high) if low > 0 and math.isfinite(high) else edges[i]
    return low, high, middle, best


def report() -> str:
    """Hybrid against composition per cell, with the rule's composition signal ``c``."""
    cells = _cells()
    lines = [
        "| world | eps | k | n | signal c | hybrid mean / max | composition mean / max "
        "| hybrid / composition mean | hybrid / composition max | rule |",
        "| --- " * 10 + "|",
    ]
    for key in sorted(cells):
        world, epsilon, k, n = key
        h, c = cells[key]["hybrid"], cells[key]["composition"]
        rule = "composition" if signal(key) >= COMPOSITION_SIGNAL else "hybrid"
        lines.append(
            f"| {world} | {epsilon:g} | {k:,} | {n:,} | {signal(key):,.0f} "
            f"| {h['mean']:.2g} / {h['max']:.2g} | {c['mean']:.2g} / {c['max']:.2g} "
            f"| {h['mean'] / c['mean']:.2f} | {h['max'] / c['max']:.2f} | {rule} |"
        )
    low, high, middle, score = fitted_cut()
    lines += [
        "",
        f"Worst target score (<= 1 meets both targets) is {score:.2f} for any cut in "
        f"({low:,.0f}, {high:,.0f}]; its geometric middle is {middle:,.0f} "
        f"(the rule's COMPOSITION_SIGNAL = {COMPOSITION_SIGNAL:,.0f}: "
        f"score {worst_score(cells, COMPOSITION_SIGNAL):.2f}).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    if args.tune:
        tune()
    print(report())


if __name__ == "__main__":
    main()
