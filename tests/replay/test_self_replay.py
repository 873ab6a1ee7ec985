"""Replaying agentfsm's own trace gives the live decisions.

The trace records the policy and the declared tools; replay rebuilds the same
Controller from them, so every decision comes out as it did live. `--policy`
overrides on purpose, and a self-replay that diverges exits 1.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._replay.engine import divergence, replay_run
from agentfsm._replay.trace import TraceWriter
from agentfsm._replay.trajectories import read_runs
from agentfsm.exceptions import TraceError
from agentfsm.testing import call, turn
from tests.strategies import model_turns, one_argument_tool, tool_calls

A = af.Action
Key = tuple[str, str, str, str | None]
SPEC = one_argument_tool("get_weather", "the weather", "city")
POLICIES = [
    af.Policy(),
    af.Policy(max_turns=4, max_retries=0, repeat_threshold=2, on_repeat="ask"),
    af.Policy(permissions={"search": "ask", "*": "allow"}, max_tool_calls=3, on_deny="stop"),
    af.Policy(max_tokens=50_000, handoffs=frozenset({"search"}), no_progress_threshold=2),
    af.Policy(max_seconds=5),  # the run's clock moves 1.5 s per input: a deadline in the run
]
TOOLS: list[list[Any] | None] = [None, ["get_weather", "search"], [SPEC, "search"], ["search"]]


def key(d: af.Decision) -> Key:
    exit_reason = None if d.exit_reason is None else d.exit_reason.value
    return (d.action.value, d.priority.value, d.guard, exit_reason)


def live_run(ctl: af.Controller, data: st.DataObject) -> list[Key]:
    """Drive a controller with random outputs, results and replies; return its decisions."""
    decisions: list[Key] = []
    for _ in range(data.draw(st.integers(1, 6))):
        if ctl.done:
            break
        if data.draw(st.integers(0, 7)) == 0:  # the host stops the run from outside
            reason = data.draw(st.sampled_from([r.value for r in af.ExitReason]))
            said = data.draw(st.none() | st.sampled_from(["", "bye", "gone (x): y"]))
            decisions.append(key(ctl.stop(reason, said)))
            break
        if ctl.state == "await_model":
            if data.draw(st.integers(0, 5)) == 0:
                ctl.on_user_message(data.draw(st.text(max_size=5)))
            d = ctl.on_model_output(data.draw(model_turns(calls=tool_calls(), max_calls=2)))
        elif ctl.state == "await_human":
            d = human_reply(ctl, data)
        else:
            pending = ctl.pending_calls
            picked = data.draw(st.lists(st.integers(0, len(pending) - 1), unique=True))
            given = [pending[i] for i in picked]
            d = ctl.on_tool_results(
                [
                    af.ToolResult(call_id=c.id, content=data.draw(st.sampled_from(["a", "b"])))
                    for c in given
                ]
            )
        decisions.append(key(d))
    return decisions


EDITS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [{}, {"city": "Oslo"}, {"q": "x"}, {"city": 3}]
)


def human_reply(ctl: af.Controller, data: st.DataObject) -> af.Decision:
    """One answer for all asked calls, or one per call with texts and edited arguments."""
    message = data.draw(st.none() | st.just("no"))
    asked = [c.id for c in ctl.pending_calls]
    if not asked or not data.draw(st.booleans()):
        return ctl.on_human_reply(data.draw(st.booleans()), message)
    answers = {i: data.draw(st.booleans()) for i in asked}
    texts = data.draw(st.dictionaries(st.sampled_from(asked), st.sampled_from(["", "not that"])))
    yes = [i for i in asked if answers[i]]
    edits = data.draw(st.dictionaries(st.sampled_from(yes), EDITS)) if yes else {}
    note_event(f"per-call reply: {sorted(set(answers.values()))}, edits: {bool(edits)}")
    return ctl.on_human_reply(answers, message, messages=texts or None, arguments=edits or None)


class TestLiveEqualsReplay:
    """The property: an agentfsm trace replayed with what it recorded decides as live."""

    @settings(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(policy=st.sampled_from(POLICIES), tools=st.sampled_from(TOOLS), data=st.data())
    def test_replay_of_a_random_run_gives_the_live_decisions(
        self, policy: af.Policy, tools: list[Any] | None, data: st.DataObject
    ) -> None:
        """Random outputs, partial results and human replies: replay gives the same decisions,
        and counts the calls the live run counted (those a human approved included)."""
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trace.jsonl")
            with TraceWriter(path) as writer:
                ticks = itertools.count(0.0, 1.5)
                ctl = af.Controller(policy, tools, observers=[writer], clock=lambda: next(ticks))
                live = live_run(ctl, data)
            (run,) = list(read_runs(path))
            result = replay_run(run)
            assert [
                (r.action, r.priority, r.guard, r.exit_reason) for r in result.decisions
            ] == live
            assert divergence(run, result) is None
            assert result.tool_calls == ctl.dump()["run"]["tool_calls_used"]


ASKING = [
    af.Policy(permissions={"get_weather": "ask", "search": "ask"}),
    af.Policy(
        permissions={"search": "ask", "*": "allow"},
        permission_rules=["ask get_weather(city=Oslo)", "deny search(q=x)"],
        max_tool_calls=4,
    ),
]


def asking_run(ctl: af.Controller, data: st.DataObject) -> list[tuple[Key, str]]:
    """Whole turns of known calls under policies that ask: most replies answer call by call."""
    decisions: list[tuple[Key, str]] = []
    for k in range(data.draw(st.integers(1, 5))):
        if ctl.done:
            break
        if ctl.state == "await_model":
            known = st.sampled_from(["get_weather", "search"])
            names = data.draw(st.lists(known, min_size=int(k == 0), max_size=3))
            calls = [call(n, data.draw(EDITS), id=f"c{k}{i}") for i, n in enumerate(names)]
            d = ctl.on_model_output(turn("done" if not calls else "", calls=calls))
        elif ctl.state == "await_human":
            d = human_reply(ctl, data)
        else:
            d = ctl.on_tool_results(
                [af.ToolResult(call_id=c.id, content="ok") for c in ctl.pending_calls]
            )
        decisions.append((key(d), d.reason))
    return decisions


class TestPerCallRepliesReplay:
    """Per-call answers, texts and edits are recorded and given again: replay decides as live."""

    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        policy=st.sampled_from(ASKING),
        tools=st.sampled_from([None, [SPEC, "search"]]),
        data=st.data(),
    )
    def test_replay_of_per_call_replies_gives_the_live_decisions(
        self, policy: af.Policy, tools: list[Any] | None, data: st.DataObject
    ) -> None:
        """Each decision of a run answered call by call replays with the same guard and reason,
        and the summary counts the calls the live run counted, the approved ones included."""
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trace.jsonl")
            with TraceWriter(path) as writer:
                ctl = af.Controller(policy, tools, observers=[writer], clock=lambda: 0.0)
                live = asking_run(ctl, data)
            (run,) = list(read_runs(path))
            result = replay_run(run)
            replayed = [
                ((r.action, r.priority, r.guard, r.exit_reason), r.reason) for r in result.decisions
            ]
            assert replayed == live
            assert divergence(run, result) is None
            assert result.summary()["tool_calls"] == ctl.dump()["run"]["tool_calls_used"]

    def write_mixed(self, path: Path) -> None:
        """search asked twice beside an allowed get_weather; s1 approved with an edit, s2 not."""
        policy = af.Policy(permissions={"search": "ask", "*": "allow"})
        with TraceWriter(path) as writer:
            ctl = af.Controller(policy, observers=[writer])
            calls = [
                call("search", {"q": "a"}, id="s1"),
                call("get_weather", {"city": "Oslo"}, id="w1"),
                call("search", {"q": "b"}, id="s2"),
            ]
            ctl.on_model_output(turn(calls=calls))
            ctl.on_human_reply(
                {"s1": True, "s2": False}, messages={"s2": "no"}, arguments={"s1": {"q": "c"}}
            )
            ctl.on_tool_results(
                [af.ToolResult(call_id=c.id, content="ok") for c in ctl.pending_calls]
            )

    def test_under_another_policy_the_reply_fits_the_calls_asked_then(self, tmp_path: Path) -> None:
        """Replayed where get_weather is asked too, the reply answers it as the recording
        went (it ran: approved), and the texts and edits of the other calls are kept."""
        path = tmp_path / "t.jsonl"
        self.write_mixed(path)
        (run,) = list(read_runs(path))
        other = af.Policy(permissions={"search": "ask", "get_weather": "ask"})
        result = replay_run(run, other)
        assert [r.action for r in result.decisions] == ["ask_human", "execute_tools", "continue"]
        assert result.decisions[1].reason == "2 valid tool calls: search, get_weather"

    def test_a_per_call_reply_that_is_not_bools_is_reported_with_file_and_line(
        self, tmp_path: Path
    ) -> None:
        """A recorded `approved` mapping holding a non-bool names the file and the line."""
        path = tmp_path / "t.jsonl"
        self.write_mixed(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        number = next(i for i, line in enumerate(lines) if '"human_reply"' in line)
        lines[number] = lines[number].replace('"s2": false', '"s2": "no"', 1)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(TraceError, match=rf"{path.name}:{number + 1}: .*approved"):
            replay_all(path)

    def test_results_pair_by_id_past_a_denied_call_of_the_same_name(self, tmp_path: Path) -> None:
        """search(q=x) denied between get_weather and an approved search: the approved one's
        recorded result answers it in replay, not the denied one's place (P1, not P5)."""
        policy = af.Policy(
            permissions={"search": "ask", "*": "allow"}, permission_rules=["deny search(q=x)"]
        )
        path = tmp_path / "t.jsonl"
        calls = [call("get_weather", {}, id="c0"), call("search", {"q": "x"}, id="c1")]
        with TraceWriter(path) as writer:
            ctl = af.Controller(policy, observers=[writer])
            ctl.on_model_output(turn(calls=[*calls, call("search", {}, id="c2")]))
            ctl.on_human_reply(True)
            ok = [af.ToolResult(call_id=c.id, content="ok") for c in ctl.pending_calls]
            assert ctl.on_tool_results(ok).guard == "ResultsReady()"
        (run,) = list(read_runs(path))
        result = replay_run(run)
        assert result.decisions[-1].guard == "ResultsReady()"
        assert divergence(run, result) is None


