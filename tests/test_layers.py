"""The package's layers, kept by its imports (docs/design.md section 5).

Each room of ``src/pmwcm`` may import only the rooms below it:

    kernels  <  mechanisms  <  engine  <  audit
    kernels  <  data
    kernels, data, engine  <  estimators (the scikit-learn face)
    everything above  <  service  <  cli

``pmwcm.errors`` (the error hierarchy) may be imported from anywhere; ``_atomic``
(atomic file writes) by the rooms that write files.

Every ``import`` and ``from ... import`` in every module is read from its AST,
including those inside functions and ``TYPE_CHECKING`` blocks, so a lazy import
cannot hide a dependency that runs back up a layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pmwcm

PACKAGE = Path(pmwcm.__file__).parent

#: What each room may import (besides the standard library and third parties).
ALLOWED: dict[str, set[str]] = {
    "kernels": {"errors", "kernels"},
    "mechanisms": {"errors", "kernels", "mechanisms"},
    "engine": {"errors", "kernels", "mechanisms", "engine"},
    "data": {"errors", "kernels", "data", "_atomic"},
    "audit": {"errors", "kernels", "mechanisms", "engine", "audit"},
    "estimators": {"errors", "kernels", "mechanisms", "engine", "data"},
    "service": {"errors", "kernels", "mechanisms", "engine", "data", "service", "_atomic"},
    "cli": {
        "errors",
        "kernels",
        "mechanisms",
        "engine",
        "data",
        "audit",
        "service",
        "cli",
        "_atomic",
    },
    "errors": set(),
    "_atomic": set(),
}


def room_of_file(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def room_of_module(name: str) -> str | None:
    """``pmwcm.kernels.domain`` -> ``kernels``; ``None`` outside pmwcm or for ``pmwcm`` itself."""
    parts = name.split(".")
    if parts[0] != "pmwcm" or len(parts) < 2:
        return None
    return parts[1]


def imported_modules(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            if node.module == "pmwcm":  # from pmwcm import kernels
                found.extend(f"pmwcm.{alias.name}" for alias in node.names)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def test_every_module_sits_in_a_known_room() -> None:
    rooms = {room_of_file(p) for p in MODULES}
    assert rooms <= set(ALLOWED), rooms - set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_up_a_layer(path: Path) -> None:
    room = room_of_file(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = [
        name
        for name in imported_modules(tree)
        if (target := room_of_module(name)) is not None and target not in ALLOWED[room]
    ]
    assert not bad, f"{path.relative_to(PACKAGE)} ({room}) imports {bad}"


def test_the_check_bites() -> None:
    """A kernel importing the engine is caught."""
    tree = ast.parse("def f():\n    from pmwcm.engine.online import OnlinePMW\n")
    assert [room_of_module(m) for m in imported_modules(tree)] == ["engine"]
    assert "engine" not in ALLOWED["kernels"]
