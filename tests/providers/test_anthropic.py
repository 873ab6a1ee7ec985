"""Anthropic Messages: bodies and stream events."""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def message(content: list[dict[str, Any]], stop: str | None, **extra: Any) -> dict[str, Any]:
    """A Messages body."""
    return {"type": "message", "model": "claude", "content": content, "stop_reason": stop, **extra}


def tool_use(name: str, payload: object, block_id: str = "toolu_1") -> dict[str, Any]:
    """A tool_use block."""
    return {"type": "tool_use", "id": block_id, "name": name, "input": payload}


class TestMessagesBody:
    """Non-streamed Messages bodies."""

    def test_server_tool_use_not_a_call(self) -> None:
        """`server_tool_use` blocks are counted, never put in `tool_calls`."""
        server = {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}}
        turn = normalize(message([server, tool_use("f", {})], "tool_use"))
        assert [c.name for c in turn.tool_calls] == ["f"]
        assert turn.server_tool_calls == 1

    def test_pause_turn(self) -> None:
        """`pause_turn` is PAUSE and not truncated."""
        turn = normalize(message([{"type": "text", "text": "wait"}], "pause_turn"))
        assert turn.finish_reason is FinishReason.PAUSE
        assert not turn.truncated

    def test_refusal_text(self) -> None:
        """`refusal` is REFUSAL with the explanation as the refusal text."""
        details = {"type": "refusal", "explanation": "not allowed"}
        turn = normalize(message([], "refusal", stop_details=details))
        assert (turn.finish_reason, turn.refusal) == (FinishReason.REFUSAL, "not allowed")

    def test_refusal_without_details(self) -> None:
        """A refusal without details still carries refusal text."""
        assert normalize(message([], "refusal")).refusal

    def test_max_tokens(self) -> None:
        """`max_tokens` is LENGTH and truncated."""
        turn = normalize(message([{"type": "text", "text": "a"}], "max_tokens"))
        assert turn.finish_reason is FinishReason.LENGTH
        assert turn.truncated

    def test_stop_sequence_is_stop(self) -> None:
        """`stop_sequence` is STOP."""
        assert normalize(message([], "stop_sequence")).finish_reason is FinishReason.STOP

    def test_thinking_is_reasoning(self) -> None:
        """Thinking blocks go to `reasoning`, not `text`."""
        blocks = [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "a"}]
        turn = normalize(message(blocks, "end_turn"))
        assert (turn.text, turn.reasoning) == ("a", "hmm")

    def test_input_not_an_object(self) -> None:
        """A tool_use whose input is not an object is broken."""
        assert normalize(message([tool_use("f", [1])], "tool_use")).tool_calls[0].error

    def test_usage_counts_cache(self) -> None:
        """Input tokens include cache reads and writes."""
        usage = {
            "input_tokens": 1,
            "cache_read_input_tokens": 10,
            "cache_creation_input_tokens": 100,
            "output_tokens": 5,
        }
        turn = normalize(message([], "end_turn", usage=usage))
        assert turn.usage is not None
        assert (turn.usage.input_tokens, turn.usage.output_tokens) == (
            111,
            5,
        )


def stream(*, stop: bool = True, close_tool: bool = True) -> list[dict[str, Any]]:
    """A text block then a tool_use block, optionally left open or without a stop reason."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "claude", "usage": {"input_tokens": 4}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": tool_use("f", {})},
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"x": '},
        },
    ]
    if close_tool:
        delta = {"type": "input_json_delta", "partial_json": "1}"}
        events += [
            {"type": "content_block_delta", "index": 1, "delta": delta},
            {"type": "content_block_stop", "index": 1},
        ]
    if stop:
        events += [
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
            {"type": "message_stop"},
        ]
    return events


class TestMessagesStream:
    """Messages stream events."""

    def test_complete(self) -> None:
        """A closed tool_use block parses its joined JSON."""
        turn = normalize(stream())
        assert (turn.text, turn.tool_calls[0].arguments) == ("a", {"x": 1})
        assert not turn.truncated

    def test_open_block_is_broken(self) -> None:
        """A tool_use block with no content_block_stop is broken and the turn truncated."""
        turn = normalize(stream(close_tool=False))
        assert turn.truncated
        assert turn.tool_calls[0].raw_arguments == '{"x": '
        assert turn.tool_calls[0].error is not None

    def test_missing_stop_reason(self) -> None:
        """A stream that never says why it stopped is truncated."""
        turn = normalize(stream(stop=False))
        assert turn.truncated
        assert turn.finish_reason is FinishReason.UNKNOWN

    def test_error_event(self) -> None:
        """An error event sets the error; with no stop reason the finish is ERROR."""
        events = [*stream(stop=False), {"type": "error", "error": {"message": "overloaded"}}]
        turn = normalize(events)
        assert (turn.error, turn.finish_reason) == ("overloaded", FinishReason.ERROR)

    def test_empty_json_means_no_arguments(self) -> None:
        """A tool_use block whose only delta is empty has `{}` arguments."""
        events = [
            {"type": "content_block_start", "index": 0, "content_block": tool_use("f", {})},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": ""},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        ]
        assert normalize(events).tool_calls[0].arguments == {}
