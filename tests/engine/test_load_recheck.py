"""A restored run checks every pending and waiting call again, against the policy it loads with.

A dump is data anyone can edit: nothing in it clears a call by itself. A call the policy
denies is not cleared (`may_run` says no) and gets an error result saying why; an `ask`
call the dump says is cleared, with no approval recorded, waits for a human again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentfsm as af
from agentfsm import Action, Policy, ToolCall, ToolResult

POLICY = Policy(permissions={"rm": "deny", "deploy": "ask"})


def cleared(name: str) -> dict[str, Any]:
    """A dump whose pending call `c1` calls `name`, cleared by the default policy, saved as
    POLICY's: an edited dump."""
    ctl = af.Controller(Policy())
    turn = af.ModelTurn(tool_calls=[ToolCall(id="c1", name=name, arguments={"x": 1})])
    assert ctl.on_model_output(turn).action is Action.EXECUTE_TOOLS
    data: dict[str, Any] = json.loads(json.dumps(ctl.dump()))
    data["policy"] = json.loads(json.dumps(af.Controller(POLICY).dump()))["policy"]
    return data


class TestEditedDumps:
    def test_a_denied_call_edited_into_pending_is_not_cleared(self) -> None:
        """The loaded run refuses the denied call: may_run is False, its result says why."""
        ctl = af.Controller.load(cleared("rm"), policy=POLICY)
        assert not ctl.may_run("c1")
        assert not ctl.may_run("c1", "rm", {"x": 1})
        d = ctl.on_tool_results([])
        assert d.action is Action.CONTINUE
        assert [(r.call_id, r.is_error) for r in d.results] == [("c1", True)]
        assert "permission denied" in d.results[0].content

    def test_the_refused_call_answered_by_the_host_counts_once(self) -> None:
        """A host (a guarded ToolNode) that answers the refused call with an error: one result."""
        ctl = af.Controller.load(cleared("rm"), policy=POLICY)
        d = ctl.on_tool_results([ToolResult(call_id="c1", content="not run", is_error=True)])
        assert d.results == []

    def test_an_ask_call_without_an_approval_waits_for_a_human_again(self) -> None:
        """A cleared `ask` call with no recorded approval is back to awaiting a human."""
        ctl = af.Controller.load(cleared("deploy"), policy=POLICY)
        assert ctl.state == "await_human"
        assert not ctl.may_run("c1")
        assert [c.id for c in ctl.pending_calls] == ["c1"]
        d = ctl.on_human_reply(approved=True)
        assert [c.id for c in d.tool_calls] == ["c1"]
        assert ctl.may_run("c1")

    def test_an_approved_ask_call_stays_cleared_across_a_dump(self) -> None:
        """An approval is recorded in the dump: the restored run keeps the call cleared."""
        ctl = af.Controller(POLICY)
        ctl.on_model_output(
            af.ModelTurn(tool_calls=[ToolCall(id="c1", name="deploy", arguments={})])
        )
        ctl.on_human_reply(approved=True)
        again = af.Controller.load(json.loads(json.dumps(ctl.dump())), policy=POLICY)
        assert again.state == "execute"
        assert again.may_run("c1")

    def test_a_call_waiting_beside_an_approval_is_refused_when_now_denied(self) -> None:
        """An allowed call waiting with an `ask` one, edited to a denied tool, never runs."""
        ctl = af.Controller(POLICY)
        turn = af.ModelTurn(
            tool_calls=[
                ToolCall(id="a", name="ls", arguments={}),
                ToolCall(id="b", name="deploy", arguments={}),
            ]
        )
        assert ctl.on_model_output(turn).action is Action.ASK_HUMAN
        data = json.loads(json.dumps(ctl.dump()))
        data["run"]["pending_allowed"][0]["name"] = "rm"
        data["last_output"]["tool_calls"][0]["name"] = "rm"
        loaded = af.Controller.load(data, policy=POLICY)
        d = loaded.on_human_reply(approved=True)
        assert [c.id for c in d.tool_calls] == ["b"]
        assert [r.call_id for r in d.results] == ["a"]
        assert "permission denied" in d.results[0].content

    def test_a_call_edited_to_an_undeclared_tool_is_refused(self) -> None:
        """Declared tools are checked again too: an unknown tool's call is not cleared."""
        ctl = af.Controller(Policy(), tools=["ls"])
        ctl.on_model_output(af.ModelTurn(tool_calls=[ToolCall(id="c1", name="ls", arguments={})]))
        data = json.loads(json.dumps(ctl.dump()))
        for part in (data["run"]["pending"], data["last_output"]["tool_calls"]):
            part[0]["name"] = "format_disk"
        loaded = af.Controller.load(data)
        assert not loaded.may_run("c1")
        assert "unknown tool" in loaded.on_tool_results([]).results[0].content

    @pytest.mark.parametrize("field", ["approved", "refused"])
    def test_records_of_calls_never_made_are_refused(self, field: str) -> None:
        """An approval or refusal naming a call the run never made is an impossible state."""
        data = cleared("ls")
        data["run"][field] = ["ghost"] if field == "approved" else {"ghost": "why"}
        with pytest.raises(af.exceptions.CheckpointError, match="ghost"):
            af.Controller.load(data, policy=POLICY)
