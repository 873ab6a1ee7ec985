"""The dependency rules between agentfsm's parts, read from the import graph.

Every `import` and `from ... import` in the package counts, at module level or inside a
function (a lazy import is still a dependency), including those under `TYPE_CHECKING`.
The rules are the ones docs/architecture.md states and draws: the packages
form layers, read bottom-up, and a package imports only from the layers below its own.
"""

from __future__ import annotations

import ast
import functools
import itertools
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentfsm"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("agentfsm._version", "agentfsm._public", "agentfsm.exceptions"),
    ("agentfsm._shell", "agentfsm._model"),
    ("agentfsm._permissions", "agentfsm._cedar", "agentfsm.guards", "agentfsm.providers"),
    ("agentfsm.states",),
    ("agentfsm._engine",),
    ("agentfsm._diagrams", "agentfsm._replay", "agentfsm.testing"),
    ("agentfsm._runner",),
    ("agentfsm.integrations", "agentfsm._report"),
    ("agentfsm._cli", "agentfsm.durable"),
    ("agentfsm", "agentfsm.__main__"),
)
"""The packages from the bottom up: the vocabulary (`model`) on the errors; guards and
normalizers on the vocabulary; the states on both; the engine (routes, policy, Controller,
machine, checkpoint) on all of those; then what drives or shows a run (the integrations
forward calls through the runner's executor); the facade on top."""

CORE = (
    "agentfsm._version",
    "agentfsm.exceptions",
    "agentfsm._shell",
    "agentfsm._model",
    "agentfsm._permissions",
    "agentfsm._cedar",
    "agentfsm.guards",
    "agentfsm.providers",
    "agentfsm.states",
    "agentfsm._engine",
)
"""What an embedding host loads on the per-step path (the first five layers)."""

OUTER = tuple(p for layer in LAYERS[5:] for p in layer if p != "agentfsm")
"""The parts built around the core."""


@dataclass(frozen=True)
class Rule:
    """Modules under `importer` must not import anything under `forbidden`."""

    importer: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str


RULES = (
    Rule(CORE, ("litellm",), "the core never imports litellm"),
    Rule(("agentfsm.guards",), ("agentfsm.providers", "agentfsm.states"), "guards read snapshots"),
    Rule(
        ("agentfsm.providers",),
        ("agentfsm.guards", "agentfsm.states", "agentfsm._engine"),
        "normalizers only produce ModelTurns",
    ),
)

ONLY_IMPORTER = {
    "transitions": ("agentfsm._engine.machine",),
    "litellm": ("agentfsm._runner", "agentfsm.durable"),
    "cedarpy": ("agentfsm._cedar",),
}
"""A third-party package and the only modules allowed to import it."""


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} imports {self.imported} (line {self.line})"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def edges(root: Path) -> tuple[Edge, ...]:
    """Every import in the package under `root`, as (importer, imported module, line).

    Read once per tree: the package is parsed once for all the tests here.
    """
    return _edges(root.resolve())


@functools.cache
def _edges(root: Path) -> tuple[Edge, ...]:
    return tuple(_read_edges(root))


