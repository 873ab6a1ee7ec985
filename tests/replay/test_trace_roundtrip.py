"""A trace written during a live run replays to exactly the decisions the live run made."""

from __future__ import annotations

from pathlib import Path

from agentfsm._engine.controller import Controller
from agentfsm._engine.policy import Policy
from agentfsm._model.types import Action, Decision, ModelTurn, ToolCall, ToolResult
from agentfsm._replay.engine import replay_run
from agentfsm._replay.trace import TraceWriter, read_trace
from agentfsm._replay.trajectories import read_runs


def _call(call_id: str, city: str, key: str | None) -> ToolCall:
    arguments = {"city": city} if key is None else {"city": city, "api_key": key}
    return ToolCall(id=call_id, name="weather", arguments=arguments)


def _live_run(path: Path, policy: Policy, key: str | None = None) -> list[Decision]:
    """Drive a controller through calls, a repeat that asks a human, and a final answer."""
    with TraceWriter(path) as writer:
        ctl = Controller(policy, run_id="live", observers=[writer])
        ctl.on_user_message("weather in Oslo and Rome?")
        decisions = []
        for turn, city in enumerate(["Oslo", "Oslo", "Oslo"], start=1):
            decision = ctl.on_model_output(ModelTurn(tool_calls=[_call(f"c{turn}", city, key)]))
            decisions.append(decision)
            if decision.action is Action.ASK_HUMAN:
                decision = ctl.on_human_reply(approved=True)
                decisions.append(decision)
            if decision.action is Action.EXECUTE_TOOLS:
                results = [ToolResult(call_id=c.id, content="sunny") for c in decision.tool_calls]
                decisions.append(ctl.on_tool_results(results))
        decisions.append(ctl.on_model_output(ModelTurn(text="Sunny in both.")))
    return decisions


def _brief(decision: Decision) -> tuple[str, str, str, str]:
    return (str(decision.action), str(decision.priority), decision.guard, decision.reason)


class TestTraceRoundTrip:
    """TraceWriter output read back by the agentfsm trace reader and replayed."""

    def test_replay_matches_the_live_decisions(self, tmp_path: Path) -> None:
        """Every decision of the replay equals the live one: action, priority, guard, reason."""
        path = tmp_path / "live.jsonl"
        policy = Policy(on_repeat="ask")
        live = _live_run(path, policy)
        (run,) = read_runs(path)
        result = replay_run(run, policy)
        replayed = [(d.action, d.priority, d.guard, d.reason) for d in result.decisions]
        assert replayed == [_brief(d) for d in live]
        assert result.format == "agentfsm-trace"
        assert result.exit_reason == result.recorded_end == "completed"

    def test_the_trace_holds_no_secret(self, tmp_path: Path) -> None:
        """The api_key argument is redacted on disk, also where a reason quotes it."""
        path = tmp_path / "live.jsonl"
        _live_run(path, Policy(on_repeat="ask"), key="sk-live-123")
        assert "sk-live-123" not in path.read_text(encoding="utf-8")
        events = [e["event"] for e in read_trace(path)]
        assert events[0] == "run_started"
        assert {"model_output", "tool_results", "decision", "human_reply"} <= set(events)
