"""Where the answers go: a JSON Lines file written atomically as the records stream,
and the tally behind the run's closing lines on stderr.

The records are written one by one to a temporary file (beside the output, or a
private one for stdout) that replaces the output only when the run succeeds, so
a failure at any line leaves nothing written, and no record is held in memory:
what the closing lines need (counts per source, the last ``epsilon_spent``,
where the answers turned synthetic) is tallied on the way (:class:`AnswerTally`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pmwcm.cli.common import fail, is_stdio

#: ``pmwcm run``'s exit status when the answers were written but some are synthetic.
EXIT_SYNTHETIC = 3


@dataclass
class AnswerTally:
    """What the closing lines report of the records written, tallied one record at a time."""

    records: int = 0
    sources: Counter[str] = field(default_factory=Counter)
    last_spent: tuple[float, float] | None = None  # (epsilon_spent, delta) of the last answer
    synthetic: int = 0
    first_synthetic: tuple[Any, int] | None = None  # (id, record number)

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]]) -> AnswerTally:
        """The tally of ``records``."""
        tally = cls()
        for record in records:
            tally.add(record)
        return tally

    def add(self, record: dict[str, Any]) -> None:
        """Counts one record."""
        self.records += 1
        source = record.get("source", "error")
        self.sources[source] += 1
        if "theta" in record:
            self.last_spent = (record["epsilon_spent"], record["delta"])
        if source == "synthetic":
            self.synthetic += 1
            if self.first_synthetic is None:
                self.first_synthetic = (record["id"], self.records)


@contextlib.contextmanager
def answer_stream(path: Path | None) -> Iterator[IO[str] | None]:
    """A text stream whose lines become ``path`` (``-``: stdout) only if the block succeeds.

    ``None`` for no output (the records are then only tallied). Leaving the block
    with an exception discards everything written.
    """
    if path is None:
        yield None
        return
    if is_stdio(path):
        with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
            yield spool
            spool.seek(0)
            shutil.copyfileobj(spool, sys.stdout)
            sys.stdout.flush()
        return
    from pmwcm._atomic import atomic_open

    try:
        with atomic_open(path) as stream:
            yield stream
    except OSError as exc:
        raise fail(f"cannot write '{path}': {exc.strerror or exc}.") from None


def write_records(
    records: Iterable[dict[str, Any]], stream: IO[str] | None, path: Path | None
) -> AnswerTally:
    """Writes each record as one JSON line on ``stream`` (if any); their tally."""
    tally = AnswerTally()
    for record in records:
        tally.add(record)
        if stream is None:
            continue
        try:
            stream.write(json.dumps(record, allow_nan=False) + "\n")
        except OSError as exc:
            raise fail(f"cannot write '{path}': {exc.strerror or exc}.") from None
    return tally


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


def summarize(tally: AnswerTally, method: str, noise_name: str) -> str:
    """One stderr line: queries, sources, refusals, epsilon spent, noise source.

    >>> tally = AnswerTally.of([{"id": 1, "error": "e"}, {"id": 2, "theta": [0.0],
    ...     "source": "oracle", "epsilon_spent": 0.5, "delta": 1e-6}])
    >>> summarize(tally, "pmw", "opendp")
    'pmw: 2 queries (oracle 1; 1 refused); epsilon spent 0.5 at delta 1e-06; noise opendp'
    """
    sources = tally.sources
    parts = ", ".join(f"{s} {c}" for s, c in sorted(sources.items()) if s != "error")
    head = f"{method}: {tally.records} queries ({parts or 'none answered'}; "
    head += f"{sources.get('error', 0)} refused)"
    if method == "nonprivate":
        return head + "; NO privacy (exact answers)"
    if tally.last_spent is None:
        return head + f"; epsilon spent 0; noise {noise_name}"
    spent, delta = tally.last_spent
    return head + f"; epsilon spent {spent:.4g} at delta {delta:g}; noise {noise_name}"


def synthetic_report(tally: AnswerTally) -> str | None:
    """A stderr warning naming where the answers turned synthetic, or ``None`` if none did.

    >>> records = [{"id": "a", "source": "oracle"}, {"id": "b", "source": "synthetic"}]
    >>> print(synthetic_report(AnswerTally.of(records))[:76])
    warning: the engine halted; 1 of 2 answers, from id 'b' (record 2) on, are s
    """
    if tally.first_synthetic is None:
        return None
    first_id, number = tally.first_synthetic
    return (
        f"warning: the engine halted; {tally.synthetic:,} of {tally.records:,} answers, from id "
        f"{first_id!r} (record {number}) on, are synthetic: no accuracy check "
        'against the data (their records carry a "warning"). More --epsilon or '
        "--max-updates answers more of them privately; --after-halt refuse refuses them."
    )
