"""Files and policies a program reads: whatever they hold, only agentfsm's own errors come out.

A saved run (`Controller.load`) is a file: edited, truncated or written by a
broken program, it must be refused with a CheckpointError naming the run, never
a TypeError or KeyError. A policy that validates must build a Controller that
routes: `Policy(final_tools="")` validated, then raised ValueError at the
first Controller.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.exceptions import AgentFSMError, CheckpointError, PolicyError
from agentfsm.testing import call, turn
from tests.strategies import odd_values

_odd = odd_values()


def _paused_run() -> dict[str, Any]:
    """A dump with everything in it: tools, a permission table, calls awaiting a human."""
    ctl = af.Controller(af.Policy(permissions={"bash": "ask"}), tools=["bash", "read"])
    ctl.on_model_output(
        turn(calls=[call("read", {"p": 1}, id="r1"), call("bash", {"c": 1}, id="b1")])
    )
    return ctl.dump()


_DUMP = _paused_run()


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, as a path of keys and indexes."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*path, index))
    return found


_PLACES = _places(_DUMP)[1:]


def _outcome(work: Callable[[], Any]) -> Any:
    """What `work` returns, or the AgentFSMError it raised (anything else escapes)."""
    try:
        return work()
    except AgentFSMError as exc:
        return exc


def _replaced(data: dict[str, Any], place: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of `data` with the value at `place` replaced."""
    copied = copy.deepcopy(data)
    holder: Any = copied
    for key in place[:-1]:
        holder = holder[key]
    holder[place[-1]] = value
    return copied


def _items(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return list(value) if isinstance(value, list | tuple | set | frozenset) else []


def _next_input(ctl: af.Controller) -> None:
    """Give a loaded controller the input its state waits for."""
    if ctl.state == af.State.AWAIT_HUMAN:
        ctl.on_human_reply(True)
    elif ctl.state == af.State.EXECUTE:
        ctl.on_tool_results([af.ToolResult(call_id=c.id, content="ok") for c in ctl.pending_calls])
    elif ctl.state == af.State.AWAIT_MODEL:
        ctl.on_model_output(turn(text="done"))


class TestDamagedDumps:
    @settings(deadline=None)
    @given(place=st.sampled_from(_PLACES), value=_odd)
    def test_one_value_replaced_anywhere(self, place: tuple[Any, ...], value: Any) -> None:
        """Load refuses with CheckpointError or restores a run whose next input works."""
        data = _replaced(_DUMP, place, value)
        outcome = _outcome(lambda: af.Controller.load(data))
        if isinstance(outcome, AgentFSMError):
            assert isinstance(outcome, CheckpointError), outcome
            return
        _outcome(lambda: _next_input(outcome))

    def test_the_found_cases_name_what_is_wrong(self) -> None:
        """Each of these raised TypeError or KeyError out of Controller.load."""
        for place, value, words in [
            (("policy", "code"), 5, "policy 'code' is not a list of names"),
            (("policy", "code"), [1], "policy 'code' is not a list of names"),
            (("tools", 0), "x", "tools[0] is not a saved tool"),
            (("tools", 0), {}, "tools[0] is not a saved tool"),
            (("policy", "data", "final_tools"), "", "a tool name must not be empty"),
        ]:
            data = _replaced(_DUMP, place, value)
            with pytest.raises(CheckpointError) as caught:
                af.Controller.load(data)
            assert words in caught.value.message, (place, caught.value.message)


class TestAPolicyThatValidatesBuilds:
    @settings(deadline=None)
    @given(
        field=st.sampled_from(sorted(af.Policy.model_fields)),
        value=_odd | st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=3),
    )
    def test_any_one_field(self, field: str, value: Any) -> None:
        """Policy(**{field: value}) raises PolicyError, or builds a Controller that routes."""
        # A callable is a guard, hook or verifier: what it raises when called is the host's own.
        assume(not callable(value) and not any(callable(v) for v in _items(value)))
        policy = _outcome(lambda: af.Policy(**{field: value}))
        if isinstance(policy, AgentFSMError):
            assert isinstance(policy, PolicyError), policy
            return
        ctl = _outcome(lambda: af.Controller(policy, tools=["bash"]))
        if isinstance(ctl, AgentFSMError):  # e.g. an ask_floor naming no declared tool
            assert isinstance(ctl, PolicyError), ctl
            return
        _outcome(lambda: ctl.on_model_output(turn(calls=[call("bash", {"c": 1}, id="c1")])))
        _outcome(lambda: _next_input(ctl))
