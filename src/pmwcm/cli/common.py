"""The CLI's shared library: what ``pmwcm run``, ``pmwcm synth`` and ``pmwcm demo`` use.

Loading (the schema, refused if drafted from the data unless accepted; the
CSV under it), checking the budget and the output paths, choosing the noise,
reading a query file, answering it and writing the answers.

A query line is validated by :meth:`~pmwcm.kernels.queries.CMQuery.from_dict`
alone, and compiled once, by the engine (or the baseline) that answers it:
a spec that does not fit the domain raises
:class:`~pmwcm.kernels.queries.QueryError` there, before anything is spent.

Errors become output records through one table, :data:`REFUSALS`, keyed by
the :mod:`pmwcm.errors` hierarchy. Only those deliberate refusals (decided
from public inputs before the data or the budget is touched) become error
lines; any other exception is a bug: the run stops with a one-line error that
names only the exception's type, never its message, and writes nothing.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from pmwcm.errors import BudgetExhausted, Halted, InvalidQuery, PmwcmError, Refused

if TYPE_CHECKING:
    import numpy as np

    from pmwcm.data.schema import Schema
    from pmwcm.data.table import Dataset
    from pmwcm.engine.config import UpdateChoice
    from pmwcm.engine.online import OnlinePMW
    from pmwcm.engine.plan import BudgetPlan
    from pmwcm.engine.practical import ModeName, PriorName
    from pmwcm.engine.settings import AfterHalt
    from pmwcm.kernels.backend import BackendChoice
    from pmwcm.kernels.domain import Domain
    from pmwcm.kernels.queries import CMQuery
    from pmwcm.mechanisms.noise import NoiseSource
    from pmwcm.mechanisms.private_data import PrivateData

HALTED = (
    "refused: all private updates are spent, so no further query can be answered with an "
    "accuracy check (--after-halt synthetic answers it from the final hypothesis instead)."
)


REFUSALS: dict[type[PmwcmError], Callable[[PmwcmError], str]] = {
    InvalidQuery: str,
    Refused: lambda exc: f"refused: {exc}",
    BudgetExhausted: lambda exc: f"refused: {exc}",
    Halted: lambda exc: HALTED,
}
"""How each deliberate refusal is reported in an output line's ``"error"``."""


def refusal_message(exc: PmwcmError) -> str:
    """The ``"error"`` text of a refusal, from :data:`REFUSALS` (the nearest base wins)."""
    for cls in type(exc).__mro__:
        if cls in REFUSALS:
            return REFUSALS[cls](exc)
    return f"refused: {exc}"


def fail(message: str) -> typer.Exit:
    """Prints ``error: message`` on stderr; returns the exit to raise (status 1)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


@dataclass(frozen=True)
class QueryLine:
    """One query line: its number, its id, and the compiled query or why it is refused."""

    line: int
    id: str | int | None
    query: CMQuery | None = None
    error: str | None = None


def resolve_prior(prior: str | None, public_prior: Path | None) -> str:
    """``--prior`` with ``--public-prior``'s implication; refuses a contradiction."""
    if public_prior is None:
        if prior == "public":
            raise fail("--prior public needs --public-prior FILE (the public records).")
        return prior or "marginals"
    if prior not in (None, "public"):
        raise fail(f"--public-prior sets the start, so --prior {prior} cannot also be given.")
    return "public"


def check_engine_options(max_updates: int | None, prior: str) -> None:
    """Refuses ``--max-updates < 1``, an unknown ``--prior``, and aim/mst without mbi."""
    from pmwcm.engine.practical import PRIORS

    if max_updates is not None and max_updates < 1:
        raise fail(f"--max-updates must be a positive integer, got {max_updates}.")
    if prior not in PRIORS:
        raise fail(f"--prior must be one of {', '.join(PRIORS)}, got {prior!r}.")
    if prior in ("aim", "mst"):
        from pmwcm.mechanisms.priors.synthetic import MbiUnavailableError, require_mbi

        try:
            require_mbi()
        except MbiUnavailableError as exc:
            raise fail(f"--prior {prior}: {exc}") from None


