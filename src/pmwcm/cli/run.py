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
line per query line, in input order, and replaces the output file only at the end;
every line names the noise source (``"noise"``: ``"opendp"``, or
``"numpy(seed=S)"`` under ``--insecure-seeded-noise S``).

Refusals at answer time are decided from public inputs before the data or the
budget is touched (the :mod:`pmwcm.errors` hierarchy, reported through
:data:`pmwcm.cli.answers.REFUSALS`); their messages go into the output. Any
other exception while the data is read would be a bug: the run stops with a
one-line error that names only the exception's type, never its message, and
writes nothing.

The query file is read in two streaming passes (:mod:`pmwcm.cli.query_file`):
the first finds ``k`` and the distinct queries, the second answers line by
line, each record written as it comes (:mod:`pmwcm.cli.answer_output`), so the
memory used grows with the distinct queries, not with the file's length.

The shared options live in :mod:`pmwcm.cli.options`.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import typer

from pmwcm.cli.answer_output import (
    EXIT_SYNTHETIC,
    AnswerTally,
    answer_stream,
    summarize,
    synthetic_report,
    write_json,
    write_records,
)
from pmwcm.cli.answers import answer_with_baseline, answer_with_engine
from pmwcm.cli.common import (
    backend_settings,
    check_backend,
    check_budget,
    check_distinct_outputs,
    check_engine_options,
    check_output,
    check_seed,
    fail,
    is_stdio,
    make_noise,
    resolve_prior,
)
from pmwcm.cli.loading import load_data, load_schema, open_data
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
from pmwcm.cli.planning import build_run_engine, describe_plan, plan_run
from pmwcm.cli.query_file import QueryFile

if TYPE_CHECKING:
    from pmwcm.kernels.backend import BackendChoice
    from pmwcm.mechanisms.private_data import PrivateData

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
_METADATA_HELP = (
    'Also write one JSON object describing the run (atomically): {"method", "noise", '
    '"epsilon", "delta", "backend", "mode"}, "backend" being the hypothesis backend chosen '
    'for --method pmw ({"kind", "support_size", "memory_bytes", "reason"}; null otherwise) '
    'and "mode" the engine that answered and why (--mode; null for other methods).'
)


RUN_HELP = """Answer a file of convex-minimisation queries under one (epsilon, delta) budget.

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
"""``pmwcm run --help`` (the command's docstring is short, the help is long)."""

_UPDATE_HELP = (
    "What a query the accuracy check flags buys (--method pmw): measure measures its "
    "clique's marginal and refits the hypothesis to every measurement, updates paced over "
    "the file's distinct queries; oracle is the paper's private fit and tilt; both does "
    "the two; auto (default) is measure, the file being announced."
)
_P = ParamSpec("_P")
_DEVICE_HELP = (
    "Where a support hypothesis computes: cpu (NumPy and numba), cuda (a CUDA array library, "
    "pmwcm[gpu]; refused without a GPU) or auto (CUDA when one is visible)."
)


def _unfreezes(command: Callable[_P, None]) -> Callable[_P, None]:
    """``command``, handing every object :func:`gc.freeze` kept from the collector back to it
    when it returns or raises (the interpreter's shutdown then collects them as usual;
    DuckDB's bindings report leaks otherwise)."""

    @functools.wraps(command)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            command(*args, **kwargs)
        finally:
            gc.unfreeze()

    return run


def _check_device(device: str) -> None:
    """``--device`` refused in one line, before any data is opened."""
    from pmwcm.kernels.array_device import DEVICES, resolve_device

    if device not in DEVICES:
        raise fail(f"--device must be one of {', '.join(DEVICES)}, got {device!r}.")
    try:
        resolve_device(device)
    except ValueError as exc:
        raise fail(str(exc)) from None


@_unfreezes
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
    dry_run: Annotated[bool, typer.Option("--dry-run", help=_DRY_RUN_HELP)] = False,
    update: Annotated[
        str, typer.Option("--update", metavar="[auto|measure|oracle|both]", help=_UPDATE_HELP)
    ] = "auto",
    device: Annotated[
        str, typer.Option("--device", metavar="[auto|cpu|cuda]", help=_DEVICE_HELP)
    ] = "cpu",
) -> None:
    """``pmwcm run``: its help is :data:`RUN_HELP`; its steps are this module's functions."""
    check_seed(seed)
    _check_choices(method, after_halt, mode, update, dry_run)
    start = resolve_prior(prior, public_prior)
    check_engine_options(max_updates, start)
    check_budget(epsilon, delta)  # the rules that need no n, before anything is opened
    settings = backend_settings(backend, hypothesis_memory, support_size) | {"device": device}
    _check_device(device)  # before any data is opened
    _check_paths(data, schema, queries, public_prior, output, metadata)
    parsed = load_schema(schema, accept_drafted=accept_drafted_schema)
    choice = check_backend(parsed.domain(), settings) if method == "pmw" else None
    dataset = open_data(data, parsed, table=table, engine=data_engine)
    # The data, and every module imported so far, live to the end of the run: kept out of
    # the collector's full passes, each of which rescanned ~300,000 such objects (0.2-0.3 s).
    gc.freeze()
    if method != "pmw":  # online PMW's plan applies every rule, with n (public)
        check_budget(epsilon, delta, dataset.n)
    public = None if public_prior is None else load_data(public_prior, parsed).records
    options = _RunOptions(
        epsilon=epsilon, delta=delta, after_halt=after_halt, max_updates=max_updates,
        prior=start, backend=settings, mode=mode, update=update, dry_run=dry_run,
        insecure_seeded_noise=insecure_seeded_noise,
    )  # fmt: skip
    with QueryFile(queries) as file, answer_stream(None if dry_run else output) as stream:
        done = _answer(method, dataset, public, file, stream, output, options)
    if done is None:  # --dry-run: the plan was printed
        return
    choice = done.backend or choice  # the support size follows the data's n
    if metadata is not None:
        about = {"method": method, "noise": done.noise, "epsilon": epsilon, "delta": delta}
        about["backend"] = None if choice is None else choice.to_dict()
        write_json(metadata, about | {"mode": done.mode})
    _report(done.tally, method, done.noise, done.mode, choice, output)


