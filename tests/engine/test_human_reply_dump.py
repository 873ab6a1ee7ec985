"""A run dumped right after a human's reply loads again, whatever the reply led to."""

from __future__ import annotations

import pytest

import agentfsm as af
from agentfsm.testing import call, turn

A = af.Action


def replied_and_loaded(
    calls: list[af.ToolCall], approved: bool, message: str | None, action: af.Action
) -> tuple[af.Controller, af.Controller]:
    """A controller that asked about `rm` among `calls` and got this reply (deciding
    `action`), and the controller loaded from its dump, in the same state."""
    ctl = af.Controller(af.Policy(permissions={"rm": "ask"}))
    assert ctl.on_model_output(turn(calls=calls)).action is A.ASK_HUMAN
    assert ctl.on_human_reply(approved, message).action is action
    loaded = af.Controller.load(ctl.dump())
    assert (loaded.state, loaded.pending_calls) == (ctl.state, ctl.pending_calls)
    return ctl, loaded


@pytest.mark.parametrize(
    ("approved", "message", "action"),
    [(True, None, A.EXECUTE_TOOLS), (False, None, A.STOP), (False, "no", A.CONTINUE)],
)
class TestDumpAfterHumanReply:
    """Nothing is left awaiting approval once the human has answered."""

    def test_dump_loads_and_decides_the_same(
        self, approved: bool, message: str | None, action: af.Action
    ) -> None:
        """Approve, decline, or decline with a message: the dump loads, in the same state."""
        ctl, loaded = replied_and_loaded([call("rm", {}, id="c1")], approved, message, action)
        if action is A.EXECUTE_TOOLS:
            results = [af.ToolResult(call_id="c1", content="removed")]
            assert loaded.on_tool_results(results) == ctl.on_tool_results(results)

    def test_a_sibling_of_an_ask_call_is_not_left_waiting(
        self, approved: bool, message: str | None, action: af.Action
    ) -> None:
        """With an allowed call beside the asked one, every reply leaves a dump that loads."""
        calls = [call("rm", {}, id="c1"), call("ls", {}, id="c2")]
        replied_and_loaded(calls, approved, message, action)


class TestApprovalAtTheLastTurn:
    def test_approved_calls_the_run_ends_without_get_their_results(self) -> None:
        """An approval at max_turns ends the run before the calls run; the STOP answers each
        approved call with an error result, so the host's conversation stays valid."""
        ctl = af.Controller(af.Policy(max_turns=1, permissions={"research": "ask"}))
        asked = ctl.on_model_output(turn(calls=[call("research", {"q": "x"}, id="c1")]))
        assert asked.action is af.Action.ASK_HUMAN
        decision = ctl.on_human_reply(approved=True)
        assert decision.action is af.Action.STOP
        assert [(r.call_id, r.is_error) for r in decision.results] == [("c1", True)]
        assert decision.results[0].content.startswith("not executed: ")
        assert not ctl.may_run("c1")
