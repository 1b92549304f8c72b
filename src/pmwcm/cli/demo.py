"""``pmwcm demo``: the main job. Online PMW vs composition vs exact answers on Adult.

On the bundled Adult data (``adult-binary`` schema, ``|X| = 2^14``) at
``delta = 1e-6`` it streams ``--queries`` CM queries -- random logistic /
squared / smoothed-hinge fits mixed with four forward-stepwise analysts that
choose each next feature from PMW-CM's released answers only -- and answers
them online with PMW-CM (the library's practical defaults) behind a live
progress bar. Then, on the same sequence: the paper's PMW (uniform start,
``T = 50``), the composition baseline (every query through the oracle, the
budget split over the ``K`` queries declared up front) and the exact
non-private fit. The excess risk ``L_D(theta) - min L_D`` of every answer is
measured exactly (one certified solve per query); the command prints a table
(stdout) and writes ``excess_risk.png`` and ``summary.json`` into ``--output``.

Without ``--seed`` the noise comes from OpenDP (CSPRNG) and the query stream
from fresh OS entropy (its seed is recorded in the summary); with ``--seed``
everything is reproducible (seeded NumPy noise, recorded as such).
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pmwcm.cli.common import check_budget, fail

if TYPE_CHECKING:
    import numpy as np

DELTA = 1e-6
SCHEMA = "adult-binary"
#: The adaptive analysts: (target, loss); each selects 3 features stepwise.
ANALYSTS = (
    ("income>50K", "logistic"),
    ("married", "smoothed_hinge"),
    ("education-num>=10", "squared"),
    ("hours>=40", "logistic"),
)
METHODS = {
    "pmw": "PMW-CM",
    "pmw_uniform": "PMW, uniform",
    "composition": "composition",
    "nonprivate": "non-private",
}

_QUERIES_HELP = "Number of queries in the stream."
_EPSILON_HELP = "Total privacy budget epsilon of each private method (delta = 1e-6)."
_SEED_HELP = "Seed the query stream and NumPy noise (reproducible; NOT floating-point safe)."
_OUTPUT_HELP = "Folder for the plot (excess_risk.png) and the summary (summary.json)."


def _sources(seed: int | None) -> tuple[list[Any], np.random.Generator, int | None, str]:
    """Three noise sources, the stream's generator, its seed, and the noise label."""
    import numpy as np

    from pmwcm.mechanisms.noise import NumpyNoise, default_noise

    if seed is None:
        stream_seed = secrets.randbits(63)
        noises = [default_noise() for _ in range(3)]
        return noises, np.random.default_rng(stream_seed), stream_seed, "opendp"
    *children, stream = np.random.SeedSequence(seed).spawn(4)
    noises = [NumpyNoise(generator=np.random.default_rng(c)) for c in children]
    return noises, np.random.default_rng(stream), None, f"numpy(seed={seed})"


def _progress() -> Any:
    from pmwcm.cli.progress import rich_progress

    return rich_progress()


def _pmw_info(answer: Any, engine: Any, counts: Counter[str]) -> str:
    return (
        f"updates {answer.updates}/{engine.settings.max_updates}  "
        f"eps {answer.epsilon_spent:.3f}  hypothesis {counts['hypothesis']}  "
        f"oracle {counts['oracle']}  synthetic {counts['synthetic']}"
    )


