"""The examples run as tests, and the public surface is what `__all__` says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agentfsm as af

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
NEEDS = {"weather_litellm.py": ("litellm",), "openai_agent.py": ("agents",)}
"""The optional modules an example drives (the rest need agentfsm alone)."""


class TestExamples:
    def test_there_are_examples(self) -> None:
        """The examples folder is not empty."""
        assert EXAMPLES

    @pytest.mark.parametrize(
        "path",
        [pytest.param(p, marks=pytest.mark.needs(*NEEDS.get(p.name, ()))) for p in EXAMPLES],
        ids=lambda p: p.name,
    )
    def test_example_runs_to_completion(self, path: Path) -> None:
        """Each example runs in a fresh interpreter and its run completes."""
        done = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "completed" in done.stdout.splitlines()[-1]


class TestPublicSurface:
    def test_all_is_sorted_and_exact(self) -> None:
        """`agentfsm.__all__` is alphabetical and lists every public name the package defines."""
        assert list(af.__all__) == sorted(af.__all__)
        # Submodules other tests imported show up as attributes; they are not re-exports.
        submodules = {
            "testing",
            "providers",
            "diagrams",
            "importlib",
            "model",
            "engine",
            "runner",
            "replay",
            "cli",
            "report",
            "integrations",
            "durable",
        }
        public = {n for n in vars(af) if not n.startswith("_")} - {"annotations", "Any"}
        assert set(af.__all__) == (public - submodules) | set(af._LAZY)
        for name in af._LAZY:
            assert getattr(af, name) is not None

    @pytest.mark.parametrize("name", ["guards", "states", "exceptions", "testing", "providers"])
    def test_public_namespaces_declare_all(self, name: str) -> None:
        """Each public namespace has an alphabetical `__all__` of names it really has."""
        module = __import__(f"agentfsm.{name}", fromlist=["__all__"])
        names = list(module.__all__)
        assert names == sorted(names)
        assert all(hasattr(module, n) for n in names)

    def test_import_does_not_load_litellm_or_transitions_extras(self) -> None:
        """`import agentfsm` loads neither litellm nor the HTTP server."""
        code = "import sys, agentfsm; print('litellm' in sys.modules, 'http.server' in sys.modules)"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert out.split() == ["False", "False"]

    def test_the_contract_names_exist(self) -> None:
        """The acceptance surface of DESIGN.md is importable from the top level."""
        for name in ["normalize", "Controller", "Policy", "ToolResult", "ToolCall", "ModelTurn"]:
            assert callable(getattr(af, name))
        assert {m.name for m in af.FinishReason} == {
            "STOP",
            "TOOL_CALLS",
            "LENGTH",
            "CONTENT_FILTER",
            "REFUSAL",
            "PAUSE",
            "ERROR",
            "UNKNOWN",
        }
        assert {"COMPLETED", "MAX_TURNS", "DOOM_LOOP", "INTERRUPTED"} <= {
            m.name for m in af.ExitReason
        }
