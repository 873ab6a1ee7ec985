"""Public names say where users import them from.

A class or function defined in a private module (`agentfsm._model.types`) but exported by a
public one (`agentfsm`) reports the public module as its `__module__`, so reprs, pickles and the
generated docs show the path users write (`agentfsm.Decision`), and moving a definition between
private modules changes no pickle and no repr. Each public package calls `publish` once, at its
end, over its `__all__`; the class bodies stay as they are. httpx and trio do the same.

Two standard-library lookups go by `__module__` and so now see the public module:
`inspect.getsource(cls)` cannot find the class in the public module's file, and
`typing.get_type_hints(cls)` resolves string annotations in the public module's namespace.
`defined_in` keeps the defining module, and `class_source` reads a class's source through it,
for the tools of this repository that read source (docs/gen_*.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from types import FunctionType

__all__ = ["class_source", "defined_in", "publish", "publish_lazy", "sweep"]

_DEFINED_IN: dict[object, str] = {}
"""Each published object and the private module that defines it."""

_LAZY: list[tuple[str, Mapping[str, str]]] = []
"""(public module, {name: module it is imported from on first use}) of each lazy package."""


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def defined_in(value: object) -> str:
    """The module that defines `value` (its `__module__` before `publish` changed it)."""
    return _DEFINED_IN.get(value) or str(getattr(value, "__module__", ""))


def class_source(cls: type) -> str:
    """The source text of `cls`'s class statement, found in the module that defines it."""
    import ast  # only the docs scripts read source: `import agentfsm` does not pay for these
    import inspect

    text = inspect.getsource(sys.modules[defined_in(cls)])
    body: list[ast.stmt] = ast.parse(text).body
    for part in cls.__qualname__.split("."):
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == part]
        if not found:
            raise OSError(f"class {cls.__qualname__} not found in {defined_in(cls)}")
        node = found[-1]  # the last definition is the one the module keeps
        body = node.body
    return ast.get_source_segment(text, node) or ""


def _publish_one(value: object, module: str, name: str, submodules: bool = False) -> None:
    # Only our own classes and functions: a typing alias or a constant has no module of its own.
    if not isinstance(value, type | FunctionType) or value in _DEFINED_IN:
        return  # the first public package that exports a name keeps it
    current = value.__module__
    below = submodules and current.startswith(module + ".")
    if not current.startswith("agentfsm.") or not (_private(current) or below):
        return
    if value.__qualname__ != name:
        return  # exported under another name: a pickle looks it up by its qualified name
    rebuild = getattr(value, "model_rebuild", None)
    if rebuild is not None and getattr(value, "__pydantic_fields_complete__", True) is False:
        # A deferred pydantic model resolves its string annotations in the namespace of
        # `sys.modules[cls.__module__]`: resolve any it left open while that is still the
        # module that defines them.
        rebuild()
    _DEFINED_IN[value] = current
    value.__module__ = module


def sweep() -> None:
    """Publish the lazy names whose private modules some import has loaded by now."""
    for module, lazy in _LAZY:
        for name, source in lazy.items():
            loaded = sys.modules.get(source)
            if loaded is not None and _private(source):
                _publish_one(getattr(loaded, name, None), module, name)


def publish(
    module: str, namespace: Mapping[str, object], names: Iterable[str], *, submodules: bool = False
) -> None:
    """Make each of `names` in `namespace` that a private module defines report `module`.

    With `submodules`, also those a module below `module` defines: the package is where users
    import them from, its modules are how the code is laid out (`agentfsm.guards.boundaries`).
    """
    for name in names:
        _publish_one(namespace.get(name), module, name, submodules)
    sweep()


def publish_lazy(module: str, lazy: Mapping[str, str]) -> None:
    """Register `module`'s names that load on first use ({name: source module}).

    Each is published once its source module is loaded and `sweep` runs: `module` calls it
    when it resolves a lazy name, and `publish` calls it at the end of every public package.
    """
    if all(entry[0] != module for entry in _LAZY):
        _LAZY.append((module, lazy))
    sweep()
