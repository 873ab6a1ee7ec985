"""A regression guard on the cost of a step that load cannot move: calls counted, not timed.

The instruction counts are in bench/ (`bench/count_step.py`, cachegrind). This guard counts
what the interpreter does in a step, which is as deterministic: every Python and builtin
function call (`sys.setprofile`), and pydantic model copies, the cost issue 36 removed
from the step. It fails on a large regression, not on noise: the bounds sit well above
today's counts, which the failure message prints.
"""

from __future__ import annotations

import sys
from collections import Counter
from types import FrameType
from typing import Any

import agentfsm as af

STEPS = 20
"""Steps counted, after two to warm the run up."""

CALLS_PER_STEP = 320
"""Function calls of one step (model output, results, both decisions): 239 when it was written."""

COPIES_PER_STEP = 2
"""Pydantic copies of one step: the host's call (the run keeps arguments no one else holds)
and the decision's call (the host may edit it). 8 before issue 36."""


def _script(n: int) -> list[af.ModelTurn]:
    return [
        af.ModelTurn(
            tool_calls=[af.ToolCall(id=f"call_{k}", name="echo", arguments={"i": k, "tag": ["x"]})],
            finish_reason=af.FinishReason.TOOL_CALLS,
        )
        for k in range(n)
    ]


def _counted(declared: Any) -> tuple[Counter[str], int]:
    """Calls by function name over `STEPS` steps of the bench's host loop, and all calls."""
    ctl = af.Controller(af.Policy(max_turns=STEPS + 10), tools=[declared])
    script = _script(STEPS + 2)

    def step(turn: af.ModelTurn) -> None:
        d = ctl.on_model_output(turn)
        assert d.action is af.Action.EXECUTE_TOOLS
        results = [af.ToolResult(call_id=c.id, content=c.arguments) for c in d.tool_calls]
        assert ctl.on_tool_results(results).action is af.Action.CONTINUE

    for turn in script[:2]:
        step(turn)
    names: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            names[frame.f_code.co_name] += 1
        elif event == "c_call":
            names[getattr(arg, "__name__", "?")] += 1

    sys.setprofile(profile)
    try:
        for turn in script[2:]:
            step(turn)
    finally:
        sys.setprofile(None)
    names -= Counter({"step": STEPS, "profile": 0})
    return names, sum(names.values())


class TestStepCost:
    def test_a_plain_step_makes_two_pydantic_copies_and_few_calls(self) -> None:
        names, total = _counted("echo")
        per_step = total / STEPS
        top = ", ".join(f"{name} {count / STEPS:g}" for name, count in names.most_common(12))
        assert names["model_copy"] / STEPS <= COPIES_PER_STEP, top
        assert per_step <= CALLS_PER_STEP, f"{per_step:g} calls a step; most: {top}"

    def test_a_declared_tool_adds_its_schema_check_only(self) -> None:
        spec = {
            "name": "echo",
            "parameters": {
                "type": "object",
                "properties": {"i": {"type": "integer", "minimum": 0}, "tag": {"type": "array"}},
                "required": ["i"],
            },
        }
        plain, plain_total = _counted("echo")
        declared, declared_total = _counted(spec)
        assert declared["model_copy"] == plain["model_copy"]
        assert declared_total / STEPS <= CALLS_PER_STEP * 1.2, declared.most_common(12)
        assert declared_total > plain_total  # the schema check is counted, so the guard sees it
