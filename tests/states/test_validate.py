"""validate: a handoff call is checked like any call (schema, rules, table, hook, ask)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentfsm as af
from agentfsm.exceptions import PolicyError
from agentfsm.testing import call, turn
from tests.strategies import one_argument_tool

A = af.Action


def handing_off(**policy: Any) -> tuple[af.Controller, af.Decision]:
    """A controller whose model hands the task to `research`, and its decision."""
    ctl = af.Controller(af.Policy(handoffs=frozenset({"research"}), **policy))
    output = turn(calls=[call("research", {"task": "rm -rf /"}, id="h")])
    return ctl, ctl.on_model_output(output)


def deny_hook(c: af.ToolCall) -> str:
    return "deny" if c.name == "research" else "allow"


DENIALS: dict[str, dict[str, Any]] = {
    "rule": {"permission_rules": ["deny research(task=rm *)"]},
    "table": {"permissions": {"research": "deny"}},
    "hook": {"permission": deny_hook},
    "default": {"permissions": {"*": "deny"}},
}


class TestHandoffPermissions:
    @pytest.mark.parametrize("source", sorted(DENIALS))
    def test_a_denied_handoff_is_refused(self, source: str) -> None:
        """A deny from any source refuses the handoff with an error result; nothing hands off."""
        ctl, d = handing_off(**DENIALS[source])
        assert d.action is A.CONTINUE
        assert [(r.call_id, r.is_error) for r in d.results] == [("h", True)]
        assert "permission denied" in str(d.results[0].content)
        assert not ctl.may_run("h")

    @pytest.mark.parametrize("source", sorted(DENIALS))
    def test_a_denied_handoff_stops_when_denies_stop(self, source: str) -> None:
        """With `on_deny="stop"` a denied handoff ends the run at P6, like any denied call."""
        ctl, d = handing_off(on_deny="stop", **DENIALS[source])
        assert (d.action, d.priority, d.exit_reason) == (
            A.STOP,
            af.Priority.P6,
            af.ExitReason.PERMISSION_DENIED,
        )
        assert not ctl.may_run("h")

    def test_an_ask_handoff_waits_for_a_human_then_hands_off(self) -> None:
        """An `ask` handoff is ASK_HUMAN; approved, it is HANDOFF and cleared to run."""
        ctl, d = handing_off(permissions={"research": "ask"})
        assert d.action is A.ASK_HUMAN
        assert [c.id for c in d.tool_calls] == ["h"]
        assert not ctl.may_run("h")
        approved = ctl.on_human_reply(approved=True)
        assert approved.action is A.HANDOFF
        assert [c.id for c in approved.tool_calls] == ["h"]
        assert ctl.may_run("h", "research", {"task": "rm -rf /"})
        after = ctl.on_tool_results([af.ToolResult(call_id="h", content="done")])
        assert after.action is A.CONTINUE

    def test_a_declined_handoff_is_not_run(self) -> None:
        """Declined, the `ask` handoff gets an error result and never becomes HANDOFF."""
        ctl, _ = handing_off(permission_rules=["ask research"])
        d = ctl.on_human_reply(approved=False, message="no")
        assert d.action is A.CONTINUE  # the model reads the human's "no"
        assert [(r.call_id, r.is_error) for r in d.results] == [("h", True)]
        assert not ctl.may_run("h")

    def test_an_ask_handoff_survives_a_dump(self) -> None:
        """A run saved while the handoff awaits approval hands off after a restore."""
        ctl, _ = handing_off(permissions={"research": "ask"})
        loaded = af.Controller.load(json.loads(json.dumps(ctl.dump())))
        assert loaded.on_human_reply(approved=True).action is A.HANDOFF
        assert loaded.may_run("h")

    def test_an_allowed_handoff_still_hands_off(self) -> None:
        """With nothing against it the handoff is HANDOFF as before."""
        ctl, d = handing_off(permission_rules=["deny research(task=ls*)"])
        assert d.action is A.HANDOFF
        assert ctl.may_run("h")


class TestHandoffSchema:
    def test_an_undeclared_handoff_is_refused(self) -> None:
        """With declared tools, a handoff naming a tool not declared is refused when given."""
        with pytest.raises(PolicyError, match="handoffs names 'research', which is not declared"):
            af.Controller(af.Policy(handoffs=frozenset({"research"})), tools=["search"])

    def test_a_handoff_with_bad_arguments_is_refused(self) -> None:
        """A handoff whose arguments do not fit its schema is refused, never handed off."""
        spec = one_argument_tool("research", "hand off", "task")
        ctl = af.Controller(af.Policy(handoffs=frozenset({"research"})), tools=[spec])
        d = ctl.on_model_output(turn(calls=[call("research", {"task": 3}, id="h")]))
        assert d.action is A.CONTINUE
        assert "invalid arguments for 'research'" in str(d.results[0].content)
        assert not ctl.may_run("h")