def write_unknown_tool_run(path: Path) -> None:
    """A run whose first call names an undeclared tool, then an answer."""
    with TraceWriter(path) as writer:
        ctl = af.Controller(af.Policy(max_turns=5), tools=["get_weather"], observers=[writer])
        ctl.on_model_output(turn(calls=[call("get_time", {}, id="t1")]))
        ctl.on_model_output(turn("it is noon", finish="stop"))


def agentfsm(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )


class TestReplayCommandOnAgentfsmTraces:
    """`agentfsm replay` on its own traces: recorded policy and tools, divergence exits 1."""

    def test_the_trace_records_the_declared_tools(self, tmp_path: Path) -> None:
        """run_started carries each declared tool's name, description and schema."""
        path = tmp_path / "t.jsonl"
        with TraceWriter(path) as writer:
            af.Controller(tools=["search", SPEC], observers=[writer])
        started = json.loads(path.read_text().splitlines()[1])
        assert [t["name"] for t in started["tools"]] == ["search", "get_weather"]
        assert started["tools"][1]["parameters"] == SPEC["parameters"]

    def test_an_unknown_tool_replays_as_unknown_and_exits_0(self, tmp_path: Path) -> None:
        """The live 'unknown tool' decision replays the same, with the recorded max_turns."""
        path = tmp_path / "t.jsonl"
        write_unknown_tool_run(path)
        done = agentfsm("replay", path, "--json")
        assert done.returncode == 0, done.stderr
        (line,) = done.stdout.splitlines()
        record = json.loads(line)
        assert "unknown tool 'get_time'" in record["decisions"][0]["reason"]
        assert record["exit_reason"] == "completed"
        assert "diverges" not in record

    def test_a_diverging_self_replay_is_reported_and_exits_1(self, tmp_path: Path) -> None:
        """A trace whose recorded decision differs from what its policy decides exits 1."""
        path = tmp_path / "t.jsonl"
        write_unknown_tool_run(path)
        lines = path.read_text().splitlines()
        tampered = [
            line.replace('"action": "continue"', '"action": "execute_tools"') for line in lines
        ]
        path.write_text("\n".join(tampered) + "\n")
        done = agentfsm("replay", path)
        assert done.returncode == 1, done.stderr
        assert "DIVERGES from the recording: decision 1 (turn 1)" in done.stdout

    def test_policy_overrides_the_recorded_one_on_purpose(self, tmp_path: Path) -> None:
        """With --policy the run replays under that policy, and no divergence is claimed."""
        path = tmp_path / "t.jsonl"
        write_unknown_tool_run(path)
        policy = tmp_path / "p.json"
        policy.write_text(json.dumps({"max_turns": 1}))
        done = agentfsm("replay", path, "--json", "--policy", policy)
        assert done.returncode == 0, done.stderr
        record = json.loads(done.stdout)
        assert record["exit_reason"] == "max_turns"
        assert "diverges" not in record


