"""Save and restore: `ctl.dump()` and `Controller.load(data)` keep every decision the same."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._engine.persistence import STATE_VERSION, RunState
from agentfsm._model.run_state import Run
from agentfsm.exceptions import CheckpointError
from agentfsm.testing import EventCapture, call, turn
from tests.strategies import model_turns, tool_calls

A, X = af.Action, af.ExitReason
DECLARED: list[Any] = [
    "search",
    {
        "name": "get_weather",
        "description": "Weather at a place.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    "write_file",
    "handoff_to_billing",
]


def lookup(q: str) -> str:
    """Look something up."""
    return q


def ask_for_writes(tool: af.ToolCall) -> af.core.policy.Permission:
    return "ask" if tool.name == "write_file" else "allow"


def roundtrip(ctl: af.Controller, **given: Any) -> af.Controller:
    """Dump, through JSON text, and load: what a process restart does."""
    return af.Controller.load(json.loads(json.dumps(ctl.dump())), **given)


def at_human(**policy: Any) -> af.Controller:
    """A run paused for a human's approval of one write_file call."""
    ctl = af.Controller(
        af.Policy(permissions={"write_file": "ask"}, **policy), tools=DECLARED, run_id="r-h"
    )
    d = ctl.on_model_output(turn(calls=[call("write_file", {"path": "a"}, id="w1")]))
    assert d.action is A.ASK_HUMAN
    return ctl


class TestFormat:
    def test_every_run_field_has_a_field_in_the_format(self) -> None:
        """A field added to Run without one in RunState fails here, before a dump loses it."""
        assert sorted(RunState.model_fields) == sorted(Run.__slots__)

    def test_a_dump_is_json_data(self) -> None:
        """`dump()` returns data that json.dumps writes and json.loads gives back equal."""
        ctl = at_human()
        data = ctl.dump()
        assert json.loads(json.dumps(data, allow_nan=False)) == data
        assert data["version"] == STATE_VERSION
        assert data["run_id"] == "r-h"

    def test_the_dump_holds_the_policy_tools_and_pending_approval(self) -> None:
        """Policy, declared tools (name and schema) and the calls awaiting approval are saved."""
        data = at_human(max_turns=7).dump()
        assert data["policy"]["data"]["max_turns"] == 7
        assert [t["name"] for t in data["tools"]] == [
            "search",
            "get_weather",
            "write_file",
            "handoff_to_billing",
        ]
        assert data["tools"][1]["parameters"]["required"] == ["city"]
        assert [c["id"] for c in data["run"]["pending_approval"]] == ["w1"]