@dataclass(frozen=True, kw_only=True)
class _RunOptions:
    """The options the answering step reads, checked."""

    epsilon: float
    delta: float
    after_halt: str
    max_updates: int | None
    prior: str
    backend: dict[str, Any]
    mode: str
    update: str
    dry_run: bool
    insecure_seeded_noise: int | None


@dataclass(frozen=True, kw_only=True)
class _Answered:
    """What the closing lines and ``--metadata`` report of the answering step."""

    tally: AnswerTally
    noise: str
    mode: str | None = None  # online PMW's mode and why
    backend: BackendChoice | None = None  # online PMW's hypothesis backend


def _check_choices(method: str, after_halt: str, mode: str, update: str, dry_run: bool) -> None:
    """Refuses an unknown ``--method``, ``--after-halt``, ``--mode`` or ``--update``, and
    a dry run of another method than online PMW."""
    from pmwcm.engine.config import UPDATE_CHOICES
    from pmwcm.engine.practical import MODES

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


def _check_paths(
    data: str,
    schema: Path,
    queries: Path,
    public_prior: Path | None,
    output: Path,
    metadata: Path | None,
) -> None:
    """Refuses outputs that would overwrite an input or each other, and two stdin readers."""
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


def _answer(
    method: str,
    dataset: PrivateData,
    public: Any,
    file: QueryFile,
    stream: Any,
    output: Path,
    options: _RunOptions,
) -> _Answered | None:
    """Surveys the query file, then answers it into ``stream`` (``None`` after a dry run).

    The file is the analysts', not the data: its number of distinct queries is public.
    """
    survey = file.survey(dataset.domain)
    if method != "pmw":
        noise = make_noise(options.insecure_seeded_noise)
        records = answer_with_baseline(
            method, dataset, file, epsilon=options.epsilon, delta=options.delta, noise=noise
        )
        return _Answered(tally=write_records(records, stream, output), noise=noise.name)
    plan = plan_run(
        dataset, epsilon=options.epsilon, delta=options.delta, after_halt=options.after_halt,
        max_updates=options.max_updates, prior=options.prior, public_start=public is not None,
        backend=options.backend, announced_queries=max(survey.answerable, 1), mode=options.mode,
        update=options.update, workload=survey.cliques,
    )  # fmt: skip
    if options.dry_run:
        typer.echo(describe_plan(plan))
        return None
    noise = make_noise(options.insecure_seeded_noise)
    engine = build_run_engine(dataset, plan, noise=noise, public=public)
    tally = write_records(answer_with_engine(engine, file), stream, output)
    return _Answered(tally=tally, noise=noise.name, mode=plan.mode_reason, backend=engine.backend)


def _report(
    tally: AnswerTally,
    method: str,
    noise_name: str,
    how: str | None,
    choice: BackendChoice | None,
    output: Path,
) -> None:
    """The closing lines on stderr; exit status 3 if some answers are synthetic."""
    if how is not None:
        typer.echo(f"mode {how}", err=True)
    if choice is not None:
        typer.echo(f"backend {choice.reason}", err=True)
    typer.echo(summarize(tally, method, noise_name), err=True)
    if method == "nonprivate":
        typer.echo("warning: --method nonprivate answers are NOT differentially private.", err=True)
    typer.echo("wrote the answers to stdout" if is_stdio(output) else f"wrote '{output}'", err=True)
    halted = synthetic_report(tally)
    if halted is not None:
        typer.echo(f"{halted} Exit status {EXIT_SYNTHETIC}.", err=True)
        raise typer.Exit(EXIT_SYNTHETIC)
