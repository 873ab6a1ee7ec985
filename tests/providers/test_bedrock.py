"""Bedrock Converse: bodies and ConverseStream events."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def converse(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    """A Converse body."""
    return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop}


class TestConverseBody:
    """Non-streamed Converse bodies."""

    @pytest.mark.parametrize("reason", ["guardrail_intervened", "content_filtered"])
    def test_filtered(self, reason: str) -> None:
        """Guardrail and content filtering map to CONTENT_FILTER."""
        assert normalize(converse([], reason)).finish_reason is FinishReason.CONTENT_FILTER

    def test_max_tokens(self) -> None:
        """`max_tokens` is LENGTH and truncated."""
        turn = normalize(converse([{"text": "a"}], "max_tokens"))
        assert turn.finish_reason is FinishReason.LENGTH
        assert turn.truncated

    def test_tool_use(self) -> None:
        """A toolUse block is a call with object arguments."""
        use = {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"a": 1}}}
        turn = normalize(converse([use], "tool_use"))
        assert turn.finish_reason is FinishReason.TOOL_CALLS
        assert (turn.tool_calls[0].id, turn.tool_calls[0].arguments) == ("t1", {"a": 1})

    def test_reasoning(self) -> None:
        """reasoningContent goes to `reasoning`."""
        block = {"reasoningContent": {"reasoningText": {"text": "r"}}}
        assert normalize(converse([block, {"text": "a"}], "end_turn")).reasoning == "r"


START = {
    "contentBlockStart": {
        "contentBlockIndex": 0,
        "start": {"toolUse": {"toolUseId": "t", "name": "f"}},
    }
}


def piece(text: str) -> dict[str, Any]:
    """A toolUse input delta."""
    return {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": text}}}}


class TestConverseStream:
    """ConverseStream events."""

    def test_complete(self) -> None:
        """Input pieces are joined and parsed once the block stops."""
        events = [
            START,
            piece('{"a":'),
            piece("1}"),
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"messageStop": {"stopReason": "tool_use"}},
        ]
        turn = normalize(events)
        assert turn.tool_calls[0].arguments == {"a": 1}
        assert not turn.truncated

    def test_open_block(self) -> None:
        """A toolUse block that never stops is broken and the turn truncated."""
        turn = normalize([START, piece('{"a":')])
        assert turn.truncated
        assert turn.tool_calls[0].raw_arguments == '{"a":'
        assert not turn.tool_calls[0].complete

    def test_exception_event(self) -> None:
        """An exception event sets the error; with no stop reason the finish is ERROR."""
        events = [START, {"throttlingException": {"message": "slow down"}}]
        turn = normalize(events)
        assert turn.error == "throttlingException: slow down"
        assert turn.finish_reason is FinishReason.ERROR
