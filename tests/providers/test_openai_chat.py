"""OpenAI Chat Completions and compatible servers: bodies and streams."""

from __future__ import annotations

import json
from typing import Any

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def body(message: dict[str, Any], finish: object = "stop", **extra: Any) -> dict[str, Any]:
    """A chat completion body with one choice."""
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", **message}}
    if finish is not ...:
        choice["finish_reason"] = finish
    return {"object": "chat.completion", "model": "m", "choices": [choice], **extra}


def call(name: str, arguments: str, call_id: str = "c1") -> dict[str, Any]:
    """One tool call as a chat message carries it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One stream chunk."""
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


class TestChatBody:
    """Non-streamed chat completions."""

    def test_stop_with_tool_calls_stays_stop(self) -> None:
        """`stop` with tool calls present is still STOP: the controller reconciles."""
        turn = normalize(body({"tool_calls": [call("f", "{}")]}, "stop"))
        assert turn.finish_reason is FinishReason.STOP
        assert turn.tool_calls[0].complete

    def test_missing_finish_is_unknown(self) -> None:
        """No finish reason maps to UNKNOWN with no raw string."""
        turn = normalize(body({"content": "hi"}, ...))
        assert (turn.finish_reason, turn.raw_finish_reason) == (FinishReason.UNKNOWN, None)

    def test_empty_and_null_finish_are_unknown(self) -> None:
        """`""` and `null` map to UNKNOWN; `""` is kept as the raw string."""
        assert normalize(body({"content": "x"}, "")).raw_finish_reason == ""
        assert normalize(body({"content": "x"}, None)).finish_reason is FinishReason.UNKNOWN

    def test_unrecognised_finish_is_unknown(self) -> None:
        """An unrecognised reason maps to UNKNOWN and is kept raw."""
        turn = normalize(body({"content": "x"}, "eos_maybe"))
        assert (turn.finish_reason, turn.raw_finish_reason) == (FinishReason.UNKNOWN, "eos_maybe")

    def test_length_is_truncated(self) -> None:
        """`length` is LENGTH and truncated."""
        turn = normalize(body({"content": '{"'}, "length"))
        assert turn.finish_reason is FinishReason.LENGTH
        assert turn.truncated

    def test_content_filter(self) -> None:
        """`content_filter` maps to CONTENT_FILTER."""
        assert normalize(body({}, "content_filter")).finish_reason is FinishReason.CONTENT_FILTER

    def test_refusal_with_stop(self) -> None:
        """A refusal keeps finish STOP and sets `refusal`, not `text`."""
        turn = normalize(body({"content": None, "refusal": "no"}, "stop"))
        assert (turn.finish_reason, turn.refusal, turn.text) == (FinishReason.STOP, "no", "")

    def test_empty_refusal_is_none(self) -> None:
        """An empty refusal string (Snowflake) is no refusal."""
        assert normalize(body({"content": "a", "refusal": ""})).refusal is None

    def test_reasoning_kept_apart(self) -> None:
        """`reasoning_content` and `reasoning` go to `reasoning`, not `text`."""
        assert normalize(body({"content": "a", "reasoning_content": "r"})).reasoning == "r"
        turn = normalize(body({"content": "a", "reasoning": "q"}))
        assert (turn.text, turn.reasoning) == ("a", "q")

    def test_legacy_function_call(self) -> None:
        """The legacy `function_call` becomes one call with an empty id."""
        message = {"function_call": {"name": "f", "arguments": '{"x": 1}'}}
        turn = normalize(body(message, "function_call"))
        assert turn.finish_reason is FinishReason.TOOL_CALLS
        assert (turn.tool_calls[0].id, turn.tool_calls[0].arguments) == ("", {"x": 1})

    def test_empty_function_call_stub_ignored(self) -> None:
        """A zero-valued `function_call` stub is not a call."""
        assert normalize(body({"function_call": {"name": "", "arguments": ""}})).tool_calls == []

    def test_non_object_arguments_broken(self) -> None:
        """Arguments that are a JSON list leave the call broken."""
        turn = normalize(body({"tool_calls": [call("f", "[1]")]}, "tool_calls"))
        assert turn.tool_calls[0].arguments is None
        assert turn.tool_calls[0].error

    def test_content_parts(self) -> None:
        """Content given as a list of text parts is concatenated."""
        content = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
        assert normalize(body({"content": content})).text == "ab"

    def test_usage_and_cost(self) -> None:
        """Usage carries prompt and completion tokens and a reported cost."""
        usage = {"prompt_tokens": 5, "completion_tokens": 2, "cost": 0.01}
        turn = normalize(body({"content": "a"}, usage=usage))
        assert turn.usage is not None
        assert (turn.usage.input_tokens, turn.usage.output_tokens, turn.usage.cost) == (5, 2, 0.01)


