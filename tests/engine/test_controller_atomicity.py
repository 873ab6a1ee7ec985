"""The Controller under every input: all or nothing, one exception root, safe to share by threads.

A failed call leaves the run as it was; only
AgentFSMError subclasses escape on bad arguments; two threads do not lose
updates; the state reads the same on the Controller and on its decisions.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._replay.trace import TraceWriter
from agentfsm.exceptions import (
    AgentFSMError,
    DefinitionError,
    InvalidInputError,
    PolicyError,
    ToolDefinitionError,
)
from agentfsm.guards import Guard, Hit, Otherwise
from agentfsm.testing import call, turn

A, X = af.Action, af.ExitReason


def saved(ctl: af.Controller) -> tuple[Any, ...]:
    """Everything a failed call must not change: the Run's fields and the last output."""
    return (ctl._run.save(), ctl.last_output, len(ctl._events.observers))


def weather_turn(k: int = 1) -> af.ModelTurn:
    return turn(calls=[call("get_weather", {"city": f"c{k}"}, id=f"w{k}")])


class BoomError(Exception):
    """What the failing hooks of these tests raise."""


class Flaky:
    """A hook that raises on every other call it counts (the first included), else does `then`."""

    def __init__(self, then: Callable[..., Any], counts: Callable[..., bool] = bool) -> None:
        self.then = then
        self.counts = counts
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        if self.counts(*args):
            self.calls += 1
            if self.calls % 2:
                raise BoomError("hook failed")
        return self.then(*args)


class RaisingGuard(Guard):
    """A guard of the user's that raises while the flag says so."""

    layer = 5

    def __init__(self) -> None:
        self.failing = True

    def __call__(self, snap: af.RunSnapshot) -> Hit | None:
        if self.failing:
            raise BoomError("guard failed")
        return None


class NotAHit(Guard):
    """A guard of the user's that answers True instead of a Hit."""

    layer = 5

    def __call__(self, snap: af.RunSnapshot) -> Any:
        return True


def drive(ctl: af.Controller) -> list[tuple[str, str, str | None]]:
    """Two tool rounds and an answer; the decisions as (action, guard, exit reason)."""
    out: list[tuple[str, str, str | None]] = []
    for k in (1, 2):
        d = ctl.on_model_output(weather_turn(k))
        out.append((d.action.value, d.guard, d.exit_reason))
        if d.action is A.EXECUTE_TOOLS:
            d = ctl.on_tool_results([af.ToolResult(call_id=f"w{k}", content="sunny")])
            out.append((d.action.value, d.guard, d.exit_reason))
    d = ctl.on_model_output(turn("done", finish="stop"))
    out.append((d.action.value, d.guard, d.exit_reason))
    return out


