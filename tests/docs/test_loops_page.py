"""docs/loops.md: its example runs as printed, and its diagram lines are the generator's."""

from __future__ import annotations

import os
import re
from pathlib import Path

from agentfsm import Policy
from agentfsm._diagrams import mermaid
from agentfsm.guards import LoopLadder
from tests.processes import python

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "loops.md"


def _block(language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    assert found, f"docs/loops.md has no {language} block"
    return found.group(1)


class TestLoopsPage:
    def test_the_example_prints_what_the_page_says(self, tmp_path: Path) -> None:
        """The example runs: each printed line starts as the page's does, up to its `...`."""
        script = tmp_path / "example.py"
        script.write_text(_block("python"), encoding="utf-8")
        done = python(
            str(script), cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120
        )
        assert done.returncode == 0, done.stderr
        printed = done.stdout.splitlines()
        expected = _block("text").splitlines()
        assert len(printed) == len(expected)
        for line, shown in zip(printed, expected, strict=True):
            for part in shown.split("..."):
                assert part.strip(" ,;") in line, (part, line)

    def test_the_diagram_lines_are_drawn_from_the_route_table(self) -> None:
        """The page's two ladder edges are in the diagram of a policy with `loops`."""
        drawn = mermaid(Policy(loops=LoopLadder()))
        for line in _block("mermaid").splitlines()[1:]:
            source, _, label = line.strip().partition(": ")
            src, dst = (s.strip().upper() for s in source.split("-->"))
            assert f"{src} --> {dst}: {label}" in drawn, line
