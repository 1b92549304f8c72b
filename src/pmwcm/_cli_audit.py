"""``pmwcm audit``: the long statistical privacy audit of pmwcm's own mechanisms.

Runs :func:`pmwcm.audit.suite.standard_cases` (``--trials`` final trials per
input and mechanism, plus a quarter as many for the event search), the
cross-checks of the vectorised models against the real code, and the
sensitivity search; prints a Markdown report to stdout (progress on stderr)
and exits 1 if any claim is refuted, any cross-check disagrees or any
sensitivity bound is exceeded.

The error probability ``--alpha`` is family-wise: each of the ``r`` audited
mechanisms gets ``alpha / r`` (Bonferroni), so with probability at least
``1 - alpha`` no correct mechanism is reported as a violation.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import time
from pathlib import Path
from typing import Annotated

import typer

_TRIALS_HELP = "Final trials per input and mechanism (the search uses a quarter as many more)."
_ALPHA_HELP = "Family-wise probability of a false violation (split evenly over mechanisms)."
_OPENDP_HELP = "Include the OpenDP noise rows (~50-100 us per draw: several minutes at 10^6)."
_OUTPUT_HELP = "Also write the report here (atomically)."


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
    output: Annotated[Path | None, typer.Option("--output", "-o", help=_OUTPUT_HELP)] = None,
) -> None:
    """Audit every mechanism statistically: lower bounds on epsilon vs the claims."""
    import numpy as np

    from pmwcm._atomic import atomic_open
    from pmwcm.audit.suite import standard_cases, standard_crosschecks, standard_sensitivity

    began = time.perf_counter()
    rng = np.random.default_rng(seed)
    cases = standard_cases(opendp=opendp)
    per_case = alpha / len(cases)
    flag = "--opendp" if opendp else "--no-opendp"
    command = f"pmwcm audit --trials {trials} --alpha {alpha:g} --seed {seed} {flag}"
    lines = [
        "# pmwcm privacy audit",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- command: `{command}`",
        f"- machine: {_machine()}",
        f"- trials: {trials:,} final per input and mechanism (+ {trials // 4:,} for the "
        f"event search); seed {seed}",
        f"- confidence: {1 - alpha:g} family-wise ({1 - per_case:.6g} per row, Bonferroni)",
        "",
        "| mechanism | guarantee | delta | claimed eps | eps lower bound | event | verdict |"
        " seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    failed = False
    for case in cases:
        typer.echo(f"auditing {case.name} ...", err=True)
        start = time.perf_counter()
        r = case.run(trials=trials, rng=rng, alpha=per_case, batch_size=50_000)
        failed |= r.violated
        lines.append(
            f"| {r.name} | {case.guarantee} | {r.delta:g} | {_fmt(r.claimed_epsilon)} | "
            f"{_fmt(r.epsilon_lower_bound)} | `{r.event}` ({r.count0:,} vs {r.count1:,}) | "
            f"{r.verdict} | {time.perf_counter() - start:.0f} |"
        )
    typer.echo("cross-checking the models against the real code ...", err=True)
    lines += ["", "## Vectorised models vs the real code (identical draws)", ""]
    lines += ["| model | result | ok |", "| --- | --- | --- |"]
    for what, result, ok in standard_crosschecks(trials=1000, rng=rng):
        failed |= not ok
        lines.append(f"| {what} | {result} | {'yes' if ok else 'NO'} |")
    typer.echo("searching for sensitivity violations ...", err=True)
    lines += ["", "## Sensitivity search: max |err(D) - err(D')| vs 2S/n + tau (n = 10)", ""]
    lines += ["| loss | R | l2 | pairs | max change / bound | ok |", "| --- | --- | --- | --- |"
              " --- | --- |"]  # fmt: skip
    for rep in standard_sensitivity(rng=rng):
        failed |= not rep.within_bound
        q = rep.query
        lines.append(f"| {q.loss} | {q.radius:g} | {q.l2:g} | {rep.pairs:,} | {rep.ratio:.6f} | "
                     f"{'yes' if rep.within_bound else 'NO'} |")  # fmt: skip
    lines += ["", f"Total time: {time.perf_counter() - began:.0f} s."]
    report = "\n".join(lines) + "\n"
    typer.echo(report, nl=False)
    if output is not None:
        with atomic_open(output) as fh:
            fh.write(report)
    if failed:
        raise typer.Exit(1)
