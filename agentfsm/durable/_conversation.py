"""The messages of a durable run: assistant turns and tool results in OpenAI chat format.

Only what the model will read goes in: an output that is retried after being
cut is dropped, and every call of an assistant turn is followed by exactly one
tool message (the tool's result, or the controller's own error result).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agentfsm._model.types import ModelTurn, ToolCall, ToolResult

__all__ = ["Conversation"]


class Conversation:
    """The message list sent to the model, settled one round at a time."""

    def __init__(self, messages: Iterable[Mapping[str, Any]]) -> None:
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self._turn: ModelTurn | None = None
        self._answers: dict[str, ToolResult] = {}

    def output(self, turn: ModelTurn | None) -> None:
        """Hold the model's output (with the ids the controller issued) until its round settles."""
        self._turn, self._answers = turn, {}

    def answer(self, results: Iterable[ToolResult]) -> None:
        """Record results for calls of the held output."""
        for result in results:
            self._answers[result.call_id] = result

    def drop(self) -> None:
        """Forget the held output: it was cut and is retried, the model never sees it."""
        if not self._answers:
            self._turn = None

    def user(self, text: str) -> None:
        """Settle the round and add a user message (a human's clarification)."""
        self.settle()
        self.messages.append({"role": "user", "content": text})

    def settle(self) -> None:
        """Append the held output with its answered calls, then one tool message per call."""
        turn, answers = self._turn, self._answers
        self._turn, self._answers = None, {}
        if turn is None:
            return
        calls = [c for c in turn.tool_calls if c.id in answers]
        if turn.text or calls:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                message["tool_calls"] = [_call(c) for c in calls]
            self.messages.append(message)
        self.messages.extend(_tool(answers[c.id]) for c in calls)


def _call(call: ToolCall) -> dict[str, Any]:
    # Unparsed arguments go back as `{}`: providers reject invalid JSON in the history.
    arguments = json.dumps(call.arguments or {}, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _tool(result: ToolResult) -> dict[str, Any]:
    content = result.content
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    return {"role": "tool", "tool_call_id": result.call_id, "content": content}
