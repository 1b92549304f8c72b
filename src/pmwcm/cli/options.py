"""The options ``pmwcm run`` and ``pmwcm synth`` share, declared once.

Each alias is a typer ``Annotated`` type: a command names its parameter with
it (``data: DataOption``) and gets the same flag, help text and metavar as
every other command that does. The flags are part of the fixed ``pmwcm run``
contract (issue 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "AcceptDraftedOption",
    "BackendOption",
    "DataOption",
    "DeltaOption",
    "EngineOption",
    "EpsilonOption",
    "HypothesisMemoryOption",
    "InsecureNoiseOption",
    "MaxUpdatesOption",
    "ModeOption",
    "PriorOption",
    "PublicPriorOption",
    "QueriesOption",
    "SchemaOption",
    "SeedOption",
    "SupportSizeOption",
    "TableOption",
]

DATA_HELP = (
    "The private data: a CSV file with a header row, a Parquet file or a directory of Parquet "
    "files (read in place by DuckDB); a postgresql:// URL (with --table); or a Parquet path "
    "or table name read by Spark (with --engine spark); - reads a CSV from stdin."
)
TABLE_HELP = "The table to read: for a postgresql:// --data, or a Spark table with --engine spark."
ENGINE_HELP = "Who reads a --data path: duckdb (the default) or spark (needs pmwcm[spark])."
SCHEMA_HELP = "Schema JSON: how the CSV's columns become attributes (see README)."
QUERIES_HELP = 'JSON Lines, one query per line: {"id": "q1", "loss": ..., "target": ..., ...}.'
EPSILON_HELP = (
    "Total privacy budget epsilon, in [0.001, 1000] (below, noise swamps every answer; "
    "above, the guarantee is void). 0.1 to 10 are usual."
)
DELTA_HELP = (
    "Total privacy budget delta, in (0, 1/n) for n rows (at 1/n a run may publish about one "
    "whole record); 1e-6 is usual."
)
SEED_HELP = "Removed (it seeded the privacy noise): see --insecure-seeded-noise."
INSECURE_NOISE_HELP = (
    "INSECURE, for experiments on public data only: draw the privacy noise from a NumPy "
    "generator seeded with SEED. Reproducible, but anyone who knows SEED can subtract the "
    "noise from the answers, and it is not floating-point safe. Without it, noise comes "
    "from OpenDP, seeded by the OS CSPRNG."
)
ACCEPT_DRAFTED_HELP = (
    "Accept a schema drafted from the data by 'pmwcm schema' (its value sets and bin edges "
    "leak the data outside the budget). Without it such a schema is refused."
)
MAX_UPDATES_HELP = (
    "Advanced: T, the number of private updates of online PMW (default: the library's, "
    "10 with its marginal prior)."
)
PRIOR_HELP = (
    "Advanced: the starting hypothesis of online PMW: marginals (noisy 2-way marginals, "
    "paid from the budget; the default), aim or mst (OpenDP's AIM or MST contingency "
    "table, paid from the budget; slower, needs pmwcm's mbi extra, not seeded by "
    "--insecure-seeded-noise), public (set by --public-prior) or uniform (the paper's start)."
)
PUBLIC_PRIOR_HELP = (
    "Advanced: start online PMW from PUBLIC records (a CSV under the same schema, e.g. an "
    "older public release or a census sample), at no privacy cost; implies --prior public. "
    "Never pass data derived from the private file here: that start would be unpaid."
)

BACKEND_HELP = (
    "Advanced: the hypothesis backend: auto (the default: a dense tensor over the universe X "
    "while it fits --hypothesis-memory, a weighted support of --support-size records beyond), "
    "dense or support. 'pmwcm schema --check' prints the choice for a schema."
)
HYPOTHESIS_MEMORY_HELP = (
    "Advanced: the memory the hypothesis may take, in bytes or with a suffix: KiB, MiB, GiB, "
    "TiB (powers of 1024; K, M, G, T mean the same), or KB, MB, GB, TB (powers of 1000). "
    "Default 512MiB."
)
MODE_HELP = (
    "Advanced: which engine answers the file with --method pmw: auto (the default: the "
    "number of distinct queries in the file is announced, and the library's public budget "
    "rule answers every query by a composed private fit where that beats online PMW, as at "
    "large n with few queries), hybrid (always online PMW) or composition (always one "
    "private fit per distinct query, under the whole budget)."
)
SUPPORT_SIZE_HELP = (
    "Advanced: M, the number of records of the support backend (default 0: the smallest "
    "power of two >= n and >= 32 records a cell of the schema's mean pair marginal, between "
    "2^14 and 2^18, capped by --hypothesis-memory; at least 1,000). Smaller is faster and "
    "coarser."
)

# A string, not a Path: a postgresql:// URL must keep its double slash.
DataOption = Annotated[str, typer.Option("--data", metavar="PATH|URL", help=DATA_HELP)]
TableOption = Annotated[str | None, typer.Option("--table", metavar="TABLE", help=TABLE_HELP)]
EngineOption = Annotated[
    str | None, typer.Option("--engine", metavar="[duckdb|spark]", help=ENGINE_HELP)
]
SchemaOption = Annotated[Path, typer.Option("--schema", help=SCHEMA_HELP)]
QueriesOption = Annotated[Path, typer.Option("--queries", help=QUERIES_HELP)]
EpsilonOption = Annotated[float, typer.Option("--epsilon", metavar="EPS", help=EPSILON_HELP)]
DeltaOption = Annotated[float, typer.Option("--delta", metavar="DELTA", help=DELTA_HELP)]
SeedOption = Annotated[int | None, typer.Option("--seed", help=SEED_HELP, hidden=True)]
MaxUpdatesOption = Annotated[int | None, typer.Option("--max-updates", help=MAX_UPDATES_HELP)]
PriorOption = Annotated[
    str | None,
    typer.Option("--prior", metavar="[marginals|aim|mst|public|uniform]", help=PRIOR_HELP),
]
PublicPriorOption = Annotated[Path | None, typer.Option("--public-prior", help=PUBLIC_PRIOR_HELP)]
InsecureNoiseOption = Annotated[
    int | None, typer.Option("--insecure-seeded-noise", metavar="SEED", help=INSECURE_NOISE_HELP)
]
AcceptDraftedOption = Annotated[
    bool, typer.Option("--accept-drafted-schema", metavar="", help=ACCEPT_DRAFTED_HELP)
]
BackendOption = Annotated[
    str, typer.Option("--backend", metavar="[auto|dense|support]", help=BACKEND_HELP)
]
HypothesisMemoryOption = Annotated[
    str | None, typer.Option("--hypothesis-memory", metavar="BYTES", help=HYPOTHESIS_MEMORY_HELP)
]
ModeOption = Annotated[
    str, typer.Option("--mode", metavar="[auto|hybrid|composition]", help=MODE_HELP)
]
SupportSizeOption = Annotated[
    int, typer.Option("--support-size", metavar="M", help=SUPPORT_SIZE_HELP)
]
