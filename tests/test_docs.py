"""The docs name only what exists (issue 36, item 5).

README.md and docs/*.md cite paths in the repository and show ``pmwcm``
commands. Round 2's README cited a moved schema and a moved NOTICE, and
docs/audit.md a package that no longer exists; nothing caught it. Here:

* every repository path in backticks or in a shell block (a name under
  ``src/``, ``tests/``, ``benchmarks/``, ``scripts/``, ``docs/`` or ``.ci/``, or
  a top-level file) exists;
* every ``pmwcm`` command line in a shell block names a real subcommand, and
  every option it gives is one that subcommand takes.

The walkthrough's blocks are also run end to end by
``tests/test_readme_walkthrough.py``; this test is the cheap check of the rest.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main

from pmwcm.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Folders whose files the docs cite by path.
TREES = ("src/", "tests/", "benchmarks/", "scripts/", "docs/", ".ci/")
#: Paths the docs show as things a reader makes, not files of the repository.
MADE_BY_THE_READER = {"docs/results.md"}  # regenerated, but committed: checked like the rest
_PATH = re.compile(r"(?<![\w./-])((?:src|tests|benchmarks|scripts|docs|\.ci)/[\w./*-]+)")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Each fenced block's language (``""`` if none) and text, fences paired in order."""
    blocks: list[tuple[str, str]] = []
    language: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if language is None:
                language, lines = line.lstrip()[3:].strip(), []
            else:
                blocks.append((language, "\n".join(lines) + "\n"))
                language = None
        elif language is not None:
            lines.append(line)
    return blocks


def cited_paths(text: str) -> set[str]:
    """Repository paths cited in inline code spans and shell blocks."""
    outside = "\n".join(
        line for i, line in enumerate(text.split("```")) if i % 2 == 0
    )  # inline spans are read outside the fenced blocks
    spans = re.findall(r"`([^`\n]+)`", outside) + [b for _, b in code_blocks(text)]
    found = set()
    for span in spans:
        for path in _PATH.findall(span):
            path = path.rstrip(".,:;)")
            if "*" not in path and "<" not in path and "..." not in path:
                found.add(path)
    return found


def command_lines(text: str) -> list[str]:
    """``pmwcm ...`` commands of the shell blocks, continuation lines joined."""
    lines = []
    for kind, block in code_blocks(text):
        if kind not in ("sh", "bash", "console"):
            continue
        joined = re.sub(r"\s*\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            line = line.split(" #", 1)[0].strip()
            if line.startswith("pmwcm ") or ".venv/bin/pmwcm " in line:
                lines.append(line[line.index("pmwcm ") :])
    return lines


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_path_exists(doc: Path) -> None:
    missing = sorted(p for p in cited_paths(doc.read_text()) if not (ROOT / p).exists())
    assert missing == [], f"{doc.name} cites paths that do not exist: {missing}"


def subcommands() -> dict[str, Any]:
    """``pmwcm``'s subcommands by name (click commands, as Typer builds them)."""
    commands: dict[str, Any] = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    return commands


def _options(command: Any) -> set[str]:
    return {name for param in command.params for name in getattr(param, "opts", [])} | {
        name for param in command.params for name in getattr(param, "secondary_opts", [])
    }


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_pmwcm_command_shown_takes_the_options_shown(doc: Path) -> None:
    commands = subcommands()
    problems = []
    for line in command_lines(doc.read_text()):
        try:
            words = shlex.split(line.split("|")[0].split(">")[0])
        except ValueError:
            problems.append(f"cannot split {line!r}")
            continue
        name = words[1] if len(words) > 1 else ""
        command = commands.get(name)
        if command is None:
            problems.append(f"{line!r}: no subcommand {name!r}")
            continue
        known = _options(command) | {"--help", "-h"}
        for word in words[2:]:
            option = word.split("=", 1)[0]
            if option.startswith("-") and option not in known:
                problems.append(f"{line!r}: pmwcm {name} has no option {option}")
    assert problems == [], "\n".join(problems)


def test_the_checks_catch_a_moved_path_and_an_unknown_option() -> None:
    """Negative controls: the round-2 README's stale path, and an option no command has."""
    stale = "Bundled data: see `src/pmwcm/datasets/data/NOTICE.md`."
    assert cited_paths(stale) == {"src/pmwcm/datasets/data/NOTICE.md"}
    assert not (ROOT / "src/pmwcm/datasets/data/NOTICE.md").exists()
    block = "```sh\npmwcm run --data a.csv \\\n  --epsilonn 1\n```\n"
    assert command_lines(block) == ["pmwcm run --data a.csv --epsilonn 1"]
    assert "--epsilonn" not in _options(subcommands()["run"])
    assert "--epsilon" in _options(subcommands()["run"])
