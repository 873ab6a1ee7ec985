"""Ollama's native /api/chat: body and NDJSON stream chunks.

Arguments arrive as an object and calls carry no id (kept `""`; the controller
issues one). `done_reason: "stop"` with tool calls stays STOP; `length` is a
cut. A stream that never sends `done: true` is truncated.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentfsm._model.types import FinishReason, ModelTurn, ToolCall
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_list,
    as_str,
    call_from_object,
    make_usage,
)

__all__ = ["TABLE", "OllamaStream", "is_ollama", "read_body"]

TABLE: dict[str, FinishReason] = {
    # Ollama API docs, /api/chat `done_reason`: stop, length, and load / unload for a
    # request that loaded or unloaded the model and generated nothing.
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "load": FinishReason.ERROR,
    "unload": FinishReason.ERROR,
}
"""Ollama done reasons; unlisted -> UNKNOWN."""


def is_ollama(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is an /api/chat body or stream chunk."""
    return "done" in payload and type(payload.get("message")) is dict


class OllamaStream:
    """Accumulate /api/chat chunks (or read one body) into one turn."""

    def __init__(self, provider: str = "ollama", streaming: bool = True) -> None:
        self._draft = Draft(provider)
        self._streaming = streaming
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self._done = False
        self._damage: str | None = None

    def damage(self, why: str) -> None:
        """Note an unreadable chunk (each chunk's calls are whole, so none has a hole)."""
        self._damage = self._damage or why

    def add(self, chunk: dict[str, Any]) -> None:
        """Fold one chunk into the turn."""
        draft = self._draft
        draft.model = draft.model or as_str(chunk.get("model"))
        message = as_dict(chunk.get("message"))
        self._text.append(as_str(message.get("content")))
        self._thinking.append(as_str(message.get("thinking")))
        for item in as_list(message.get("tool_calls")):
            entry = as_dict(item)
            function = as_dict(entry.get("function"))
            call = call_from_object(
                entry.get("id"), function.get("name"), function.get("arguments")
            )
            self._calls.append(call)
        if chunk.get("error"):
            draft.error = as_str(chunk["error"]) or str(chunk["error"])
        if chunk.get("done") is True:
            self._done = True
            draft.set_finish(chunk.get("done_reason"), TABLE)
            draft.usage = make_usage(chunk.get("prompt_eval_count"), chunk.get("eval_count"))

    def draft(self) -> Draft:
        """The turn so far; a stream without `done: true` is truncated."""
        draft = replace(self._draft)  # reading mid-stream must not change the stream
        draft.text = "".join(self._text)
        draft.reasoning = "".join(self._thinking)
        draft.calls = list(self._calls)
        if draft.error is not None:
            draft.truncated = True
            if draft.raw_finish is None:
                draft.finish = FinishReason.ERROR
        if self._streaming and not self._done:
            draft.truncated = True
        draft.damaged(self._damage)
        return draft

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()


def read_body(payload: dict[str, Any], provider: str = "ollama") -> Draft:
    """Read an /api/chat body."""
    reader = OllamaStream(provider, streaming=False)
    reader.add(payload)
    return reader.draft()
