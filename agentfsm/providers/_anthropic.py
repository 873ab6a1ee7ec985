"""Anthropic Messages API: body and stream events.

`server_tool_use` (and `mcp_tool_use`) blocks ran on Anthropic's side: they are
counted in `server_tool_calls`, never put in `tool_calls`. `pause_turn` means
"call again", `refusal` is a refusal, `max_tokens` a cut. In a stream, a
`tool_use` block with no `content_block_stop` is an incomplete call. A `tool_use`
made by code execution whose result is already in the content was answered there.
A block, event or delta of a type not known here makes the turn unusable.
"""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import FinishReason, ModelTurn
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

__all__ = ["TABLE", "MessagesStream", "is_event", "is_message", "read_body"]

TABLE: dict[str, FinishReason] = {
    # Anthropic "Stop reasons" docs and Messages API reference, `stop_reason`. A failed
    # request is an HTTP error or an `error` stream event, never a stop reason.
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "pause_turn": FinishReason.PAUSE,
    "refusal": FinishReason.REFUSAL,
}
"""Anthropic stop reasons; unlisted -> UNKNOWN."""
_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
_QUIET_BLOCKS = frozenset({"redacted_thinking", "compaction", "fallback", "container_upload"})
"""Blocks that carry nothing for the host: encrypted thinking, a compacted context, a model
fallback marker, a file put in the container. Server tools' results (`*_tool_result`) too."""
_QUIET_DELTAS = frozenset({"signature_delta", "citations_delta", "compaction_delta"})
_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
    }
)
_CUT = "the stream ended before the tool_use block was complete"


