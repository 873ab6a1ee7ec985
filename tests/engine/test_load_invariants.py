"""`Controller.load` refuses a dump edited into a state no run reaches, naming the field.

The invariants are listed in docs/durable.md; each example below breaks one, and the
property edits real dumps at random: a dump either loads into a state that keeps every
invariant and carries on answering each call once, or raises CheckpointError.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.exceptions import CheckpointError

A, S = af.Action, af.State
POLICY = af.Policy(
    permission_rules=["ask write", "deny write(path=/etc/*)"],
    handoffs=["research"],
    final_tools=["submit"],
    max_turns=6,
    max_consecutive_tool_errors=2,
)
NAMES = ("read", "write", "research", "submit")


def turn_of(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> af.ModelTurn:
    listed = [af.ToolCall(id=i, name=n, arguments=a) for i, n, a in calls]
    finish = af.FinishReason.TOOL_CALLS if listed else af.FinishReason.STOP
    return af.ModelTurn(text=text, tool_calls=listed, finish_reason=finish)


def executing() -> af.Controller:
    """A run whose two read calls await their results."""
    ctl = af.Controller(POLICY, run_id="r-x", clock=lambda: 0.0)
    ctl.on_model_output(turn_of(("a", "read", {"path": "a"}), ("b", "read", {"path": "b"})))
    return ctl


def load(data: dict[str, Any]) -> af.Controller:
    return af.Controller.load(json.loads(json.dumps(data)), policy=POLICY, clock=lambda: 0.0)


class TestEditedDumps:
    """The edits issue 35 names, and their kin, each raise CheckpointError naming the field."""

    def test_calls_used_below_the_calls_pending(self) -> None:
        """Two calls pending, none counted: tool_calls_used is named."""
        data = executing().dump()
        data["run"]["tool_calls_used"] = 1
        with pytest.raises(CheckpointError, match=r"r-x.*tool_calls_used 1 is below the 2"):
            load(data)

    def test_a_cleared_call_dropped_from_pending(self) -> None:
        """A pending call removed (its key and the turn kept): pending_sigs is named."""
        data = executing().dump()
        data["run"]["pending"].pop()
        with pytest.raises(CheckpointError, match=r"pending_sigs does not key exactly"):
            load(data)

    def test_every_pending_call_dropped(self) -> None:
        """Executing with nothing pending is no state a run rests in."""
        data = executing().dump()
        data["run"]["pending"], data["run"]["pending_sigs"] = [], {}
        with pytest.raises(CheckpointError, match=r"state 'execute' has no pending calls"):
            load(data)

    def test_a_held_output_at_turn_0(self) -> None:
        """A last_output while no model output was taken: turn and last_output are named."""
        data = af.Controller(POLICY, run_id="r-0").dump()
        data["last_output"] = turn_of(text="hi").model_dump(mode="json")
        with pytest.raises(CheckpointError, match=r"turn 0 holds a last_output"):
            load(data)

    def test_no_output_after_turn_0(self) -> None:
        """A run past turn 0 without the output its calls answer."""
        data = executing().dump()
        data["last_output"] = None
        with pytest.raises(CheckpointError, match=r"turn 1 holds no last_output"):
            load(data)

    def test_a_pending_call_edited_away_from_the_issued_one(self) -> None:
        """A pending call whose arguments differ from the call the model issued."""
        data = executing().dump()
        data["run"]["pending"][0]["arguments"] = {"path": "/etc/passwd"}
        with pytest.raises(CheckpointError, match=r"calls \['a'\] differ from the calls"):
            load(data)

    def test_a_run_that_goes_on_past_its_error_bound(self) -> None:
        """tool_errors at max_consecutive_tool_errors in a run that has not ended."""
        data = executing().dump()
        data["run"]["tool_errors"] = 2
        with pytest.raises(CheckpointError, match=r"tool_errors 2 reached"):
            load(data)

    def test_a_handoff_pending_as_a_tool(self) -> None:
        """A handoff call among the calls a host executes."""
        ctl = af.Controller(POLICY, clock=lambda: 0.0)
        ctl.on_model_output(turn_of(("h", "research", {"task": "x"})))
        data = ctl.dump()
        assert data["run"]["state"] == "handoff"
        data["run"]["state"], data["run"]["tool_calls_used"] = "execute", 1
        with pytest.raises(CheckpointError, match=r"handoff calls \['h'\] are pending as tools"):
            load(data)

    def test_an_untouched_dump_loads_and_decides_as_the_original(self) -> None:
        """The control: the same dump, not edited, loads and decides as the original."""
        ctl = executing()
        twin = load(ctl.dump())
        results = [af.ToolResult(call_id=i, content="ok") for i in ("a", "b")]
        assert twin.on_tool_results(results) == ctl.on_tool_results(results)


# -- the property -------------------------------------------------------------------


@st.composite
def real_dumps(draw: st.DrawFn) -> dict[str, Any]:
    """The dump of a real run stopped anywhere: model outputs with any mix of calls,
    results (missing, failed), human replies, steering messages and stops."""
    ctl = af.Controller(POLICY, clock=lambda: 0.0)
    for step in range(draw(st.integers(0, 6))):
        if ctl.done:
            break
        state = ctl.state
        if state is S.AWAIT_MODEL:
            where = st.sampled_from("ab/")
            picks = draw(st.lists(st.tuples(st.sampled_from(NAMES), where), max_size=3))
            calls = [
                (f"t{step}c{i}", name, {"path": f"/{where}/x" if where != "/" else "/etc/x"})
                for i, (name, where) in enumerate(picks)
            ]
            ctl.on_model_output(turn_of(*calls, text=draw(st.sampled_from(["", "done"]))))
        elif state in (S.EXECUTE, S.HANDOFF):
            if draw(st.booleans()):
                ctl.on_user_message("change of plan")
            pending = [c.id for c in ctl.pending_calls]
            answered = draw(st.lists(st.sampled_from(pending), unique=True)) if pending else []
            errors = draw(st.booleans())
            ctl.on_tool_results(
                [af.ToolResult(call_id=i, content="out", is_error=errors) for i in answered]
            )
        elif state is S.AWAIT_HUMAN:
            ctl.on_human_reply(approved=draw(st.booleans()))
        if draw(st.integers(0, 9)) == 0 and not ctl.done:
            ctl.stop()
    return ctl.dump()


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside a dump's run state and last output."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def edit(value: Any, how: int) -> Any:
    """Another value of the same kind (or none at all)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return [value + 1, max(0, value - 1), 0][how % 3]
    if isinstance(value, str):
        return ["execute", "await_human", "handoff", "await_model", "end", "x"][how % 6]
    if isinstance(value, list):
        return [value[1:], value[:-1], [], value + value[:1]][how % 4]
    if isinstance(value, dict):
        return [dict(list(value.items())[1:]), {}][how % 2]
    return ["await_model", 1, {}][how % 3]


