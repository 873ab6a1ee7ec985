"""Amazon Bedrock Converse: body and ConverseStream events.

`guardrail_intervened` and `content_filtered` are CONTENT_FILTER; `max_tokens`
and `model_context_window_exceeded` are a cut. A stream's exception events
(`throttlingException`, `modelStreamErrorException`, ...) set the turn's error.
A `toolUse` of type `server_tool_use` ran on Bedrock's side: counted, never run.
A block, event or delta of a kind not known here makes the turn unusable.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentfsm._model.types import FinishReason, ModelTurn, ToolCall
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_int,
    as_list,
    as_str,
    broken,
    call_from_object,
    call_from_string,
    make_usage,
)

__all__ = ["BROKEN", "TABLE", "ConverseStream", "is_converse", "is_event", "read_body"]

TABLE: dict[str, FinishReason] = {
    # Bedrock Runtime API reference, `StopReason` (Converse and MessageStopEvent).
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "guardrail_intervened": FinishReason.CONTENT_FILTER,
    "content_filtered": FinishReason.CONTENT_FILTER,
    "malformed_model_output": FinishReason.ERROR,
    "malformed_tool_use": FinishReason.ERROR,
}
"""Converse stop reasons; unlisted -> UNKNOWN."""
BROKEN = frozenset({"malformed_model_output", "malformed_tool_use"})
"""Reasons that say the output or its calls are malformed: none may run; a retry may fix it."""
_EVENTS = frozenset(
    {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop"}
)
_QUIET_BLOCKS = frozenset({"toolResult", "cachePoint"})
"""Blocks that carry nothing for the host (a server tool's result, a cache marker)."""
_QUIET_DELTAS = frozenset({"toolResult", "citation"})
_SERVER_TOOL = "server_tool_use"
"""The `type` of a `toolUse` that Bedrock ran itself (e.g. Nova's code interpreter)."""
_CUT = "the stream ended before the toolUse block was complete"


def is_converse(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a Converse body."""
    return "stopReason" in payload or "message" in as_dict(payload.get("output"))


def is_event(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a ConverseStream event (exception events included)."""
    return any(
        type(key) is str and (key in _EVENTS or key.endswith("Exception")) for key in payload
    )


def _usage(draft: Draft, usage: object) -> None:
    if type(usage) is dict:
        cached = as_int(usage.get("cacheReadInputTokens")) + as_int(
            usage.get("cacheWriteInputTokens")
        )
        draft.usage = make_usage(
            as_int(usage.get("inputTokens")) + cached, usage.get("outputTokens")
        )


def _block(draft: Draft, block: dict[str, Any]) -> None:
    if "text" in block:
        draft.text += as_str(block["text"])
    elif "toolUse" in block:
        use = as_dict(block["toolUse"])
        if use.get("type") == _SERVER_TOOL:
            draft.server_tool_calls += 1
            return
        draft.calls.append(
            call_from_object(use.get("toolUseId"), use.get("name"), use.get("input"))
        )
    elif "reasoningContent" in block:
        text = as_dict(as_dict(block["reasoningContent"]).get("reasoningText")).get("text")
        draft.reasoning = (draft.reasoning or "") + as_str(text)
    elif "citationsContent" in block:  # generated text with its sources
        parts = as_list(as_dict(block["citationsContent"]).get("content"))
        draft.text += "".join(as_str(as_dict(part).get("text")) for part in parts)
    elif not _QUIET_BLOCKS.intersection(block):
        draft.not_understood(f"a content block with {sorted(map(str, block))[:4]}")


def read_body(payload: dict[str, Any], provider: str = "bedrock") -> Draft:
    """Read a Converse body."""
    draft = Draft(provider)
    message = as_dict(as_dict(payload.get("output")).get("message"))
    for block in as_list(message.get("content")):
        _block(draft, as_dict(block))
    draft.set_finish(payload.get("stopReason"), TABLE)
    _usage(draft, payload.get("usage"))
    _malformed(draft)
    return draft


def _malformed(draft: Draft) -> None:
    """A malformed stop: no call runs, the turn is retried (bounded by max_retries)."""
    if draft.raw_finish in BROKEN:
        draft.truncated = True
        draft.error = draft.error or f"the provider stopped with {draft.raw_finish}"
        draft.break_calls(f"the provider reported {draft.raw_finish}")


class ConverseStream:
    """Accumulate ConverseStream events into one turn."""

    def __init__(self, provider: str = "bedrock") -> None:
        self._draft = Draft(provider)
        self._blocks: dict[int, dict[str, Any]] = {}
        self._open: set[int] = set()
        self._stopped = False
        self._damage: str | None = None
        self._holes: dict[int, str] = {}
        """Blocks whose input may have lost a piece, and why."""

    def damage(self, why: str) -> None:
        """Note an unreadable event: every block still open may have lost a piece in it."""
        self._damage = self._damage or why
        for index in self._open:
            self._holes.setdefault(index, f"its input may have a hole: {why}")

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event into the turn."""
        if "contentBlockStart" in event:
            self._block_start(as_dict(event["contentBlockStart"]))
        elif "contentBlockDelta" in event:
            self._delta(as_dict(event["contentBlockDelta"]))
        elif "contentBlockStop" in event:
            self._open.discard(as_int(as_dict(event["contentBlockStop"]).get("contentBlockIndex")))
        elif "messageStop" in event:
            self._draft.set_finish(as_dict(event["messageStop"]).get("stopReason"), TABLE)
            self._stopped = True
        elif "metadata" in event:
            _usage(self._draft, as_dict(event["metadata"]).get("usage"))
        elif "messageStart" not in event:
            self._exception(event)

    def _block_start(self, start: dict[str, Any]) -> None:
        index = as_int(start.get("contentBlockIndex"))
        begun = as_dict(start.get("start"))
        tool = as_dict(begun.get("toolUse"))
        if tool.get("type") == _SERVER_TOOL:  # ran by Bedrock: its input is read, never run
            self._draft.server_tool_calls += 1
            tool = {}
        self._blocks[index] = {"tool": tool}
        self._open.add(index)

    def _exception(self, event: dict[str, Any]) -> None:
        found = False
        for key, value in event.items():
            if type(key) is str and key.endswith("Exception"):
                message = as_str(as_dict(value).get("message"))
                self._draft.error = f"{key}: {message}" if message else key
                found = True
        if not found:
            keys = sorted(map(str, event))[:4]
            self.damage(f"a stream event agentfsm does not read (keys {keys})")

    def _delta(self, delta_event: dict[str, Any]) -> None:
        raw_index = delta_event.get("contentBlockIndex")
        index = raw_index if type(raw_index) is int else -1
        block = self._blocks.get(index)
        if block is None:  # its contentBlockStart never arrived (a text block may have none)
            block = self._blocks[index] = {}
        delta = as_dict(delta_event.get("delta"))
        if "text" in delta:
            block["text"] = as_str(block.get("text")) + as_str(delta["text"])
        elif "toolUse" in delta:
            piece = as_dict(delta["toolUse"]).get("input")
            if "tool" not in block:
                self.damage(f"tool input for block {index}, which never started")
            elif type(piece) is not str:
                self._holes.setdefault(index, "a toolUse delta without a string input")
            block["input"] = as_str(block.get("input")) + as_str(piece)
        elif "reasoningContent" in delta:
            piece = as_str(as_dict(delta["reasoningContent"]).get("text"))
            block["reasoning"] = as_str(block.get("reasoning")) + piece
        elif not _QUIET_DELTAS.intersection(delta):
            self.damage(f"a delta agentfsm does not read (keys {sorted(map(str, delta))[:4]})")

    def _call(self, index: int, block: dict[str, Any]) -> ToolCall:
        tool = as_dict(block.get("tool"))
        call = call_from_string(tool.get("toolUseId"), tool.get("name"), as_str(block.get("input")))
        if index in self._open:
            return broken(call, _CUT)
        return broken(call, self._holes[index]) if index in self._holes else call

    def draft(self) -> Draft:
        """The turn so far; an open block or a missing messageStop makes it truncated."""
        draft = replace(self._draft)  # reading mid-stream must not change the stream
        blocks = [(index, self._blocks[index]) for index in sorted(self._blocks)]
        draft.text = "".join(as_str(block.get("text")) for _, block in blocks)
        draft.reasoning = "".join(as_str(block.get("reasoning")) for _, block in blocks)
        draft.calls = [self._call(index, block) for index, block in blocks if block.get("tool")]
        if self._open or not self._stopped or draft.error is not None:
            draft.truncated = True
        if draft.error is not None and draft.raw_finish is None:
            draft.finish = FinishReason.ERROR
        _malformed(draft)
        draft.damaged(self._damage)
        return draft

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()
