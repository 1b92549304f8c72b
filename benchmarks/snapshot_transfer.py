"""Opening a table of mostly distinct records: the snapshot's way from the engine to pmwcm.

Opening a table reads it once, into the pinned snapshot of distinct coded records
and their counts (:mod:`pmwcm.data.sources.sql_source`). Where the records are
mostly distinct the snapshot has about as many rows as the table, and how the
engine hands them over decides the open's time and memory: as one Python tuple a
row, or as integer columns. This benchmark writes a table of ``--rows`` rows of
``--columns`` integer columns drawn uniformly from 0..999 (a schema of 100 bins
each: ``100^6`` cells, so nearly every record is distinct), loads it into DuckDB
(a Parquet file), a throw-away PostgreSQL server (tests/postgres_cluster.py) and
Spark in local mode, and opens it once per engine and per ``--tree`` (a ``src``
folder put first on ``PYTHONPATH``), each open in its own process. One JSON line
per open: the snapshot's rows and bytes, the open's wall and CPU time, and the
memory it added (peak ``ru_maxrss`` minus the resident memory before the open;
Spark's JVM is another process and is not counted). DuckDB, whose result always
came as NumPy columns, is the baseline of the same run. After the open, each
process counts the cliques of the first 2, 3 and 4 columns (``--cliques``: 10^4,
10^6 and 10^8 cells) from the snapshot, and reports their CPU time and the
process's peak resident memory once they are counted: what a session holds while
it answers.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/snapshot_transfer.py --rows 4000000 \\
        --tree /path/to/old/src --tree src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

ENGINES = ("duckdb", "postgres", "spark")

_OPEN = """
import json, resource, sys, time
spec = json.loads(sys.argv[1])
from pmwcm.data.schema import Schema
from pmwcm.data.sources.open import open_source

schema = Schema.from_json(spec["schema"])
options, session = {}, None
if spec["engine"] == "postgres":
    options["table"] = "records"
if spec["engine"] == "spark":
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \\
        .config("spark.sql.shuffle.partitions", "4").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    options.update(engine="spark", spark=session)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
wall, cpu = time.perf_counter(), time.process_time()
source = open_source(spec["data"], schema, **options)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
pinned = source.pinned
count_cpu, occupied = time.process_time(), []
for clique in spec["cliques"]:
    occupied.append(int(source.counts(tuple(clique)).mass.size))
count_cpu = time.process_time() - count_cpu
counted = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({
    "engine": spec["engine"], "tree": spec["tree"], "rows": spec["rows"],
    "snapshot_rows": pinned.rows, "n": pinned.n,
    "snapshot_mib": round(pinned.nbytes / 2**20, 1), "spilled": getattr(pinned, "spilled", False),
    "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
    "added_mib": round(peak - before), "peak_mib": round(peak),
    "cliques_occupied": occupied, "count_cpu_s": round(count_cpu, 2),
    "peak_after_counts_mib": round(counted),
}))
if session is not None:
    session.stop()
"""


def schema_json(columns: int) -> dict[str, object]:
    """``columns`` attributes of 100 bins of width 10 over 0..1000 (public)."""
    edges = list(range(0, 1001, 10))
    return {"attributes": [{"name": f"c{j}", "bins": edges} for j in range(columns)]}


def write_parquet(path: Path, rows: int, columns: int, seed: int) -> None:
    """The table, drawn by DuckDB (seeded), as Parquet."""
    import duckdb

    connection = duckdb.connect()
    connection.execute(f"SELECT setseed({seed / 1000})")
    drawn = ", ".join(f"CAST(floor(random() * 1000) AS INTEGER) AS c{j}" for j in range(columns))
    connection.execute(f"COPY (SELECT {drawn} FROM range({rows})) TO '{path}' (FORMAT parquet)")


def load_postgres(url: str, parquet: Path, columns: int) -> None:
    """The same rows into table ``records`` of the server (``COPY`` from CSV)."""
    import duckdb
    import psycopg

    csv = parquet.with_suffix(".csv")
    duckdb.sql(f"COPY (SELECT * FROM '{parquet}') TO '{csv}' (FORMAT csv, HEADER false)")
    with psycopg.connect(url) as connection:
        typed = ", ".join(f"c{j} integer" for j in range(columns))
        connection.execute(f"CREATE TABLE records ({typed})")
        statement = "COPY records FROM STDIN WITH (FORMAT csv)"
        with connection.cursor().copy(statement) as copy, csv.open("rb") as f:
            while block := f.read(1 << 20):
                copy.write(block)
    csv.unlink()


def open_once(spec: dict[str, object], tree: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _OPEN, json.dumps({**spec, "tree": tree})],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the open failed ({spec['engine']}, {tree}): {done.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=6)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--tree", action="append", default=None, help="a src folder (repeat)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cliques", type=int, nargs="*", default=[2, 3, 4],
        help="after the open, count a clique of the first W columns for each W given",
    )  # fmt: skip
    args = parser.parse_args()
    trees = args.tree or [str(Path(__file__).resolve().parents[1] / "src")]
    from postgres_cluster import PostgresCluster

    with tempfile.TemporaryDirectory() as tmp:
        parquet = Path(tmp) / "records.parquet"
        write_parquet(parquet, args.rows, args.columns, args.seed)
        cliques = [[f"c{j}" for j in range(width)] for width in args.cliques]
        base = {"rows": args.rows, "schema": schema_json(args.columns), "cliques": cliques}
        with PostgresCluster() as cluster:
            if "postgres" in args.engines:
                load_postgres(cluster.url, parquet, args.columns)
            for engine in args.engines:
                data = cluster.url if engine == "postgres" else str(parquet)
                for tree in trees:
                    print(json.dumps(open_once({**base, "engine": engine, "data": data}, tree)))
                    sys.stdout.flush()


if __name__ == "__main__":
    main()