class TestAFailedInputLeavesTheRunAsItWas:
    """Item 5: when anything raises mid-step, the Controller is exactly as before; a retry works."""

    def _retry_until_done(self, ctl: af.Controller) -> list[tuple[str, str, str | None]]:
        """Drive the run, retrying each input once after a BoomError, checking nothing moved."""
        out: list[tuple[str, str, str | None]] = []
        inputs: list[Callable[[], af.Decision]] = [
            lambda: ctl.on_model_output(weather_turn(1)),
            lambda: ctl.on_tool_results([af.ToolResult(call_id="w1", content="sunny")]),
            lambda: ctl.on_model_output(weather_turn(2)),
            lambda: ctl.on_tool_results([af.ToolResult(call_id="w2", content="sunny")]),
            lambda: ctl.on_model_output(turn("done", finish="stop")),
        ]
        for give in inputs:
            before = saved(ctl)
            try:
                d = give()
            except BoomError:
                assert saved(ctl) == before
                d = give()
            out.append((d.action.value, d.guard, d.exit_reason))
        return out

    def test_a_raising_guard_leaves_the_run_unchanged(self) -> None:
        """A guard that raises on the first tool round moves no counter and no state."""
        guard = RaisingGuard()
        ctl = af.Controller(af.Policy(guards=[guard]))
        d = None
        before = saved(ctl)
        with pytest.raises(BoomError):
            ctl.on_model_output(weather_turn(1))
        assert saved(ctl) == before
        assert ctl.turn == 0
        assert ctl.state == "await_model"
        guard.failing = False
        d = ctl.on_model_output(weather_turn(1))
        assert d.action is A.EXECUTE_TOOLS
        assert d.turn == 1

    def test_a_raising_verifier_or_observer_can_be_retried(self) -> None:
        """Each failing hook raises once per input; after each retry the run decides as usual.

        (A permission hook that raises denies the call instead: it fails closed.)
        """
        expected = drive(af.Controller())
        hooks = {
            "verifier": af.Controller(af.Policy(verifiers=(Flaky(lambda s: None),))),
            "observer": af.Controller(),
        }
        hooks["observer"].add_observer(Flaky(lambda e: None, lambda e: e["event"] == "decision"))
        for name, ctl in hooks.items():
            got = self._retry_until_done(ctl)
            assert [(a, e) for a, _, e in got] == [(a, e) for a, _, e in expected], name

    def test_a_full_disk_under_the_trace_writer_leaves_no_torn_line(self, tmp_path: Path) -> None:
        """Writing to /dev/full raises ENOSPC; the run is as before, the trace holds whole lines."""
        path = tmp_path / "t.jsonl"
        writer = TraceWriter(path)
        ctl = af.Controller(observers=[writer])
        ctl.on_model_output(weather_turn(1))
        disk, writer._raw = writer._raw, open("/dev/full", "wb", buffering=0)  # noqa: SIM115
        before = saved(ctl)
        with pytest.raises(OSError, match="No space"):
            ctl.on_tool_results([af.ToolResult(call_id="w1", content="sunny")])
        assert saved(ctl) == before
        name: str = "execute"
        assert ctl.state == name
        assert writer._raw is not None
        writer._raw.close()
        writer._raw = disk
        d = ctl.on_tool_results([af.ToolResult(call_id="w1", content="sunny")])
        writer.close()
        assert d.action is A.CONTINUE
        lines = path.read_text().splitlines()
        assert all(line.startswith("{") and line.endswith("}") for line in lines)
        assert [line.count('"event": "tool_results"') for line in lines].count(1) == 1

    def test_an_unknown_call_id_moves_nothing(self) -> None:
        """A result for a call never asked for raises and leaves the pending calls and counters."""
        ctl = af.Controller()
        ctl.on_model_output(weather_turn(1))
        before = saved(ctl)
        with pytest.raises(af.exceptions.UnknownCallIdError):
            ctl.on_tool_results([af.ToolResult(call_id="nope", content="x")])
        assert saved(ctl) == before


class TestOneControllerSharedByThreads:
    """Item 6: the Controller serializes inputs under a lock; threads lose no update."""

    def test_turns_and_tool_calls_count_every_accepted_input_once(self) -> None:
        """Eight threads race on one Controller; the counters equal the inputs that succeeded."""
        ctl = af.Controller(af.Policy(max_turns=100_000, no_progress_threshold=None))
        outputs = [0] * 8
        executed = [0] * 8
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)

        def worker(index: int) -> None:
            for k in range(150):
                tag = f"t{index}_{k}"
                try:
                    d = ctl.on_model_output(
                        turn(calls=[call("get_weather", {"k": tag}, id=tag)], finish="tool_calls")
                    )
                    outputs[index] += 1
                    executed[index] += d.action is A.EXECUTE_TOOLS
                except InvalidInputError:
                    pass
                try:
                    pending = ctl.pending_calls
                    ctl.on_tool_results(
                        [af.ToolResult(call_id=c.id, content=c.id) for c in pending]
                    )
                except AgentFSMError:
                    pass

        try:
            threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
        assert sum(outputs) > 0
        assert ctl.turn == sum(outputs)
        assert ctl._run.tool_calls_used == sum(executed)


