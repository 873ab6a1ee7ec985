"""Streamed runs end as the wire says, through litellm's real client and a local server.

Anthropic's `pause_turn` streamed is PAUSE, as it is in a body: the run calls the
model again and sends the paused turn back with its server tool work. An
OpenAI-style stream the server ended with `data: [DONE]` but no finish reason is
used when its answer or calls are whole; a cut one is retried.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm._model.types import Action, ExitReason, Priority
from agentfsm._runner.loop import RunResult, arun, run
from agentfsm.providers import normalize
from agentfsm.testing.scripted import Reply, call, say
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import WeatherTool, scripted_arun, scripted_run

pytestmark = LITELLM_CLIENT

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
SHANGHAI = {"latitude": 31.23, "longitude": 121.47}


def paused_events() -> list[dict[str, Any]]:
    """A recorded Anthropic stream (text, a web_fetch server tool use and its result) paused
    after the result: the rest of the answer is dropped and the stop reason is `pause_turn`."""
    path = CORPUS / "wire/anthropic/vercel-anthropic-web-fetch-tool.1.stream.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    kept = [
        e
        for e in events
        if e["type"] not in ("message_delta", "message_stop") and e.get("index", 0) < 3
    ]
    delta = {"stop_reason": "pause_turn", "stop_sequence": None}
    return [
        *kept,
        {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 80}},
        {"type": "message_stop"},
    ]


def paused_body() -> dict[str, Any]:
    """A recorded Messages body that paused (`pause_turn`) after server web searches."""
    path = CORPUS / "providers/anthropic/messages-pause_turn-server-web_search.json"
    return dict(json.loads(path.read_text()))


def server_tool_ids(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["id"] for b in blocks if b.get("type") == "server_tool_use"]


def run_anthropic(server: ScriptedServer, *, stream: bool, asynchronous: bool) -> RunResult:
    options: dict[str, Any] = dict(api_base=server.anthropic_base, api_key="sk-test", stream=stream)
    if asynchronous:
        return asyncio.run(arun("anthropic/scripted", "Search, then answer.", **options))
    return run("anthropic/scripted", "Search, then answer.", **options)


class TestPausedTurn:
    """`pause_turn`, streamed or not: call again, the paused turn sent back as it came."""

    @pytest.mark.parametrize("asynchronous", [False, True])
    @pytest.mark.parametrize("stream", [False, True])
    def test_paused_turn_goes_on_with_its_server_tool_work(
        self, stream: bool, asynchronous: bool
    ) -> None:
        """The pause is PAUSE (CONTINUE by Paused), not a cut; the next request holds the
        paused turn's server tool use and result, and the run completes."""
        body, events = paused_body(), paused_events()
        source = (
            body["content"]
            if not stream
            else [e["content_block"] for e in events if e["type"] == "content_block_start"]
        )
        script = [Reply(body=body, events=events), say("Here is what I found.")]
        with ScriptedServer(script) as server:
            result = run_anthropic(server, stream=stream, asynchronous=asynchronous)
        assert result.exit_reason is ExitReason.COMPLETED
        first = result.decisions[0]
        assert (first.action, first.fired, first.priority) == (
            Action.CONTINUE,
            "Paused()",
            Priority.P4,
        )
        assert len(server.requests) == 2
        sent_back = server.requests[1].body["messages"][-1]
        assert sent_back["role"] == "assistant"
        answered = {b["tool_use_id"] for b in source if b["type"].endswith("_tool_result")}
        back = sent_back["content"]
        assert answered
        assert answered <= set(server_tool_ids(back))
        assert answered <= {b.get("tool_use_id") for b in back if b["type"].endswith("_result")}
        said = normalize(events if stream else body).text
        assert said
        assert "".join(b["text"] for b in back if b["type"] == "text") == said
        assert result.text == "Here is what I found."


class TestEndedWithoutReason:
    """An OpenAI-style stream ended by `[DONE]` with no finish reason (OpenRouter-style)."""

    @pytest.mark.parametrize("asynchronous", [False, True])
    def test_whole_answer_completes_at_once(self, asynchronous: bool) -> None:
        """A whole text answer is the final answer: one request, FINAL at P7, no retry."""
        with ScriptedServer([say("Sunny tomorrow.", finish_reason=None)]) as server:
            if asynchronous:
                result = asyncio.run(scripted_arun(server, "Weather?", stream=True))
            else:
                result = scripted_run(server, "Weather?", stream=True)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text == "Sunny tomorrow."
        assert [(d.action, d.priority) for d in result.decisions] == [(Action.FINAL, Priority.P7)]
        assert len(server.requests) == 1

    @pytest.mark.parametrize("asynchronous", [False, True])
    def test_whole_tool_call_runs_once(
        self, get_weather: WeatherTool, weather_calls: list[Any], asynchronous: bool
    ) -> None:
        """A whole tool call is executed (EXECUTE_TOOLS at P7), then the answer ends the run."""
        script = [
            Reply(tool_calls=[call("get_weather", SHANGHAI)], finish_reason=None),
            say("Forecast given.", finish_reason=None),
        ]
        with ScriptedServer(script) as server:
            options: dict[str, Any] = dict(tools=[get_weather], stream=True)
            if asynchronous:
                result = asyncio.run(scripted_arun(server, "Weather?", **options))
            else:
                result = scripted_run(server, "Weather?", **options)
        assert result.exit_reason is ExitReason.COMPLETED
        assert weather_calls == [(31.23, 121.47)]
        first = result.decisions[0]
        assert (first.action, first.priority) == (Action.EXECUTE_TOOLS, Priority.P7)

    def test_cut_arguments_are_retried(
        self, get_weather: WeatherTool, weather_calls: list[Any]
    ) -> None:
        """Arguments that do not parse are retried even after `[DONE]`; the call never runs."""
        script = [
            Reply(tool_calls=[call("get_weather", '{"latitude": 31.2')], finish_reason=None),
            say("No forecast."),
        ]
        with ScriptedServer(script) as server:
            result = scripted_run(server, "Weather?", tools=[get_weather], stream=True)
        assert weather_calls == []
        assert (result.decisions[0].action, result.decisions[0].priority) == (
            Action.RETRY,
            Priority.P0,
        )
        assert result.exit_reason is ExitReason.COMPLETED

    def test_stream_cut_before_done_is_retried(self) -> None:
        """The same answer with no `[DONE]` (the connection dropped) is a cut: retried."""
        script = [
            Reply(text="Sunny tomorrow.", finish_reason=None, end_stream=False),
            say("Sunny."),
        ]
        with ScriptedServer(script) as server:
            result = scripted_run(server, "Weather?", stream=True)
        assert result.decisions[0].action is Action.RETRY
        assert len(server.requests) == 2
        assert result.text == "Sunny."

    def test_data_after_done_is_no_proper_end(self) -> None:
        """A stream whose `[DONE]` is followed by more data did not end there: retried.

        The data after `[DONE]` is written in the same write as `[DONE]`, so it arrives in
        the bytes the client reads with it: the SDK stops reading at `[DONE]`, and data
        written later may never be read (the end is judged on what was read).
        """
        head = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
        chunk = {**head, "choices": [{"index": 0, "delta": {"content": "Sunny"}}]}
        trailing = f"data: [DONE]\n\ndata: {json.dumps(chunk)}\n\n"
        events: list[dict[str, Any] | str] = [chunk, trailing]
        with ScriptedServer([Reply(events=events), say("Sunny.")]) as server:
            result = scripted_run(server, "Weather?", stream=True)
        assert result.decisions[0].action is Action.RETRY
