"""What every CLI command shares: the one-line error, and the checks of options and
paths made before anything is opened.

:func:`fail` prints ``error: ...`` and returns the exit to raise; the checks
(the budget's range, the prior, the backend, the output paths, the removed
``--seed``) and the choice of noise read only the command line, never the data.

The rest of a command's path lives in rooms of one idea each:
:mod:`pmwcm.cli.loading` (schema and data), :mod:`pmwcm.cli.memory_size`
(``--hypothesis-memory``'s units), :mod:`pmwcm.cli.planning` (the budget
plan and the engine), :mod:`pmwcm.cli.query_file` (the query file, streamed),
:mod:`pmwcm.cli.answers` (a record per line) and :mod:`pmwcm.cli.answer_output`
(where the records go).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from pmwcm.kernels.backend import BackendChoice
    from pmwcm.kernels.domain import Domain
    from pmwcm.mechanisms.noise import NoiseSource


def fail(message: str) -> typer.Exit:
    """Prints ``error: message`` on stderr; returns the exit to raise (status 1)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


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
    :func:`~pmwcm.cli.planning.plan_run`, which applies every rule again with ``n``.
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


def backend_settings(
    backend: str, hypothesis_memory: str | None, support_size: int
) -> dict[str, Any]:
    """``--backend``, ``--hypothesis-memory`` and ``--support-size`` checked, as
    :class:`~pmwcm.engine.practical.PMWConfig` keyword arguments."""
    from pmwcm.cli.memory_size import MemorySizeError, parse_memory
    from pmwcm.kernels.backend import BACKENDS, DEFAULT_HYPOTHESIS_MEMORY, MIN_SUPPORT_SIZE

    if backend not in BACKENDS:
        raise fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}.")
    if support_size != 0 and support_size < MIN_SUPPORT_SIZE:
        raise fail(
            f"--support-size must be 0 (the default size) or at least {MIN_SUPPORT_SIZE:,}, "
            f"got {support_size}."
        )
    try:
        memory = (
            DEFAULT_HYPOTHESIS_MEMORY
            if hypothesis_memory is None
            else parse_memory(hypothesis_memory)
        )
    except MemorySizeError as exc:
        raise fail(str(exc)) from None
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
