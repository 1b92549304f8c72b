"""Every public function, class and method of the package has a docstring.

Public means: a module not starting with ``_``, a name not starting with ``_``,
defined in that module (not imported into it). A method may take its docstring
from the base class (``inspect.getdoc``) or the protocol it implements (a class
with every member of one of :data:`PROTOCOLS`), which is where the contract is
written.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import pmwcm


def _protocols() -> list[type]:
    from pmwcm.engine.rounds import QueryRound
    from pmwcm.kernels.histogram import Histogram
    from pmwcm.mechanisms.noise import NoiseSource
    from pmwcm.mechanisms.oracles.base import Oracle

    return [Histogram, NoiseSource, Oracle, QueryRound]


def protocol_doc(cls: type, attr: str) -> str | None:
    """The docstring of ``attr`` in a protocol ``cls`` implements, if any."""
    for protocol in _protocols():
        members = {m for m in vars(protocol) if not m.startswith("_")}
        fields = getattr(cls, "__dataclass_fields__", {})
        if attr in members and all(hasattr(cls, m) or m in fields for m in members):
            return inspect.getdoc(getattr(protocol, attr))
    return None


MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(pmwcm.__path__, prefix="pmwcm.")
    if not any(part.startswith("_") for part in info.name.split("."))
)


def undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = []
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module_name:
            continue
        if not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        if not inspect.getdoc(value):
            missing.append(name)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") or not (
                    inspect.isfunction(member) or isinstance(member, property | classmethod)
                ):
                    continue
                target = member.fget if isinstance(member, property) else member
                if isinstance(target, classmethod):
                    target = target.__func__
                documented = (
                    inspect.getdoc(getattr(value, attr, None))
                    or inspect.getdoc(target)
                    or protocol_doc(value, attr)
                )
                if not documented:
                    missing.append(f"{name}.{attr}")
    return missing


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    assert not undocumented(module_name), undocumented(module_name)


def test_the_check_bites(monkeypatch: pytest.MonkeyPatch) -> None:
    """A public function without a docstring is reported."""
    import pmwcm.kernels.queries as module

    def bare() -> None:
        pass

    bare.__module__ = module.__name__
    monkeypatch.setattr(module, "bare", bare, raising=False)
    assert undocumented(module.__name__) == ["bare"]