def check_budget(epsilon: float, delta: float, n: int | None = None) -> None:
    """The library's budget rules
    (:func:`~pmwcm.mechanisms.accounting.budget_rules.check_total_budget`: the very
    rules the service and ``build_engine`` apply), refused in one line naming the option.

    Before the data is opened ``n`` is unknown and ``delta < 1/n`` waits for
    :func:`plan_run`, which applies every rule again with ``n``.
    """
    from pmwcm.mechanisms.accounting.budget_rules import BudgetRefused, check_total_budget

    try:
        check_total_budget(epsilon, delta, n=n)
    except BudgetRefused as exc:
        raise fail(option_message(exc)) from None


def option_message(exc: Exception) -> str:
    """A budget refusal's message with its field written as the option (``--epsilon``)."""
    text, field = str(exc), getattr(exc, "field", None)
    return f"--{text}" if field is not None and text.startswith(field) else text


def plan_run(
    dataset: Dataset | PrivateData,
    *,
    epsilon: float,
    delta: float,
    after_halt: str,
    max_updates: int | None,
    prior: str,
    public_start: bool = False,
    backend: dict[str, Any] | None = None,
    announced_queries: int | None = None,
    mode: str = "auto",
    update: str = "auto",
    workload: Sequence[tuple[str, ...]] = (),
) -> BudgetPlan:
    """The budget plan of a run (:func:`~pmwcm.engine.plan.plan_budget`, the function the
    service and ``build_engine`` call), from public inputs only: ``n``, the schema,
    the options and the file's number of distinct queries. A budget it refuses is
    one error line naming the option; nothing has read the data yet.

    Every parameter is a documented constant (``T``, ``eta``, the threshold rule
    and its ``k``); ``backend`` holds :func:`backend_settings`' keyword arguments,
    ``announced_queries`` (the file's distinct queries) and ``mode`` let the budget
    rule answer the file in composition mode.
    """
    from pmwcm.engine.config import PMWConfig
    from pmwcm.engine.plan import plan_budget
    from pmwcm.mechanisms.accounting.budget_rules import BudgetRefused

    config = PMWConfig(  # max_updates=0 picks the library default
        epsilon=epsilon,
        delta=delta,
        # typer hands over plain strings; PMWConfig checks them against the Literals
        after_halt=cast("AfterHalt", after_halt),
        max_updates=max_updates or 0,
        prior=cast("PriorName", prior),
        announced_queries=announced_queries,
        mode=cast("ModeName", mode),
        update=cast("UpdateChoice", update),
        **(backend or {}),
    )
    try:
        return plan_budget(
            config, n=dataset.n, domain=dataset.domain, prior_supplied=public_start,
            workload=workload,
        )  # fmt: skip
    except BudgetRefused as exc:
        raise fail(option_message(exc)) from None


def describe_plan(plan: BudgetPlan) -> str:
    """The plan as ``pmwcm run --dry-run`` prints it: one ``name value`` line each."""
    lines = []
    for name, value in plan.to_dict().items():
        shown = json.dumps(value, allow_nan=False) if isinstance(value, dict | list) else value
        lines.append(f"{name} {shown}")
    return "\n".join(lines)


def is_stdio(path: Path | None) -> bool:
    """Whether ``path`` is ``-``: stdout for an output, stdin for the query file (the Unix way)."""
    return path is not None and str(path) == "-"


def check_output(
    path: Path,
    option: str = "--output",
    *,
    inputs: Sequence[tuple[str, Path | str | None]] = (),
) -> None:
    """Refuses an output path that would destroy something or cannot be written.

    Refused: a directory, a device, pipe or other non-regular file (writing
    atomically would replace it, e.g. the ``/dev/stdout`` symlink: write ``-``
    for stdout instead), any of ``inputs`` (the data, schema or query file it
    would overwrite; symlinks and hard links are resolved), and a path whose
    directory is missing. ``-`` (stdout) is always accepted.

    Args:
        path: the output path.
        option: how to name it in the message (``"--output"``).
        inputs: ``(option, path)`` of every input file of the command.
    """
    import os
    import stat

    if is_stdio(path):
        return
    if path.is_dir():
        raise fail(f"{option} '{path}' is a directory; give a file name (or - for stdout).")
    if path.exists():
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise fail(
                f"{option} '{path}' is not a regular file (a device, pipe or socket); "
                "writing it atomically would replace it. Use - to write to stdout."
            )
        for label, given in inputs:
            # --data may be a URL or a table name: only a local path can be overwritten.
            source = Path(given) if isinstance(given, str) and "://" not in given else given
            if (
                isinstance(source, Path)
                and not is_stdio(source)
                and source.exists()
                and os.path.samefile(path, source)
            ):
                raise fail(
                    f"{option} '{path}' is the {label} file '{source}'; writing the "
                    "output there would destroy it. Choose another output file."
                )
    if not path.parent.is_dir():
        raise fail(f"cannot write {option} '{path}': directory '{path.parent}' does not exist.")