class TestRestore:
    def test_a_run_paused_for_a_human_resumes_after_loading(self) -> None:
        """A run saved at ASK_HUMAN takes the human's reply after loading and runs the call."""
        ctl = roundtrip(at_human())
        assert (ctl.state, ctl.run_id, ctl.turn) == ("await_human", "r-h", 1)
        assert [c.id for c in ctl.pending_calls] == ["w1"]
        d = ctl.on_human_reply(approved=True)
        assert d.action is A.EXECUTE_TOOLS
        assert [c.id for c in d.tool_calls] == ["w1"]

    def test_pending_calls_take_their_results_after_loading(self) -> None:
        """Calls pending at the dump accept their results in the loaded run, others are refused."""
        ctl = af.Controller(tools=DECLARED)
        ctl.on_model_output(turn(calls=[call("search", {"q": "x"}, id="s1")]))
        loaded = roundtrip(ctl)
        with pytest.raises(af.exceptions.UnknownCallIdError):
            loaded.on_tool_results([af.ToolResult(call_id="nope", content="?")])
        d = loaded.on_tool_results([af.ToolResult(call_id="s1", content="found")])
        assert d.action is A.CONTINUE

    def test_the_repeat_streak_survives_a_restore(self) -> None:
        """Two identical calls before the dump and one after trip the doom-loop guard."""
        ctl = af.Controller(af.Policy(repeat_threshold=3, on_repeat="stop"), tools=DECLARED)
        for i in range(2):
            ctl.on_model_output(turn(calls=[call("search", {"q": "x"}, id=f"c{i}")]))
            # The same result each time: changing results would be polling, not a loop.
            ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content="r")])
        d = roundtrip(ctl).on_model_output(turn(calls=[call("search", {"q": "x"}, id="c2")]))
        assert (d.action, d.exit_reason) == (A.STOP, X.DOOM_LOOP)

    def test_time_already_used_counts_against_the_deadline(self) -> None:
        """A loaded run keeps the wall time it had used: the deadline is not reset."""
        ctl = af.Controller(af.Policy(max_seconds=50))
        data = ctl.dump()
        data["run"]["started"] = 60.0  # the run had used a minute before it was saved
        d = af.Controller.load(data).on_model_output(turn(calls=[call("search", id="c1")]))
        assert (d.action, d.exit_reason) == (A.STOP, X.DEADLINE)

    def test_budgets_used_are_kept(self) -> None:
        """Tokens and cost used before the dump still count against their budgets."""
        ctl = af.Controller(af.Policy(max_tokens=100))
        ctl.on_model_output(turn(calls=[call("search", id="c1")], usage=(60, 10)))
        ctl.on_tool_results([af.ToolResult(call_id="c1", content="r")])
        loaded = roundtrip(ctl)
        d = loaded.on_model_output(turn(calls=[call("search", id="c2")], usage=(30, 10)))
        assert (d.action, d.exit_reason) == (A.STOP, X.TOKEN_BUDGET)

    def test_an_ended_run_stays_ended(self) -> None:
        """A dump of a finished run loads finished, with its exit reason."""
        ctl = af.Controller()
        ctl.on_model_output(turn("done"))
        loaded = roundtrip(ctl)
        assert (loaded.done, loaded.exit_reason) == (True, X.COMPLETED)
        assert loaded.last_output == ctl.last_output

    def test_observers_are_attached_again_on_load(self) -> None:
        """Observers given to load receive the loaded run's later events, with its run id."""
        capture = EventCapture()
        loaded = af.Controller.load(at_human().dump(), observers=[capture])
        loaded.on_human_reply(approved=False)
        assert capture.events
        assert {e["run_id"] for e in capture.events} == {"r-h"}
        assert capture.events[-1]["event"] == "decision"

    def test_the_transitions_engine_is_kept(self) -> None:
        """A run routed by the transitions engine is loaded with it, and decides the same."""
        ctl = af.Controller(engine="transitions")
        ctl.on_model_output(turn(calls=[call("search", id="c1")]))
        data = ctl.dump()
        assert data["engine"] == "transitions"
        d = af.Controller.load(data).on_tool_results([af.ToolResult(call_id="c1", content="r")])
        assert d.action is A.CONTINUE


