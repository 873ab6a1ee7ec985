"""Repeated calls and denied permissions are P6, and refused calls count as repeats.

Seed 003 puts repetition, exhausted budgets and denied permissions at P6 whatever the
answer (stop, degrade, ask): a refused repeat or a denial that goes back to the model is
decided by the guard that refused, at its layer and P6, not by the P5 feedback of a tool
that failed. A model that makes the same refused call again and again is repeating
itself, and ends as DOOM_LOOP like any other.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import Action, ExitReason, Policy, Priority, ToolCall, ToolResult


def output(name: str, number: int, **arguments: Any) -> af.ModelTurn:
    return af.ModelTurn(
        tool_calls=[ToolCall(id=f"c{number}", name=name, arguments=arguments)],
        finish_reason=af.FinishReason.TOOL_CALLS,
    )


class TestPriorities:
    def test_a_refused_repeat_is_decided_by_the_loop_guard_at_p6(self) -> None:
        """The third identical call, refused with feedback, names RepeatedCall, layer 4, P6."""
        ctl = af.Controller(Policy())
        for number in range(3):
            d = ctl.on_model_output(output("search", number, q="x"))
            if d.action is Action.EXECUTE_TOOLS:
                d = ctl.on_tool_results([ToolResult(call_id=f"c{number}", content="same")])
        assert d.action is Action.CONTINUE
        assert (d.priority, d.layer) == (Priority.P6, 4)
        assert d.guard == d.fired == "RepeatedCall(3, feedback=True)"
        assert [r.call_id for r in d.results] == ["c2"]
        assert "in a row" in d.results[0].content

    def test_a_denial_fed_back_is_decided_by_the_permission_guard_at_p6(self) -> None:
        """A denied call sent back to the model names PermissionDenied, layer 5, P6."""
        ctl = af.Controller(Policy(permissions={"rm": "deny"}))
        d = ctl.on_model_output(output("rm", 0, path="/"))
        assert d.action is Action.CONTINUE
        assert (d.priority, d.layer) == (Priority.P6, 5)
        assert d.guard == "PermissionDenied(feedback=True)"
        assert "permission denied" in d.results[0].content

    def test_a_denial_beside_a_call_that_runs_lets_it_run(self) -> None:
        """An allowed call beside a denied one still runs (P1); the denial is its error result."""
        ctl = af.Controller(Policy(permissions={"rm": "deny"}))
        turn = af.ModelTurn(
            tool_calls=[
                ToolCall(id="a", name="search", arguments={}),
                ToolCall(id="b", name="rm", arguments={}),
            ]
        )
        d = ctl.on_model_output(turn)
        assert d.action is Action.EXECUTE_TOOLS
        assert [c.id for c in d.tool_calls] == ["a"]
        assert [r.call_id for r in d.results] == ["b"]

    def test_an_invalid_call_alone_is_still_a_p5_tool_failure(self) -> None:
        """A call that fails its schema is a repairable tool failure (P5), not a refusal."""
        ctl = af.Controller(Policy(), tools=["search"])
        d = ctl.on_model_output(output("nope", 0))
        assert (d.action, d.priority, d.guard) == (Action.CONTINUE, Priority.P5, "ToolFailed()")


class TestRefusedCallsRepeat:
    def test_repeating_a_denied_call_ends_as_doom_loop(self) -> None:
        """The same denied call made again and again ends DOOM_LOOP, not TOOL_ERRORS."""
        ctl = af.Controller(Policy(permissions={"rm": "deny"}))
        decisions = []
        for number in range(10):
            d = ctl.on_model_output(output("rm", number, path="/"))
            decisions.append(d)
            if ctl.done:
                break
        assert d.exit_reason is ExitReason.DOOM_LOOP
        assert d.guard == "RepeatedCall(5)"
        assert decisions[2].guard == "RepeatedCall(3, feedback=True)"

    def test_a_user_message_resets_the_count_of_a_denied_call(self) -> None:
        """A user message between denied repeats starts the count again."""
        ctl = af.Controller(Policy(permissions={"rm": "deny"}))
        ctl.on_model_output(output("rm", 0))
        ctl.on_model_output(output("rm", 1))
        ctl.on_user_message("try another way")
        d = ctl.on_model_output(output("rm", 2))
        assert d.guard == "PermissionDenied(feedback=True)"


refused_calls = st.sampled_from(["denied", "undeclared", "invalid"])


def _refused(kind: str, number: int) -> af.ModelTurn:
    if kind == "denied":
        return output("rm", number, path="/")
    if kind == "undeclared":
        return output("launch", number)
    return output("search", number, q=5)  # q must be a string


class TestRefusedRepeatsProperty:
    @given(
        kind=refused_calls,
        threshold=st.integers(2, 5),
        on_repeat=st.sampled_from(["feedback", "ask", "stop"]),
    )
    def test_repeating_any_refused_call_trips_the_loop_guard(
        self, kind: str, threshold: int, on_repeat: str
    ) -> None:
        """Whatever refused the call, its repeats reach the loop guard at the threshold."""
        policy = Policy(
            permissions={"rm": "deny"},
            repeat_threshold=threshold,
            on_repeat=on_repeat,
            max_consecutive_tool_errors=50,
            no_progress_threshold=None,
        )
        tools = [
            "rm",
            {
                "name": "search",
                "description": "",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        ]
        ctl = af.Controller(policy, tools=tools)
        wanted = threshold + (2 if on_repeat == "feedback" else 0)
        for number in range(1, wanted + 1):
            d = ctl.on_model_output(_refused(kind, number))
            if number < threshold:
                assert not d.guard.startswith("RepeatedCall"), d
        assert d.guard.startswith("RepeatedCall")
        assert (d.priority, d.layer) == (Priority.P6, 4)
        if on_repeat == "ask":
            assert d.action is Action.ASK_HUMAN
        else:
            assert (d.action, d.exit_reason) == (Action.STOP, ExitReason.DOOM_LOOP)