class TestTimeReplays:
    """A time budget replays from the times the trace recorded, not from replay's own clock."""

    def write_deadline_run(self, path: Path) -> list[Key]:
        """Each input 4 s after the last, a 10 s budget: the third input stops with DEADLINE."""
        readings = iter([0.0, 4.0, 8.0, 12.0])
        with TraceWriter(path) as writer:
            ctl = af.Controller(
                af.Policy(max_seconds=10), observers=[writer], clock=lambda: next(readings)
            )
            decisions = [ctl.on_model_output(turn(calls=[call("search", {"q": "a"}, id="c1")]))]
            decisions.append(ctl.on_tool_results([af.ToolResult(call_id="c1", content="x")]))
            decisions.append(ctl.on_model_output(turn(calls=[call("search", {"q": "b"}, id="c2")])))
        return [key(d) for d in decisions]

    def test_a_run_stopped_by_its_deadline_replays_stopped_at_the_same_step(
        self, tmp_path: Path
    ) -> None:
        """Live: continue, continue, DEADLINE; the replay, done in microseconds, says the same."""
        path = tmp_path / "t.jsonl"
        live = self.write_deadline_run(path)
        assert live[-1][3] == "deadline"
        (run,) = list(read_runs(path))
        result = replay_run(run)
        assert [(r.action, r.priority, r.guard, r.exit_reason) for r in result.decisions] == live
        assert divergence(run, result) is None

    def test_the_input_events_record_the_run_time(self, tmp_path: Path) -> None:
        """model_output and tool_results carry `elapsed`: 4, 8 and 12 seconds."""
        path = tmp_path / "t.jsonl"
        self.write_deadline_run(path)
        events = [json.loads(line) for line in path.read_text().splitlines()]
        inputs = [e for e in events if e["event"] in ("model_output", "tool_results")]
        assert [(e["event"], e["elapsed"]) for e in inputs] == [
            ("model_output", 4.0),
            ("tool_results", 8.0),
            ("model_output", 12.0),
        ]

    def test_a_trace_without_times_replays_as_if_no_time_passed(self, tmp_path: Path) -> None:
        """Older traces carry no `elapsed`: the budget never fires instead of firing at random."""
        path = tmp_path / "t.jsonl"
        self.write_deadline_run(path)
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for event in lines:
            event.pop("elapsed", None)
        path.write_text("".join(json.dumps(e) + "\n" for e in lines))
        (run,) = list(read_runs(path))
        result = replay_run(run)
        actions = [r.action for r in result.decisions]
        assert actions == ["execute_tools", "continue", "execute_tools"]

    def test_a_bad_time_is_reported_with_file_and_line(self, tmp_path: Path) -> None:
        """An `elapsed` that is not seconds names the file and the line of the event."""
        path = tmp_path / "t.jsonl"
        self.write_deadline_run(path)
        lines = path.read_text().splitlines()
        number = next(i for i, line in enumerate(lines) if '"model_output"' in line)
        event = json.loads(lines[number])
        event["elapsed"] = "soon"
        lines[number] = json.dumps(event)
        path.write_text("\n".join(lines) + "\n")
        done = agentfsm("replay", path, "--json")
        assert done.returncode == 2
        assert f"{path}:{number + 1}" in done.stderr
        assert "elapsed must be a number of seconds" in done.stderr


