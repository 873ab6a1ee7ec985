"""The scripts in docs/ (the page and schema generators), loaded as modules for the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parents[2] / "docs"


def load(name: str) -> ModuleType:
    """docs/<name>.py, executed afresh as a module named `name`.

    Afresh on each call, and kept out of `sys.modules`, so a test sees the script as `make docs`
    would run it now rather than a copy another test loaded earlier.
    """
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