def bad_calls() -> Iterator[tuple[str, Callable[[], Any], type[AgentFSMError], str]]:
    """Every bad argument to a public name, the error it must raise, and the name it must say."""
    yield "Policy(max_turns=0)", lambda: af.Policy(max_turns=0), PolicyError, "max_turns"
    yield "Policy(on_repeat=...)", lambda: af.Policy(on_repeat="x"), PolicyError, "on_repeat"
    yield "Controller(policy=5)", lambda: af.Controller(5), PolicyError, "policy"  # type: ignore[arg-type]
    yield (
        "Controller(policy={'max_turns': 0})",
        lambda: af.Controller({"max_turns": 0}),
        PolicyError,
        "max_turns",
    )
    yield (
        "Controller(tools='bash')",
        lambda: af.Controller(tools="bash"),
        ToolDefinitionError,
        "tools",
    )
    yield "Controller(tools=5)", lambda: af.Controller(tools=5), ToolDefinitionError, "tools"  # type: ignore[arg-type]
    yield (
        "Controller(observers=[1])",
        lambda: af.Controller(observers=[1]),  # type: ignore[list-item]
        DefinitionError,
        "observers",
    )
    yield "Controller(run_id=3)", lambda: af.Controller(run_id=3), DefinitionError, "run_id"  # type: ignore[arg-type]
    yield "Controller(engine='x')", lambda: af.Controller(engine="x"), DefinitionError, "engine"  # type: ignore[arg-type]
    yield "Otherwise([1])", lambda: Otherwise([1]), PolicyError, "reason"  # type: ignore[arg-type]
    yield "MaxTurns('x')", lambda: af.guards.MaxTurns("x"), PolicyError, "limit"  # type: ignore[arg-type]


def executing() -> af.Controller:
    ctl = af.Controller()
    ctl.on_model_output(weather_turn(1))
    return ctl


def bad_inputs() -> Iterator[tuple[str, Callable[[af.Controller], Any], str]]:
    """Bad arguments to the inputs of a Controller that awaits tool results."""
    yield "on_tool_results(None)", lambda c: c.on_tool_results(None), "results"  # type: ignore[arg-type]
    yield "on_tool_results('x')", lambda c: c.on_tool_results("x"), "results"
    yield "on_tool_results([None])", lambda c: c.on_tool_results([None]), "tool result #0"
    yield "add_observer(1)", lambda c: c.add_observer(1), "observers"  # type: ignore[arg-type]


