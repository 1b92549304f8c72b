"""The last privacy audit's report, read back for the web console (:mod:`pmwcm.service.console`).

``pmwcm audit -o FILE`` writes a Markdown report (:mod:`pmwcm.cli.audit`): a few
``- key: value`` lines, then tables. The operator names that file at start-up
(``PMWCM_AUDIT_REPORT=FILE pmwcm serve ...``); the console shows its date,
command and tables, and whether it passed, judged as ``pmwcm audit`` judges
its exit status:

* a row of the mechanisms' table whose verdict is ``violation`` (a claim refuted);
* a negative control that must be caught (``must catch`` ``yes``) but is not a
  ``violation``;
* a cross-check or sensitivity row whose ``ok`` is not ``yes``.

The report is about pmwcm's mechanisms on synthetic neighbouring inputs; it
holds nothing of any session's data.

>>> report = parse_report('''# pmwcm privacy audit
...
... - date: 2026-01-01 00:00 UTC
...
... | mechanism | verdict |
... | --- | --- |
... | Laplace | consistent |
... ''')
>>> report.date, report.passed, report.tables[0].rows
('2026-01-01 00:00 UTC', True, (('Laplace', 'consistent'),))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The header lines of a report that the console shows (the machine line is left out).
SHOWN_KEYS = ("date", "command", "trials", "confidence")
#: The largest report read (the real one is ~10 kB).
MAX_REPORT_BYTES = 1_000_000


@dataclass(frozen=True, kw_only=True)
class AuditTable:
    """One table of the report: its section title, column names and cells."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def failures(self) -> int:
        """The rows that make ``pmwcm audit`` exit 1 (module docstring)."""
        return sum(_row_failures(dict(zip(self.columns, row, strict=False))) for row in self.rows)


def _row_failures(row: dict[str, str]) -> int:
    """0 or 1: whether one row, by column name, fails (module docstring)."""
    if "must catch" in row:
        refuted = row["must catch"] == "yes" and row.get("verdict") != "violation"
    else:
        refuted = row.get("verdict") == "violation"
    return int(refuted or row.get("ok", "yes") != "yes")


@dataclass(frozen=True, kw_only=True)
class AuditReport:
    """A parsed ``pmwcm audit`` report."""

    date: str | None
    command: str | None
    trials: str | None
    confidence: str | None
    tables: tuple[AuditTable, ...]

    @property
    def failures(self) -> int:
        """How many rows fail (:meth:`AuditTable.failures`)."""
        return sum(t.failures() for t in self.tables)

    @property
    def passed(self) -> bool:
        """Whether ``pmwcm audit`` passed: some table, and no failing row."""
        return bool(self.tables) and self.failures == 0


def _cells(line: str) -> tuple[str, ...]:
    return tuple(c.replace("`", "").strip() for c in line.strip().strip("|").split("|"))


def parse_report(text: str) -> AuditReport:
    """The header and tables of a ``pmwcm audit`` report (unknown lines are ignored)."""
    header: dict[str, str] = {}
    tables: list[AuditTable] = []
    title = "Mechanisms"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("## "):
            title = line[3:].strip()
        elif line.startswith("- ") and ":" in line:
            key, _, value = line[2:].partition(":")
            if key.strip() in SHOWN_KEYS:
                header[key.strip()] = value.strip().strip("`")
        elif line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            columns = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append(AuditTable(title=title, columns=columns, rows=tuple(rows)))
            continue
        i += 1
    return AuditReport(
        date=header.get("date"),
        command=header.get("command"),
        trials=header.get("trials"),
        confidence=header.get("confidence"),
        tables=tuple(tables),
    )


def read_report(path: Path) -> AuditReport | None:
    """The report at ``path``, or ``None`` when there is no readable file there."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_REPORT_BYTES)
    except OSError:
        return None
    return parse_report(raw.decode("utf-8", errors="replace"))