def demo_command(
    queries: Annotated[int, typer.Option("--queries", "-k", help=_QUERIES_HELP)] = 1000,
    epsilon: Annotated[float, typer.Option("--epsilon", help=_EPSILON_HELP)] = 1.0,
    seed: Annotated[int | None, typer.Option("--seed", help=_SEED_HELP)] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help=_OUTPUT_HELP)] = Path("pmwcm-demo"),
) -> None:
    """Stream random and adaptive queries on Adult; compare PMW-CM with composition.

    Prints a comparison table and writes excess_risk.png and summary.json into --output.
    """
    from pmwcm.data.bundled import load_adult
    from pmwcm.kernels.workload import MixedStream, StepwiseAnalyst
    from pmwcm.mechanisms.private_data import PrivateData

    if queries < 1:
        raise fail(f"--queries must be a positive integer, got {queries}.")
    check_budget(epsilon, DELTA)
    _prepare_output(output)
    noises, rng, stream_seed, noise_name = _sources(seed)
    dataset = load_adult(SCHEMA)
    data = PrivateData.from_records(dataset.domain, dataset.records)
    analysts = [StepwiseAnalyst(dataset.domain, t, loss=loss) for t, loss in ANALYSTS]
    stream = MixedStream(dataset.domain, queries, rng=rng, analysts=analysts)
    runs = _Runs()
    with _progress() as progress:
        _run_pmw(runs, data, stream, epsilon, noises[0], progress, queries)
        _run_pmw_uniform(runs, data, epsilon, noises[1], progress, queries)
        _run_composition(runs, data, epsilon, noises[2], progress, queries)
        _run_nonprivate(runs, data)
        risks = _excess_risks(runs, data, progress, queries)
    summary = _summary(
        runs, risks, data, epsilon=epsilon, queries=queries, seed=seed, stream_seed=stream_seed
    )
    summary["noise"] = noise_name
    summary["stepwise"] = [
        {"target": a.target, "loss": a.loss, "selected": list(a.selected)} for a in analysts
    ]
    summary = {k: summary[k] for k in _SUMMARY_ORDER}
    _print_table(summary)
    _write_outputs(output, risks, runs, summary)


_SUMMARY_ORDER = (
    "dataset", "n", "universe_size", "epsilon", "delta", "queries", "seed", "stream_seed",
    "noise", "methods", "pmw", "stepwise", "per_query",
)  # fmt: skip


@dataclass
class _Runs:
    """What the demo's steps produce: the stream's items, each method's answers and timing."""

    items: list[Any] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)
    thetas: dict[str, list[Any]] = field(default_factory=lambda: {m: [] for m in METHODS})
    timing: dict[str, float] = field(default_factory=dict)
    spent: dict[str, float | None] = field(default_factory=lambda: {"nonprivate": None})
    calls: dict[str, int] = field(default_factory=lambda: {"nonprivate": 0})
    engine: Any = None


def _prepare_output(output: Path) -> None:
    """Creates the ``--output`` directory; refuses a file in its place."""
    if output.exists() and not output.is_dir():
        raise fail(f"--output '{output}' exists and is not a directory.")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create --output '{output}': {exc.strerror or exc}.") from None


def _run_pmw(
    runs: _Runs, data: Any, stream: Any, epsilon: float, noise: Any, progress: Any, k: int
) -> None:
    """Step 1: PMW-CM (practical defaults) answers the adaptive stream."""
    from pmwcm.engine.practical import PMWConfig, build_engine

    start = time.perf_counter()
    config = PMWConfig(epsilon=epsilon, delta=DELTA, after_halt="synthetic")
    engine = build_engine(data, config, noise=noise)
    task = progress.add_task("PMW-CM", total=k, info="")
    counts: Counter[str] = Counter()
    while (item := stream.next_item()) is not None:
        answer = engine.answer(item.query)
        stream.observe(answer.value)
        runs.items.append(item)
        runs.answers.append(answer)
        counts[answer.source] += 0 if answer.repeated else 1
        progress.update(task, advance=1, info=_pmw_info(answer, engine, counts))
    runs.thetas["pmw"] = [a.value for a in runs.answers]
    runs.timing["pmw"] = time.perf_counter() - start
    runs.spent["pmw"] = engine.ledger.spent_epsilon()
    runs.calls["pmw"] = len(engine.updates)
    runs.engine = engine