def _read_edges(root: Path) -> Iterator[Edge]:
    """Every import in the package under `root`, as (importer, imported module, line).

    `from M import a` imports the module `M.a` when there is one (`from agentfsm import
    runner`), and `M` itself otherwise (`from agentfsm import __version__`).
    """
    paths = sorted(root.rglob("*.py"))
    modules = {module_name(path, root) for path in paths}
    for path in paths:
        importer = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Edge(importer, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                imported = _resolve(node, importer, path.name == "__init__.py")
                for alias in node.names:
                    name = f"{imported}.{alias.name}"
                    yield Edge(importer, name if name in modules else imported, node.lineno)


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def package_of(module: str) -> str | None:
    """The listed package (a layer's entry) that holds `module`; None outside agentfsm."""
    if module != "agentfsm" and not module.startswith("agentfsm."):
        return None
    if module == "agentfsm":
        return module
    listed = [p for layer in LAYERS for p in layer if p != "agentfsm" and under(module, (p,))]
    return max(listed, key=len) if listed else ".".join(module.split(".")[:2])


def package_graph(root: Path) -> dict[str, dict[str, Edge]]:
    """Package -> packages it imports, each with one import that makes the edge."""
    graph: dict[str, dict[str, Edge]] = {}
    for edge in edges(root):
        source, target = package_of(edge.importer), package_of(edge.imported)
        if source is None or target is None or source == target:
            continue
        graph.setdefault(source, {}).setdefault(target, edge)
    return graph


def module_graph(root: Path) -> dict[str, dict[str, Edge]]:
    """Module -> the package's modules it imports, each with one import that makes the edge.

    A name imported from a module (`from agentfsm._model.types import ToolCall`) is an edge
    to that module; importing a package is an edge to its `__init__`.
    """
    modules = {module_name(path, root.resolve()) for path in root.rglob("*.py")}
    graph: dict[str, dict[str, Edge]] = {}
    for edge in edges(root):
        target = edge.imported
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != edge.importer:
            graph.setdefault(edge.importer, {}).setdefault(target, edge)
    return graph


def find_cycle(graph: Mapping[str, Mapping[str, Edge]]) -> list[Edge]:
    """One cycle of an import graph as the imports that close it, or [] for a DAG."""
    done: set[str] = set()
    trail: list[str] = []

    def visit(node: str) -> list[Edge]:
        if node in trail:
            loop = [*trail[trail.index(node) :], node]
            return [graph[a][b] for a, b in itertools.pairwise(loop)]
        if node in done:
            return []
        trail.append(node)
        for nxt in sorted(graph.get(node, {})):
            found = visit(nxt)
            if found:
                return found
        trail.pop()
        done.add(node)
        return []

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return []


def layer_of(package: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if package in layer), None)


def violations(root: Path) -> list[str]:
    """Each import that breaks a rule, with the rule's reason."""
    found = []
    for edge in edges(root):
        for rule in RULES:
            if under(edge.importer, rule.importer) and under(edge.imported, rule.forbidden):
                found.append(f"{edge}: {rule.why}")
        for package, allowed in ONLY_IMPORTER.items():
            if under(edge.imported, (package,)) and not under(edge.importer, allowed):
                found.append(f"{edge}: only {', '.join(allowed)} may import {package}")
    for source, targets in package_graph(root).items():
        for target, edge in targets.items():
            low, high = layer_of(target), layer_of(source)
            if low is None or high is None:
                unlisted = source if high is None else target
                found.append(f"{edge}: {unlisted} is in no layer of tests/test_architecture.py")
            elif low >= high:
                found.append(
                    f"{edge}: {source} (layer {high}) may only import lower layers, "
                    f"and {target} is layer {low}"
                )
    return sorted(set(found))


def _tree(tmp_path: Path, files: Mapping[str, str]) -> Path:
    """A package `agentfsm` under `tmp_path` holding `files` (path -> source)."""
    root = tmp_path / "agentfsm"
    for module, source in files.items():
        target = root / module
        target.parent.mkdir(parents=True, exist_ok=True)
        for folder in (root, *target.relative_to(root).parents):
            (root / folder / "__init__.py").touch()
        target.write_text(source)
    return root


