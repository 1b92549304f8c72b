"""``pmwcm audit``: the long statistical privacy audit of pmwcm's own mechanisms.

Runs :func:`pmwcm.audit.suite.standard_cases` (``--trials`` final trials per
input and mechanism, plus a quarter as many for the event search), the
shipped default pipeline end to end and the paid support prior as a black box
(:func:`~pmwcm.audit.suite.pipeline_cases`, ``--pipeline-trials``: real code at
~40 ms and ~5 ms a trial), the same pipeline audit through the support backend,
sparse clique tables, a Parquet file opened by DuckDB, with ``--spark`` the same
file read by Spark and, with ``--postgres URL``, a PostgreSQL table
(:func:`~pmwcm.audit.suite.reach_cases`; the data is opened as ``pmwcm run --data``
opens it), the cross-checks of the vectorised models against the real code, and
the sensitivity search; with
``--negative-controls`` also the deliberately broken pipelines, support priors,
oracles and the planted bug of each path above. Prints a
Markdown report to stdout (progress on stderr) and exits 1 if any claim is
refuted, any cross-check disagrees, any sensitivity bound is exceeded or a
must-catch negative control is not flagged. ``--no-suite`` runs the pipeline
rows only.

The error probability ``--alpha`` is family-wise: each of the ``r`` audited
rows (negative controls included) gets ``alpha / r`` (Bonferroni), so with
probability at least ``1 - alpha`` no correct mechanism is reported as a
violation.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

_TRIALS_HELP = "Final trials per input and mechanism (the search uses a quarter as many more)."
_ALPHA_HELP = "Family-wise probability of a false violation (split evenly over mechanisms)."
_OPENDP_HELP = "Include the OpenDP noise rows (~50-100 us per draw: several minutes at 10^6)."
_OUTPUT_HELP = "Also write the report here (atomically)."
_PIPELINE_HELP = "Final trials per input for the end-to-end pipeline rows (0: skip them)."
_CONTROLS_HELP = "Also audit the deliberately broken pipelines (negative controls)."
_SUITE_HELP = "Run the vectorised cases, cross-checks and sensitivity search (else pipeline only)."
_POSTGRES_HELP = (
    "Also audit the pipeline on a PostgreSQL table at this URL (creates or replaces the "
    "tables pmwcm_audit_reach_d0 and _d1 there)."
)
_SPARK_HELP = (
    "Also audit the pipeline on the Parquet pair read by Spark (pmwcm run --engine spark; "
    "needs pmwcm[spark] and Java; the session is SparkSession.builder.getOrCreate())."
)


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        info = Path("/proc/cpuinfo").read_text().splitlines()
        names = [ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def audit_command(
    trials: Annotated[int, typer.Option("--trials", min=1000, help=_TRIALS_HELP)] = 1_000_000,
    alpha: Annotated[float, typer.Option("--alpha", min=1e-12, max=0.5, help=_ALPHA_HELP)] = 0.01,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the audit's NumPy draws.")] = 0,
    opendp: Annotated[bool, typer.Option("--opendp/--no-opendp", help=_OPENDP_HELP)] = True,
    pipeline_trials: Annotated[
        int, typer.Option("--pipeline-trials", min=0, help=_PIPELINE_HELP)
    ] = 2000,
    negative_controls: Annotated[
        bool, typer.Option("--negative-controls/--no-negative-controls", help=_CONTROLS_HELP)
    ] = False,
    suite: Annotated[bool, typer.Option("--suite/--no-suite", help=_SUITE_HELP)] = True,
    postgres: Annotated[str | None, typer.Option("--postgres", help=_POSTGRES_HELP)] = None,
    spark: Annotated[bool, typer.Option("--spark/--no-spark", help=_SPARK_HELP)] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help=_OUTPUT_HELP)] = None,
) -> None:
    """Audit every mechanism statistically: lower bounds on epsilon vs the claims."""
    import numpy as np

    from pmwcm._atomic import atomic_open
    from pmwcm.audit import suite as standard

    began = time.perf_counter()
    rng = np.random.default_rng(seed)
    flags = [
        "--opendp" if opendp else "--no-opendp",
        f"--pipeline-trials {pipeline_trials}",
        *(["--negative-controls"] if negative_controls else []),
        *([] if suite else ["--no-suite"]),
        *(["--postgres URL"] if postgres else []),
        *(["--spark"] if spark else []),
    ]
    command = f"pmwcm audit --trials {trials} --alpha {alpha:g} --seed {seed} {' '.join(flags)}"
    with tempfile.TemporaryDirectory(prefix="pmwcm-audit-") as folder:
        sources = _reach_sources(Path(folder), postgres, spark) if pipeline_trials else []
        cases = [(c, trials) for c in standard.standard_cases(opendp=opendp)] if suite else []
        controls: list[tuple[Any, bool]] = []
        if pipeline_trials:
            cases += [(c, pipeline_trials) for c in standard.pipeline_cases()]
            cases += [(c, pipeline_trials) for c in standard.reach_cases(sources)]
            if negative_controls:
                controls = standard.negative_controls() + standard.reach_controls(sources)
        per_case = alpha / max(len(cases) + len(controls), 1)
        lines = [
            "# pmwcm privacy audit",
            "",
            f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- command: `{command}`",
            f"- machine: {_machine()}",
            f"- trials: {trials:,} final per input and vectorised mechanism, {pipeline_trials:,} "
            f"for the end-to-end pipelines (+ a quarter as many for the event search); seed {seed}",
            f"- confidence: {1 - alpha:g} family-wise ({1 - per_case:.6g} per row, Bonferroni)",
            "",
        ]
        failed = _case_rows(cases, lines, rng=rng, alpha=per_case)
        failed |= _control_rows(controls, lines, rng=rng, alpha=per_case, trials=pipeline_trials)
    if suite or pipeline_trials:
        typer.echo("cross-checking the models against the real code ...", err=True)
        lines += ["", "## Vectorised models vs the real code (identical draws)", ""]
        lines += ["| model | result | ok |", "| --- | --- | --- |"]
        checks = standard.standard_crosschecks(trials=1000, rng=rng) if suite else []
        if pipeline_trials:
            checks += standard.pipeline_crosschecks(trials=3, seed=seed)
        for what, result, ok in checks:
            failed |= not ok
            lines.append(f"| {what} | {result} | {'yes' if ok else 'NO'} |")
    if suite:
        typer.echo("searching for sensitivity violations ...", err=True)
        lines += ["", "## Sensitivity search: max |q(D) - q(D')| vs c S/n + tau", ""]
        lines += ["| loss | features | R | l2 | n | pairs | refusals | max change / bound | ok |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for rep in standard.standard_sensitivity(rng=rng):
            failed |= not rep.within_bound
            lines.append(_sensitivity_row(rep))
    lines += ["", f"Total time: {time.perf_counter() - began:.0f} s."]
    report = "\n".join(lines) + "\n"
    typer.echo(report, nl=False)
    if output is not None:
        with atomic_open(output) as fh:
            fh.write(report)
    if failed:
        raise typer.Exit(1)


def _case_rows(cases: list[tuple[Any, int]], lines: list[str], *, rng: Any, alpha: float) -> bool:
    """Audits each ``(case, trials)`` into a row of ``lines``; whether any was violated."""
    lines += [
        "| mechanism | guarantee | delta | claimed eps | eps lower bound | event | verdict |"
        " seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    failed = False
    for case, n in cases:
        typer.echo(f"auditing {case.name} ...", err=True)
        start = time.perf_counter()
        r = case.run(trials=n, rng=rng, alpha=alpha, batch_size=50_000)
        failed |= r.violated
        lines.append(
            f"| {r.name} | {case.guarantee} | {r.delta:g} | {_fmt(r.claimed_epsilon)} | "
            f"{_fmt(r.epsilon_lower_bound)} | `{r.event}` ({r.count0:,} vs {r.count1:,}) | "
            f"{r.verdict} | {time.perf_counter() - start:.0f} |"
        )
    return failed


def _control_rows(
    controls: list[tuple[Any, bool]], lines: list[str], *, rng: Any, alpha: float, trials: int
) -> bool:
    """Audits each negative control into ``lines``; whether a must-catch one was missed."""
    if not controls:
        return False
    lines += ["", "## Negative controls: deliberately broken pipelines and oracles", ""]
    lines += ["| broken mechanism | claimed eps | eps lower bound | event | verdict | must "
              "catch | seconds |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    failed = False
    for case, must in controls:
        typer.echo(f"auditing {case.name} ...", err=True)
        start = time.perf_counter()
        r = case.run(trials=trials, rng=rng, alpha=alpha, batch_size=50_000)
        failed |= must and not r.violated
        lines.append(
            f"| {r.name} | {_fmt(r.claimed_epsilon)} | {_fmt(r.epsilon_lower_bound)} | "
            f"`{r.event}` ({r.count0:,} vs {r.count1:,}) | {r.verdict} | "
            f"{'yes' if must else 'no'} | {time.perf_counter() - start:.0f} |"
        )
    return failed


def _reach_sources(folder: Path, postgres: str | None, spark: bool) -> list[Any]:
    """The reach rows' pair as a Parquet file in ``folder`` and, with ``postgres``, as two
    tables there; each opened by :func:`~pmwcm.cli.loading.open_data`, as ``pmwcm run
    --data`` opens it (with ``spark``, the Parquet pair also as ``--engine spark`` reads
    it). A source that cannot be set up is refused here, before any row runs."""
    from pmwcm.audit import reach
    from pmwcm.cli.loading import open_data
    from pmwcm.data.schema import Schema

    pair = reach.wide_parity_pair()
    schema = Schema.from_domain(pair[0].domain)
    paths = [reach.write_parquet(d, folder / f"reach-d{i}.parquet") for i, d in enumerate(pair)]
    sources = [
        reach.Source(
            label="DuckDB, Parquet",
            dataset0=str(paths[0]),
            dataset1=str(paths[1]),
            opener=lambda path: open_data(path, schema),
        )
    ]
    if postgres is not None:
        url = postgres
        try:
            tables = [reach.write_postgres(d, url, f"pmwcm_audit_reach_d{i}")
                      for i, d in enumerate(pair)]  # fmt: skip
        except Exception as exc:  # the URL holds a password: name the failure, not the URL
            raise typer.BadParameter(
                f"cannot create the audit's tables there ({type(exc).__name__}).",
                param_hint="--postgres",
            ) from None
        sources.append(
            reach.Source(
                label="PostgreSQL",
                dataset0=tables[0],
                dataset1=tables[1],
                opener=lambda table: open_data(url, schema, table=table),
            )
        )
    if spark:
        sources.append(_spark_source(paths, schema))
    return sources


def _spark_source(paths: list[Path], schema: Any) -> Any:
    """The Parquet pair read by Spark; refused if PySpark, PyArrow or its JVM is missing.

    The pair is the audit's own public data, so opening ``D0`` once here to start
    Spark reveals nothing; it turns a missing Java into a one-line refusal instead
    of a failed row after the other rows' minutes.
    """
    import importlib

    from pmwcm.audit import reach
    from pmwcm.cli.loading import open_data

    for package in ("pyspark", "pyarrow"):
        try:
            importlib.import_module(package)
        except ModuleNotFoundError:
            raise typer.BadParameter(
                f"needs the optional package {package}: pip install 'pmwcm[spark]'.",
                param_hint="--spark",
            ) from None

    def opener(path: Path) -> Any:
        return open_data(str(path), schema, engine="spark")

    try:
        opener(paths[0]).close()
    except Exception as exc:
        raise typer.BadParameter(
            f"cannot read the audit's Parquet files with Spark ({type(exc).__name__}).",
            param_hint="--spark",
        ) from None
    return reach.Source(label="Spark, Parquet", dataset0=paths[0], dataset1=paths[1], opener=opener)


def _sensitivity_row(rep: Any) -> str:
    """One row of the sensitivity table (features, then interactions and encodings)."""
    q = rep.query
    extras = ["*".join(g) for g in q.interactions] + [f"{a} {e}" for a, e in q.encodings.items()]
    shown = ", ".join(q.features) + (f" ({'; '.join(extras)})" if extras else "")
    return (
        f"| {q.loss} | {shown} | {q.radius:g} | {q.l2:g} | {rep.n:,} | {rep.pairs:,} | "
        f"{rep.refusals:,} | {rep.ratio:.6f} | {'yes' if rep.within_bound else 'NO'} |"
    )
