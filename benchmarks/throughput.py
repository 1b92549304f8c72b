"""Engine throughput: queries per second on each path, and where the time goes.

The engine's two paths (docs/design.md section 3) cost very different amounts:

* **below threshold** (the sparse vector says "below"; answer ``theta_hat``):
  one marginal of the hypothesis ``Dhat`` on the query's clique (a pass over
  ``|X|``), the real data's marginal (cached per clique), two certified solves
  on the clique table, one sparse-vector comparison;
* **above threshold** (the oracle answers and the hypothesis is updated): the
  above plus one oracle call (noisy gradient descent), one reweight pass, and
  the post-processing sweeps, which replay every past update ``sweeps`` times
  (each replay = a marginal, a solve and a reweight), so update ``t`` costs
  ``O(t)`` passes.

For each universe this script forces each path (threshold ``+-1e12``
sensitivities, so the sparse vector's answer is certain) and reports queries
per second, with the time split into hypothesis marginals, reweights, real-data
marginals (first touch of a clique; cached after), oracle calls, ledger spends
(the PLD accountant recomposes every event so far), and the rest (certified
solves, sparse vector, bookkeeping). On Adult (binary schema, ``|X| = 2^14``)
it also times 10,000 random logistic queries end to end with the default
configuration (marginal prior, ``T = 10``, ``after_halt="synthetic"``), the
issue's target being under 30 s on 2 cores. Larger universes: Adult's
categorical schema (1,228,800 cells) and synthetic binary domains of ``2^20``,
``2^22`` and ``2^24`` cells whose data is a histogram (``PrivateData(histogram=
...)``), to show where the full passes start to dominate.

Randomness: seeded NumPy noise (``--noise opendp`` for the production sampler).
Run it with BLAS pinned to one thread on a shared machine (see histogram.py)::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/throughput.py
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/throughput.py --max-log2 22 --quick
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from pmwcm.data.bundled import load_adult
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import SWEEP_WINDOW, PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, FloatArray, Histogram
from pmwcm.kernels.problem import ConvexProblem
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise, OpenDPNoise
from pmwcm.mechanisms.oracles import NoisyGradientDescent, OracleInput
from pmwcm.mechanisms.private_data import PrivateData

ALWAYS, NEVER = -1e12, 1e12
PARTS = ("hyp marginal", "reweight", "data marginal", "oracle", "ledger", "rest")


class Clock:
    """Accumulates seconds per part."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def timed(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start

        return wrapper


class TimedHistogram:
    """A :class:`~pmwcm.kernels.histogram.Histogram` that times its marginal and reweight passes."""

    def __init__(self, inner: Histogram, clock: Clock) -> None:
        self.inner, self.clock, self.domain = inner, clock, inner.domain
        self.marginal = clock.timed("hyp marginal", inner.marginal)
        self.clique_table = clock.timed("hyp marginal", inner.clique_table)
        self.reweight = clock.timed("reweight", inner.reweight)
        self.reweight_table = clock.timed("reweight", inner.reweight_table)

    def sample(self, n: int, *, rng: np.random.Generator) -> Any:
        return self.inner.sample(n, rng=rng)

    def to_array(self) -> FloatArray:
        return self.inner.to_array()

    def copy(self) -> Histogram:
        return self.inner.copy()


