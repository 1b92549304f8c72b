"""Wide and large tables through every command: the numbers behind issue 36's targets.

Three measurements, each in a fresh child process whose peak RSS is its own
``VmHWM`` (``/proc/self/status``), on data generated in a temporary directory:

* ``wide``: a CSV of ``--columns`` binary columns x ``--rows`` rows (default
  1,000 x 10^5, 200 MB): ``pmwcm schema --check --data`` on it, then ``pmwcm
  run`` with ``--queries`` logistic queries (3 features each) under ``--prior``
  and ``--support-size``;
* ``categorical``: a CSV whose ``id`` column holds ``--values`` distinct values
  (default 10^6, one row each) beside three binary columns, under a schema that
  lists every value: ``schema --check --data``, ``run`` and ``synth``;
* ``schema``: parsing a schema of one categorical with ``--schema-values``
  values (default 200,000), median of 3.

Run from the repository root: ``python benchmarks/wide_tables.py [--skip wide]``.
It prints one line per step: wall seconds and peak RSS in MiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pmwcm.cli import app
    start = time.perf_counter()
    try:
        app(sys.argv[1:], standalone_mode=False)
        status = 0
    except SystemExit as exc:
        status = exc.code or 0
    wall = time.perf_counter() - start
    peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print(json.dumps({"status": status, "wall_s": wall, "peak_mib": int(peak.split()[1]) / 1024}))
    """
)


def measure(label: str, args: list[str]) -> dict[str, float]:
    """Runs ``pmwcm ARGS`` in a child process; prints and returns its wall time and peak."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, check=False
    )
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"status": done.returncode}
    said = done.stderr.strip().splitlines()
    tail = f" ({said[-1][:160]})" if said else ""
    print(
        f"{label}: exit {result['status']}, {result.get('wall_s', float('nan')):.1f} s, "
        f"peak RSS {result.get('peak_mib', float('nan')):.0f} MiB{tail}",
        flush=True,
    )
    return result


def binary_csv(path: Path, columns: int, rows: int, seed: int = 0) -> None:
    """``rows`` rows of ``columns`` correlated 0/1 columns (each copies its neighbour 3/4
    of the time), written in blocks so the generator's memory stays small."""
    rng = np.random.default_rng(seed)
    with path.open("wb") as f:
        f.write((",".join(f"c{j}" for j in range(columns)) + "\n").encode())
        for start in range(0, rows, 10_000):
            block = min(10_000, rows - start)
            bits = rng.integers(0, 2, size=(block, columns), dtype=np.uint8)
            keep = rng.random((block, columns)) < 0.75
            for j in range(1, columns):
                bits[:, j] = np.where(keep[:, j], bits[:, j - 1], bits[:, j])
            text = np.full((block, 2 * columns), ord(","), dtype=np.uint8)
            text[:, 0::2] = bits + ord("0")
            text[:, -1] = ord("\n")
            f.write(text.tobytes())


def queries(path: Path, columns: int, count: int, target: str) -> None:
    rng = np.random.default_rng(1)
    names = [f"c{j}" for j in range(columns) if f"c{j}" != target]
    lines = []
    for i in range(count):
        features = [str(x) for x in rng.choice(names, size=3, replace=False)]
        lines.append(json.dumps({"id": i, "loss": "logistic", "target": target,
                                 "features": features}))  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def wide(tmp: Path, ns: argparse.Namespace) -> None:
    data, schema, asked = tmp / "wide.csv", tmp / "wide.schema.json", tmp / "wide.jsonl"
    binary_csv(data, ns.columns, ns.rows)
    attributes = [{"name": f"c{j}", "values": ["0", "1"]} for j in range(ns.columns)]
    schema.write_text(json.dumps({"attributes": attributes}), encoding="utf-8")
    queries(asked, ns.columns, ns.queries, "c0")
    print(f"wide: {ns.columns} columns x {ns.rows:,} rows, {data.stat().st_size / 2**20:.0f} MiB")
    measure("wide schema --check --data", ["schema", "--check", str(schema), "--data",
                                            str(data)])  # fmt: skip
    measure("wide run", [
        "run", "--data", str(data), "--schema", str(schema), "--queries", str(asked),
        "--epsilon", "1", "--delta", "1e-7", "--prior", ns.prior, "-o", str(tmp / "wide.out"),
        "--support-size", str(ns.support_size),
    ])  # fmt: skip
    out = tmp / "wide.out"
    answers = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    print(f"wide run: {sum('theta' in a for a in answers)} of {ns.queries} answered")


def categorical(tmp: Path, ns: argparse.Namespace) -> None:
    data, schema, asked = tmp / "cat.csv", tmp / "cat.schema.json", tmp / "cat.jsonl"
    rng = np.random.default_rng(2)
    values = [f"id{i:07d}" for i in range(ns.values)]
    bits = rng.integers(0, 2, size=(ns.values, 3))
    with data.open("w", encoding="utf-8") as f:
        f.write("id,a,b,y\n")
        f.writelines(f"{v},{a},{b},{y}\n" for v, (a, b, y) in zip(values, bits, strict=True))
    attributes = [{"name": "id", "values": values}] + [
        {"name": c, "values": ["0", "1"]} for c in ("a", "b", "y")
    ]
    schema.write_text(json.dumps({"attributes": attributes}), encoding="utf-8")
    asked.write_text(
        json.dumps({"id": 1, "loss": "logistic", "target": "y", "features": ["a", "b"]}) + "\n"
    )
    print(f"categorical: {ns.values:,} values, {data.stat().st_size / 2**20:.0f} MiB")
    measure("categorical schema --check --data", ["schema", "--check", str(schema), "--data",
                                                   str(data)])  # fmt: skip
    common = ["--data", str(data), "--schema", str(schema), "--epsilon", "1", "--delta", "1e-7"]
    measure("categorical run", ["run", *common, "--queries", str(asked), "-o",
                                str(tmp / "cat.out")])  # fmt: skip
    measure("categorical synth", ["synth", *common, "--queries", str(asked), "-o",
                                  str(tmp / "cat.synth.csv")])  # fmt: skip


def schema_parse(tmp: Path, ns: argparse.Namespace) -> None:
    path = tmp / "big.schema.json"
    values = [f"v{i}" for i in range(ns.schema_values)]
    path.write_text(json.dumps({"attributes": [{"name": "big", "values": values}]}))
    code = textwrap.dedent(
        f"""
        import time
        from pmwcm.data.schema import Schema
        times = []
        for _ in range(3):
            start = time.perf_counter()
            Schema.from_json({str(path)!r}).domain()
            times.append(time.perf_counter() - start)
        print(sorted(times)[1])
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds = float(done.stdout)
    print(f"schema of {ns.schema_values:,} values parsed in {seconds:.2f} s (median of 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--prior", default="marginals")
    parser.add_argument("--support-size", type=int, default=0, help="0: run's default rule")
    parser.add_argument("--values", type=int, default=1_000_000)
    parser.add_argument("--schema-values", type=int, default=200_000)
    parser.add_argument("--skip", action="append", default=[],
                        choices=["wide", "categorical", "schema"])  # fmt: skip
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pmwcm-wide-") as tmp:
        for name, step in (("schema", schema_parse), ("categorical", categorical), ("wide", wide)):
            if name not in ns.skip:
                step(Path(tmp), ns)


if __name__ == "__main__":
    main()
