"""Traces of real runs for the report tests, written by agentfsm's own TraceWriter."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm import Action, Controller, Policy, ToolResult
from agentfsm._replay.trace import TraceWriter
from agentfsm.testing import call, turn

INJECTED = (
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    "</pre></details></li><b>bold</b>"
)
"""Tool output that tries to run script in the page and break out of its block."""


def write_doom_loop(path: Path, *, repeats: int = 3) -> Path:
    """A run that searches, reads HTML-laden output, then repeats one call until stopped."""
    with TraceWriter(path) as writer:
        ctl = Controller(Policy(on_repeat="stop"), observers=[writer])
        d = ctl.on_model_output(turn("", [call("search", {"q": "<weather>"}, id="c1")]))
        assert d.action is Action.EXECUTE_TOOLS
        ctl.on_tool_results([ToolResult(call_id="c1", content=INJECTED)])
        for i in range(repeats):
            d = ctl.on_model_output(turn("", [call("fetch", {"url": "u"}, id=f"f{i}")]))
            if d.action is not Action.EXECUTE_TOOLS:
                break
            ctl.on_tool_results([ToolResult(call_id=f"f{i}", content="same page")])
        assert d.action is Action.STOP
    return path


def write_final(path: Path, turns: int = 1) -> Path:
    """A run of `turns` tool rounds then a final answer."""
    with TraceWriter(path) as writer:
        ctl = Controller(Policy(max_turns=turns + 1), observers=[writer])
        for i in range(turns):
            ctl.on_model_output(turn("", [call("step", {"i": i}, id=f"s{i}")]))
            ctl.on_tool_results([ToolResult(call_id=f"s{i}", content=f"done {i}")])
        assert ctl.on_model_output(turn("All done.")).action is Action.FINAL
    return path


@pytest.fixture
def doom_trace(tmp_path: Path) -> Path:
    """An agentfsm trace of a run stopped for a doom loop, with HTML in a tool result."""
    return write_doom_loop(tmp_path / "doom.jsonl")


@pytest.fixture
def final_trace(tmp_path: Path) -> Path:
    """An agentfsm trace of a run that completed after one tool round."""
    return write_final(tmp_path / "final.jsonl")