def _run_pmw_uniform(
    runs: _Runs, data: Any, epsilon: float, noise: Any, progress: Any, k: int
) -> None:
    """Step 2: the paper's PMW (uniform start) replays the same queries."""
    from pmwcm.engine.practical import PMWConfig, build_engine

    start = time.perf_counter()
    paper = PMWConfig(epsilon=epsilon, delta=DELTA, after_halt="synthetic", prior="uniform")
    uniform = build_engine(data, paper, noise=noise)
    task = progress.add_task("PMW, paper", total=k, info="uniform start")
    for item in runs.items:
        runs.thetas["pmw_uniform"].append(uniform.answer(item.query).value)
        progress.advance(task)
    runs.timing["pmw_uniform"] = time.perf_counter() - start
    runs.spent["pmw_uniform"] = uniform.ledger.spent_epsilon()
    runs.calls["pmw_uniform"] = len(uniform.updates)


def _run_composition(
    runs: _Runs, data: Any, epsilon: float, noise: Any, progress: Any, k: int
) -> None:
    """Step 3: the composition baseline answers every query with the oracle."""
    from pmwcm.engine.baselines import CompositionBaseline

    start = time.perf_counter()
    comp = CompositionBaseline(data, epsilon=epsilon, delta=DELTA, queries=k, noise=noise)
    task = progress.add_task("composition", total=k, info="")
    for item in runs.items:
        runs.thetas["composition"].append(comp.answer(item.query))
        progress.update(task, advance=1, info=f"eps {comp.ledger.spent_epsilon():.3f}")
    runs.timing["composition"] = time.perf_counter() - start
    runs.spent["composition"] = comp.ledger.spent_epsilon()
    runs.calls["composition"] = k


def _run_nonprivate(runs: _Runs, data: Any) -> None:
    """Step 4: exact answers, for reference (no privacy)."""
    from pmwcm.engine.baselines import NonPrivateBaseline

    start = time.perf_counter()
    exact = NonPrivateBaseline(data)
    runs.thetas["nonprivate"] = [exact.answer(item.query) for item in runs.items]
    runs.timing["nonprivate"] = time.perf_counter() - start


def _excess_risks(runs: _Runs, data: Any, progress: Any, k: int) -> dict[str, Any]:
    """Step 5: each method's excess empirical risk on each query (one exact solve each)."""
    import numpy as np

    from pmwcm.engine.baselines import exact_minimum

    task = progress.add_task("excess risk", total=k, info="one exact solve per query")
    risks = {m: np.zeros(k) for m in METHODS}
    for i, item in enumerate(runs.items):
        problem = item.query.compile(data.domain)
        weights = data.marginal(problem.clique).ravel()
        best = exact_minimum(problem, weights)
        for m in METHODS:
            risks[m][i] = max(0.0, problem.objective(runs.thetas[m][i], weights) - best)
        progress.advance(task)
    return risks


def _summary(
    runs: _Runs,
    risks: dict[str, Any],
    data: Any,
    *,
    epsilon: float,
    queries: int,
    seed: int | None,
    stream_seed: Any,
) -> dict[str, Any]:
    """Step 6: the summary.json record (without the noise and the stepwise analysts)."""
    import numpy as np

    engine, answers = runs.engine, runs.answers
    return {
        "dataset": f"bundled UCI Adult, schema {SCHEMA}",
        "n": data.n,
        "universe_size": data.domain.size,
        "epsilon": epsilon,
        "delta": DELTA,
        "queries": queries,
        "seed": seed,
        "stream_seed": stream_seed,
        "methods": {
            m: {
                "label": label,
                "mean_excess_risk": float(risks[m].mean()),
                "p95_excess_risk": float(np.quantile(risks[m], 0.95)),
                "max_excess_risk": float(risks[m].max()),
                "oracle_calls": runs.calls[m],
                "epsilon_spent": runs.spent[m],
                "time_s": runs.timing[m],
            }
            for m, label in METHODS.items()
        },
        "pmw": {
            "max_updates": engine.settings.max_updates,
            "updates": len(engine.updates),
            "sources": dict(Counter(a.source for a in answers if not a.repeated)),
            "repeats": sum(a.repeated for a in answers),
            "first_synthetic_answer": next(
                (a.index for a in answers if a.source == "synthetic"), None
            ),
            "ledger": [
                {"label": e.label, "epsilon_after": e.epsilon_after} for e in engine.ledger.entries
            ],
        },
        "per_query": [
            {
                "index": i,
                "kind": item.kind,
                "query": item.query.to_dict(),
                "pmw_source": answers[i].source,
                "excess_risk": {m: float(risks[m][i]) for m in METHODS},
            }
            for i, item in enumerate(runs.items)
        ],
    }