class TestCode:
    def test_a_policy_with_a_hook_needs_the_live_policy(self) -> None:
        """A saved policy with a permission hook cannot be rebuilt from data: load says so."""
        ctl = af.Controller(af.Policy(permission=ask_for_writes), run_id="r-hook")
        with pytest.raises(CheckpointError, match=r"r-hook.*permission.*policy="):
            af.Controller.load(ctl.dump())

    def test_the_live_policy_restores_a_hook(self) -> None:
        """Passing the live policy restores the hook, and the run asks as before."""
        policy = af.Policy(permission=ask_for_writes)
        ctl = af.Controller(policy)
        loaded = af.Controller.load(ctl.dump(), policy=policy)
        d = loaded.on_model_output(turn(calls=[call("write_file", id="w")]))
        assert d.action is A.ASK_HUMAN

    def test_a_different_policy_is_refused_naming_the_field(self) -> None:
        """A policy given to load that differs from the saved one raises, naming the field."""
        data = af.Controller(af.Policy(max_turns=5), run_id="r-p").dump()
        with pytest.raises(CheckpointError, match=r"r-p.*max_turns"):
            af.Controller.load(data, policy=af.Policy(max_turns=6))

    def test_a_function_guard_needs_the_live_policy(self) -> None:
        """A guard written as a Python function is code: the dump names it and load asks for it."""
        policy = af.Policy(guards=[lambda snap: snap.turn > 3])
        data = af.Controller(policy, run_id="r-g").dump()
        assert data["policy"]["code"] == ["guards[0]"]
        with pytest.raises(CheckpointError, match=r"guards\[0\]"):
            af.Controller.load(data)
        assert af.Controller.load(data, policy=policy).policy is policy

    def test_built_in_guards_are_rebuilt_from_their_reprs(self) -> None:
        """Guards that read back as code need nothing given: the loaded policy is equal."""
        policy = af.Policy(guards=[af.guards.TokenBudget(500) | af.guards.MaxTurns(4)])
        loaded = roundtrip(af.Controller(policy))
        assert loaded.policy == policy

    def test_callable_tools_must_be_given_again(self) -> None:
        """A callable tool is saved by name; load without it raises naming the tool."""
        data = af.Controller(tools=[lookup], run_id="r-t").dump()
        assert data["tools"][0]["callable"] is True
        with pytest.raises(CheckpointError, match=r"r-t.*lookup.*tools="):
            af.Controller.load(data)
        loaded = af.Controller.load(data, tools=[lookup])
        assert loaded.tools is not None
        assert loaded.tools["lookup"].fn is lookup

    def test_different_tools_are_refused_naming_them(self) -> None:
        """Tools given to load that differ from the saved ones raise, naming the tool."""
        data = af.Controller(tools=["a", "b"], run_id="r-d").dump()
        with pytest.raises(CheckpointError, match=r"r-d.*'c'"):
            af.Controller.load(data, tools=["a", "c"])


