"""The runner's history holds what the model sent: a call that did not arrive whole stays out.

After UNRECOVERABLE_OUTPUT (or any end that answers a cut turn), the assistant message keeps
the model's text and its whole calls; a cut or unparseable call is neither rewritten as
`name({})` nor answered by a tool message, so the history can be sent again as it is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._runner.session import Session
from agentfsm.testing.scripted import Reply, ScriptedCall, say
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_run
from tests.strategies import model_turns, tool_calls

pytestmark = LITELLM_CLIENT

WHOLE = {"latitude": 1.5, "longitude": 2.5}
CUT = '{"latitude": 31.2'


def get_weather(latitude: float, longitude: float) -> dict[str, Any]:
    """Forecast tomorrow's weather at a point."""
    return {"latitude": latitude, "longitude": longitude, "sky": "clear"}


def cut_turn() -> Reply:
    """Text, a whole call and a call cut at the length limit."""
    calls = [
        ScriptedCall(name="get_weather", arguments=WHOLE, id="whole"),
        ScriptedCall(name="get_weather", arguments=CUT, id="cut"),
    ]
    return Reply(text="Let me check.", tool_calls=calls, finish_reason="length")


def assistant_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]


class TestUnrecoverableOutputHistory:
    """af.run against the scripted server: the history after UNRECOVERABLE_OUTPUT is true."""

    @pytest.mark.parametrize("stream", [False, True])
    def test_a_cut_call_is_not_rewritten_as_an_empty_call(self, stream: bool) -> None:
        """The cut call is absent (no `get_weather({})`), the text and the whole call stay."""
        with ScriptedServer([cut_turn()]) as server:
            result = scripted_run(
                server,
                "weather?",
                tools=[get_weather],
                policy=af.Policy(max_retries=0),
                stream=stream,
            )
        assert result.exit_reason is af.ExitReason.UNRECOVERABLE_OUTPUT
        (assistant,) = [m for m in result.messages if m["role"] == "assistant"]
        assert assistant["content"] == "Let me check."
        calls = assistant_calls(result.messages)
        assert [(c["id"], json.loads(c["function"]["arguments"])) for c in calls] == [
            ("whole", WHOLE)
        ]
        answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
        assert answered == ["whole"]
        # The decisions still answer the cut call: the host sees why it did not run.
        assert "cut" in {r.call_id for r in result.decisions[-1].results}

    def test_the_history_is_accepted_when_sent_again(self) -> None:
        """The kept history goes to the Anthropic route as it is, and the run completes."""
        with ScriptedServer([cut_turn()]) as server:
            first = scripted_run(
                server, "weather?", tools=[get_weather], policy=af.Policy(max_retries=0)
            )
        again = [*first.messages, {"role": "user", "content": "just answer"}]
        with ScriptedServer([say("clear skies")]) as server:
            result = af.run(
                "anthropic/scripted",
                again,
                tools=[get_weather],
                api_base=server.anthropic_base,
                api_key="sk-ant-test",
            )
        assert result.exit_reason is af.ExitReason.COMPLETED
        sent = server.requests[0].body["messages"]
        uses = [b for m in sent for b in m["content"] if isinstance(b, dict) and "input" in b]
        assert [(b["id"], b["input"]) for b in uses] == [("whole", WHOLE)]


class TestSessionHistoryProperty:
    """Any turn, whole or cut, ending the run: the history holds only calls sent whole."""

    @given(
        turn=model_turns(calls=tool_calls(names=st.sampled_from(["a", "b"])), max_calls=3),
        retries=st.integers(0, 1),
    )
    def test_every_call_in_the_history_arrived_whole_and_has_one_result(
        self, turn: af.ModelTurn, retries: int
    ) -> None:
        """Each assistant call is a whole call of the turn with its own arguments, answered once;
        each tool message answers a call in the history."""
        ctl = af.Controller(af.Policy(max_retries=retries, max_turns=1))
        session = Session("m", [{"role": "user", "content": "go"}], ctl, None)
        decision = session.on_turn(turn)
        if decision.action is af.Action.EXECUTE_TOOLS:
            session.on_results(
                [af.ToolResult(call_id=c.id, content="ok") for c in decision.tool_calls]
            )
        whole = {c.id: c for c in (ctl.last_output or turn).tool_calls if c.complete}
        calls = assistant_calls(session.messages)
        for entry in calls:
            sent = whole[entry["id"]]
            assert json.loads(entry["function"]["arguments"]) == sent.arguments
        answered = [m["tool_call_id"] for m in session.messages if m["role"] == "tool"]
        assert sorted(answered) == sorted(c["id"] for c in calls)