def is_message(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a Messages API body."""
    return payload.get("type") == "message" or (
        "stop_reason" in payload and type(payload.get("content")) is list
    )


def is_event(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a Messages API stream event (an `error` event included)."""
    kind = as_str(payload.get("type"))
    return kind in _EVENTS or (kind == "error" and type(payload.get("error")) is dict)


def _usage(usage: dict[str, Any], into: dict[str, int]) -> None:
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        if key in usage:
            into[key] = as_int(usage[key])
    if "output_tokens" in usage:
        into["output_tokens"] = as_int(usage["output_tokens"])


def _set_usage(draft: Draft, counts: dict[str, int]) -> None:
    if counts:
        inputs = sum(v for k, v in counts.items() if k != "output_tokens")
        draft.usage = make_usage(inputs, counts.get("output_tokens", 0))


def _block(draft: Draft, block: dict[str, Any]) -> None:
    kind = as_str(block.get("type"))
    if kind == "text":
        draft.text += as_str(block.get("text"))
    elif kind == "thinking":
        draft.reasoning = (draft.reasoning or "") + as_str(block.get("thinking"))
    elif kind == "tool_use":
        draft.calls.append(call_from_object(block.get("id"), block.get("name"), block.get("input")))
    elif kind in _SERVER_BLOCKS:
        draft.server_tool_calls += 1
    elif kind not in _QUIET_BLOCKS and not kind.endswith("_tool_result"):
        draft.not_understood(f"a content block of type {kind!r:.60}")


def _answered(blocks: list[dict[str, Any]]) -> set[str]:
    """The ids of server tool uses whose result the content already holds."""
    done = {
        as_str(block.get("tool_use_id"))
        for block in blocks
        if as_str(block.get("type")).endswith("_tool_result")
    }
    done.discard("")  # no id answers nothing
    return done


def _ran_inside(block: dict[str, Any], done: set[str]) -> bool:
    """Whether a `tool_use` was made by code execution that has already returned.

    Programmatic tool calling: code running in a server tool calls a client tool, and
    the call names that server tool as its `caller`. Once the server tool's result is in
    the content, every call its code made was answered: none waits for the host.
    """
    caller = as_dict(block.get("caller"))
    return (
        as_str(caller.get("type")) not in ("", "direct") and as_str(caller.get("tool_id")) in done
    )


def _refusal(draft: Draft, details: object) -> None:
    if draft.finish is FinishReason.REFUSAL:
        explanation = as_str(as_dict(details).get("explanation"))
        draft.refusal = explanation or draft.text or "the model refused (stop_reason refusal)"


def read_body(payload: dict[str, Any], provider: str = "anthropic") -> Draft:
    """Read a Messages API body."""
    draft = Draft(provider, model=as_str(payload.get("model")))
    blocks = [as_dict(block) for block in as_list(payload.get("content"))]
    done = _answered(blocks)
    for block in blocks:
        if not (block.get("type") == "tool_use" and _ran_inside(block, done)):
            _block(draft, block)
    draft.set_finish(payload.get("stop_reason"), TABLE)
    _refusal(draft, payload.get("stop_details"))
    counts: dict[str, int] = {}
    _usage(as_dict(payload.get("usage")), counts)
    _set_usage(draft, counts)
    return draft


class MessagesStream:
    """Accumulate Messages stream events into one turn."""

    def __init__(self, provider: str = "anthropic") -> None:
        self._provider = provider
        self._start()

    def _start(self) -> None:
        """Begin a message: nothing read yet."""
        self._stopped = False
        self._model = ""
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._open: set[int] = set()
        self._stop: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        self._error: str | None = None
        self._damage: str | None = None
        self._holes: dict[int, str] = {}
        """Blocks whose input may have lost a piece, and why."""

    def damage(self, why: str) -> None:
        """Note an unreadable event: every block still open may have lost a piece in it."""
        self._damage = self._damage or why
        for index in self._open:
            self._holes.setdefault(index, f"its input may have a hole: {why}")

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event into the turn; a message started after one stopped starts it anew.

        (A recording of several requests holds several messages; the last one is the turn.)
        """
        kind = as_str(event.get("type"))
        raw_index = event.get("index")
        index = raw_index if type(raw_index) is int else -1
        if kind == "content_block_start":
            self._blocks[index] = dict(as_dict(event.get("content_block")))
            self._open.add(index)
        elif kind == "content_block_delta":
            self._delta(index, as_dict(event.get("delta")))
        elif kind == "content_block_stop":
            self._open.discard(index)
        elif kind in ("message_start", "message_delta", "message_stop"):
            self._message(kind, event)
        elif kind == "error":
            error = as_dict(event.get("error"))
            self._error = as_str(error.get("message")) or as_str(error.get("type")) or "error"
        elif kind != "ping":
            self.damage(f"a stream event of a type agentfsm does not read ({kind!r:.60})")

    def _message(self, kind: str, event: dict[str, Any]) -> None:
        if kind == "message_start":
            if self._stopped:
                self._start()
            message = as_dict(event.get("message"))
            self._model = as_str(message.get("model"))
            _usage(as_dict(message.get("usage")), self._counts)
        elif kind == "message_delta":
            self._stop.update(as_dict(event.get("delta")))
            _usage(as_dict(event.get("usage")), self._counts)
        else:
            self._stopped = True

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.get(index)
        if block is None:  # its content_block_start never arrived
            block = self._blocks[index] = {"type": "text"}
            self.damage(f"a delta for block {index}, which never started")
        kind = as_str(delta.get("type"))
        if kind == "text_delta":
            block["text"] = as_str(block.get("text")) + as_str(delta.get("text"))
        elif kind == "thinking_delta":
            block["thinking"] = as_str(block.get("thinking")) + as_str(delta.get("thinking"))
        elif kind == "input_json_delta":
            piece = delta.get("partial_json")
            if type(piece) is not str:
                self._holes.setdefault(index, "an input_json_delta without a string partial_json")
            self._json.setdefault(index, []).append(as_str(piece))
        elif kind not in _QUIET_DELTAS:
            self.damage(f"a delta of a type agentfsm does not read ({kind!r:.60})")

    def _tool_block(self, draft: Draft, index: int, block: dict[str, Any]) -> None:
        parts = self._json.get(index)
        if parts is None or not "".join(parts):
            call = call_from_object(block.get("id"), block.get("name"), block.get("input"))
        else:
            call = call_from_string(block.get("id"), block.get("name"), "".join(parts))
        if index in self._open:
            call = broken(call, _CUT)
        elif index in self._holes:
            call = broken(call, self._holes[index])
        draft.calls.append(call)

    def draft(self) -> Draft:
        """The turn so far; an open block or a missing stop reason makes it truncated."""
        draft = Draft(self._provider, model=self._model)
        done = _answered(list(self._blocks.values()))
        for index, block in self._blocks.items():
            if block.get("type") != "tool_use":
                _block(draft, block)
            elif not _ran_inside(block, done):
                self._tool_block(draft, index, block)
        draft.set_finish(self._stop.get("stop_reason"), TABLE)
        _refusal(draft, self._stop.get("stop_details"))
        _set_usage(draft, self._counts)
        if self._open or draft.raw_finish is None:
            draft.truncated = True
        if self._error is not None:
            draft.error, draft.truncated = self._error, True
            if draft.raw_finish is None:
                draft.finish = FinishReason.ERROR
        draft.damaged(self._damage)
        return draft

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()