def check_distinct_outputs(paths: Sequence[tuple[str, Path | None]]) -> None:
    """Refuses two outputs that are the same file (or both stdout)."""
    seen: dict[str, str] = {}
    for option, path in paths:
        if path is None:
            continue
        key = "-" if is_stdio(path) else str(path.resolve())
        if key in seen:
            raise fail(f"{seen[key]} and {option} must be different files, got '{path}' twice.")
        seen[key] = option


def load_schema(path: Path, *, accept_drafted: bool) -> Schema:
    """The schema at ``path`` (or the bundled schema of that name: ``adult-binary``, ...);
    refuses one drafted from the data unless ``accept_drafted``.

    An accepted drafted schema gets a warning on stderr.
    """
    from pmwcm.data.bundled import schema_at
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.schema_draft import drafted_schema_error

    try:
        schema = schema_at(path)
    except SchemaError as exc:
        raise fail(str(exc)) from None
    problem = drafted_schema_error(schema, f"--schema '{path}'", "--accept-drafted-schema")
    if problem is not None:
        if not accept_drafted:
            raise fail(problem)
        typer.echo(
            f"warning: --schema '{path}' was drafted from the data; its value sets and bin "
            "edges leak the data outside the privacy budget (accepted by "
            "--accept-drafted-schema).",
            err=True,
        )
    return schema


def load_data(data: Path, schema: Schema) -> Dataset:
    """The CSV encoded under the schema; a one-line error if it does not fit."""
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.table import DataError, Dataset

    try:
        return Dataset.from_csv(data, schema)
    except (SchemaError, DataError) as exc:
        raise fail(str(exc)) from None


def _csv_from_stdin(schema: Schema) -> Dataset:
    """``--data -``: a CSV read from stdin, checked as a file is (the same reader, on a
    copy in a private temporary directory that is removed at once)."""
    import shutil
    import tempfile

    from pmwcm.data.schema import SchemaError
    from pmwcm.data.table import DataError, Dataset

    folder = Path(tempfile.mkdtemp(prefix="pmwcm-stdin-"))  # mode 0700
    try:
        copy = folder / "stdin.csv"
        with copy.open("wb") as sink:
            shutil.copyfileobj(sys.stdin.buffer, sink)
        try:
            return Dataset.from_csv(copy, schema)
        except (SchemaError, DataError) as exc:
            raise fail(str(exc).replace(f"'{copy}'", "stdin")) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def open_data(
    data: str, schema: Schema, *, table: str | None = None, engine: str | None = None
) -> PrivateData:
    """The private data where it lives (:func:`~pmwcm.data.sources.open.open_source`),
    checked against the schema; a one-line error if it does not fit."""
    from pmwcm.data.schema import SchemaError
    from pmwcm.data.sources.open import open_source
    from pmwcm.data.table import DataError
    from pmwcm.mechanisms.private_data import PrivateData

    if engine not in (None, "duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, got {engine!r}.")
    if data == "-":
        return PrivateData.of(_csv_from_stdin(schema))
    try:
        opened = open_source(
            data, schema, table=table, engine="spark" if engine == "spark" else None
        )
    except (SchemaError, DataError) as exc:
        raise fail(str(exc)) from None
    except ModuleNotFoundError as exc:
        extra = "spark" if engine == "spark" else "postgres"
        raise fail(
            f"this --data needs the optional package {exc.name}: pip install 'pmwcm[{extra}]'."
        ) from None
    return PrivateData.of(opened)


