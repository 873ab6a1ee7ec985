"""Gemini / Vertex generateContent: bodies and streams."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def body(
    parts: list[dict[str, Any]] | None, reason: str | None, **candidate: Any
) -> dict[str, Any]:
    """A generateContent body with one candidate."""
    entry: dict[str, Any] = dict(candidate)
    if parts is not None:
        entry["content"] = {"role": "model", "parts": parts}
    if reason is not None:
        entry["finishReason"] = reason
    return {"candidates": [entry], "modelVersion": "gemini-x"}


CALL = {"functionCall": {"name": "f", "args": {"a": 1}}}


class TestGeminiBody:
    """Non-streamed bodies."""

    def test_function_call_under_stop(self) -> None:
        """A function call under STOP stays STOP, with the call complete and id empty."""
        turn = normalize(body([CALL], "STOP"))
        assert turn.finish_reason is FinishReason.STOP
        assert (turn.tool_calls[0].id, turn.tool_calls[0].arguments) == ("", {"a": 1})

    def test_malformed_function_call(self) -> None:
        """MALFORMED_FUNCTION_CALL is ERROR, truncated, its calls broken, the message kept."""
        turn = normalize(body([CALL], "MALFORMED_FUNCTION_CALL", finishMessage="bad call"))
        assert (turn.finish_reason, turn.error, turn.truncated) == (
            FinishReason.ERROR,
            "bad call",
            True,
        )
        assert not turn.tool_calls[0].complete

    def test_unexpected_tool_call(self) -> None:
        """UNEXPECTED_TOOL_CALL is ERROR and its call never runs: the turn is retried."""
        turn = normalize(body([CALL], "UNEXPECTED_TOOL_CALL", finishMessage="undeclared"))
        assert (turn.finish_reason, turn.error) == (FinishReason.ERROR, "undeclared")
        assert not turn.tool_calls[0].complete
        assert "UNEXPECTED_TOOL_CALL" in (turn.tool_calls[0].error or "")
        assert turn.truncated

    @pytest.mark.parametrize(
        "reason",
        ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MODEL_ARMOR"],
    )
    def test_filters(self, reason: str) -> None:
        """The safety family maps to CONTENT_FILTER."""
        turn = normalize(body(None, reason))
        assert (turn.finish_reason, turn.raw_finish_reason) == (FinishReason.CONTENT_FILTER, reason)

    def test_prompt_blocked(self) -> None:
        """`promptFeedback.blockReason` with no candidates is CONTENT_FILTER."""
        turn = normalize({"promptFeedback": {"blockReason": "SAFETY"}})
        assert turn.finish_reason is FinishReason.CONTENT_FILTER

    def test_max_tokens(self) -> None:
        """MAX_TOKENS is LENGTH and truncated."""
        turn = normalize(body([{"text": "a"}], "MAX_TOKENS"))
        assert turn.finish_reason is FinishReason.LENGTH
        assert turn.truncated

    def test_thought_parts(self) -> None:
        """Thought parts go to `reasoning`."""
        turn = normalize(body([{"text": "t", "thought": True}, {"text": "a"}], "STOP"))
        assert (turn.text, turn.reasoning) == ("a", "t")

    def test_unrecognised_reason(self) -> None:
        """A reason the enum does not document is UNKNOWN; the documented OTHER is ERROR."""
        assert normalize(body([], "SOMETHING_NEW")).finish_reason is FinishReason.UNKNOWN
        assert normalize(body([], "OTHER")).finish_reason is FinishReason.ERROR

    def test_usage_includes_thoughts(self) -> None:
        """Output tokens include thinking tokens."""
        meta = {"promptTokenCount": 3, "candidatesTokenCount": 2, "thoughtsTokenCount": 5}
        turn = normalize({**body([], "STOP"), "usageMetadata": meta})
        assert turn.usage is not None
        assert turn.usage.output_tokens == 7


def partial(path: str, value: dict[str, Any], more: bool = True) -> dict[str, Any]:
    """A chunk streaming one argument piece."""
    call: dict[str, Any] = {"partialArgs": [{"jsonPath": path, **value}]}
    if more:
        call["willContinue"] = True
    return {"candidates": [{"content": {"parts": [{"functionCall": call}]}}]}


START = {
    "candidates": [{"content": {"parts": [{"functionCall": {"name": "w", "willContinue": True}}]}}]
}
END = body([{"text": ""}], "STOP")


class TestGeminiStream:
    """streamGenerateContent chunks."""

    def test_partial_args_with_terminal_call(self) -> None:
        """Streamed argument pieces are assembled when a terminal functionCall closes them."""
        chunks = [
            START,
            partial("$.items[0].name", {"stringValue": "ap"}),
            partial("$.items[0].name", {"stringValue": "ple"}),
            partial("$.items[0].price", {"numberValue": 0.5}, more=False),
            {"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]},
            END,
        ]
        turn = normalize(chunks)
        assert turn.tool_calls[0].arguments == {"items": [{"name": "apple", "price": 0.5}]}
        assert not turn.truncated

    def test_partial_args_without_terminal_call(self) -> None:
        """Without a terminal functionCall the call is kept broken and the turn truncated."""
        chunks = [START, partial("$.a", {"boolValue": True}, more=False), END]
        turn = normalize(chunks)
        call = turn.tool_calls[0]
        assert (call.name, call.arguments, call.raw_arguments) == ("w", None, '{"a": true}')
        assert call.error is not None
        assert turn.truncated

    def test_stream_without_finish(self) -> None:
        """A stream that never sends a finishReason is truncated."""
        turn = normalize([body([{"text": "a"}], None)])
        assert turn.truncated
        assert turn.text == "a"

    def test_text_across_chunks(self) -> None:
        """Text parts across chunks are concatenated."""
        turn = normalize([body([{"text": "a"}], None), body([{"text": "b"}], "STOP")])
        assert (turn.text, turn.truncated) == ("ab", False)
