"""``pmwcm synth``: run online PMW on a query file, then write its synthetic dataset.

The engine answers the queries exactly as ``pmwcm run --method pmw`` does (same
validation, same defaults, same per-line errors). Its final hypothesis
``Dhat`` is a public distribution over the data universe: the command samples
``--rows`` records from it (default ``n``) and writes them as a CSV of value
labels, one column per schema attribute. Optionally it also writes ``Dhat``
itself (``--histogram``) and the answers (``--answers``, the JSON Lines
``pmwcm run`` writes).

The ``--histogram`` file is :func:`pmwcm.kernels.histogram_codec.encode_histogram`'s
bytes (read back with ``decode_histogram(blob, schema.domain())``). With the
dense backend it is a NumPy ``.npy`` array of shape ``domain.shape`` (the
probability of every cell of ``X``; ``numpy.load`` reads it). With the support
backend (``X`` too large for a tensor) it is a NumPy ``.npz`` archive of two
arrays: ``records``, shape ``(M, number of attributes)``, the support's records
as value codes in schema order (code ``j`` is the attribute's ``j``-th value or
bin), and ``log_weights``, shape ``(M,)``, their normalised log-probabilities
(``numpy.exp(log_weights)`` sums to 1; a record may appear more than once, its
mass is then the sum).

Privacy: the synthetic rows, the histogram and the answers are all
post-processing of one engine run, so together they cost exactly what the
run costs (at most ``(epsilon, delta)``). Sampling the rows needs no
privacy, so it uses a plain NumPy generator (from OS entropy, or derived from
the seed of ``--insecure-seeded-noise``, which also seeds the privacy noise
and makes the whole run reproducible and NOT private: experiments only). The
removed ``--seed`` and a schema drafted from the data are refused as by
``pmwcm run``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pmwcm.cli.answer_output import answer_stream, summarize, synthetic_report, write_records
from pmwcm.cli.answers import answer_with_engine
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
    PriorOption,
    PublicPriorOption,
    QueriesOption,
    SchemaOption,
    SeedOption,
    SupportSizeOption,
    TableOption,
)
from pmwcm.cli.planning import build_run_engine, plan_run
from pmwcm.cli.query_file import QueryFile

if TYPE_CHECKING:
    from pmwcm.engine.online import OnlinePMW
    from pmwcm.mechanisms.private_data import PrivateData

_OUTPUT_HELP = (
    "Write the synthetic dataset here (CSV of value labels, atomically); - writes it to "
    "stdout. Refused: an input file, a directory or a device."
)
_ROWS_HELP = "Number of synthetic rows (default: n, the number of rows of --data)."
_HISTOGRAM_HELP = (
    "Also write the final hypothesis: dense backend, a NumPy .npy array of shape = domain "
    "shape (one probability per cell); support backend, a NumPy .npz archive of 'records' "
    "(M x attributes, value codes in schema order) and 'log_weights' (M normalised "
    "log-probabilities)."
)
_ANSWERS_HELP = "Also write the answers (JSON Lines, as pmwcm run writes them)."


def synth_command(
    data: DataOption,
    schema: SchemaOption,
    queries: QueriesOption,
    epsilon: EpsilonOption,
    delta: DeltaOption,
    output: Annotated[Path, typer.Option("--output", "-o", help=_OUTPUT_HELP)],
    seed: SeedOption = None,
    rows: Annotated[int | None, typer.Option("--rows", help=_ROWS_HELP)] = None,
    histogram: Annotated[Path | None, typer.Option("--histogram", help=_HISTOGRAM_HELP)] = None,
    answers: Annotated[Path | None, typer.Option("--answers", help=_ANSWERS_HELP)] = None,
    max_updates: MaxUpdatesOption = None,
    prior: PriorOption = None,
    public_prior: PublicPriorOption = None,
    insecure_seeded_noise: InsecureNoiseOption = None,
    accept_drafted_schema: AcceptDraftedOption = False,
    backend: BackendOption = "auto",
    hypothesis_memory: HypothesisMemoryOption = None,
    support_size: SupportSizeOption = 0,
    table: TableOption = None,
    data_engine: EngineOption = None,
) -> None:
    """Answer a query file with online PMW and write the synthetic dataset it learned.

    The rows are sampled from the final hypothesis; everything written is
    post-processing of the one run, so the total cost is at most (epsilon, delta).
    """
    check_seed(seed)
    if rows is not None and rows < 1:
        raise fail(f"--rows must be a positive integer, got {rows}.")
    start = resolve_prior(prior, public_prior)
    check_engine_options(max_updates, start)
    check_budget(epsilon, delta)
    settings = backend_settings(backend, hypothesis_memory, support_size)
    paths = _check_paths(data, schema, queries, public_prior, output, histogram, answers)
    parsed = load_schema(schema, accept_drafted=accept_drafted_schema)
    choice = check_backend(parsed.domain(), settings)
    dataset = open_data(data, parsed, table=table, engine=data_engine)
    public = None if public_prior is None else load_data(public_prior, parsed).records
    with QueryFile(queries) as file, answer_stream(answers) as stream:
        survey = file.survey(dataset.domain)
        # announced as pmwcm run announces its file (public): the same plan and engine
        plan = plan_run(
            dataset, epsilon=epsilon, delta=delta, after_halt="synthetic",
            max_updates=max_updates, prior=start, public_start=public is not None,
            backend=settings, announced_queries=max(survey.answerable, 1),
            workload=survey.cliques,
        )  # fmt: skip
        noise = make_noise(insecure_seeded_noise)
        engine = build_run_engine(dataset, plan, noise=noise, public=public)
        tally = write_records(answer_with_engine(engine, file), stream, answers)
        n_rows = dataset.n if rows is None else rows
        _write_synthetic(engine, dataset, n_rows, insecure_seeded_noise, output, histogram)
    typer.echo(f"backend {(engine.backend or choice).reason}", err=True)
    typer.echo(summarize(tally, "pmw", noise.name), err=True)
    halted = synthetic_report(tally)
    if halted is not None:
        typer.echo(halted, err=True)
    written = ", ".join("stdout" if is_stdio(p) else f"'{p}'" for p, _ in paths)
    typer.echo(f"wrote {n_rows:,} synthetic rows; files: {written}", err=True)


def _check_paths(
    data: str,
    schema: Path,
    queries: Path,
    public_prior: Path | None,
    output: Path,
    histogram: Path | None,
    answers: Path | None,
) -> list[tuple[Path, str]]:
    """The outputs given, each refused if it would overwrite an input or another output."""
    targets = [(output, "--output"), (histogram, "--histogram"), (answers, "--answers")]
    paths = [(p, o) for p, o in targets if p is not None]
    inputs: list[tuple[str, Path | str | None]] = [
        ("--data", data), ("--schema", schema), ("--queries", queries),
        ("--public-prior", public_prior),
    ]  # fmt: skip
    for path, option in paths:
        check_output(path, option, inputs=inputs)
    if is_stdio(histogram):
        raise fail("--histogram is binary; give it a file name, not -.")
    check_distinct_outputs([(o, p) for p, o in paths])
    if data == "-" and is_stdio(queries):
        raise fail("--data - and --queries - cannot both read stdin; give one of them a file.")
    return paths


def _write_synthetic(
    engine: OnlinePMW,
    dataset: PrivateData,
    n_rows: int,
    seed: int | None,
    output: Path,
    histogram: Path | None,
) -> None:
    """Samples ``n_rows`` records from the final hypothesis and writes them (and the
    hypothesis itself, with ``--histogram``): post-processing, no privacy cost."""
    import numpy as np

    from pmwcm._atomic import atomic_write_bytes
    from pmwcm.data.table import Dataset
    from pmwcm.kernels.histogram_codec import encode_histogram

    rng = np.random.default_rng() if seed is None else np.random.default_rng([seed, 1])
    synthetic = Dataset(domain=dataset.domain, records=engine.synthetic_records(n_rows, rng=rng))
    try:
        if is_stdio(output):
            synthetic.to_dataframe().to_csv(sys.stdout, index=False)
        else:
            synthetic.to_csv(output)
        if histogram is not None:
            atomic_write_bytes(histogram, encode_histogram(engine.hypothesis))
    except OSError as exc:
        raise fail(f"cannot write output: {exc.strerror or exc}.") from None
