"""Cohere v2 chat bodies."""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def chat(reason: str, **message: Any) -> dict[str, Any]:
    """A v2 chat body."""
    return {"id": "x", "message": {"role": "assistant", **message}, "finish_reason": reason}


class TestCohere:
    """Cohere v2 chat."""

    def test_null_arguments(self) -> None:
        """Arguments `"null"` mean `{}`: the call is complete."""
        call = {"id": "c", "function": {"name": "now", "arguments": "null"}}
        turn = normalize(chat("TOOL_CALL", tool_calls=[call], tool_plan="plan"))
        assert turn.finish_reason is FinishReason.TOOL_CALLS
        assert turn.tool_calls[0].arguments == {}
        assert turn.reasoning == "plan"

    def test_max_tokens(self) -> None:
        """MAX_TOKENS is LENGTH and truncated."""
        turn = normalize(chat("MAX_TOKENS", content=[{"type": "text", "text": "a"}]))
        assert (turn.finish_reason, turn.truncated, turn.text) == (FinishReason.LENGTH, True, "a")

    def test_complete(self) -> None:
        """COMPLETE is STOP."""
        assert normalize(chat("COMPLETE", content=[])).finish_reason is FinishReason.STOP
