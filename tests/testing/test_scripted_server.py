"""The scripted server speaks OpenAI chat completions and Anthropic Messages on 127.0.0.1."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from agentfsm.testing.scripted import (
    Reply,
    call,
    cut_tool_call,
    fault,
    last_tool_result,
    say,
    stop_with_tool_calls,
    tool_calls,
)
from agentfsm.testing.server import ScriptedServer

WEATHER = call("get_weather", {"latitude": 31.23, "longitude": 121.47})


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """POST JSON and return the status, the headers (lower-cased) and the raw body."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            headers = {k.lower(): v for k, v in response.headers.items()}
            return int(response.status), headers, bytes(response.read())
    except urllib.error.HTTPError as exc:
        headers = {k.lower(): v for k, v in exc.headers.items()}
        return int(exc.code), headers, bytes(exc.read())


def sse_data(raw: bytes) -> list[str]:
    """Return the `data:` payloads of a server-sent event stream, in order."""
    return [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """Return the JSON events of an Anthropic stream, in order."""
    return [json.loads(d) for d in sse_data(raw)]


class TestOpenAIProtocol:
    """`POST /v1/chat/completions`, with and without streaming."""

    def test_body_carries_text_finish_reason_and_usage(self) -> None:
        """A text reply is one chat.completion with finish_reason stop and a usage block."""
        with ScriptedServer([say("hello")]) as server:
            status, _, raw = post(f"{server.openai_base}/chat/completions", {"messages": []})
        body = json.loads(raw)
        assert status == 200
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == "hello"
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"]["total_tokens"] == 30

    def test_tool_calls_get_ids_and_json_arguments(self) -> None:
        """Tool calls come with issued ids, JSON-text arguments and finish_reason tool_calls."""
        with ScriptedServer([tool_calls(WEATHER)]) as server:
            _, _, raw = post(f"{server.openai_base}/chat/completions", {})
        choice = json.loads(raw)["choices"][0]
        (entry,) = choice["message"]["tool_calls"]
        assert entry["id"].startswith("call_")
        assert json.loads(entry["function"]["arguments"]) == WEATHER.arguments
        assert choice["finish_reason"] == "tool_calls"

    def test_stop_with_tool_calls_keeps_stop(self) -> None:
        """Some OpenAI-compatible servers' quirk is served as scripted: stop plus tool calls."""
        with ScriptedServer([stop_with_tool_calls(WEATHER)]) as server:
            _, _, raw = post(f"{server.openai_base}/chat/completions", {})
        choice = json.loads(raw)["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["message"]["tool_calls"]

    def test_stream_splits_arguments_and_ends_with_done(self) -> None:
        """A streamed tool call comes in argument pieces, then finish chunk, usage and [DONE]."""
        request = {"stream": True, "stream_options": {"include_usage": True}}
        with ScriptedServer([tool_calls(WEATHER)]) as server:
            _, headers, raw = post(f"{server.openai_base}/chat/completions", request)
        data = sse_data(raw)
        chunks = [json.loads(d) for d in data[:-1]]
        pieces = [
            tc["function"].get("arguments", "")
            for c in chunks
            for ch in c["choices"]
            for tc in ch["delta"].get("tool_calls", [])
        ]
        assert headers["content-type"] == "text/event-stream"
        assert data[-1] == "[DONE]"
        assert json.loads("".join(pieces)) == WEATHER.arguments
        assert len([p for p in pieces if p]) > 1
        assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[-1]["usage"]["prompt_tokens"] == 20

    def test_cut_stream_has_no_finish_and_no_done(self) -> None:
        """A stream cut before its end sends neither a finish reason nor [DONE]."""
        with ScriptedServer([Reply(text="partial answer", end_stream=False)]) as server:
            _, _, raw = post(f"{server.openai_base}/chat/completions", {"stream": True})
        data = sse_data(raw)
        assert "[DONE]" not in data
        assert all(json.loads(d)["choices"][0]["finish_reason"] is None for d in data)

    def test_cut_tool_call_sends_invalid_json_with_length(self) -> None:
        """A tool call cut at the length limit has unfinished arguments and finish length."""
        with ScriptedServer([cut_tool_call("get_weather", '{"latitude": 31.2')]) as server:
            _, _, raw = post(f"{server.openai_base}/chat/completions", {})
        choice = json.loads(raw)["choices"][0]
        assert choice["finish_reason"] == "length"
        assert choice["message"]["tool_calls"][0]["function"]["arguments"] == '{"latitude": 31.2'


class TestAnthropicProtocol:
    """`POST /v1/messages`, with and without streaming."""

    def test_body_has_blocks_and_stop_reason(self) -> None:
        """Text and tool_use blocks come in one message with stop_reason tool_use."""
        with ScriptedServer([tool_calls(WEATHER, text="Let me check.")]) as server:
            _, _, raw = post(f"{server.anthropic_base}/v1/messages", {})
        body = json.loads(raw)
        assert [b["type"] for b in body["content"]] == ["text", "tool_use"]
        assert body["content"][1]["input"] == WEATHER.arguments
        assert body["stop_reason"] == "tool_use"

    def test_stream_events_in_order(self) -> None:
        """A streamed reply is message_start, block events, message_delta, message_stop."""
        with ScriptedServer([tool_calls(WEATHER)]) as server:
            _, _, raw = post(f"{server.anthropic_base}/v1/messages", {"stream": True})
        events = sse_events(raw)
        partial = "".join(
            e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
        )
        assert events[0]["type"] == "message_start"
        assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
        assert events[-2]["delta"]["stop_reason"] == "tool_use"
        assert json.loads(partial) == WEATHER.arguments

    def test_length_maps_to_max_tokens(self) -> None:
        """A reply scripted with finish reason length stops with max_tokens."""
        with ScriptedServer([say("cut", finish_reason="length")]) as server:
            _, _, raw = post(f"{server.anthropic_base}/v1/messages", {})
        assert json.loads(raw)["stop_reason"] == "max_tokens"

    def test_error_body_is_anthropic_shaped(self) -> None:
        """An error reply has Anthropic's `{"type": "error", "error": {...}}` body."""
        with ScriptedServer([fault(529, message="overloaded")]) as server:
            status, _, raw = post(f"{server.anthropic_base}/v1/messages", {})
        assert status == 529
        assert json.loads(raw) == {
            "type": "error",
            "error": {"type": "api_error", "message": "overloaded"},
        }


class TestScriptedServer:
    """Serving, faults and the request record."""

    def test_rate_limit_sends_retry_after(self) -> None:
        """A 429 fault carries its Retry-After header and an OpenAI error body."""
        with ScriptedServer([fault(429, retry_after=2)]) as server:
            status, headers, raw = post(f"{server.openai_base}/chat/completions", {})
        assert status == 429
        assert headers["retry-after"] == "2"
        assert json.loads(raw)["error"]["type"] == "rate_limit_error"

    def test_exhausted_script_answers_400(self) -> None:
        """A request after the last scripted reply gets a 400 that says so."""
        with ScriptedServer([]) as server:
            status, _, raw = post(f"{server.openai_base}/chat/completions", {})
        assert status == 400
        assert "script exhausted" in raw.decode()

    def test_unknown_path_is_404(self) -> None:
        """Only the two protocol routes exist; anything else is 404 and consumes no reply."""
        with ScriptedServer([say("kept")]) as server:
            status, _, _ = post(f"{server.url}/v1/embeddings", {})
            assert server.remaining == 1
        assert status == 404

    def test_records_every_request(self) -> None:
        """Each request is recorded with its path, JSON body and headers."""
        body = {"model": "m", "max_tokens": 64, "tools": [{"type": "function"}]}
        with ScriptedServer([say("a"), say("b")]) as server:
            post(f"{server.openai_base}/chat/completions", body)
            post(f"{server.anthropic_base}/v1/messages", {"max_tokens": 128})
        first, second = server.requests
        assert first.path == "/v1/chat/completions"
        assert first.body == body
        assert first.headers["content-type"] == "application/json"
        assert (second.path, second.body["max_tokens"]) == ("/v1/messages", 128)

    def test_responder_builds_reply_from_request(self) -> None:
        """A callable in the script answers from the request body (here, the last tool result)."""

        def echo(body: Any) -> Reply:
            return say(f"got {last_tool_result(body)}")

        messages = [{"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
        with ScriptedServer([echo]) as server:
            _, _, raw = post(f"{server.openai_base}/chat/completions", {"messages": messages})
        assert json.loads(raw)["choices"][0]["message"]["content"] == "got sunny"

    def test_port_is_released_on_close(self) -> None:
        """After the context ends the server no longer accepts connections."""
        with ScriptedServer([]) as server:
            url = f"{server.openai_base}/chat/completions"
        with pytest.raises(urllib.error.URLError):
            post(url, {})


class TestLastToolResult:
    """Finding the last tool result in either protocol's request body."""

    def test_openai_tool_message(self) -> None:
        """An OpenAI `role: tool` message's content is returned."""
        body = {"messages": [{"role": "tool", "content": "a"}, {"role": "tool", "content": "b"}]}
        assert last_tool_result(body) == "b"

    def test_anthropic_tool_result_block(self) -> None:
        """An Anthropic `tool_result` block's text content is returned."""
        block = {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "x"}],
        }
        body = {"messages": [{"role": "user", "content": [block]}]}
        assert last_tool_result(body) == "x"

    def test_none_without_results(self) -> None:
        """A body without tool results gives None."""
        assert last_tool_result({"messages": [{"role": "user", "content": "hi"}]}) is None


class TestChunkDelay:
    """`Reply(chunk_delay=...)` streams its events apart in time, as a model writing."""

    def test_the_first_chunk_arrives_before_the_last_is_sent(self) -> None:
        """The client reads the first text chunk well before the stream ends."""
        reply = Reply(text="It is sunny in Paris today, all day long.", chunk_delay=0.05)
        body = json.dumps({"stream": True}).encode()
        with ScriptedServer([reply]) as server:
            request = urllib.request.Request(
                f"{server.openai_base}/chat/completions",
                data=body,
                headers={"content-type": "application/json"},
            )
            start = time.perf_counter()
            with urllib.request.urlopen(request, timeout=5) as response:
                first = response.readline()
                first_at = time.perf_counter() - start
                rest = response.read()
                end_at = time.perf_counter() - start
        assert first.startswith(b"data: ")
        assert b"[DONE]" in rest
        assert end_at - first_at >= 0.2  # at least 5 more events, 0.05 s apart
