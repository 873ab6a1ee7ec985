"""The public API is what docs/api.md lists; a new public name cannot appear unlisted."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tests.docs.scripts import DOCS, load

GEN = load("gen_api")


def test_the_api_page_is_current() -> None:
    """docs/api.md is what docs/gen_api.py renders: a name added to (or dropped from) a
    public module's `__all__`, or a new public module, fails here until the page says so."""
    committed = (DOCS / "api.md").read_text(encoding="utf-8")
    assert committed == GEN.render(), "docs/api.md is stale: run `make docs` and review the diff"


@pytest.mark.parametrize("name", GEN.public_modules())
def test_a_public_module_lists_every_public_name_it_defines(name: str) -> None:
    """A class or function a public module defines without an underscore is in its
    `__all__` (then on the page) or renamed with an underscore: nothing public by accident."""
    module = importlib.import_module(name)
    assert GEN.unlisted(module) == []
    assert all(hasattr(module, n) for n in module.__all__)


def test_the_check_sees_an_unlisted_name() -> None:
    """The check is not vacuous: a module defining a public name outside `__all__` fails it."""
    module = ModuleType("agentfsm.fake")
    module.__all__ = ["listed"]  # type: ignore[attr-defined]

    def listed() -> None: ...

    def leaked() -> None: ...

    for function in (listed, leaked):
        function.__module__ = module.__name__
        setattr(module, function.__name__, function)
    assert GEN.unlisted(module) == ["leaked"]


def test_every_top_level_module_is_public_or_underscored() -> None:
    """A module or package directly under agentfsm/ is on the API page or named with an
    underscore: an internal part cannot pass for public by its name."""
    package = DOCS.parent / "agentfsm"
    tops = {
        p.stem if p.suffix == ".py" else p.name
        for p in package.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").is_file()) and not p.name.startswith("_")
    }
    documented = {name.split(".")[1] for name in GEN.public_modules() if "." in name}
    assert sorted(tops - documented) == []
    assert {"guards", "durable", "integrations", "testing"} <= tops
