"""The package's layers, kept by its imports (docs/design.md section 5).

Each room of ``src/pmwcm`` may import only the rooms below it:

    kernels  <  mechanisms  <  engine  <  audit
    kernels  <  data
    kernels, data, engine  <  estimators (the scikit-learn face)
    everything above  <  service  <  cli

``pmwcm.errors`` (the error hierarchy) may be imported from anywhere; ``_atomic``
(atomic file writes) by the rooms that write files.

Every ``import`` and ``from ... import`` in every module is read from its AST,
including those inside functions and ``TYPE_CHECKING`` blocks, relative ones
(resolved against the module; ruff's TID252 also bans them) and
``importlib.import_module`` / ``__import__`` calls with a literal name, so no
spelling of an import can hide a dependency that runs back up a layer; a
mutation test plants each spelling in a kernel and checks that it is caught.
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


def imported_modules(tree: ast.AST, module: str = "pmwcm") -> list[str]:
    """Every module ``tree`` imports: ``import``, ``from ... import`` (relative ones
    resolved against ``module``, the dotted name of the file read) and
    ``importlib.import_module("...")`` / ``__import__("...")`` with a literal name."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, module)
            found.append(base)
            # from pmwcm import kernels; from .. import engine (names that may be modules)
            if base == "pmwcm" or node.module is None:
                found.extend(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append(first.value)
    return found


def _absolute(name: str | None, level: int, module: str) -> str:
    """``from <level dots><name> import`` in ``module``, as an absolute module name."""
    if level == 0:
        return name or ""
    parts = module.split(".")[:-level]  # the package holding ``module``, then up
    return ".".join([*parts, *([name] if name else [])])


def _is_dynamic_import(func: ast.expr) -> bool:
    """``importlib.import_module``, a bare ``import_module`` or ``__import__``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def module_name(path: Path) -> str:
    """``src/pmwcm/kernels/domain.py`` -> ``pmwcm.kernels.domain``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
        for name in imported_modules(tree, module_name(path))
        if (target := room_of_module(name)) is not None and target not in ALLOWED[room]
    ]
    assert not bad, f"{path.relative_to(PACKAGE)} ({room}) imports {bad}"


@pytest.mark.parametrize(
    "source",
    [
        "from pmwcm.engine.online import OnlinePMW\n",
        "def f():\n    from pmwcm.engine.online import OnlinePMW\n",
        "import pmwcm.engine.online\n",
        "from pmwcm import engine\n",
        "from ..engine.online import OnlinePMW\n",
        "from .. import engine\n",
        "import importlib\nimportlib.import_module('pmwcm.engine.online')\n",
        "from importlib import import_module\nimport_module('pmwcm.engine')\n",
        "__import__('pmwcm.engine.online')\n",
    ],
    ids=["from", "lazy", "import", "from package", "relative", "relative package",
         "importlib", "import_module", "__import__"],
)  # fmt: skip
def test_the_check_bites_on_every_kind_of_upward_import(source: str) -> None:
    """Mutation test: a kernel module importing the engine, spelled each way, is caught."""
    tree = ast.parse(source)
    rooms = {room_of_module(m) for m in imported_modules(tree, "pmwcm.kernels.domain")}
    assert "engine" in rooms
    assert "engine" not in ALLOWED["kernels"]


def test_relative_imports_resolve_within_their_own_room() -> None:
    tree = ast.parse("from .histogram import DenseHistogram\nfrom . import losses\n")
    found = imported_modules(tree, "pmwcm.kernels.domain")
    assert found == ["pmwcm.kernels.histogram", "pmwcm.kernels", "pmwcm.kernels.losses"]
    assert {room_of_module(m) for m in found} == {"kernels"}
