"""A support build's time and peak memory against ``M`` (issue 37 item 1, issue 33 item 5).

Each cell builds the engine with the default paid marginal prior on a support of
``M`` records (full-resolution Adult, 14 attributes, 91 measured pairs, unless
``--table`` says otherwise) in its own subprocess, and prints one JSON line:
the build's wall time, the memory the build added to the process (its peak,
``VmHWM``, minus the resident memory before the build, after the data is
loaded and the compiled kernels are warm), the hypothesis's declared memory
and their ratio, and the declared time limit
(:func:`pmwcm.engine.build_cost.build_cost`). Ends with a Markdown table::

    python benchmarks/support_build.py --sizes 1048576 8388608

Timings are wall-clock on whatever the machine is doing; its load average is
printed with them. Nothing here is asserted: the targets (``M = 2^23`` within
60 s on 2 cores, peak within 1.5x of declared) are read from the output.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time


def _peak() -> int:
    """This process's own peak resident memory in bytes (``VmHWM``). Not ``ru_maxrss``:
    Linux keeps the forking parent's high-water mark in it across ``exec``."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _resident() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cell(table: str, size: int) -> dict[str, object]:
    from pmwcm.engine.build_cost import build_cost
    from pmwcm.engine.practical import PMWConfig, build_engine
    from pmwcm.mechanisms.noise import NumpyNoise
    from pmwcm.mechanisms.private_data import PrivateData

    if table == "adult-full":
        from pmwcm.data.bundled import load_adult

        dataset = load_adult("full")
    else:
        from benchmarks.tables.load import load_table

        dataset = load_table(table)
    data = PrivateData.from_records(dataset.domain, dataset.records)
    warm = PMWConfig(epsilon=1.0, delta=1e-6, support_size=2000)
    build_engine(data, warm, noise=NumpyNoise(seed=0))  # loads the compiled kernels
    gc.collect()
    before = _resident()
    config = PMWConfig(epsilon=1.0, delta=1e-6, support_size=size)
    declared = config.backend_choice(data.domain, data.n)
    start = time.perf_counter()
    engine = build_engine(data, config, noise=NumpyNoise(seed=0))
    seconds = time.perf_counter() - start
    peak = _peak()
    added = peak - before
    cost = build_cost(data.domain, config.resolved_for(data.n, len(data.domain)), n=data.n)
    return {
        "table": table,
        "M": engine.backend.support_size if engine.backend else 0,
        "build_s": round(seconds, 1),
        "declared_mib": round(declared.memory_bytes / 2**20, 1),
        "added_mib": round(added / 2**20, 1),
        "ratio": round(added / declared.memory_bytes, 2),
        "declared_limit_s": round(cost.seconds),
        "load_average": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="adult-full")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2**20, 2**22, 2**23])
    parser.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(cell(args.table, args.sizes[0])))
        return
    rows = []
    for size in args.sizes:
        command = [sys.executable, __file__, "--cell", "--table", args.table, "--sizes", str(size)]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(row), flush=True)
        rows.append(row)
    keys = list(rows[0])
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for key in keys) + " |")


if __name__ == "__main__":
    main()