class TestOneExceptionRoot:
    """Item 8: every bad argument raises an AgentFSMError subclass naming it, where it is given."""

    @pytest.mark.parametrize(("label", "give", "kind", "names"), list(bad_calls()))
    def test_a_bad_argument_raises_an_agentfsm_error_naming_it(
        self, label: str, give: Callable[[], Any], kind: type[AgentFSMError], names: str
    ) -> None:
        """The error is the documented subclass and its message names the argument."""
        with pytest.raises(kind, match=names):
            give()

    @pytest.mark.parametrize(("label", "give", "names"), list(bad_inputs()))
    def test_a_bad_input_raises_and_leaves_the_controller(
        self, label: str, give: Callable[[af.Controller], Any], names: str
    ) -> None:
        """A bad input raises InvalidInputError (or DefinitionError) and changes nothing."""
        ctl = executing()
        before = saved(ctl)
        with pytest.raises(AgentFSMError, match=names):
            give(ctl)
        assert saved(ctl) == before

    def test_bad_human_reply_and_user_message_arguments_are_named(self) -> None:
        """approved must be a bool, message and text strings."""
        ctl = af.Controller(af.Policy(permissions={"get_weather": "ask"}))
        assert ctl.on_model_output(weather_turn(1)).action is A.ASK_HUMAN
        before = saved(ctl)
        attempts: list[tuple[Callable[[], Any], str]] = [
            (lambda: ctl.on_human_reply("yes"), "approved"),  # type: ignore[arg-type]
            (lambda: ctl.on_human_reply(True, 5), "message"),  # type: ignore[arg-type]
            (lambda: ctl.on_user_message(None), "text"),  # type: ignore[arg-type]
        ]
        for give, name in attempts:
            with pytest.raises(InvalidInputError, match=name):
                give()
            assert saved(ctl) == before

    def test_a_guard_returning_a_non_hit_is_named(self) -> None:
        """A guard answering True instead of a Hit raises DefinitionError naming the guard."""
        ctl = af.Controller(af.Policy(guards=[NotAHit()]))
        before = saved(ctl)
        with pytest.raises(DefinitionError, match=r"NotAHit\(\) returned True"):
            ctl.on_model_output(weather_turn(1))
        assert saved(ctl) == before

    def test_a_mapping_is_read_as_a_policy(self) -> None:
        """Controller({'max_turns': 1}) builds the policy from the mapping."""
        ctl = af.Controller({"max_turns": 1})
        assert ctl.policy.max_turns == 1
        assert ctl.on_model_output(weather_turn(1)).exit_reason is X.MAX_TURNS

    @pytest.mark.parametrize(
        "fields",
        [{"max_retries": 0}, {"max_cost": math.inf}, {"max_seconds": math.inf}],
        ids=["max_retries=0", "max_cost=inf", "max_seconds=inf"],
    )
    def test_a_policy_that_validates_builds_and_runs(self, fields: dict[str, Any]) -> None:
        """Edge values the Policy accepts build a Controller that routes a whole run."""
        ctl = af.Controller(af.Policy(**fields))
        assert drive(ctl)[-1] == ("final", "AnswerComplete()", X.COMPLETED)

    def test_max_retries_zero_ends_at_the_first_broken_output(self) -> None:
        """With max_retries=0 a cut output ends the run as UNRECOVERABLE_OUTPUT, no retry."""
        ctl = af.Controller(af.Policy(max_retries=0))
        d = ctl.on_model_output(turn("cut", finish="length"))
        assert (d.action, d.exit_reason) == (A.STOP, X.UNRECOVERABLE_OUTPUT)


