"""The dependency rules between agentfsm's parts, read from the import graph.

Every `import` and `from ... import` in the package counts, at module level or inside a
function (a lazy import is still a dependency), including those under `TYPE_CHECKING`.
The rules are the ones the README's "Architecture" section states.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentfsm"

CORE = ("agentfsm.core", "agentfsm.states", "agentfsm.guards", "agentfsm.providers")
"""What an embedding host loads on the per-step path."""

OUTER = (
    "agentfsm.runner",
    "agentfsm.replay",
    "agentfsm.cli",
    "agentfsm.testing",
    "agentfsm.diagrams",
    "agentfsm.report",
    "agentfsm.integrations",
    "agentfsm.durable",
)
"""The parts built around the core."""


@dataclass(frozen=True)
class Rule:
    """Modules under `importer` must not import anything under `forbidden`."""

    importer: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str


RULES = (
    Rule(CORE, OUTER, "the core never imports the parts around it"),
    Rule((*CORE, "agentfsm.exceptions"), ("litellm",), "the core never imports litellm"),
    Rule(("agentfsm.guards",), ("agentfsm.providers", "agentfsm.states"), "guards read snapshots"),
    Rule(
        ("agentfsm.providers",),
        ("agentfsm.guards", "agentfsm.states", "agentfsm.core.controller"),
        "normalizers only produce ModelTurns",
    ),
)

ONLY_IMPORTER = {
    "transitions": ("agentfsm.core.machine",),
    "litellm": ("agentfsm.runner", "agentfsm.durable"),
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


def edges(root: Path) -> Iterator[Edge]:
    """Every import in the package under `root`, as (importer, imported module, line)."""
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Edge(importer, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                imported = _resolve(node, importer, path.name == "__init__.py")
                yield Edge(importer, imported, node.lineno)
                for alias in node.names:  # `from agentfsm import runner` imports a module
                    yield Edge(importer, f"{imported}.{alias.name}", node.lineno)


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


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
    return sorted(set(found))


class TestImportRules:
    def test_the_package_keeps_every_rule(self) -> None:
        """No module of agentfsm imports across a boundary the architecture forbids."""
        assert violations(PACKAGE) == []

    def test_the_graph_sees_the_packages_real_imports(self) -> None:
        """The reader finds known edges, so an empty violation list means something."""
        found = {(e.importer, e.imported) for e in edges(PACKAGE)}
        assert ("agentfsm.core.machine", "transitions") in found
        assert ("agentfsm.core.controller", "agentfsm.guards") in found
        assert any(i == "agentfsm.runner.loop" and m == "litellm" for i, m in found)

    @pytest.mark.parametrize(
        ("module", "source", "expected"),
        [
            ("core/policy.py", "from agentfsm.runner import loop\n", "core never imports"),
            ("core/policy.py", "def f():\n    import agentfsm.replay.engine\n", "core never"),
            ("guards/extra.py", "from agentfsm.providers import normalize\n", "guards read"),
            ("states/extra.py", "import transitions\n", "only agentfsm.core.machine"),
            ("core/types.py", "from ..cli import command\n", "core never imports"),
            ("providers/x.py", "import litellm\n", "core never imports litellm"),
        ],
    )
    def test_a_forbidden_import_is_reported(
        self, tmp_path: Path, module: str, source: str, expected: str
    ) -> None:
        """A module that breaks a rule is named with the line and the rule it breaks."""
        root = tmp_path / "agentfsm"
        target = root / module
        target.parent.mkdir(parents=True)
        for folder in (root, target.parent):
            (folder / "__init__.py").touch()
        target.write_text(source)
        found = violations(root)
        assert found, f"{module}: {source!r} was not reported"
        assert any(expected in v and "line" in v for v in found), found

    def test_the_core_loads_no_outer_part(self) -> None:
        """`import agentfsm` (the per-step path) loads none of the parts around the core."""
        import subprocess
        import sys

        code = "import sys, agentfsm; print(sorted(m for m in sys.modules if 'agentfsm' in m))"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        loaded = ast.literal_eval(out)
        assert [m for m in loaded if under(m, OUTER)] == []
