"""The progress bar ``pmwcm run``, ``synth`` and ``demo`` draw on stderr.

On when stderr is a terminal, off otherwise (a pipe, a file, a test runner),
so logs and scripts never see control characters. The bar shows only what is
released anyway: how many queries were answered, and from which source.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["progress_bar", "rich_progress"]


def rich_progress(stream: IO[str] | None = None, *, transient: bool = False) -> Any:
    """A :class:`rich.progress.Progress` on ``stream`` (default stderr) with pmwcm's columns.

    ``transient`` bars vanish when done (``run`` and ``synth`` then print one summary line).
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True) if stream is None else Console(file=stream, force_terminal=True)
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description:<12}"),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        transient=transient,
    )


@contextmanager
def progress_bar(
    total: int, label: str, *, stream: IO[str] | None = None
) -> Iterator[Callable[[str], None]]:
    """Yields ``advance(source)``: one query done, answered from ``source`` (or ``"error"``).

    Draws on ``stream`` (default ``sys.stderr``) only if it is a terminal.
    """
    out = sys.stderr if stream is None else stream
    if not out.isatty():
        yield lambda source: None
        return
    counts: Counter[str] = Counter()
    with rich_progress(stream, transient=True) as progress:
        task = progress.add_task(label, total=total, info="")

        def advance(source: str) -> None:
            counts[source] += 1
            info = "  ".join(f"{name} {n}" for name, n in sorted(counts.items()))
            progress.update(task, advance=1, info=info)

        yield advance