def read_queries(path: Path) -> list[QueryLine]:
    """Parses every query line (blank lines are skipped) with :meth:`CMQuery.from_dict`.

    Spec problems become per-line errors (the message is ``from_dict``'s); a
    spec that does not fit the domain is refused by whatever answers it, which
    compiles it once, before anything is spent; a line that is not a JSON object,
    an unreadable file or a missing file is fatal (one-line error, exit 1).
    """
    try:
        text = sys.stdin.read() if is_stdio(path) else path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail(f"queries file not found: '{path}'.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read queries file '{path}': {exc}.") from None
    out: list[QueryLine] = []
    first_line: dict[str | int, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise fail(
                f"queries file '{path}' line {number} is not valid JSON: {exc.msg} "
                f"(column {exc.colno}); every line must be one JSON object."
            ) from None
        if not isinstance(spec, dict):
            raise fail(
                f"queries file '{path}' line {number} must be a JSON object, "
                f"got {type(spec).__name__}."
            )
        out.append(_query_line(number, spec, first_line))
    return out


def _query_line(number: int, spec: dict[str, Any], first_line: dict[str | int, int]) -> QueryLine:
    """One parsed line: its id checked (present, unique) and its spec validated."""
    from pmwcm.kernels.queries import CMQuery

    qid = spec.get("id")
    if not isinstance(qid, str | int) or isinstance(qid, bool):
        return QueryLine(number, None, error=f"line {number}: a query needs an id (string or int).")
    if qid in first_line:
        return QueryLine(
            number, qid, error=f"duplicate id {qid!r} (first on line {first_line[qid]})."
        )
    first_line[qid] = number
    try:
        query = CMQuery.from_dict(spec)
    except InvalidQuery as exc:
        return QueryLine(number, qid, error=str(exc))
    return QueryLine(number, qid, query=query)


def check_seed(seed: int | None) -> None:
    """Refuses the removed ``--seed``, pointing to ``--insecure-seeded-noise``."""
    if seed is not None:
        raise fail(
            f"--seed {seed} is refused: it would seed the privacy noise, so anyone who knows "
            "the seed could subtract the noise from the answers. For experiments on public "
            f"data only, pass --insecure-seeded-noise {seed}."
        )


def make_noise(insecure_seed: int | None) -> NoiseSource:
    """OpenDP noise (CSPRNG) by default; seeded NumPy noise, with a warning, if asked."""
    from pmwcm.mechanisms.noise import NumpyNoise, default_noise

    if insecure_seed is None:
        return default_noise()
    typer.echo(
        f"warning: --insecure-seeded-noise {insecure_seed}: the noise comes from a NumPy "
        "generator with a known seed, so these answers are NOT differentially private "
        "(anyone who knows the seed can subtract the noise); use it only for experiments "
        "on public data.",
        err=True,
    )
    return NumpyNoise(seed=insecure_seed)


def distinct_queries(lines: list[QueryLine], domain: Domain) -> int:
    """The number of distinct answerable queries (repeats, in any spelling, count once).

    The composition split (and the count ``pmwcm run`` announces) needs this
    before the first answer, so it is the one place that checks a query ahead
    of its answer (:meth:`~pmwcm.kernels.queries.CMQuery.check`: what compiling
    it would refuse); a query that does not fit the domain is left out (its
    answer is then refused).
    """
    from pmwcm.engine.online import query_key

    keys: set[str] = set()
    for item in lines:
        if item.query is None:
            continue
        try:
            item.query.check(domain)
            keys.add(query_key(item.query, domain))
        except InvalidQuery:
            continue
    return len(keys)


def announced_cliques(lines: list[QueryLine], domain: Domain) -> list[tuple[str, ...]]:
    """The cliques (features and target) of the file's answerable queries: public, as
    their number is (:func:`distinct_queries`); the plan's workload-aware start reads them."""
    cliques = []
    for item in lines:
        if item.query is None:
            continue
        try:
            item.query.check(domain)
        except InvalidQuery:
            continue
        cliques.append(item.query.clique)
    return cliques


def answer_with_engine(engine: OnlinePMW, lines: list[QueryLine]) -> list[dict[str, Any]]:
    """Streams the valid queries through online PMW's one door for a known batch
    (:meth:`~pmwcm.engine.online.OnlinePMW.ask_each`: each query keyed once; the data
    sides of the next large-clique queries run while the current one is answered);
    per-line errors for refusals."""
    outcomes = iter(engine.ask_each([item.query for item in lines if item.query is not None]))

    def answer(query: CMQuery) -> Any:  # the next outcome is this line's
        outcome = next(outcomes)
        if isinstance(outcome, PmwcmError):
            raise outcome
        return outcome

    return _answer_each(lines, answer, engine.noise.name, engine.domain)


@dataclass(frozen=True)
class _Released:
    value: Any
    source: str
    updates: int
    epsilon_spent: float | None
    delta: float | None


def answer_with_baseline(
    method: str,
    data: Dataset | PrivateData,
    lines: list[QueryLine],
    *,
    epsilon: float,
    delta: float,
    noise: Any,
) -> list[dict[str, Any]]:
    """Answers with the composition baseline (split over distinct queries) or exactly.

    A repeated query gets its released answer again (no new noise, no cost);
    ``epsilon_spent`` is always the running total at that line.
    """
    from pmwcm.engine.baselines import CompositionBaseline, NonPrivateBaseline
    from pmwcm.engine.online import query_key
    from pmwcm.mechanisms.private_data import PrivateData

    private = (
        data
        if isinstance(data, PrivateData)
        else PrivateData.from_records(data.domain, data.records)
    )
    k = distinct_queries(lines, data.domain)
    exact = NonPrivateBaseline(private)
    comp = None
    if method == "composition" and k > 0:
        comp = CompositionBaseline(private, epsilon=epsilon, delta=delta, queries=k, noise=noise)
    thetas: dict[str, Any] = {}

    def answer(query: CMQuery) -> _Released:  # a repeat is served from `thetas`
        key = query_key(query, data.domain)
        if key not in thetas:  # kept in the canonical order, returned in each query's
            canonical = query.canonical(data.domain)
            thetas[key] = exact.answer(canonical) if comp is None else comp.answer(canonical)
        order = query.coordinate_order(data.domain)
        theta = thetas[key] if order is None else thetas[key][list(order)]
        if comp is None:
            return _Released(theta, "nonprivate", 0, None, None)
        spent = comp.ledger.spent_epsilon()
        return _Released(theta, "composition", 0, spent, comp.ledger.delta)

    return _answer_each(lines, answer, "none" if comp is None else noise.name, data.domain)


def labelled(query: CMQuery, domain: Domain, theta: list[float]) -> dict[str, Any]:
    """The fields that make ``theta`` readable: ``coefficients`` and ``on_boundary``.

    ``coefficients`` names each coordinate of ``theta``, in order
    (:func:`pmwcm.kernels.coefficients.coefficient_names`); ``on_boundary``
    (:func:`pmwcm.kernels.coefficients.on_boundary`) is true when ``||theta||``
    reached the radius. Both read only the public query, the public domain and
    the released ``theta``.
    """
    from pmwcm.kernels.coefficients import coefficient_names, on_boundary

    return {
        "coefficients": list(coefficient_names(query, domain)),
        "on_boundary": on_boundary(query, theta),
    }


def _answer_each(
    lines: list[QueryLine],
    answer: Callable[[CMQuery], Any],
    noise: str,
    domain: Domain,
) -> list[dict[str, Any]]:
    """One output record per line: the answer, or ``{"id", "error"}`` (the run goes on).

    An answer also carries :func:`labelled`'s ``coefficients`` and
    ``on_boundary`` (fields added to the fixed contract; ``theta`` is unchanged).
    Every record also carries ``"noise"``, the noise source's name. Only refusals
    decided from public inputs become error lines; any other exception stops the
    run without its message (it could carry a number computed from the data).
    The error text of a refusal comes from :data:`REFUSALS`.
    """
    from pmwcm.cli.progress import progress_bar

    with progress_bar(len(lines), "queries") as advance:
        return [_answer_one(item, answer, noise, domain, advance) for item in lines]


def _answer_one(
    item: QueryLine,
    answer: Callable[[CMQuery], Any],
    noise: str,
    domain: Domain,
    advance: Callable[[str], None],
) -> dict[str, Any]:
    """The output record of one query line (see :func:`_answer_each`)."""
    if item.query is None:
        advance("error")
        return {"id": item.id, "error": item.error, "noise": noise}
    try:
        a = answer(item.query)
    except PmwcmError as exc:
        advance("error")
        return {"id": item.id, "error": refusal_message(exc), "noise": noise}
    except Exception as exc:  # a bug: never echo its message, which may hold data
        raise fail(
            f"internal error ({type(exc).__name__}) while answering query {item.id!r} "
            f"(line {item.line}); nothing was written. Please report this bug."
        ) from None
    advance(a.source)
    theta = [float(v) for v in a.value]
    record = (
        {"id": item.id, "theta": theta, "source": a.source, "updates": a.updates,
         "epsilon_spent": a.epsilon_spent, "delta": a.delta, "noise": noise}
        | labelled(item.query, domain, theta)
    )  # fmt: skip
    if a.source == "synthetic":
        from pmwcm.engine.online import SYNTHETIC_ANSWER_WARNING  # the service's too

        record["warning"] = SYNTHETIC_ANSWER_WARNING
    return record


#: ``pmwcm run``'s exit status when the answers were written but some are synthetic.
EXIT_SYNTHETIC = 3


def synthetic_report(records: list[dict[str, Any]]) -> str | None:
    """A stderr warning naming where the answers turned synthetic, or ``None`` if none did.

    >>> records = [{"id": "a", "source": "oracle"}, {"id": "b", "source": "synthetic"}]
    >>> print(synthetic_report(records)[:76])
    warning: the engine halted; 1 of 2 answers, from id 'b' (record 2) on, are s
    """
    synthetic = [i for i, r in enumerate(records) if r.get("source") == "synthetic"]
    if not synthetic:
        return None
    first = synthetic[0]
    return (
        f"warning: the engine halted; {len(synthetic):,} of {len(records):,} answers, from id "
        f"{records[first]['id']!r} (record {first + 1}) on, are synthetic: no accuracy check "
        'against the data (their records carry a "warning"). More --epsilon or '
        "--max-updates answers more of them privately; --after-halt refuse refuses them."
    )


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    """Writes one JSON object per line, atomically."""
    from pmwcm._atomic import atomic_write_text

    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in records)
    if is_stdio(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise fail(f"cannot write '{path}': {exc.strerror or exc}.") from None


def write_json(path: Path, record: dict[str, Any]) -> None:
    """Writes one JSON object (indented), atomically."""
    from pmwcm._atomic import atomic_write_text

    text = json.dumps(record, indent=2, allow_nan=False) + "\n"
    if is_stdio(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise fail(f"cannot write '{path}': {exc.strerror or exc}.") from None


def summarize(records: list[dict[str, Any]], method: str, noise_name: str) -> str:
    """One stderr line: queries, sources, refusals, epsilon spent, noise source."""
    sources = Counter(r.get("source", "error") for r in records)
    parts = ", ".join(f"{s} {c}" for s, c in sorted(sources.items()) if s != "error")
    head = f"{method}: {len(records)} queries ({parts or 'none answered'}; "
    head += f"{sources.get('error', 0)} refused)"
    if method == "nonprivate":
        return head + "; NO privacy (exact answers)"
    answered = [r for r in records if "theta" in r]
    if not answered:
        return head + f"; epsilon spent 0; noise {noise_name}"
    last = answered[-1]
    return (
        head + f"; epsilon spent {last['epsilon_spent']:.4g} at delta {last['delta']:g}; "
        f"noise {noise_name}"
    )


_MEMORY_UNITS = {
    "": 1,
    "B": 1,
    "K": 2**10, "KIB": 2**10, "KB": 10**3,
    "M": 2**20, "MIB": 2**20, "MB": 10**6,
    "G": 2**30, "GIB": 2**30, "GB": 10**9,
    "T": 2**40, "TIB": 2**40, "TB": 10**12,
}  # fmt: skip


def parse_memory(text: str, option: str = "--hypothesis-memory") -> int:
    """Bytes from ``"536870912"``, ``"512MiB"``, ``"2GiB"``, ``"1.5G"`` or ``"800MB"``.

    ``KiB``/``MiB``/``GiB``/``TiB`` (and ``K``/``M``/``G``/``T``) are powers of
    1024, ``KB``/``MB``/``GB``/``TB`` powers of 1000; case and spaces are ignored.

    >>> parse_memory("512MiB"), parse_memory("2G"), parse_memory("1000"), parse_memory("1 kb")
    (536870912, 2147483648, 1000, 1000)
    """
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _MEMORY_UNITS:
        raise fail(
            f"{option} must be a number of bytes, optionally with a suffix (KiB, MiB, GiB, "
            f"TiB, KB, MB, GB, TB), e.g. 512MiB; got {text!r}."
        )
    value = int(float(match.group(1)) * _MEMORY_UNITS[unit])
    if value < 1:
        raise fail(f"{option} must be at least 1 byte, got {text!r}.")
    physical = physical_memory()
    if physical is not None and value > physical:
        raise fail(
            f"{option} {text} is more than this machine's memory ({_gib(physical)}): the "
            "hypothesis would fail to allocate. Give at most that, or keep the default "
            "(512MiB; larger universes then use the support backend)."
        )
    return value


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or ``None`` where the OS does not say."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def backend_settings(
    backend: str, hypothesis_memory: str | None, support_size: int
) -> dict[str, Any]:
    """``--backend``, ``--hypothesis-memory`` and ``--support-size`` checked, as
    :class:`~pmwcm.engine.practical.PMWConfig` keyword arguments."""
    from pmwcm.kernels.backend import BACKENDS, DEFAULT_HYPOTHESIS_MEMORY, MIN_SUPPORT_SIZE

    if backend not in BACKENDS:
        raise fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}.")
    if support_size != 0 and support_size < MIN_SUPPORT_SIZE:
        raise fail(
            f"--support-size must be 0 (the default size) or at least {MIN_SUPPORT_SIZE:,}, "
            f"got {support_size}."
        )
    memory = (
        DEFAULT_HYPOTHESIS_MEMORY if hypothesis_memory is None else parse_memory(hypothesis_memory)
    )
    return {"backend": backend, "hypothesis_memory": memory, "support_size": support_size}