def _write_outputs(output: Path, risks: dict[str, Any], runs: _Runs, summary: dict) -> None:
    """Step 7: the plot and summary.json, each written atomically."""
    plot_path, summary_path = output / "excess_risk.png", output / "summary.json"
    try:
        from pmwcm._atomic import atomic_write_text
        from pmwcm.cli.demo_plot import plot_excess_risk

        plot_excess_risk(plot_path, risks, [a.source for a in runs.answers], summary)
        atomic_write_text(summary_path, json.dumps(summary, indent=1, allow_nan=False) + "\n")
    except OSError as exc:
        raise fail(f"cannot write into '{output}': {exc.strerror or exc}.") from None
    typer.echo(f"wrote {plot_path} and {summary_path}")


def _print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"Adult (n = {summary['n']:,}, |X| = 2^14), {summary['queries']} queries, "
        f"eps = {summary['epsilon']:g}, delta = {summary['delta']:g}",
        caption="risk = excess empirical risk L_D(theta) - min L_D; PMW, uniform = the paper's "
        "start (no prior), T = 50",
    )
    for col in ("method", "mean risk", "max risk", "oracle calls", "eps spent", "time (s)"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for m in summary["methods"].values():
        spent = "none" if m["epsilon_spent"] is None else f"{m['epsilon_spent']:.3f}"
        table.add_row(
            m["label"], f"{m['mean_excess_risk']:.5f}", f"{m['max_excess_risk']:.4f}",
            str(m["oracle_calls"]), spent, f"{m['time_s']:.1f}",
        )  # fmt: skip
    console = Console(highlight=False)
    console.print(table)
    p = summary["pmw"]
    src, halt = p["sources"], p["first_synthetic_answer"]
    console.print(
        f"PMW-CM: {src.get('hypothesis', 0)} answers from the hypothesis (checked by the "
        f"sparse vector), {src.get('oracle', 0)} from the oracle (updates), "
        f"{src.get('synthetic', 0)} synthetic, {p['repeats']} repeats (free)"
        + (f"; all {p['max_updates']} updates spent at query {halt}." if halt else ".")
    )
    console.print("PMW-CM budget: " + _ledger_line(p["ledger"]))
    for s in summary["stepwise"]:
        chosen = ", ".join(s["selected"]) or "(none selected yet)"
        console.print(f"stepwise {s['target']} ({s['loss']}): {chosen}")
    typer.echo(f"noise: {summary['noise']}", err=True)  # as every command: the source on stderr


def _ledger_line(entries: list[dict[str, Any]]) -> str:
    """``prior ... 0.40, sparse vector 0.70, 2 oracle calls 0.75`` (cumulative epsilon)."""
    groups: list[list[Any]] = []  # [stem, count, epsilon after]
    for e in entries:
        stem = e["label"].rstrip("0123456789 ")
        if groups and groups[-1][0] == stem:
            groups[-1][1:] = [groups[-1][1] + 1, e["epsilon_after"]]
        else:
            groups.append([stem, 1, e["epsilon_after"]])
    parts = [f"{s if c == 1 else f'{c} x {s}'} -> eps {eps:.3f}" for s, c, eps in groups]
    return ", ".join(parts) or "nothing spent"