def as_issued(held: dict[str, Any], issued: dict[str, Any] | None, approved: list[str]) -> bool:
    """A held call is as issued, or approved with arguments its human edited (same tool)."""
    if held == issued:
        return True
    same = issued is not None and all(held[k] == issued[k] for k in ("id", "name", "kind"))
    return same and held["id"] in approved and held["error"] is None


def keeps_the_invariants(ctl: af.Controller, data: dict[str, Any]) -> None:
    """The invariants docs/durable.md lists, checked on the loaded run from outside."""
    run = data["run"]
    state = S(run["state"])
    pending = {c["id"] for c in run["pending"]}
    last = data["last_output"]
    issued = {c["id"]: c for c in last["tool_calls"]} if last else {}
    assert state in (S.AWAIT_MODEL, S.EXECUTE, S.HANDOFF, S.AWAIT_HUMAN, S.END)
    assert (last is None) == (run["turn"] == 0)
    assert (state is S.END) == (run["exit_reason"] is not None)
    assert run["episode"] >= 1
    assert run["episode_start"] <= run["turn"]
    assert run["turn"] - run["episode_start"] <= POLICY.max_turns
    assert state is S.END or run["tool_errors"] < POLICY.max_consecutive_tool_errors
    if state in (S.EXECUTE, S.HANDOFF):
        assert pending
        assert set(run["pending_sigs"]) == pending
    else:
        assert not pending
        assert run["interjection"] is None
    if state is S.EXECUTE:
        assert run["tool_calls_used"] >= len(pending)
    if state is not S.AWAIT_HUMAN:
        assert not run["pending_approval"]
        assert not run["pending_allowed"]
        assert not run["pending_rejected"]
    held = [*run["pending"], *run["pending_approval"], *run["pending_allowed"]]
    assert all(as_issued(c, issued.get(c["id"]), run["approved"]) for c in held)
    assert set(run["approved"]) <= pending
    assert set(run["refused"]) <= {c["id"] for c in held}


def answers_each_call_once(ctl: af.Controller) -> None:
    """Carried on, the loaded run gives every call it holds exactly one result."""
    state = ctl.state
    if state in (S.EXECUTE, S.HANDOFF):
        ids = [c.id for c in ctl.pending_calls]
        given_ids = [i for i in ids if ctl.may_run(i)]
        d = ctl.on_tool_results([af.ToolResult(call_id=i, content="ok") for i in given_ids])
        assert sorted([*given_ids, *(r.call_id for r in d.results)]) == sorted(ids)
    elif state is S.AWAIT_HUMAN:
        assert ctl.on_human_reply(approved=False).action in (A.CONTINUE, A.STOP)


class TestRandomEdits:
    """Edits of real dumps never load into a state no run reaches."""

    @given(data=real_dumps(), how=st.integers(0, 11))
    def test_an_edited_dump_loads_into_a_reachable_state_or_raises(
        self, data: dict[str, Any], how: int
    ) -> None:
        """Each value of a real dump's run state or last output, in turn, replaced by another
        of its kind (counters moved, calls dropped or doubled, states swapped, the output
        removed): load raises CheckpointError, or the run it loads keeps every invariant
        and answers each call it holds once."""
        places = paths({"run": data["run"], "last_output": data["last_output"]})
        for index, place in enumerate(places):
            edited = copy.deepcopy(data)
            parent: Any = edited
            for key in place[:-1]:
                parent = parent[key]
            parent[place[-1]] = edit(parent[place[-1]], how + index)
            try:
                ctl = load(edited)
            except CheckpointError:
                continue
            if edited == data:
                assert ctl.dump() == load(data).dump()
            keeps_the_invariants(ctl, ctl.dump())
            answers_each_call_once(ctl)
