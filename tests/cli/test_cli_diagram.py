"""`agentfsm diagram` draws the machine from a policy, optionally over a traced run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentfsm import Action, Controller, Policy, ToolResult
from agentfsm._diagrams import dot, mermaid
from agentfsm._replay.trace import TraceWriter
from agentfsm.testing import call, turn
from tests.processes import python


def diagram(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m agentfsm diagram ARGS` in a fresh interpreter."""
    return python(
        "-m",
        "agentfsm",
        "diagram",
        *args,
        cwd=cwd,
        env=env if env is not None else {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        timeout=60,
    )


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    """A trace of a real run: one search call, its result, then a final answer."""
    path = tmp_path / "run.jsonl"
    with TraceWriter(path) as writer:
        ctl = Controller(Policy(), observers=[writer])
        first = ctl.on_model_output(turn("", [call("search", {"q": "weather"}, id="c1")]))
        assert first.action is Action.EXECUTE_TOOLS
        ctl.on_tool_results([ToolResult(call_id="c1", content="sunny")])
        last = ctl.on_model_output(turn("It is sunny."))
        assert last.action is Action.FINAL
    return path


class TestDiagramCommand:
    def test_prints_mermaid_by_default(self, tmp_path: Path) -> None:
        """With no options, stdout is the Mermaid diagram of the default policy."""
        done = diagram(cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == mermaid(Policy().routes)

    def test_prints_dot(self, tmp_path: Path) -> None:
        """`--format dot` prints the DOT digraph of the default policy."""
        done = diagram("--format", "dot", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == dot(Policy().routes)

    @pytest.mark.parametrize(
        ("name", "text"),
        [("policy.json", '{"max_turns": 7}'), ("policy.toml", "max_turns = 7\n")],
    )
    def test_draws_the_policy_given(self, tmp_path: Path, name: str, text: str) -> None:
        """`--policy FILE` draws that policy: its limits label the edges."""
        (tmp_path / name).write_text(text, encoding="utf-8")
        done = diagram("--policy", name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "P6 MaxTurns(7)" in done.stdout
        assert "MaxTurns(50)" not in done.stdout

    def test_writes_to_the_output_file(self, tmp_path: Path) -> None:
        """`-o FILE` writes the diagram there and prints nothing."""
        done = diagram("--format", "dot", "-o", "machine.dot", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
        assert (tmp_path / "machine.dot").read_text(encoding="utf-8") == dot(Policy().routes)

    def test_overlays_a_traced_run(self, tmp_path: Path, trace_file: Path) -> None:
        """`--trace FILE` marks the states and edges the run took, with counts."""
        done = diagram("--trace", str(trace_file), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        marked = (
            'state "await_model ×2" as AWAIT_MODEL',
            'state "parse ×2" as PARSE',
            'state "execute ×1" as EXECUTE',
            'state "end ×1" as END',
            'state "recover" as RECOVER',
            "P1 HasToolCalls() ×1",
            "P3 AnswerComplete() ×1",
        )
        assert [line for line in marked if line not in done.stdout] == []

    def test_overlays_a_traced_run_in_dot(self, tmp_path: Path, trace_file: Path) -> None:
        """The DOT overlay colours the edges the run took."""
        done = diagram("--format", "dot", "--trace", str(trace_file), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        taken = next(
            line for line in done.stdout.splitlines() if line.startswith("  verify -> end")
        )
        assert "penwidth" in taken

    def test_a_bad_policy_file_exits_2_naming_it(self, tmp_path: Path) -> None:
        """An invalid policy is reported on stderr with exit status 2, and nothing is drawn."""
        (tmp_path / "policy.json").write_text('{"max_turns": 0}', encoding="utf-8")
        done = diagram("--policy", "policy.json", cwd=tmp_path)
        assert done.returncode == 2
        assert done.stdout == ""
        assert "policy.json" in done.stderr
        assert "max_turns" in done.stderr

    def test_svg_without_graphviz_exits_2_with_install_advice(self, tmp_path: Path) -> None:
        """`--format svg` with no `dot` on PATH says how to install Graphviz."""
        empty = tmp_path / "empty-bin"
        empty.mkdir()
        env = {**os.environ, "PATH": str(empty), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = diagram("--format", "svg", "-o", "machine.svg", cwd=tmp_path, env=env)
        assert done.returncode == 2
        assert "graphviz" in done.stderr.lower()
        assert not (tmp_path / "machine.svg").exists()

    def test_an_unknown_format_is_a_usage_error(self, tmp_path: Path) -> None:
        """A format outside mermaid, dot, svg and png is refused by the argument parser."""
        done = diagram("--format", "pdf", cwd=tmp_path)
        assert done.returncode == 2
        assert "invalid choice" in done.stderr
