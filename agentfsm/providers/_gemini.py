"""Gemini / Vertex AI generateContent: body and streamGenerateContent chunks.

Function calls under `STOP` stay STOP (the controller reconciles). The safety
family and `promptFeedback.blockReason` are CONTENT_FILTER. The error family
(`MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, ...) is ERROR with the
`finishMessage` as the turn's error; a malformed call is also never executable.
Streamed arguments (`partialArgs` with `willContinue`) need a terminal
`functionCall` part; without one the call is kept broken and the turn truncated.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from agentfsm.core.types import FinishReason, ModelTurn, ToolCall
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_int,
    as_list,
    as_str,
    call_from_object,
    construct,
    make_usage,
)

__all__ = ["TABLE", "GeminiStream", "is_gemini", "read_body"]

_FILTERS = (
    "SAFETY RECITATION BLOCKLIST PROHIBITED_CONTENT SPII MODEL_ARMOR IMAGE_SAFETY "
    "IMAGE_PROHIBITED_CONTENT IMAGE_RECITATION"
)
_ERRORS = (
    "MALFORMED_FUNCTION_CALL UNEXPECTED_TOOL_CALL TOO_MANY_TOOL_CALLS MALFORMED_RESPONSE "
    "MISSING_THOUGHT_SIGNATURE"
)
TABLE: dict[str, FinishReason] = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    **dict.fromkeys(_FILTERS.split(), FinishReason.CONTENT_FILTER),
    **dict.fromkeys(_ERRORS.split(), FinishReason.ERROR),
}
BROKEN = frozenset({"MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE"})
_PATH = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
_VALUES = ("stringValue", "numberValue", "boolValue")
_CUT = "the stream ended before a terminal functionCall closed the streamed arguments"


def is_gemini(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a generateContent body or stream chunk."""
    return type(payload.get("candidates")) is list or "promptFeedback" in payload


def _steps(path: str) -> list[str | int]:
    return [int(index) if index else key for key, index in _PATH.findall(path)]


def _put(root: dict[str, Any], steps: list[str | int], value: object) -> None:
    """Set `value` at a parsed JSON path, creating containers; strings concatenate."""
    node: Any = root
    for position, step in enumerate(steps):
        if type(step) is int:
            if type(node) is not list:
                return
            node.extend([None] * (step + 1 - len(node)))
        elif type(node) is not dict:
            return
        old = node[step] if type(step) is int else node.get(step)
        if position == len(steps) - 1:
            node[step] = old + value if type(old) is str and type(value) is str else value
            return
        if old is None:
            old = [] if type(steps[position + 1]) is int else {}
            node[step] = old
        node = old


class _Streamed:
    """A function call whose arguments arrive as `partialArgs` pieces."""

    def __init__(self, name: object, call_id: object) -> None:
        self.name, self.id = name, call_id
        self.args: dict[str, Any] = {}

    def apply(self, pieces: list[Any]) -> None:
        for piece in pieces:
            entry = as_dict(piece)
            value = next((entry[k] for k in _VALUES if k in entry), None)
            _put(self.args, _steps(as_str(entry.get("jsonPath"))), value)


class GeminiStream:
    """Accumulate generateContent chunks (or read one body) into one turn."""

    def __init__(self, provider: str = "gemini", streaming: bool = True) -> None:
        self._draft = Draft(provider)
        self._streaming = streaming
        self._streamed: _Streamed | None = None
        self._calls: list[ToolCall] = []
        self._message = ""

    def add(self, chunk: dict[str, Any]) -> None:
        """Fold one chunk into the turn."""
        draft = self._draft
        draft.model = draft.model or as_str(chunk.get("modelVersion"))
        usage = chunk.get("usageMetadata")
        if type(usage) is dict and "promptTokenCount" in usage:
            output = as_int(usage.get("candidatesTokenCount"))
            draft.usage = make_usage(
                usage["promptTokenCount"], output + as_int(usage.get("thoughtsTokenCount"))
            )
        blocked = as_dict(chunk.get("promptFeedback")).get("blockReason")
        if type(blocked) is str:
            draft.set_finish(blocked, {blocked: FinishReason.CONTENT_FILTER})
        candidates = as_list(chunk.get("candidates"))
        candidate = as_dict(candidates[0]) if candidates else as_dict(None)
        for part in as_list(as_dict(candidate.get("content")).get("parts")):
            self._part(as_dict(part))
        if "finishReason" in candidate:
            draft.set_finish(candidate["finishReason"], TABLE)
            self._message = as_str(candidate.get("finishMessage"))

    def _part(self, part: dict[str, Any]) -> None:
        draft = self._draft
        if "functionCall" in part:
            self._function_call(as_dict(part["functionCall"]))
        elif "text" in part:
            text = as_str(part["text"])
            if part.get("thought") is True:
                draft.reasoning = (draft.reasoning or "") + text
            else:
                draft.text += text
        elif "executableCode" in part:
            draft.server_tool_calls += 1

    def _function_call(self, call: dict[str, Any]) -> None:
        pieces = call.get("partialArgs")
        streamed = self._streamed
        if pieces is not None or call.get("willContinue") is True:
            if streamed is None:
                streamed = self._streamed = _Streamed(call.get("name"), call.get("id"))
            streamed.apply(as_list(pieces))
            return
        if streamed is not None:
            self._streamed = None
            args = call.get("args", streamed.args)
            name = call.get("name") or streamed.name
            self._calls.append(call_from_object(call.get("id") or streamed.id, name, args))
            return
        self._calls.append(call_from_object(call.get("id"), call.get("name"), call.get("args")))

    def draft(self) -> Draft:
        """The turn so far; see the module docstring for the rules."""
        draft = replace(self._draft)  # reading mid-stream must not change the stream
        draft.calls = list(self._calls)
        streamed = self._streamed
        if streamed is not None:
            cut = call_from_object(streamed.id, streamed.name, None).__dict__
            cut.update(arguments=None, raw_arguments=json.dumps(streamed.args), error=_CUT)
            draft.calls.append(construct(ToolCall, cut))
            draft.truncated = True
        if self._streaming and draft.raw_finish is None:
            draft.truncated = True
        if draft.finish is FinishReason.ERROR:
            draft.error = self._message or f"the provider stopped with {draft.raw_finish}"
        if draft.raw_finish in BROKEN:
            draft.truncated = True
            draft.break_calls(f"the provider reported {draft.raw_finish}")
        return draft

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()


def read_body(payload: dict[str, Any], provider: str = "gemini") -> Draft:
    """Read a generateContent body."""
    reader = GeminiStream(provider, streaming=False)
    reader.add(payload)
    return reader.draft()