def _openai(message: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _raw_call(ident: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


OUTPUTS: list[Any] = [
    weather_turn(1),
    weather_turn(1),  # the same call again: the repeat guard
    turn(calls=[call("search", {"q": "x"}), call("search", {"q": "x"})]),
    turn(calls=[call("undeclared", {})], finish="stop"),
    turn("the answer", finish="stop"),
    turn("", finish="stop"),
    turn("cut", finish="length"),
    turn(calls=[af.ToolCall(id="b", name="search", raw_arguments='{"q": ')]),
    turn("no", finish="content_filter"),
    turn("", finish="error"),
    _openai({"role": "assistant", "content": "hi"}, "stop"),
    _openai({"role": "assistant", "tool_calls": [_raw_call("", "search", '{"q": 1}')]}, None),
    _openai({"role": "assistant", "tool_calls": [_raw_call("c", "get_weather", "{")]}, "length"),
    {"choices": []},
    {"choices": [{"message": None}]},
    {"candidates": [{"content": {"parts": [{"functionCall": {"name": "search"}}]}}]},
]
JUNK: list[Any] = [None, 0, 1.5, "", "x", b"x", [], {}, [None], {"call_id": 5}, print]


def arguments_for(ctl: af.Controller, method: str, pick: int) -> tuple[Any, ...]:
    """Arguments for one input chosen by `pick`: mostly fitting ones, often wrong ones."""
    junk = JUNK[pick % len(JUNK)]
    wrong = pick % 4 == 0
    if method == "on_model_output":
        return (junk if wrong else OUTPUTS[pick % len(OUTPUTS)],)
    if method == "on_tool_results":
        pending = ctl.pending_calls
        if wrong:
            return (junk if pick % 8 else [af.ToolResult(call_id="never", content="x")],)
        given = [c for i, c in enumerate(pending) if (pick >> i) & 1]
        return (
            [af.ToolResult(call_id=c.id, content=pick % 3, is_error=pick % 5 == 1) for c in given],
        )
    if method == "on_human_reply":
        approved: Any = junk if wrong else bool(pick & 2)
        return (approved, None if pick % 3 else (junk if pick % 7 == 0 else "why"))
    if method == "on_user_message":
        return (junk if wrong else "more please",)
    if method == "stop":
        return (junk,) if wrong else ((af.ExitReason.INTERRUPTED, "done") if pick & 1 else ())
    if method == "charge":
        return (junk if wrong else af.Usage(input_tokens=pick, output_tokens=1),)
    if method == "dump":
        return ()
    return (junk,)


POLICIES = [
    af.Policy(),
    af.Policy(max_turns=3, max_retries=0, on_repeat="ask", repeat_threshold=2),
    af.Policy(permissions={"*": "ask"}, on_incomplete="ask", max_tool_calls=2),
]
METHODS = [
    "on_model_output",
    "on_tool_results",
    "on_human_reply",
    "on_user_message",
    "add_observer",
]


class TestRandomCallSequences:
    """Item 8: any sequence of calls lets only AgentFSMError out, and a failed call is void."""

    @settings(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        policy=st.sampled_from(POLICIES),
        tools=st.sampled_from([None, ["get_weather", "search"]]),
        calls=st.lists(
            st.tuples(st.sampled_from(METHODS), st.integers(0, 1023)), min_size=1, max_size=10
        ),
    )
    def test_only_agentfsm_errors_escape_and_a_failed_call_changes_nothing(
        self, policy: af.Policy, tools: list[str] | None, calls: list[tuple[str, int]]
    ) -> None:
        """Random methods with random or bad arguments: errors are ours, failures leave no trace."""
        ctl = af.Controller(policy, tools)
        for method, pick in calls:
            args = arguments_for(ctl, method, pick)
            before = saved(ctl)
            try:
                result = getattr(ctl, method)(*args)
            except AgentFSMError:
                assert saved(ctl) == before
                continue
            if isinstance(result, af.Decision):
                assert ctl.state == result.state
                assert isinstance(ctl.state, af.State)


class TestStateAndReasonsReadTheSame:
    """Item 11: the Controller's state is the State enum; hand-built turns read sensibly."""

    def test_controller_state_is_the_decision_state(self) -> None:
        """Controller.state is a State, equal to the decision's and to its name."""
        ctl = af.Controller()
        d = ctl.on_model_output(weather_turn(1))
        assert ctl.state is d.state is af.State.EXECUTE
        name: str = "execute"
        assert ctl.state == name

    def test_a_hand_built_stop_turn_reads_as_stop(self) -> None:
        """ModelTurn(finish_reason='stop') with calls says 'stop', not 'no finish reason'."""
        ctl = af.Controller()
        d = ctl.on_model_output(
            af.ModelTurn(
                finish_reason="stop", tool_calls=[call("get_weather", {"city": "x"}, id="a")]
            )
        )
        assert "provider said 'stop'" in d.reason

    def test_unparseable_raw_arguments_say_so(self) -> None:
        """A call with raw_arguments that never parsed names them, not 'None'."""
        ctl = af.Controller()
        broken = af.ToolCall(id="a", name="get_weather", raw_arguments='{"city": ')
        d = ctl.on_model_output(af.ModelTurn(tool_calls=[broken]))
        assert d.action is A.RETRY
        assert "None" not in d.reason
        assert '{"city": ' in d.reason
