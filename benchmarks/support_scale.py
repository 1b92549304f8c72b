"""The support backend at scale: prior fit time, peak memory and query rate on wide tables.

Issue 13's targets: peak RSS at most 2 GB with ``M = 10^6`` on a table of 50+
attributes, and at least 100 below-threshold answers per second on 2 cores.
Each cell runs in its own subprocess, so its peak RSS (``ru_maxrss``) is its
own. Prints one JSON line per cell and a Markdown table at the end::

    .venv-bench/bin/python benchmarks/support_scale.py                 # loans, M = 1e6
    .venv-bench/bin/python benchmarks/support_scale.py --table adult-full --sizes 16384 262144
    python benchmarks/support_scale.py --table adult-full --sizes 100000000 --device cuda \
        --memory-gib 16                                          # on a GPU machine

A cell: build the engine (``PMWConfig(epsilon=1, delta=1e-6)``, the default
paid marginal prior on the support) on the whole table, then answer ``k``
random logistic queries (target: the table's first binary attribute; 2-5
features; one-hot up to 16 values, ordinal beyond) and count the answers
that came from the hypothesis, in two modes: each query answered as it comes
(an interactive analyst), and the stream announced first
(:meth:`~pmwcm.engine.online.OnlinePMW.expect`, as ``pmwcm run`` does with its
query file), which lets the next query's real-data solve start early. Timings
are wall-clock on whatever the machine is doing; the machine's load average
is printed with them, and so are the main thread's and the whole process's
CPU time per answer (what the answers cost, whatever the load).

In the one-by-one mode each below-threshold round's wall time is also reported by
the cells of the hypothesis's table on its clique (:func:`rounds_by_table_cells`).

``--phases`` also times, on the main thread and while the stream is answered, the
steps of the hypothesis side of a round: its clique table
(:meth:`~pmwcm.kernels.support.SupportHistogram.clique_table`: the occupied cells and
their masses, in passes over the ``M`` records), the problem built on its cells
(:meth:`~pmwcm.kernels.glm_problem.GLMProblem.on_cells`) and the Newton solve on them;
wall ms per answer each, and the rest of the round (the sparse vector, the wait for
the data side's worker, the engine's bookkeeping).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from pmwcm.data.table import Dataset
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load(table: str) -> Dataset:
    if table == "adult-full":
        from pmwcm.data.bundled import load_adult

        return load_adult("full")
    from benchmarks.tables.load import load_table

    return load_table(table)


def queries(domain: Domain, k: int, seed: int) -> list[CMQuery]:
    rng = np.random.default_rng(seed)
    binary = [a for a, s in zip(domain.names, domain.sizes, strict=True) if s == 2]
    target = binary[-1]
    others = [a for a in domain.names if a != target]
    out = []
    for _ in range(k):
        features = tuple(rng.choice(others, size=int(rng.integers(2, 6)), replace=False))
        encodings = {f: "ordinal" for f in features if domain.size_of(str(f)) > 16}
        out.append(
            CMQuery(
                loss="logistic",
                target=target,
                features=tuple(str(f) for f in features),
                encodings=encodings,
            )
        )
    return out


@contextmanager
def timed(owner: Any, name: str, seconds: dict[str, float], label: str) -> Iterator[None]:
    """``owner.name`` timed into ``seconds[label]`` on the main thread while it is entered
    (restored on exit: :func:`unittest.mock.patch.object`)."""
    original = getattr(owner, name)

    def timing(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return original(*args, **kwargs)
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seconds[label] += time.perf_counter() - start

    with mock.patch.object(owner, name, timing):
        yield


def phase_timers(seconds: dict[str, float]) -> ExitStack:
    """The ``--phases`` timers (module docstring), entered together. Only kernels are
    timed: the engine's own classes are not touched from outside
    (``tests/test_engine_state.py``)."""
    from pmwcm.kernels import solvers
    from pmwcm.kernels.glm_problem import GLMProblem
    from pmwcm.kernels.support import SupportHistogram

    stack = ExitStack()
    stack.enter_context(timed(SupportHistogram, "clique_table", seconds, "clique table"))
    stack.enter_context(timed(GLMProblem, "on_cells", seconds, "problem on its cells"))
    stack.enter_context(timed(solvers, "_compiled_newton", seconds, "Newton solve"))
    return stack


#: The upper edges of :func:`rounds_by_table_cells`' groups, and the groups' labels.
CELL_GROUPS = (10**3, 10**4, 10**5, 10**6)
CELL_GROUP_LABELS = (*(f"<= {e:,}" for e in CELL_GROUPS), f"> {CELL_GROUPS[-1]:,}")


def rounds_by_table_cells(
    hypothesis: Any, stream: list[CMQuery], sources: list[str], seconds: list[float]
) -> dict[str, dict[str, float]]:
    """The below-threshold rounds' wall ms (median and largest, and how many), grouped by
    the cells of the hypothesis's table on the query's clique (all of a small clique's,
    a large one's occupied cells): the cells the problem and its solve run on, which no
    pass over the records removes (issue 37 item 1: a round at ``M = 2^23`` within 50
    ms). Read after the stream, outside the timed rounds: a large clique's occupied
    cells are its records' distinct codes, which reweighting does not change."""
    groups: dict[str, list[float]] = defaultdict(list)
    for query, source, took in zip(stream, sources, seconds, strict=True):
        if source != "hypothesis":
            continue
        cells = hypothesis.clique_table(query.clique).mass.size
        groups[CELL_GROUP_LABELS[bisect.bisect_left(CELL_GROUPS, cells)]].append(1e3 * took)
    return {
        label: {
            "rounds": len(groups[label]),
            "median_ms": round(float(np.median(groups[label])), 1),
            "max_ms": round(max(groups[label]), 1),
        }
        for label in CELL_GROUP_LABELS
        if groups[label]
    }


def cell(
    table: str,
    size: int,
    k: int,
    announced: bool,
    device: str = "cpu",
    memory_gib: float = 0.5,
    phases: bool = False,
) -> dict:
    from pmwcm.engine.practical import PMWConfig, build_engine
    from pmwcm.mechanisms.noise import NumpyNoise
    from pmwcm.mechanisms.private_data import PrivateData

    dataset = load(table)
    data = PrivateData.from_records(dataset.domain, dataset.records)
    start = time.perf_counter()
    config = PMWConfig(
        epsilon=1.0, delta=1e-6, support_size=size, device=device,  # type: ignore[arg-type]
        hypothesis_memory=int(memory_gib * 2**30),
    )  # fmt: skip
    engine = build_engine(data, config, noise=NumpyNoise(seed=0))
    built = time.perf_counter() - start
    # On stderr at once: a cell stopped by its time limit still says what its build took.
    print(f"built: M = {size:,} on {device} in {built:.1f} s", file=sys.stderr, flush=True)
    cpu_start = time.process_time()
    rss_after_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    stream = queries(dataset.domain, k, seed=1)
    seconds: dict[str, float] = defaultdict(float)
    round_seconds: list[float] = []  # each round's wall time (one by one only)
    with phase_timers(seconds) if phases else ExitStack():
        start, main_cpu = time.perf_counter(), time.thread_time()
        if announced:  # the batch door: each query's data side may start ahead
            sources = [getattr(a, "source", "refused") for a in engine.ask_each(stream)]
        else:
            sources = []
            for query in stream:
                began = time.perf_counter()
                sources.append(engine.answer(query).source)
                round_seconds.append(time.perf_counter() - began)
        answering = time.perf_counter() - start
    main_cpu = time.thread_time() - main_cpu
    below = sources.count("hypothesis")
    by_cells = (
        {}
        if announced
        else rounds_by_table_cells(engine.hypothesis, stream, sources, round_seconds)
    )
    return {
        "table": table,
        "attributes": len(dataset.domain),
        "log10_X": round(dataset.domain.log_size / np.log(10), 2),
        "n": data.n,
        "M": engine.backend.support_size if engine.backend else 0,
        "backend": engine.backend.kind if engine.backend else "?",
        "device": getattr(getattr(engine.hypothesis, "device", None), "name", "cpu"),
        "prior_fit_s": round(built, 2),
        "peak_rss_after_prior_mb": round(rss_after_build, 1),
        "k": k,
        "mode": "announced" if announced else "one by one",
        "answers_per_s": round(k / answering, 2),
        "main_thread_ms_per_answer": round(1e3 * main_cpu / k, 2),
        "process_cpu_ms_per_answer": round(1e3 * (time.process_time() - cpu_start) / k, 2),
        "hypothesis_answers": below,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average": round(os.getloadavg()[0], 2),
        **({"below_threshold_round_ms_by_table_cells": by_cells} if by_cells else {}),
        **({"phase_ms_per_answer": {
            **{p: round(1e3 * t / k, 1) for p, t in seconds.items()},
            "rest of the round": round(1e3 * (answering - sum(seconds.values())) / k, 1),
        }} if phases else {}),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="loans")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**6])
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["one-by-one", "announced"],
        choices=["one-by-one", "announced"],
        help="answer each query as it comes, or announce the stream first (OnlinePMW.expect)",
    )
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    parser.add_argument(
        "--memory-gib", type=float, default=0.5, help="the hypothesis's memory budget (GiB)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per cell")
    parser.add_argument("--phases", action="store_true",
                        help="also time the steps of a round (module docstring)")  # fmt: skip
    parser.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        announced = args.modes == ["announced"]
        row = cell(
            args.table, args.sizes[0], args.k, announced, args.device, args.memory_gib,
            phases=args.phases,
        )  # fmt: skip
        print(json.dumps(row))
        return
    rows = []
    for size in args.sizes:
        for mode in args.modes:
            command = [sys.executable, __file__, "--cell", "--table", args.table]
            command += ["--sizes", str(size), "--k", str(args.k), "--modes", mode]
            command += ["--device", args.device, "--memory-gib", str(args.memory_gib)]
            command += ["--phases"] if args.phases else []
            env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
            out = subprocess.run(
                command, check=True, stdout=subprocess.PIPE, text=True, env=env,
                timeout=args.timeout,
            )  # fmt: skip
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            rows.append(row)
    keys = list(rows[0])
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for key in keys) + " |")


if __name__ == "__main__":
    main()
