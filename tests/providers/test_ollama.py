"""Ollama /api/chat: bodies and NDJSON streams."""

from __future__ import annotations

import json
from typing import Any

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def chat(done: bool = True, reason: str | None = "stop", **message: Any) -> dict[str, Any]:
    """An /api/chat body or chunk."""
    payload: dict[str, Any] = {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "", **message},
        "done": done,
    }
    if reason is not None:
        payload["done_reason"] = reason
    return payload


CALL = {"function": {"name": "f", "arguments": {"city": "Tokyo"}}}


class TestOllama:
    """Ollama chat bodies and streams."""

    def test_stop_with_calls_stays_stop(self) -> None:
        """`done_reason: stop` with tool calls stays STOP; ids stay empty."""
        turn = normalize(chat(tool_calls=[CALL]))
        assert turn.finish_reason is FinishReason.STOP
        assert (turn.tool_calls[0].id, turn.tool_calls[0].arguments) == ("", {"city": "Tokyo"})

    def test_length(self) -> None:
        """`length` is LENGTH and truncated."""
        turn = normalize(chat(reason="length", content="a"))
        assert turn.finish_reason is FinishReason.LENGTH
        assert turn.truncated

    def test_string_arguments(self) -> None:
        """Arguments sent as a JSON string are parsed too."""
        call = {"function": {"name": "f", "arguments": '{"a": 1}'}}
        assert normalize(chat(tool_calls=[call])).tool_calls[0].arguments == {"a": 1}

    def test_stream_without_done(self) -> None:
        """An NDJSON stream that never sends `done: true` is truncated."""
        lines = [json.dumps(chat(done=False, reason=None, content="a"))]
        turn = normalize(lines)
        assert turn.truncated
        assert turn.text == "a"

    def test_stream_error_line(self) -> None:
        """An error line in the stream sets the error."""
        turn = normalize([chat(done=False, reason=None, content="a"), {"error": "model crashed"}])
        assert (turn.error, turn.finish_reason) == ("model crashed", FinishReason.ERROR)

    def test_thinking(self) -> None:
        """`thinking` goes to `reasoning`."""
        assert normalize(chat(content="a", thinking="t")).reasoning == "t"
