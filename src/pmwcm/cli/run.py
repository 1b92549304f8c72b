"""``pmwcm run``: answer a JSONL file of CM queries against a CSV under one budget.

The command line is a fixed contract (issue 3): scripts depend on it.

Everything is validated before any privacy is spent: the budget, the schema,
the CSV against the schema, the output path, and every line of the query
file (parsed, and checked by :meth:`~pmwcm.kernels.queries.CMQuery.from_dict`).
A schema drafted from the data (``pmwcm schema``) is refused unless
``--accept-drafted-schema`` is given, and the removed ``--seed`` is refused
with a pointer to ``--insecure-seeded-noise``. A file that is not JSON Lines
(a line that is not a JSON object) is fatal; a well-formed line whose query
cannot be served (unknown attribute, radius <= 0, a duplicate id, ...) gets
an ``{"id": ..., "error": ...}`` line and the run goes on. The output has one
line per query line, in input order, and is written atomically at the end;
every line names the noise source (``"noise"``: ``"opendp"``, or
``"numpy(seed=S)"`` under ``--insecure-seeded-noise S``).

Refusals at answer time are decided from public inputs before the data or the
budget is touched (the :mod:`pmwcm.errors` hierarchy, reported through
:data:`pmwcm.cli.common.REFUSALS`); their messages go into the output. Any
other exception while the data is read would be a bug: the run stops with a
one-line error that names only the exception's type, never its message, and
writes nothing.

The shared helpers live in :mod:`pmwcm.cli.common`, the shared options in
:mod:`pmwcm.cli.options`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pmwcm.cli.common import (
    EXIT_SYNTHETIC,
    announced_cliques,
    answer_with_baseline,
    answer_with_engine,
    backend_settings,
    build_run_engine,
    check_backend,
    check_budget,
    check_distinct_outputs,
    check_engine_options,
    check_output,
    check_seed,
    describe_plan,
    distinct_queries,
    fail,
    is_stdio,
    load_data,
    load_schema,
    make_noise,
    open_data,
    plan_run,
    read_queries,
    resolve_prior,
    summarize,
    synthetic_report,
    write_json,
    write_jsonl,
)
from pmwcm.cli.options import (
    AcceptDraftedOption,
    BackendOption,
    DataOption,
    DeltaOption,
    EngineOption,
    EpsilonOption,
    HypothesisMemoryOption,
    InsecureNoiseOption,
    MaxUpdatesOption,
    ModeOption,
    PriorOption,
    PublicPriorOption,
    QueriesOption,
    SchemaOption,
    SeedOption,
    SupportSizeOption,
    TableOption,
)

METHODS = ("pmw", "composition", "nonprivate")
AFTER_HALT = ("synthetic", "refuse")

_METHOD_HELP = (
    "pmw: online private multiplicative weights; composition: every query answered by the "
    "private oracle, budget split evenly over the distinct valid queries of the file; "
    "nonprivate: exact answers, NO privacy (for reference)."
)
_AFTER_HALT_HELP = (
    "After the T updates are spent: synthetic answers from the final hypothesis "
    '(source "synthetic", no privacy cost, no accuracy check); refuse gives an error line.'
)
_OUTPUT_HELP = (
    "Write the answers here (JSON Lines, atomically); - writes them to stdout. Refused: an "
    "input file (--data, --schema, --queries), a directory or a device."
)
_DRY_RUN_HELP = (
    "Print the budget plan (the mode, the split, T, every calibrated noise level, the "
    "backend) on stdout, one 'name value' line each, and stop: nothing is answered, "
    "nothing written, no noise drawn. Opens the data for n only (--method pmw)."
)
_UPDATE_HELP = (
    "What a query the accuracy check flags buys (--method pmw): measure (default) measures "
    "its clique's marginal and refits the hypothesis to every measurement, updates paced "
    "over the file's distinct queries; oracle is the paper's private fit and tilt; both "
    "does the two; auto (default) is measure, the file being announced."
)
_METADATA_HELP = (
    'Also write one JSON object describing the run (atomically): {"method", "noise", '
    '"epsilon", "delta", "backend", "mode"}, "backend" being the hypothesis backend chosen '
    'for --method pmw ({"kind", "support_size", "memory_bytes", "reason"}; null otherwise) '
    'and "mode" the engine that answered and why (--mode; null for other methods).'
)


def run_command(
    data: DataOption,
    schema: SchemaOption,
    queries: QueriesOption,
    epsilon: EpsilonOption,
    delta: DeltaOption,
    output: Annotated[Path, typer.Option("--output", "-o", help=_OUTPUT_HELP)],
    seed: SeedOption = None,
    method: Annotated[
        str, typer.Option("--method", metavar="[pmw|composition|nonprivate]", help=_METHOD_HELP)
    ] = "pmw",
    after_halt: Annotated[
        str, typer.Option("--after-halt", metavar="[synthetic|refuse]", help=_AFTER_HALT_HELP)
    ] = "synthetic",
    max_updates: MaxUpdatesOption = None,
    prior: PriorOption = None,
    public_prior: PublicPriorOption = None,
    insecure_seeded_noise: InsecureNoiseOption = None,
    accept_drafted_schema: AcceptDraftedOption = False,
    backend: BackendOption = "auto",
    hypothesis_memory: HypothesisMemoryOption = None,
    support_size: SupportSizeOption = 0,
    metadata: Annotated[Path | None, typer.Option("--metadata", help=_METADATA_HELP)] = None,
    table: TableOption = None,
    data_engine: EngineOption = None,
    mode: ModeOption = "auto",
    update: Annotated[
        str, typer.Option("--update", metavar="[auto|measure|oracle|both]", help=_UPDATE_HELP)
    ] = "auto",
    dry_run: Annotated[bool, typer.Option("--dry-run", help=_DRY_RUN_HELP)] = False,
) -> None:
    """Answer a file of convex-minimisation queries under one (epsilon, delta) budget.

    \b
    A query line (JSON): {"id": "q1", "loss": "logistic", "target": "income>50K",
      "features": ["age>=37", "male"], "radius": 1.0, "l2": 0.0, "intercept": true,
      "loss_param": null, "encodings": {"age": "onehot"}, "interactions": [["a", "b"]]}
    Only id, loss, target and features are required. Losses: logistic, hinge,
    smoothed_hinge (binary target; its second value is +1), squared, huber,
    absolute, quantile (target code scaled onto [-1, 1]).

    \b
    An answer line: {"id", "theta", "source", "updates", "epsilon_spent",
      "delta", "noise", "coefficients", "on_boundary"}; a refused query gives
      {"id", "error", "noise"}.
    "coefficients" names each coordinate of theta, in order ("male=yes": +1 if
    yes, -1 if no; "race=white": one-hot; "intercept" last). "source" is
    hypothesis (checked against the data by the sparse vector), oracle (a fresh
    private fit), synthetic (after the engine halted: NO accuracy check; the line
    also has a "warning"), composition or nonprivate. "noise" is "opendp",
    "numpy(seed=S)" (--insecure-seeded-noise S) or "none".

    The radius R: every fit is constrained to ||theta|| <= R (default 1).
    "on_boundary": true says the constraint binds, so the unconstrained fit has
    larger coefficients. A larger R fits such a model better but costs accuracy
    for the same privacy: every noise scale grows in proportion to R. theta
    acts on features scaled by 1/sqrt(blocks) (features, interactions and
    intercept: one block each); theta / sqrt(blocks) are the coefficients on the
    raw +/-1 and one-hot features (README, "Reading the answers").

    The hypothesis backend (--backend, --hypothesis-memory, --support-size) is
    chosen from the schema and these settings alone; the choice and its reason
    go to stderr and, with --metadata FILE, into that file. So does the mode
    (--mode): the file's number of distinct queries k is announced, and with
    auto a public rule of (epsilon, delta, n, k) may answer every query by a
    private fit under the composed budget (source "oracle") instead of online PMW.

    Exit status: 0 done; 1 bad input (one "error:" line, nothing written); 2
    usage mistake; 3 answers written but some are synthetic (engine halted).
    """
    from pmwcm.engine.config import UPDATE_CHOICES
    from pmwcm.engine.practical import MODES

    check_seed(seed)
    if method not in METHODS:
        raise fail(f"--method must be one of {', '.join(METHODS)}, got {method!r}.")
    if after_halt not in AFTER_HALT:
        raise fail(f"--after-halt must be one of {', '.join(AFTER_HALT)}, got {after_halt!r}.")
    if mode not in MODES:
        raise fail(f"--mode must be one of {', '.join(MODES)}, got {mode!r}.")
    if update not in UPDATE_CHOICES:
        raise fail(f"--update must be one of {', '.join(UPDATE_CHOICES)}, got {update!r}.")
    if dry_run and method != "pmw":
        raise fail("--dry-run shows online PMW's budget plan; it needs --method pmw.")
    start = resolve_prior(prior, public_prior)
    check_engine_options(max_updates, start)
    check_budget(epsilon, delta)  # the rules that need no n, before anything is opened
    settings = backend_settings(backend, hypothesis_memory, support_size)
    inputs: list[tuple[str, Path | str | None]] = [
        ("--data", data), ("--schema", schema), ("--queries", queries),
        ("--public-prior", public_prior),
    ]  # fmt: skip
    check_output(output, inputs=inputs)
    if metadata is not None:
        check_output(metadata, "--metadata", inputs=inputs)
    check_distinct_outputs([("--output", output), ("--metadata", metadata)])
    if data == "-" and is_stdio(queries):
        raise fail("--data - and --queries - cannot both read stdin; give one of them a file.")
    parsed = load_schema(schema, accept_drafted=accept_drafted_schema)
    choice = check_backend(parsed.domain(), settings) if method == "pmw" else None
    dataset = open_data(data, parsed, table=table, engine=data_engine)
    if method != "pmw":  # online PMW's plan applies every rule, with n (public)
        check_budget(epsilon, delta, dataset.n)
    public = None if public_prior is None else load_data(public_prior, parsed).records
    lines = read_queries(queries)
    how = None
    if method == "pmw":
        # The file is the analysts', not the data: its number of queries is public.
        plan = plan_run(
            dataset, epsilon=epsilon, delta=delta, after_halt=after_halt,
            max_updates=max_updates, prior=start, public_start=public is not None,
            backend=settings, announced_queries=max(distinct_queries(lines, dataset.domain), 1),
            mode=mode, update=update, workload=announced_cliques(lines, dataset.domain),
        )  # fmt: skip
        if dry_run:
            typer.echo(describe_plan(plan))
            return
        how, noise = plan.mode_reason, make_noise(insecure_seeded_noise)
        engine = build_run_engine(dataset, plan, noise=noise, public=public)
        records = answer_with_engine(engine, lines)
        choice = engine.backend or choice  # the support size follows the data's n
    else:
        noise = make_noise(insecure_seeded_noise)
        records = answer_with_baseline(
            method, dataset, lines, epsilon=epsilon, delta=delta, noise=noise
        )
    write_jsonl(output, records)
    if metadata is not None:
        about = {"method": method, "noise": noise.name, "epsilon": epsilon, "delta": delta}
        about["backend"] = None if choice is None else choice.to_dict()
        write_json(metadata, about | {"mode": how})
    if how is not None:
        typer.echo(f"mode {how}", err=True)
    if choice is not None:
        typer.echo(f"backend {choice.reason}", err=True)
    typer.echo(summarize(records, method, noise.name), err=True)
    if method == "nonprivate":
        typer.echo("warning: --method nonprivate answers are NOT differentially private.", err=True)
    typer.echo("wrote the answers to stdout" if is_stdio(output) else f"wrote '{output}'", err=True)
    halted = synthetic_report(records)
    if halted is not None:
        typer.echo(f"{halted} Exit status {EXIT_SYNTHETIC}.", err=True)
        raise typer.Exit(EXIT_SYNTHETIC)