class TestStopsFromOutside:
    """A host's `Controller.stop` is an input: replay gives it again where it was given."""

    def write(self, path: Path, policy: af.Policy) -> None:
        with TraceWriter(path) as writer:
            ctl = af.Controller(policy, observers=[writer])
            ctl.on_model_output(turn(calls=[call("ls", {}, id="c1")]))
            ctl.on_tool_results([af.ToolResult(call_id="c1", content="a")])
            ctl.on_model_output(turn(calls=[call("ls", {"all": True}, id="c2")]))
            ctl.stop(af.ExitReason.INTERRUPTED, "the server went away: status 3")

    def test_a_stopped_run_replays_stopped_with_its_pending_call_answered(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "trace.jsonl"
        self.write(path, af.Policy())
        (run,) = list(read_runs(path))
        result = replay_run(run)
        assert divergence(run, result) is None
        assert result.exit_reason == run.end == "interrupted"
        last = result.decisions[-1]
        assert last.guard == "Stop(ExitReason.INTERRUPTED)"
        assert last.reason.endswith(": the server went away: status 3")
        done = agentfsm("replay", path, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["differs"] is False

    def test_a_policy_that_ends_the_run_first_makes_the_stop_too_late(self, tmp_path: Path) -> None:
        path = tmp_path / "trace.jsonl"
        self.write(path, af.Policy())
        (run,) = list(read_runs(path))
        result = replay_run(run, af.Policy(max_tool_calls=1))
        assert result.exit_reason == "max_tool_calls"
        assert all(not r.guard.startswith("Stop(") for r in result.decisions)

    def test_an_unknown_exit_reason_is_reported_with_file_and_line(self, tmp_path: Path) -> None:
        path = tmp_path / "trace.jsonl"
        self.write(path, af.Policy())
        lines = path.read_text(encoding="utf-8").splitlines()
        number = max(i for i, line in enumerate(lines) if '"event": "decision"' in line)
        lines[number] = lines[number].replace('"exit_reason": "interrupted"', '"exit_reason": "x"')
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(TraceError, match=rf"{path.name}:{number + 1}: .*'x'"):
            replay_all(path)


def replay_all(path: Path) -> None:
    for run in read_runs(path):
        replay_run(run)
