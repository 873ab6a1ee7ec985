"""The one permission check: Controller.may_run, keyed by call id."""

from __future__ import annotations

import pytest

import agentfsm as af
from agentfsm.exceptions import InvalidInputError


def _body(*calls: tuple[str, str, str]) -> dict[str, object]:
    return {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, n, a in calls
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }


class TestMayRun:
    def test_only_cleared_calls_may_run(self) -> None:
        """A cleared call may run; a denied one, an unknown id and a wrong name may not."""
        ctl = af.Controller(af.Policy(permissions={"rm": "deny"}))
        ctl.on_model_output(_body(("a", "ls", '{"p": 1}'), ("b", "rm", "{}")))
        assert ctl.may_run("a")
        assert ctl.may_run("a", "ls", {"p": 1})
        assert not ctl.may_run("a", "ls", {"p": 2})
        assert not ctl.may_run("a", "rm")
        assert not ctl.may_run("b")
        assert not ctl.may_run("zzz")

    def test_answered_call_may_not_run_again(self) -> None:
        """Once its result is given, a call id is no longer cleared."""
        ctl = af.Controller()
        ctl.on_model_output(_body(("a", "ls", "{}")))
        ctl.on_tool_results([af.ToolResult(call_id="a", content="ok")])
        assert not ctl.may_run("a")

    def test_call_awaiting_approval_may_not_run_until_approved(self) -> None:
        """An `ask` call is not cleared before the human approves it, and is after."""
        ctl = af.Controller(af.Policy(permissions={"rm": "ask"}))
        ctl.on_model_output(_body(("a", "rm", "{}")))
        assert not ctl.may_run("a")
        ctl.on_human_reply(approved=True)
        assert ctl.may_run("a")

    def test_a_bad_call_id_raises(self) -> None:
        """A call id that is not a str raises agentfsm's error."""
        with pytest.raises(InvalidInputError, match="call_id"):
            af.Controller().may_run(3)  # type: ignore[arg-type]