class TestImportRules:
    def test_the_package_keeps_every_rule(self) -> None:
        """No module of agentfsm imports across a boundary the architecture forbids."""
        assert violations(PACKAGE) == []

    def test_the_package_graph_is_a_dag(self) -> None:
        """No package imports, even lazily or for types only, one that imports it back."""
        cycle = find_cycle(package_graph(PACKAGE))
        assert cycle == [], "a cycle: " + "; ".join(map(str, cycle))

    def test_no_module_imports_one_that_imports_it_back(self) -> None:
        """Inside a package too: the modules of each part read bottom-up, with no cycle. Where
        two modules need each other, a protocol or a shared lower module cuts the cycle."""
        cycle = find_cycle(module_graph(PACKAGE))
        assert cycle == [], "a cycle: " + "; ".join(map(str, cycle))

    def test_every_package_has_a_layer(self) -> None:
        """A new package is placed in LAYERS (and drawn in docs/architecture.md) when added."""
        packages = {package_of(module_name(p, PACKAGE)) for p in PACKAGE.rglob("*.py")}
        assert {p for p in packages if p is not None and layer_of(p) is None} == set()

    def test_the_graph_sees_the_packages_real_imports(self) -> None:
        """The reader finds known edges, so an empty violation list means something."""
        found = {(e.importer, e.imported) for e in edges(PACKAGE)}
        assert ("agentfsm._engine.machine", "transitions") in found
        assert ("agentfsm._engine.controller", "agentfsm.guards") in found
        assert ("agentfsm._engine.policy", "agentfsm._model.limits") in found
        assert any(i == "agentfsm._runner.loop" and m == "litellm" for i, m in found)
        graph = package_graph(PACKAGE)
        assert "agentfsm._model" in graph["agentfsm.guards"]
        assert "agentfsm._engine" in graph["agentfsm._runner"]
        assert "agentfsm.providers" in graph["agentfsm.states"]

    @pytest.mark.parametrize(
        ("module", "source", "expected"),
        [
            ("_engine/policy.py", "from agentfsm._runner import loop\n", "may only import lower"),
            ("_engine/policy.py", "def f():\n    import agentfsm._replay.engine\n", "lower layers"),
            ("guards/extra.py", "from agentfsm.providers import normalize\n", "guards read"),
            ("states/extra.py", "import transitions\n", "only agentfsm._engine.machine"),
            ("_model/types.py", "from .._cli import command\n", "may only import lower"),
            ("providers/x.py", "import litellm\n", "core never imports litellm"),
            ("_runner/x.py", "from agentfsm import __version__\n", "may only import lower"),
            (
                "_model/run_state.py",
                (
                    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from agentfsm._engine.policy import Policy\n"
                ),
                "agentfsm._model (layer 1) may only import lower layers",
            ),
            ("newpart/x.py", "from agentfsm._model import types\n", "is in no layer"),
        ],
    )
    def test_a_forbidden_import_is_reported(
        self, tmp_path: Path, module: str, source: str, expected: str
    ) -> None:
        """A module that breaks a rule is named with the line and the rule it breaks."""
        root = _tree(tmp_path, {module: source})
        found = violations(root)
        assert found, f"{module}: {source!r} was not reported"
        assert any(expected in v and "line" in v for v in found), found

    def test_a_cycle_through_a_lazy_import_is_found(self, tmp_path: Path) -> None:
        """A cycle closed by an import inside a function is reported, with its lines."""
        root = _tree(
            tmp_path,
            {
                "_engine/policy.py": "from agentfsm.guards import Guard\n",
                "guards/_routes.py": "def f():\n    from agentfsm._engine.policy import Policy\n",
            },
        )
        cycle = find_cycle(package_graph(root))
        assert [str(e) for e in cycle] == [
            "agentfsm._engine.policy imports agentfsm.guards (line 1)",
            "agentfsm.guards._routes imports agentfsm._engine.policy (line 2)",
        ]

    def test_a_cycle_under_type_checking_is_found(self, tmp_path: Path) -> None:
        """An import made only for the type checker still closes a cycle."""
        root = _tree(
            tmp_path,
            {
                "_model/run_state.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from agentfsm.guards import Hit\n",
                "guards/_base.py": "from agentfsm._model.snapshot import RunSnapshot\n",
                "_model/snapshot.py": "",
            },
        )
        cycle = find_cycle(package_graph(root))
        assert {e.importer for e in cycle} == {"agentfsm.guards._base", "agentfsm._model.run_state"}

    def test_a_cycle_between_two_modules_of_one_package_is_found(self, tmp_path: Path) -> None:
        """A module cycle inside one package, closed lazily, is reported; the packages' is not."""
        root = _tree(
            tmp_path,
            {
                "_cli/replay.py": "def f():\n    from agentfsm._cli.replay_ray import g\n",
                "_cli/replay_ray.py": "from agentfsm._cli.replay import Job\n",
            },
        )
        assert find_cycle(package_graph(root)) == []
        cycle = find_cycle(module_graph(root))
        assert [str(e) for e in cycle] == [
            "agentfsm._cli.replay imports agentfsm._cli.replay_ray (line 2)",
            "agentfsm._cli.replay_ray imports agentfsm._cli.replay (line 1)",
        ]

    def test_the_core_loads_no_outer_part(self) -> None:
        """`import agentfsm` (the per-step path) loads none of the parts around the core."""
        code = "import sys, agentfsm; print(sorted(m for m in sys.modules if 'agentfsm' in m))"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        loaded = ast.literal_eval(out)
        assert [m for m in loaded if under(m, OUTER)] == []