class TestChatStream:
    """Streamed chat completion chunks."""

    def test_arguments_in_pieces(self) -> None:
        """Argument fragments are joined and parsed once the stream ends."""
        chunks = [
            chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x"'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
            chunk({}, "tool_calls"),
        ]
        turn = normalize(chunks)
        assert turn.tool_calls[0].arguments == {"x": 1}
        assert turn.tool_calls[0].raw_arguments == '{"x": 1}'

    def test_index_starting_at_one(self) -> None:
        """Tool-call indexes that start at 1 make one call, not a phantom at 0."""
        chunks = [
            chunk({"tool_calls": [{"index": 1, "function": {"name": "f", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
            chunk({}, "tool_calls"),
        ]
        turn = normalize(chunks)
        assert [c.name for c in turn.tool_calls] == ["f"]
        assert turn.tool_calls[0].id == ""

    def test_repeated_empty_name_does_not_clobber(self) -> None:
        """A later delta with `name: ""` keeps the name already received."""
        chunks = [
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "", "arguments": "{}"}}]}),
            chunk({}, "tool_calls"),
        ]
        assert normalize(chunks).tool_calls[0].name == "f"

    def test_cut_mid_arguments(self) -> None:
        """A stream that ends mid-arguments is truncated and its call broken, raw kept."""
        chunks = [
            chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]}),
        ]
        turn = normalize(chunks)
        assert turn.truncated
        assert turn.finish_reason is FinishReason.UNKNOWN
        assert turn.tool_calls[0].raw_arguments == '{"x": '
        assert turn.tool_calls[0].error is not None

    def test_cut_with_parseable_arguments(self) -> None:
        """The last call of an unfinished stream is broken even if its arguments parse."""
        chunks = [
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]})
        ]
        assert not normalize(chunks).tool_calls[0].complete

    def test_error_chunk_after_finish(self) -> None:
        """An error chunk after the finish sets `error` and makes the turn truncated."""
        chunks = [
            chunk({"content": "a"}, "stop"),
            {"error": {"code": 400, "message": "Token limit reached"}, "choices": []},
        ]
        turn = normalize(chunks)
        assert turn.finish_reason is FinishReason.STOP
        assert (turn.error, turn.truncated) == ("400: Token limit reached", True)

    def test_error_chunk_without_finish(self) -> None:
        """An error chunk with no finish claim at all is ERROR."""
        turn = normalize([chunk({"content": "a"}), {"error": {"message": "boom"}, "choices": []}])
        assert (turn.finish_reason, turn.error) == (FinishReason.ERROR, "boom")

    def test_refusal_and_reasoning_deltas(self) -> None:
        """Refusal and reasoning deltas accumulate apart from the text."""
        chunks = [
            chunk({"reasoning_content": "th"}),
            chunk({"reasoning_content": "ink", "refusal": "no"}),
            chunk({"refusal": "pe"}, "stop"),
        ]
        turn = normalize(chunks)
        assert (turn.text, turn.reasoning, turn.refusal) == ("", "think", "nope")

    def test_usage_chunk(self) -> None:
        """The trailing usage chunk is read."""
        usage = {"prompt_tokens": 3, "completion_tokens": 1}
        turn = normalize([chunk({"content": "a"}, "stop"), {"choices": [], "usage": usage}])
        assert turn.usage is not None
        assert turn.usage.total_tokens == 4

    def test_lone_chunk(self) -> None:
        """A single chunk dict reads as a one-chunk stream."""
        turn = normalize(chunk({"content": "a"}, "stop", model="m"))
        assert (turn.text, turn.model, turn.truncated) == ("a", "m", False)

    def test_missing_indexes(self) -> None:
        """Deltas without an index continue the last call unless they name a new one."""
        chunks = [
            chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}),
            chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
            chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            chunk({}, "tool_calls"),
        ]
        turn = normalize(chunks)
        assert [(c.id, c.arguments) for c in turn.tool_calls] == [("a", {}), ("b", {})]

    def test_sse_text(self) -> None:
        """A raw SSE transcript (event lines, comments, [DONE]) is read as a stream."""
        lines = [
            ": OPENROUTER PROCESSING",
            "data: " + json.dumps(chunk({"content": "hi"})),
            "",
            "data: " + json.dumps(chunk({}, "stop")),
            "data: [DONE]",
        ]
        turn = normalize("\n".join(lines))
        assert (turn.text, turn.finish_reason) == ("hi", FinishReason.STOP)
        assert (turn.truncated, turn.error) == (False, None)  # [DONE] ends it, never damages