def check_backend(domain: Domain, settings: dict[str, Any]) -> BackendChoice:
    """The backend ``settings`` give ``domain`` (public: schema and settings only).

    Refuses, before any data or budget is touched, a choice that does not fit
    (a forced dense backend over the memory budget, a budget too small for a
    support).
    """
    from pmwcm.kernels.backend import choose_backend

    try:
        choice = choose_backend(
            domain,
            memory_budget=settings["hypothesis_memory"],
            support_size=settings["support_size"],
            backend=settings["backend"],
        )
    except ValueError as exc:
        hint = (
            " (on the command line: --backend auto or support, or a larger --hypothesis-memory)"
            if "backend='dense' needs" in str(exc)
            else ""
        )
        raise fail(f"{exc}{hint}") from None
    return choice


def build_run_engine(
    dataset: Dataset | PrivateData,
    plan: BudgetPlan,
    *,
    noise: NoiseSource,
    public: np.ndarray | None = None,
) -> OnlinePMW:
    """Online PMW on the run's plan (:func:`plan_run`): the data is read only through
    what the ledger pays for (the prior's noisy marginals, the sparse vector, the
    oracle calls). ``public`` records (the start for ``prior="public"``, free) are
    public; the engine's :attr:`~pmwcm.engine.online.OnlinePMW.backend` says which
    hypothesis backend was chosen.
    """
    from pmwcm.engine.practical import build_engine
    from pmwcm.mechanisms.private_data import PrivateData

    private = (
        dataset
        if isinstance(dataset, PrivateData)
        else PrivateData.from_records(dataset.domain, dataset.records)
    )
    start = None
    if public is not None:
        from pmwcm.mechanisms.priors.support import public_start

        start = public_start(dataset.domain, public, plan.backend)
    return build_engine(
        private, plan.requested, noise=noise, prior=start, plan=plan,
        workload=plan.announced_cliques,
    )  # fmt: skip
