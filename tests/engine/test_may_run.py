"""The one permission check: Controller.may_run, keyed by call id."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.exceptions import InvalidInputError
from tests.strategies import Raising, RaisingMapping, hostile_values


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


_odd = hostile_values()


def _cleared() -> af.Controller:
    ctl = af.Controller(clock=lambda: 0.0)  # a stopped clock: dump() is the same twice
    ctl.on_model_output(_body(("a", "ls", '{"p": 1}')))
    return ctl


class TestMayRunArguments:
    """may_run with any value: a bool or an InvalidInputError, and the Controller untouched."""

    @settings(deadline=None)
    @given(
        call_id=st.sampled_from(["a", "zzz"]) | _odd,
        name=st.sampled_from([None, "ls", "rm"]) | _odd,
        arguments=st.sampled_from([None, {"p": 1}, {}]) | _odd,
    )
    @example(call_id="a", name=None, arguments=RaisingMapping())
    @example(call_id="a", name="ls", arguments={"p": Raising()})
    @example(call_id="a", name=None, arguments={1: "a"})
    def test_any_arguments(self, call_id: Any, name: Any, arguments: Any) -> None:
        ctl = _cleared()
        before = ctl.dump()
        try:
            answer = ctl.may_run(call_id, name, arguments)
        except InvalidInputError:  # any other error, agentfsm's or not, fails the test
            answer = False
        assert answer is True or answer is False
        if answer:  # only the cleared call, by exact id and name
            assert type(call_id) is str
            assert call_id == "a"
            assert name is None or (type(name) is str and name == "ls")
        assert ctl.dump() == before
        assert ctl.may_run("a", "ls", {"p": 1})


class TestMayRunComparesJSONKinds:
    """Arguments match as JSON data: a boolean is not a number, an integer is its float."""

    @pytest.mark.parametrize(
        ("cleared", "given", "same"),
        [
            ('{"force": 1}', {"force": True}, False),
            ('{"force": true}', {"force": 1}, False),
            ('{"force": false}', {"force": 0}, False),
            ('{"n": 0}', {"n": False}, False),
            ('{"n": [1, true]}', {"n": [True, 1]}, False),
            ('{"n": {"m": 1.0}}', {"n": {"m": True}}, False),
            ('{"n": null}', {"n": False}, False),
            ('{"n": "1"}', {"n": 1}, False),
            ('{"n": 1}', {"n": 1.0}, True),
            ('{"n": 2.5}', {"n": 2.5}, True),
            ('{"force": true, "n": [1, null]}', {"force": True, "n": (1, None)}, True),
        ],
    )
    def test_a_boolean_never_stands_for_a_number(
        self, cleared: str, given: dict[str, Any], same: bool
    ) -> None:
        """An approval of `{"force": 1}` does not let `{"force": true}` run under its id."""
        ctl = af.Controller()
        ctl.on_model_output(_body(("a", "rm", cleared)))
        assert ctl.may_run("a", "rm", given) is same
        assert ctl.may_run("a")  # the call itself stays cleared either way