def edited(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of `data` with one field set, as a hand edit would."""
    out = copy.deepcopy(data)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


class TestBadInput:
    @pytest.mark.parametrize(
        ("path", "value", "message"),
        [
            (("version",), STATE_VERSION + 1, r"state-format version 2"),
            (("format",), "other", r"format 'other'"),
            (("run", "state"), "flying", r"'state' is invalid"),
            (("run", "state"), "parse", r"'parse' is never held"),
            (("run", "turn"), 99, r"turn 99 is above max_turns 50"),
            (("run", "turn"), -1, r"'turn' is invalid.*non-negative"),
            (("run", "tokens"), "many", r"'tokens' is invalid"),
            (("run", "exit_reason"), "completed", r"exit_reason .* does not match"),
            (("run", "last_results"), [[{"x": 1}, []]], r"'last_results' is invalid"),
            (("run", "pending_approval"), [{"id": "ghost", "name": "write_file"}], r"ghost"),
            (("run", "pending_rejected"), [{"call_id": "ghost", "content": "x"}], r"ghost"),
            (("run",), None, r"no 'run' object"),
            (("policy",), {"data": {"max_turns": 0}, "code": []}, r"max_turns"),
            (("tools",), "everything", r"'tools' is not a list"),
        ],
    )
    def test_an_edited_dump_is_refused_naming_the_run_and_the_field(
        self, path: tuple[str, ...], value: Any, message: str
    ) -> None:
        """A dump edited into another version or an impossible state raises CheckpointError."""
        data = at_human().dump()
        bad = edited(data, path, value)
        before = copy.deepcopy(bad)
        with pytest.raises(CheckpointError, match=r"r-h") as info:
            af.Controller.load(bad)
        assert info.match(message)
        assert bad == before, "load changed the data it was given"

    def test_a_result_for_a_call_never_issued_is_refused(self) -> None:
        """Pending calls that the last model output never issued make an impossible state."""
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("search", id="s1")]))
        data = ctl.dump()
        data["run"]["pending"].append({"id": "forged", "name": "search", "arguments": {}})
        data["run"]["pending_sigs"]["forged"] = {"t": ["search", {"t": []}]}
        with pytest.raises(CheckpointError, match=r"\['forged'\] answer no call"):
            af.Controller.load(data)

    def test_a_counter_above_the_tool_call_limit_is_refused(self) -> None:
        """tool_calls_used above max_tool_calls is a state no run reaches."""
        data = af.Controller(af.Policy(max_tool_calls=3), run_id="r-c").dump()
        data["run"]["tool_calls_used"] = 4
        with pytest.raises(CheckpointError, match=r"r-c.*tool_calls_used 4 is above"):
            af.Controller.load(data)

    @pytest.mark.parametrize("data", [None, [], "{}", {}, {"run_id": ""}])
    def test_something_else_than_a_dump_is_refused(self, data: Any) -> None:
        """A missing or corrupted checkpoint raises CheckpointError saying what it is not."""
        with pytest.raises(CheckpointError, match=r"Controller\.dump"):
            af.Controller.load(data)

    def test_a_missing_or_extra_field_is_refused_by_name(self) -> None:
        """A dump from a Run with other fields names the fields that differ."""
        data = at_human().dump()
        del data["run"]["streak"]
        data["run"]["mood"] = "happy"
        with pytest.raises(CheckpointError, match=r"\['mood', 'streak'\]"):
            af.Controller.load(data)

    def test_content_that_is_not_json_cannot_be_saved(self) -> None:
        """A tool result whose content JSON cannot carry makes dump raise, naming it."""
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("search", id="c1")]))
        ctl.on_tool_results([af.ToolResult(call_id="c1", content={1, 2})])
        with pytest.raises(CheckpointError, match=r"content.*not JSON"):
            ctl.dump()


class TestPickle:
    def test_a_controller_pickles_through_its_dump(self) -> None:
        """Pickling a Controller restores the run, its live hook and callable tools included."""
        ctl = af.Controller(af.Policy(permission=ask_for_writes), tools=[lookup, "write_file"])
        ctl.on_model_output(turn(calls=[call("write_file", id="w")]))
        copy_ = pickle.loads(pickle.dumps(ctl))
        assert (copy_.state, copy_.pending_calls) == (ctl.state, ctl.pending_calls)
        assert copy_.on_human_reply(True) == ctl.on_human_reply(True)

    def test_a_controller_with_a_trace_writer_refuses_to_pickle(self, tmp_path: Path) -> None:
        """A trace writer holds an open file: pickling says to pickle the dump instead."""
        from agentfsm._replay.trace import TraceWriter

        with TraceWriter(tmp_path / "t.jsonl") as writer:
            ctl = af.Controller(run_id="r-w", observers=[writer])
            ctl.on_model_output(turn(calls=[call("search", id="c1")]))
            with pytest.raises(CheckpointError, match=r"r-w.*Controller\.load\(data, observers"):
                pickle.dumps(ctl)
            loaded = af.Controller.load(ctl.dump(), observers=[writer])
            loaded.on_tool_results([af.ToolResult(call_id="c1", content="r")])
        events = (tmp_path / "t.jsonl").read_text().splitlines()
        assert json.loads(events[-1])["event"] == "decision"

    def test_a_controller_with_an_observer_refuses_to_pickle(self) -> None:
        """With observers attached (a trace writer), pickling raises a clear error instead."""
        ctl = af.Controller(run_id="r-o", observers=[EventCapture()])
        with pytest.raises(CheckpointError, match=r"r-o.*observers.*dump\(\)"):
            pickle.dumps(ctl)


POLICIES = st.builds(
    af.Policy,
    max_turns=st.integers(1, 8),
    max_tool_calls=st.none() | st.integers(0, 6),
    max_retries=st.integers(1, 2),  # 0 is refused by RetriesExhausted (not a state matter)
    max_consecutive_tool_errors=st.integers(1, 3),
    repeat_threshold=st.integers(2, 3),
    on_repeat=st.sampled_from(["ask", "stop"]),
    no_progress_threshold=st.none() | st.integers(2, 4),
    max_tokens=st.none() | st.integers(0, 3_000_000),
    permissions=st.sampled_from([{}, {"write_file": "ask"}, {"write_file": "deny", "*": "allow"}]),
    handoffs=st.sampled_from([frozenset(), frozenset({"handoff_to_billing"})]),
    on_incomplete=st.sampled_from(["continue", "ask"]),
)
NAMES = st.sampled_from(["search", "get_weather", "write_file", "handoff_to_billing", "rm"])
TURNS = model_turns(calls=tool_calls(names=NAMES), max_calls=2)
INPUTS = st.tuples(TURNS, st.lists(st.booleans(), min_size=3, max_size=3), st.booleans())


def feed(ctl: af.Controller, item: tuple[af.ModelTurn, list[bool], bool]) -> Mapping[str, Any]:
    """Give the run the input its state takes, built from one drawn item; return the decision."""
    output, keep, flag = item
    if ctl.state == "await_model":
        return ctl.on_model_output(output).model_dump()
    if ctl.state == "await_human":
        return ctl.on_human_reply(approved=flag, message="no" if keep[0] else None).model_dump()
    results = [
        af.ToolResult(call_id=c.id, content=f"r{i}" if keep[1] else "same", is_error=flag)
        for i, (c, k) in enumerate(zip(ctl.pending_calls, keep, strict=False))
        if k
    ]
    return ctl.on_tool_results(results).model_dump()


class TestRestoreProperty:
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(POLICIES, st.lists(INPUTS, min_size=1, max_size=16), st.integers(0, 16))
    def test_dump_load_and_continue_decides_as_never_stopping(
        self, policy: af.Policy, inputs: list[Any], cut: int
    ) -> None:
        """At any point of a random run, dump → JSON → load → continue gives the same decisions."""
        original = af.Controller(policy, tools=DECLARED, run_id="prop")
        restored = af.Controller(policy, tools=DECLARED, run_id="prop")
        for index, item in enumerate(inputs):
            if original.done:
                break
            if index == cut:
                restored = af.Controller.load(json.loads(json.dumps(restored.dump())))
                mine, theirs = restored.dump()["run"], original.dump()["run"]
                assert mine | {"started": 0} == theirs | {"started": 0}
            assert feed(restored, item) == feed(original, item)
            assert (restored.state, restored.turn) == (original.state, original.turn)
        assert restored.exit_reason == original.exit_reason


class TestContractAdditionsSurvive:
    """Episodes, steering and approvals held beside allowed calls survive a restore."""

    def test_an_episode_and_its_turn_count_survive(self) -> None:
        """A run restored in its second episode counts max_turns from that episode's start."""
        ctl = af.Controller(af.Policy(max_turns=2))
        ctl.on_model_output(turn(calls=[call("search", id="c1")]))
        ctl.on_tool_results([af.ToolResult(call_id="c1", content="r")])
        ctl.on_model_output(turn("done"))
        ctl.on_user_message("and then?")
        loaded = roundtrip(ctl)
        d = loaded.on_model_output(turn(calls=[call("search", {"q": 2}, id="c2")]))
        assert d.action is A.EXECUTE_TOOLS
        assert loaded.turn == 3

    def test_a_user_message_during_results_survives(self) -> None:
        """After a restore the calls a user message skipped are still answered as skipped."""
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("search", id="c1")]))
        ctl.on_user_message("never mind")
        d = roundtrip(ctl).on_tool_results([])
        assert d.results[0].content == "skipped: a user message arrived"