class TimedOracle:
    """Delegates to an oracle and times its calls."""

    def __init__(self, inner: Any, clock: Clock) -> None:
        self.inner, self.name = inner, inner.name
        self._answer = clock.timed("oracle", inner.answer)

    def privacy_event(self, noise_level: float) -> Any:
        return self.inner.privacy_event(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        self.inner.check(problem)

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        return self._answer(data, noise_level=noise_level, noise=noise)


def instrument(
    engine: OnlinePMW, data: PrivateData, clock: Clock
) -> tuple[OnlinePMW, Callable[[], None]]:
    """``engine`` with its hypothesis and oracle in timers (a new engine from its parts
    and state: drop the old one), and the ledger's spend and the data's marginal timed.

    Returns the timed engine and a function that removes the (instance-level) timer
    from ``data``.
    """
    timed_parts = replace(engine.parts, oracle=TimedOracle(engine.oracle, clock))
    timed_start = TimedHistogram(engine.hypothesis, clock)
    state = replace(engine.state(), hypothesis=timed_start)  # type: ignore[arg-type]
    engine = type(engine).from_parts(timed_parts, state=state)
    engine.ledger.spend = clock.timed("ledger", engine.ledger.spend)  # type: ignore[method-assign]
    data.marginal = clock.timed("data marginal", data.marginal)  # type: ignore[method-assign]
    data.clique_table = clock.timed("data marginal", data.clique_table)  # type: ignore[method-assign]

    def restore() -> None:
        del data.marginal
        del data.clique_table

    return engine, restore


def run_stream(
    engine: OnlinePMW, data: PrivateData, queries: Sequence[CMQuery]
) -> tuple[float, dict[str, float], dict[str, int]]:
    """Answers ``queries``; returns wall seconds, the split (plus ``"cpu"``) and the sources."""
    clock = Clock()
    engine, restore = instrument(engine, data, clock)
    sources: dict[str, int] = defaultdict(int)
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        for q in queries:
            sources[engine.answer(q).source] += 1
    finally:
        restore()
    total = time.perf_counter() - start
    split = dict(clock.seconds)
    split["rest"] = total - sum(split.values())
    split["cpu"] = time.process_time() - cpu_start
    return total, split, dict(sources)


def distinct_queries(domain: Domain, k: int, *, seed: int) -> list[CMQuery]:
    """``k`` distinct random logistic queries (repeats would be free and skew the rate)."""
    rng = np.random.default_rng(seed)
    out: dict[str, CMQuery] = {}
    while len(out) < k:
        for q in random_queries(domain, k, rng=rng, losses=("logistic",)):
            out.setdefault(repr(q.to_dict()), q)
    return list(out.values())[:k]


def path_rates(
    label: str,
    data: PrivateData,
    *,
    below: int,
    above: int,
    noise: Callable[[], NoiseSource],
    sweeps: int = 2,
) -> list[list[str]]:
    """One row per path: queries/s and the time split (ms per query)."""
    rows = []
    queries = distinct_queries(data.domain, below + above, seed=1)
    for path, count, threshold in (("below", below, NEVER), ("above", above, ALWAYS)):
        if count == 0:
            continue
        config = PMWConfig(
            epsilon=1.0,
            delta=1e-6,
            prior="uniform",
            max_updates=max(count, 1),
            threshold=threshold,
            sweeps=sweeps,
            oracle=NoisyGradientDescent(),
        )
        engine = build_engine(data, config, noise=noise())
        chosen = queries[:count] if path == "below" else queries[below : below + count]
        total, split, sources = run_stream(engine, data, chosen)
        assert sources == {"hypothesis" if path == "below" else "oracle": count}, sources
        ms = {part: 1e3 * split.get(part, 0.0) / count for part in PARTS}
        rows.append(
            [
                label,
                f"{path} ({count}{', sweeps ' + str(sweeps) if path == 'above' else ''})",
                f"{count / total:,.1f}",
                f"{count / split['cpu']:,.1f}",
                *(f"{ms[p]:.2f}" for p in PARTS),
            ]
        )
        print(f"  {label} {path}: {count / total:,.1f} q/s", flush=True)
    return rows


def end_to_end(data: PrivateData, k: int, *, noise: Callable[[], NoiseSource]) -> list[str]:
    """``k`` random logistic queries with the default configuration, timed from build."""
    queries = random_queries(data.domain, k, rng=np.random.default_rng(2), losses=("logistic",))
    start, cpu_start = time.perf_counter(), time.process_time()
    engine = build_engine(
        data, PMWConfig(epsilon=1.0, delta=1e-6, after_halt="synthetic"), noise=noise()
    )
    built, built_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    total, split, sources = run_stream(engine, data, queries)
    return [
        f"{k:,}",
        f"{built + total:.1f} ({built_cpu + split['cpu']:.1f})",
        f"{built:.1f} ({built_cpu:.1f})",
        f"{total:.1f} ({split['cpu']:.1f})",
        f"{k / total:,.0f} ({k / split['cpu']:,.0f})",
        ", ".join(f"{s} {c}" for s, c in sorted(sources.items())),
        ", ".join(f"{p} {split.get(p, 0.0):.1f}" for p in PARTS),
    ]


ROUND_PARTS = (
    "query key",
    "compile",
    "hyp marginal",
    "data marginal",
    "hyp solve",
    "data solve",
    "sparse vector",
)


def below_round_split(
    data: PrivateData, k: int, *, repeats: int, noise: Callable[[], NoiseSource]
) -> list[list[str]]:
    """Below-threshold rounds with the default configuration, timed round by round.

    Issue 18's target: at most 100 us per round at ``|X| = 2^14`` (binary Adult).
    ``k`` distinct logistic queries after 200 warm-up rounds; threshold ``1e12``
    sensitivities so every round is below. Each part is timed around its call
    (``perf_counter_ns``); a row per repeat gives the medians over its rounds, and
    the last rows the median of the repeats and its ratio to the target. Wall and
    CPU (``process_time``) per round, and the round's wall median as a multiple of
    ``np.copyto`` of the histogram (issue 18's unit).
    """
    rows = [_below_rounds(data, k, seed=10 + repeat, noise=noise) for repeat in range(repeats)]
    table = [[f"repeat {i + 1}", *(f"{v:.1f}" for v in row)] for i, row in enumerate(rows)]
    middle = np.median(np.asarray(rows), axis=0)
    table.append(["median", *(f"{v:.1f}" for v in middle)])
    ratios = [f"{middle[0] / 100:.2f}x", f"{middle[1] / 100:.2f}x"]
    table.append(["/ 100 us target", *ratios, *[""] * (len(ROUND_PARTS) + 1)])
    return table


def _below_rounds(
    data: PrivateData, k: int, *, seed: int, noise: Callable[[], NoiseSource]
) -> list[float]:
    """One repeat of :func:`below_round_split`: its row of numbers."""
    import pmwcm.engine.data_side as data_side_module
    import pmwcm.engine.online as online_module
    import pmwcm.engine.round_compiler as compiler_module
    import pmwcm.engine.rounds as rounds_module

    config = PMWConfig(epsilon=1.0, delta=1e-6, threshold=NEVER)
    engine = build_engine(data, config, noise=noise())
    queries = distinct_queries(data.domain, k + 200, seed=seed)
    parts: dict[str, list[int]] = defaultdict(list)
    restore: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return inner(*args, **kwargs)
            finally:
                parts[label].append(time.perf_counter_ns() - start)

        if isinstance(owner, type) or owner in (online_module, compiler_module, rounds_module):
            restore.append((owner, name, inner))  # shared: put back afterwards
        setattr(owner, name, timed)

    wrap(online_module, "query_key", "query key")
    wrap(compiler_module, "query_key", "query key")
    wrap(compiler_module.RoundCompiler, "_compile", "compile")
    wrap(engine.hypothesis, "clique_table", "hyp marginal")
    wrap(data_side_module.DataSide, "table", "data marginal")
    wrap(rounds_module.CMRound, "hypothesis_answer", "hyp solve")
    # The solve and its value (fixed_budget_minimum); the solve alone before it existed.
    solve = "fixed_budget_minimum" if hasattr(rounds_module, "fixed_budget_minimum") else None
    wrap(rounds_module, solve or "fixed_budget_minimize", "data solve")
    wrap(engine.sparse_vector, "above", "sparse vector")
    wall, cpu = [], []
    try:
        for q in queries[:200]:
            engine.answer(q)
        parts.clear()
        for q in queries[200:]:
            start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
            assert engine.answer(q).source == "hypothesis"
            wall.append(time.perf_counter_ns() - start)
            cpu.append(time.process_time_ns() - cpu_start)
    finally:
        for owner, name, inner in reversed(restore):
            setattr(owner, name, inner)
    copy_from = np.random.default_rng(0).random(data.domain.shape)
    copy_to = np.empty_like(copy_from)
    copies = []
    for _ in range(200):
        start = time.perf_counter_ns()
        np.copyto(copy_to, copy_from)
        copies.append(time.perf_counter_ns() - start)
    median = float(np.median(wall))
    print(f"  below-threshold rounds (seed {seed}): median {median / 1e3:.0f} us", flush=True)
    return [
        median / 1e3,
        float(np.mean(cpu)) / 1e3,
        median / float(np.median(copies)),
        *(float(np.median(parts[label])) / 1e3 for label in ROUND_PARTS),
    ]


def oracle_round_growth(
    data: PrivateData, updates: int, *, noise: Callable[[], NoiseSource]
) -> list[list[str]]:
    """Above-threshold (oracle) rounds with the default oracle, by ``sweeps`` (and the
    default sweep window of 10 updates against replaying every update): the CPU
    median of the first and last fifth of ``updates`` rounds and the overall rate
    (issue 18: independent of ``T``, at least 20 per second at ``2^14``)."""
    queries = distinct_queries(data.domain, updates, seed=1)
    out = []
    variants: list[tuple[str, int, int | None]] = [
        ("2 (default: window 10)", 2, SWEEP_WINDOW),
        ("2, every update", 2, None),
        ("0", 0, None),
    ]
    for label, sweeps, window in variants:
        config = PMWConfig(
            epsilon=1.0, delta=1e-6, prior="uniform", max_updates=updates, threshold=ALWAYS,
            sweeps=sweeps, sweep_window=window,
        )  # fmt: skip
        engine = build_engine(data, config, noise=noise())
        seconds = []
        for q in queries:
            cpu_start = time.process_time()
            assert engine.answer(q).source == "oracle"
            seconds.append(time.process_time() - cpu_start)
        fifth = max(1, updates // 5)
        out.append(
            [
                label,
                f"{1e3 * float(np.median(seconds[:fifth])):.1f}",
                f"{1e3 * float(np.median(seconds[-fifth:])):.1f}",
                f"{updates / sum(seconds):.1f}",
            ]
        )
        rate = updates / sum(seconds)
        print(f"  oracle rounds, sweeps {label}: {rate:.1f} per cpu s", flush=True)
    return out


def cli_run_ratio(k: int, *, repeats: int) -> list[str]:
    """``pmwcm run`` on ``k`` random Adult queries, pmw (seeded noise) against nonprivate.

    Both run in this process through the command's own entry (the Typer app),
    alternating, ``repeats`` times each; the ratios are the medians of the
    per-pair ratios of CPU seconds of this process (steadier than wall time
    on a shared machine) and of wall seconds (issue 18's target: at most 1.2).
    """
    import json
    import tempfile
    from importlib import resources
    from pathlib import Path

    from typer.testing import CliRunner

    from pmwcm.cli import app

    files = Path(str(resources.files("pmwcm.data.bundled").joinpath("files")))

    adult = load_adult()
    queries = random_queries(adult.domain, k, rng=np.random.default_rng(5), losses=("logistic",))
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        query_file = Path(tmp) / "queries.jsonl"
        query_file.write_text(
            "".join(
                json.dumps({"id": f"q{i}", **q.to_dict()}) + "\n" for i, q in enumerate(queries)
            )
        )
        base = [
            "run", "--data", str(files / "adult.csv"),
            "--schema", str(files / "adult-binary.schema.json"),
            "--queries", str(query_file), "--epsilon", "1", "--delta", "1e-6",
            "--output", str(Path(tmp) / "out.jsonl"),
        ]  # fmt: skip
        pmw_args = [*base, "--insecure-seeded-noise", "0"]
        exact_args = [*base, "--method", "nonprivate"]
        runs: dict[str, list[tuple[float, float]]] = {"pmw": [], "exact": []}
        for _ in range(repeats):
            for name, args in (("pmw", pmw_args), ("exact", exact_args)):
                start, cpu = time.perf_counter(), time.process_time()
                result = runner.invoke(app, args)
                runs[name].append((time.process_time() - cpu, time.perf_counter() - start))
                assert result.exit_code == 0, result.output

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    pairs = list(zip(runs["pmw"], runs["exact"], strict=True))
    return [
        f"{k:,}",
        f"{median([p[0] for p in runs['pmw']]):.2f} ({median([p[1] for p in runs['pmw']]):.2f})",
        f"{median([e[0] for e in runs['exact']]):.2f} "
        f"({median([e[1] for e in runs['exact']]):.2f})",
        f"{median([p[0] / e[0] for p, e in pairs]):.2f}x "
        f"({median([p[1] / e[1] for p, e in pairs]):.2f}x)",
    ]


def synthetic_binary(log2: int, *, seed: int, n: int = 10**6) -> PrivateData:
    """A random histogram on ``log2`` binary attributes (a product of biased bits, perturbed)."""
    rng = np.random.default_rng(seed)
    domain = Domain.from_sizes({f"x{i}": 2 for i in range(log2)})
    values = np.ones(1)
    for p in rng.uniform(0.2, 0.8, size=log2):
        values = np.multiply.outer(values, np.array([1 - p, p])).ravel()
    values *= rng.gamma(4.0, 0.25, size=values.size)  # noise so that queries have signal
    return PrivateData(
        domain=domain, n=n, histogram=DenseHistogram(domain, values.reshape(domain.shape))
    )


def markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-log2", type=int, default=24, help="largest synthetic 2^m (>= 20)")
    parser.add_argument("--quick", action="store_true", help="fewer queries per measurement")
    parser.add_argument("--noise", choices=("numpy", "opendp"), default="numpy")
    parser.add_argument("--e2e", type=int, default=10_000, help="end-to-end stream length")
    parser.add_argument(
        "--cli-only", action="store_true", help="only the pmwcm run vs nonprivate ratio"
    )
    parser.add_argument("--repeats", type=int, default=5, help="runs of each pmwcm run")
    parser.add_argument(
        "--round-only",
        action="store_true",
        help="only the below-threshold round split and the oracle rounds' growth (Adult binary)",
    )
    parser.add_argument("--updates", type=int, default=50, help="oracle rounds for the growth")
    args = parser.parse_args()

    def noise() -> NoiseSource:
        return OpenDPNoise() if args.noise == "opendp" else NumpyNoise(seed=0)

    print(
        f"pmwcm throughput benchmark, {datetime.datetime.now():%Y-%m-%d %H:%M}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"NumPy {np.__version__}, noise {args.noise}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
        f"load average at start {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if args.round_only:
        report_rounds(repeats=args.repeats, updates=args.updates, noise=noise)
        return
    cli = cli_run_ratio(args.e2e, repeats=args.repeats)
    print(
        "\npmwcm run on Adult (binary), logistic queries, medians of "
        f"{args.repeats} alternating runs:\n"
    )
    print(
        markdown(
            ["queries", "pmw cpu s (wall)", "nonprivate cpu s (wall)", "pmw / nonprivate"], [cli]
        )
    )
    if args.cli_only:
        return
    report_paths(e2e=args.e2e, scale=0.25 if args.quick else 1.0, max_log2=args.max_log2,
                 noise=noise)  # fmt: skip


def report_rounds(*, repeats: int, updates: int, noise: Callable[[], NoiseSource]) -> None:
    """``--round-only``: the below-threshold round split and the oracle rounds' growth."""
    binary = load_adult("binary")
    binary_data = PrivateData.from_records(binary.domain, binary.records)
    split = below_round_split(binary_data, 2000, repeats=repeats, noise=noise)
    growth = oracle_round_growth(binary_data, updates, noise=noise)
    print(
        "\nBelow-threshold rounds, Adult binary (2^14), default configuration, "
        "2,000 distinct logistic queries per repeat (us; part columns are medians):\n"
    )
    header = ["", "round wall p50", "round cpu mean", "x copy", *ROUND_PARTS]
    print(markdown(header, split))
    print(f"\nOracle rounds, Adult binary, T = {updates}, uniform prior (cpu ms):\n")
    print(markdown(["sweeps", "first fifth p50", "last fifth p50", "rounds / cpu s"], growth))
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


def report_paths(
    *, e2e: int, scale: float, max_log2: int, noise: Callable[[], NoiseSource]
) -> None:
    """The end-to-end stream and the per-path rates on Adult and the synthetic universes."""
    adult = load_adult()
    adult_data = PrivateData.from_records(adult.domain, adult.records)

    e2e_header = [
        "queries",
        "total s (cpu)",
        "build s (cpu)",
        "answer s (cpu)",
        "q/s (cpu)",
        "sources",
        "answer split, wall s",
    ]
    e2e_rows = [end_to_end(adult_data, e2e, noise=noise)]
    print(f"  end to end: {e2e_rows[0][1]} s (cpu)", flush=True)

    rows: list[list[str]] = []
    n_below, n_above = max(10, int(1000 * scale)), max(5, int(50 * scale))
    rows += path_rates("Adult binary 2^14", adult_data, below=n_below, above=n_above, noise=noise)
    rows += path_rates(
        "Adult binary 2^14",
        PrivateData.from_records(adult.domain, adult.records),
        below=0,
        above=n_above,
        noise=noise,
        sweeps=0,
    )
    categorical = load_adult("categorical")
    cat_data = PrivateData.from_records(categorical.domain, categorical.records)
    rows += path_rates(
        f"Adult categorical {categorical.domain.size:,}",
        cat_data,
        below=max(10, int(200 * scale)),
        above=max(5, int(20 * scale)),
        noise=noise,
    )
    for log2 in range(20, max_log2 + 1, 2):
        data = synthetic_binary(log2, seed=log2)
        rows += path_rates(
            f"synthetic 2^{log2}",
            data,
            below=max(5, int(100 * scale / 2 ** ((log2 - 20) / 2))),
            above=max(3, int(10 * scale)),
            noise=noise,
        )
        del data

    print()
    print("End to end on Adult (binary, 2^14), default configuration, eps = 1:\n")
    print(markdown(e2e_header, e2e_rows))
    print()
    print(
        "Per path (wall ms per query; 'rest' = certified solves, sparse vector, bookkeeping;"
        " q/s cpu = queries per CPU second of this process):\n"
    )
    header = ["universe", "path (queries)", "q/s", "q/s cpu", *(f"{p} ms" for p in PARTS)]
    print(markdown(header, rows))
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
