"""``pmwcm run`` on a long query file: peak memory and wall time (issue 36 item 4).

Writes, in a temporary directory, a small CSV (``--rows`` rows, 8 binary
attributes and a 4-bin age), its schema, and a query file of ``--lines`` lines
drawing on ``--distinct`` distinct queries in a fixed pseudo-random order, each
line with its own id (10^6 lines is about 115 MB). Then runs ``pmwcm run`` on
it in a subprocess per source tree (``--tree``, each a ``src`` folder put first
on ``PYTHONPATH``: this branch's and main's) and prints one JSON line each: the
process's own peak resident memory (``VmHWM`` from ``/proc/self/status``, read
at exit by the child itself: ``ru_maxrss`` would report the forking parent's
high-water mark), the wall and CPU time, the exit status, and a digest of the output
with the noise fixed (``--insecure-seeded-noise``) so the trees' answers can be
compared::

    python benchmarks/query_stream.py --lines 1000000 \\
        --tree src --tree /work/main/src

Nothing is asserted; the target (a 10^6-line file within 500 MB) is read from
the output. Timings are wall-clock on whatever the machine is doing; its load
average is printed with them.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BINARY = ("sex", "smoker", "urban", "married", "degree", "owner", "veteran", "income")
LOSSES = ("logistic", "hinge", "smoothed_hinge", "squared", "huber")

#: The child: records its own VmHWM when it exits, however it exits.
_CHILD = """
import atexit, os, sys
def _peak():
    with open('/proc/self/status') as status:
        kib = next(l for l in status if l.startswith('VmHWM:')).split()[1]
    with open(os.environ['PMWCM_BENCH_PEAK'], 'w') as out:
        out.write(kib)
atexit.register(_peak)
sys.argv = ['pmwcm', *sys.argv[1:]]
from pmwcm.cli import main
main()
"""


def write_table(folder: Path, rows: int) -> tuple[Path, Path]:
    """A CSV of ``rows`` rows and its schema (age in 4 bins, 8 yes/no attributes)."""
    rng = np.random.default_rng(5)
    schema = {
        "attributes": [{"name": "age", "bins": [0, 30, 45, 60, 120]}]
        + [{"name": name, "values": ["no", "yes"]} for name in BINARY]
    }
    ages = rng.integers(18, 90, rows)
    flags = rng.random((rows, len(BINARY))) < 0.4
    lines = [",".join(("age", *BINARY))]
    lines += [
        ",".join((str(age), *("yes" if f else "no" for f in row)))
        for age, row in zip(ages, flags, strict=True)
    ]
    data, schema_path = folder / "data.csv", folder / "schema.json"
    data.write_text("\n".join(lines) + "\n")
    schema_path.write_text(json.dumps(schema))
    return data, schema_path


def distinct_specs(count: int) -> list[dict[str, object]]:
    """``count`` distinct query specs (without ids): every loss, target and feature pair."""
    specs: list[dict[str, object]] = []
    for loss, target in itertools.product(LOSSES, BINARY):
        others = [name for name in ("age", *BINARY) if name != target]
        for pair in itertools.combinations(others, 2):
            specs.append({"loss": loss, "target": target, "features": list(pair)})
    for loss, target in itertools.product(LOSSES, BINARY):
        others = [name for name in ("age", *BINARY) if name != target]
        for triple in itertools.combinations(others, 3):
            specs.append({"loss": loss, "target": target, "features": list(triple)})
    if count > len(specs):
        raise SystemExit(f"--distinct is at most {len(specs)}")
    order = np.random.default_rng(3).permutation(len(specs))[:count]
    return [specs[i] for i in order]


def write_queries(path: Path, lines: int, distinct: int) -> int:
    """The query file: line ``i`` has id ``q{i}`` and one of the distinct specs."""
    specs = [json.dumps(spec)[1:] for spec in distinct_specs(distinct)]  # '"loss": ...}'
    picks = np.random.default_rng(4).integers(0, len(specs), lines)
    picks[:distinct] = np.arange(distinct)  # every distinct query occurs
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, lines, 65536):
            chunk = picks[start : start + 65536]
            out.write(
                "".join(
                    f'{{"id": "q{start + offset:07d}", "radius": 1.0, {specs[pick]}\n'
                    for offset, pick in enumerate(chunk)
                )
            )
    return path.stat().st_size


def run_tree(tree: str, files: dict[str, Path], method: str, epsilon: str) -> dict[str, object]:
    """``pmwcm run`` with ``tree`` first on ``PYTHONPATH``: peak, time, status, digest."""
    folder = files["queries"].parent
    peak_file, output = folder / "peak", folder / "answers.jsonl"
    env = os.environ | {
        "PYTHONPATH": str(Path(tree).resolve()),
        "PMWCM_BENCH_PEAK": str(peak_file),
        "OPENBLAS_NUM_THREADS": "1",
    }
    argv = [
        sys.executable, "-c", _CHILD, "run",
        "--data", str(files["data"]), "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", epsilon, "--delta", "1e-6",
        "--method", method, "--insecure-seeded-noise", "7", "-o", str(output),
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    digest = hashlib.sha256(output.read_bytes()).hexdigest()[:16] if output.exists() else None
    result: dict[str, object] = {
        "tree": tree,
        "method": method,
        "exit": done.returncode,
        "peak_mb": round(int(peak_file.read_text()) / 1024, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "output_sha256": digest,
        "stderr_tail": done.stderr.strip().splitlines()[-1:] if done.stderr else [],
    }
    output.unlink(missing_ok=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--distinct", type=int, default=615)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--method", default="pmw", choices=("pmw", "composition", "nonprivate"))
    parser.add_argument("--epsilon", default="1")
    parser.add_argument("--tree", action="append", help="a src folder (default: this one's)")
    options = parser.parse_args()
    trees = options.tree or [str(Path(__file__).resolve().parents[1] / "src")]
    print(json.dumps({"load_average": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)
    with tempfile.TemporaryDirectory(prefix="pmwcm-query-stream-") as temporary:
        folder = Path(temporary)
        data, schema = write_table(folder, options.rows)
        queries = folder / "queries.jsonl"
        size = write_queries(queries, options.lines, options.distinct)
        print(json.dumps({"lines": options.lines, "distinct": options.distinct,
                          "file_mb": round(size / 1e6, 1)}), flush=True)  # fmt: skip
        files = {"data": data, "schema": schema, "queries": queries}
        for tree in trees:
            print(json.dumps(run_tree(tree, files, options.method, options.epsilon)), flush=True)


if __name__ == "__main__":
    main()
