"""The README's Quickstart, the Makefile and CI must agree.

The Quickstart promises exactly two commands, ``make demo`` and ``make test``;
the Makefile must define both, ``make test`` must run every check, and
``.ci/run`` must run exactly ``make test``. These tests parse the files, so
changing one without the others fails here.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _section(markdown: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def _commands(section: str) -> list[str]:
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", section, re.M | re.S)
    lines = [line.strip().removeprefix("$ ") for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _targets(makefile: str) -> dict[str, list[str]]:
    """``{target: recipe lines}`` for every explicit rule."""
    rules: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in makefile.splitlines():
        if line.startswith("\t") and current is not None:
            current.append(line.strip())
            continue
        match = re.match(r"^([^\s:#=][^:=]*?)\s*:(?!=)", line)
        current = None
        if match:
            current = []
            for name in match.group(1).split():
                rules[name] = current
    return rules


README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
TARGETS = _targets(MAKEFILE)


def test_quickstart_is_exactly_make_demo_and_make_test() -> None:
    assert _commands(_section(README, "Quickstart")) == ["make demo", "make test"]


def test_every_quickstart_command_is_a_makefile_target() -> None:
    for command in _commands(_section(README, "Quickstart")):
        target = command.removeprefix("make ").strip()
        assert target in TARGETS, f"README says `{command}` but the Makefile has no {target!r}"
    assert {"demo", "test"} <= set(TARGETS)
    assert re.search(r"^\.PHONY:.*\bdemo\b.*\btest\b", MAKEFILE, re.M)


def test_make_test_runs_every_check() -> None:
    recipe = " ; ".join(TARGETS["test"])
    for tool in ("ruff check", "ruff format --check", "mypy", "pytest"):
        assert tool in recipe, f"make test does not run {tool!r}"
    assert "pytest -k" not in recipe and "--ignore" not in recipe  # the whole suite


def test_make_demo_runs_the_demo_command() -> None:
    assert any(line.endswith("pmwcm demo") for line in TARGETS["demo"])


def test_installs_are_pinned_and_stamped() -> None:
    installs = [line for lines in TARGETS.values() for line in lines if " install " in line]
    assert installs and all("-c constraints.txt" in line for line in installs)
    assert "python3.11" in MAKEFILE
    for target in ("demo", "test"):
        stamp = re.search(rf"^{target}:\s*(\S+)", MAKEFILE, re.M)
        assert stamp, f"make {target} has no install prerequisite"
        assert re.search(rf"^{re.escape(stamp.group(1))}:.*pyproject\.toml", MAKEFILE, re.M)


def test_constraints_pin_the_dev_tools_as_pyproject_does() -> None:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pins = dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))
    assert all(v and " " not in v for v in pins.values())
    assert "pmwcm" not in {k.lower() for k in pins}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["optional-dependencies"]["dev"]:
        if "==" in req:
            name, version = req.split("==")
            assert pins.get(name) == version, f"constraints.txt pins {name} differently"


def test_ci_runs_exactly_make_test() -> None:
    run = ROOT / ".ci" / "run"
    assert os.access(run, os.X_OK), ".ci/run must be executable"
    text = run.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") or text.startswith("#!/bin/bash\n")
    commands = [
        line.strip()
        for line in text.splitlines()[1:]
        if line.strip() and not line.strip().startswith("#")
    ]
    assert "set -euo pipefail" in commands
    work = [c for c in commands if not c.startswith(("set ", "cd "))]
    assert [c.removeprefix("exec ") for c in work] == ["make test"]
