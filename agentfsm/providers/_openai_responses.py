"""OpenAI Responses API (and Responses-compatible servers): body and stream events.

The Responses API has no finish reason, only a `status`: `completed` maps to
TOOL_CALLS when function calls are present and STOP otherwise; `incomplete`
maps from `incomplete_details.reason` and is always truncated. A
`multi_tool_use.parallel` call is unwrapped into the calls it wraps.

Items the host runs besides function calls (custom tools, shells, apply_patch, computer
use, client tool search, MCP approval requests) are calls whose `kind` is their item type;
items the provider ran are counted in `server_tool_calls`; an item of a type not known
here makes the turn unusable rather than vanish.
"""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import FinishReason, ModelTurn, ToolCall
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_list,
    as_str,
    broken,
    call_from_object,
    call_from_string,
    checked_call,
    json_text,
    make_usage,
    of_kind,
)

__all__ = ["ResponsesStream", "is_event", "is_response", "read_body"]

# OpenAI Responses API reference: `status` is completed, failed, in_progress, cancelled,
# queued or incomplete; `incomplete_details.reason` is max_output_tokens or content_filter.
_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_STATUS: dict[str, FinishReason] = {
    "completed": FinishReason.STOP,
    "failed": FinishReason.ERROR,
    "cancelled": FinishReason.ERROR,
}
_UNFINISHED = frozenset({"in_progress", "queued"})
"""A response still being made (background mode): nothing in it is final."""
_SERVER_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "program",  # programmatic tool calling: the program runs on OpenAI's side
    }
)
"""Items the provider ran itself: counted, never for the host."""
_QUIET_ITEMS = frozenset(
    {"mcp_list_tools", "compaction", "additional_tools", "mcp_approval_response"}
)
"""Items that carry nothing for the host to do (tools listed or made available, compacted
context, an approval already given); every `*_output` item too."""
_CLIENT_TOOLS: dict[str, tuple[str, str]] = {
    # OpenAI Responses API reference: the host runs these and answers with the item type
    # named `<type>_output` (`mcp_approval_request` is answered by `mcp_approval_response`).
    # The tool's name, and the field that holds what to run, as a call's arguments.
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "computer_call": ("computer", ""),  # `action`, or batched `actions`: see `_computer`
    "tool_search_call": ("tool_search", "arguments"),
}
"""Client-executed items other than function, custom tool and MCP approval calls."""
_WRAPPERS = frozenset({"multi_tool_use.parallel", "parallel"})
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_HOLE = "\x00hole"
"""A key only the stream reader sets on an item: why its arguments may have a hole."""


def is_response(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a Responses API body."""
    return payload.get("object") == "response" or (
        type(payload.get("output")) is list and "status" in payload
    )


def is_event(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a Responses API stream event."""
    kind = payload.get("type")
    return type(kind) is str and kind.startswith("response.")


def _unwrap(call: ToolCall) -> list[ToolCall] | None:
    """The calls a `multi_tool_use.parallel` wrapper carries, or None if it is not one."""
    uses = as_list((call.arguments or {}).get("tool_uses"))
    if call.name not in _WRAPPERS or not uses:
        return None
    calls = []
    for number, use in enumerate(uses):
        entry = as_dict(use)
        recipient = as_str(entry.get("recipient_name"))
        if not recipient.startswith("functions."):
            return None
        call_id = f"{call.id}_{number}" if call.id else ""
        calls.append(call_from_object(call_id, recipient[10:], entry.get("parameters")))
    return calls


def _unsettled(item: dict[str, Any], settled: bool) -> str | None:
    """Why a call item cannot run yet: a stream hole, or a status that says it is unfinished.

    An `in_progress` call inside a completed response is a call waiting for its result
    (a `program` item calls client tools that way); it is unfinished only while the
    response itself is.
    """
    hole = item.get(_HOLE)
    if type(hole) is str:
        return hole
    status = as_str(item.get("status"))
    if status == "incomplete" or (status == "in_progress" and not settled):
        return f"the call is {status}"
    return None


def _function_call(item: dict[str, Any], settled: bool) -> list[ToolCall]:
    call_id = item.get("call_id") or item.get("id")
    call = call_from_string(call_id, item.get("name"), item.get("arguments"))
    why = _unsettled(item, settled)
    if why is not None:
        return [broken(call, why)]
    return _unwrap(call) or [call]


def _client_call(kind: str, item: dict[str, Any]) -> ToolCall:
    """A call the host runs that is not a function call, keeping its item type as its kind."""
    call_id = item.get("call_id") or item.get("id")
    if kind == "custom_tool_call":
        raw = item.get("input")
        arguments = {"input": raw} if type(raw) is str else None
        call = call_from_object(call_id, item.get("name"), arguments)
        if type(raw) is str:
            call = _with(call, raw_arguments=raw)
        else:
            call = broken(call, "a custom tool call whose input is no string")
    elif kind == "mcp_approval_request":
        call = call_from_string(item.get("id"), item.get("name"), item.get("arguments"))
    else:
        name, key = _CLIENT_TOOLS[kind]
        what = item.get(key) if key else _computer(item)
        call = call_from_object(call_id, name, what if type(what) is dict else {})
        if type(what) is not dict:
            call = broken(call, f"a {kind} item without its {key or 'action'} object")
    return of_kind(call, kind)


def _computer(item: dict[str, Any]) -> dict[str, Any] | None:
    """A computer call's work: its `action` or batched `actions`, and the safety checks the
    host must acknowledge."""
    fields = ("action", "actions", "pending_safety_checks")
    work = {key: item[key] for key in fields if item.get(key) is not None}
    return work if "action" in work or "actions" in work else None


def _with(call: ToolCall, **changes: Any) -> ToolCall:
    return checked_call({**call.__dict__, **changes})


def _message(draft: Draft, item: dict[str, Any]) -> None:
    for part in as_list(item.get("content")):
        entry = as_dict(part)
        kind = entry.get("type")
        if kind == "refusal":
            draft.refusal = (draft.refusal or "") + as_str(entry.get("refusal"))
        elif kind in ("output_text", "text"):
            draft.text += as_str(entry.get("text"))
        else:
            draft.not_understood(f"a message part of type {kind!r:.60}")


def _reasoning(item: dict[str, Any]) -> str:
    texts = [as_str(as_dict(p).get("text")) for p in as_list(item.get("content"))]
    texts += [as_str(as_dict(p).get("text")) for p in as_list(item.get("summary"))]
    return "".join(texts)


def _answered(output: list[Any]) -> set[str]:
    """The call ids the output already answers (a hosted shell returns its own output)."""
    answered = set()
    for item in output:
        entry = as_dict(item)
        if as_str(entry.get("type")).endswith("_output") and type(entry.get("call_id")) is str:
            answered.add(entry["call_id"])
    answered.discard("")  # no id answers nothing
    return answered


def _item(draft: Draft, item: dict[str, Any], settled: bool, answered: set[str]) -> None:
    kind = as_str(item.get("type"))
    if kind == "function_call":
        draft.calls.extend(_function_call(item, settled))
    elif kind == "message":
        _message(draft, item)
    elif kind == "reasoning":
        draft.reasoning = (draft.reasoning or "") + _reasoning(item)
    elif kind in _SERVER_ITEMS or _ran_by_server(kind, item, answered):
        draft.server_tool_calls += 1
    elif kind in _CLIENT_TOOLS or kind in ("custom_tool_call", "mcp_approval_request"):
        call = _client_call(kind, item)
        why = _unsettled(item, settled)
        draft.calls.append(call if why is None else broken(call, why))
    elif kind not in _QUIET_ITEMS and not kind.endswith("_output"):
        draft.not_understood(f"an output item of type {kind!r:.60}")


def _ran_by_server(kind: str, item: dict[str, Any], answered: set[str]) -> bool:
    """Whether a client-kind item ran on the provider's side (server tool search, hosted shell)."""
    if kind == "tool_search_call":
        return item.get("execution") != "client"
    return kind in _CLIENT_TOOLS and as_str(item.get("call_id")) in answered


def _status(draft: Draft, payload: dict[str, Any]) -> None:
    status = payload.get("status")
    reason = as_dict(payload.get("incomplete_details")).get("reason")
    if status == "incomplete":
        draft.set_finish(reason if type(reason) is str else status, _INCOMPLETE)
        draft.truncated = True
    else:
        draft.set_finish(status, _STATUS)
        draft.truncated = draft.truncated or as_str(status) in _UNFINISHED
    if draft.finish is FinishReason.STOP and draft.calls:
        draft.finish = FinishReason.TOOL_CALLS
    error = payload.get("error")
    if error:
        draft.error = as_str(as_dict(error).get("message")) or json_text(error)


def read_body(payload: dict[str, Any], provider: str = "openai_responses") -> Draft:
    """Read a Responses API body."""
    draft = Draft(provider, model=as_str(payload.get("model")))
    output = as_list(payload.get("output"))
    settled = payload.get("status") == "completed"
    answered = _answered(output)
    for item in output:
        _item(draft, as_dict(item), settled, answered)
    _status(draft, payload)
    usage = payload.get("usage")
    if type(usage) is dict:
        draft.usage = make_usage(usage.get("input_tokens"), usage.get("output_tokens"))
    return draft


def _error_text(event: dict[str, Any]) -> str:
    """An error event's message: on the event itself, or in its `error` object."""
    error = as_dict(event.get("error"))
    message = as_str(event.get("message")) or as_str(error.get("message"))
    code = as_str(event.get("code")) or as_str(error.get("code"))
    if message:
        return f"{code}: {message}" if code else message
    return "error event in the stream"


class ResponsesStream:
    """Accumulate Responses stream events into one turn.

    Items are rebuilt from `output_item.added`/`.done` and the text and argument
    deltas; the terminal event's response gives the status and usage. Without a
    terminal event the turn is truncated and unfinished calls are broken.
    """

    def __init__(self, provider: str = "openai_responses") -> None:
        self._provider = provider
        self._start()

    def _start(self) -> None:
        """Begin a response: nothing read yet."""
        self._items: dict[int, dict[str, Any]] = {}
        self._final: dict[str, Any] | None = None
        self._error: str | None = None
        self._damage: str | None = None
        self._holes: dict[int, str] = {}
        """Items whose arguments may have lost a piece, and why."""
        self._done: set[int] = set()
        self._sequence: int | None = None

    def damage(self, why: str) -> None:
        """Note an unreadable event: every item not yet done may have lost a piece in it."""
        self._damage = self._damage or why
        for key in self._items:
            if key not in self._done:
                self._holes.setdefault(key, f"its arguments may have a hole: {why}")

    def _check_sequence(self, event: dict[str, Any]) -> None:
        number = event.get("sequence_number")
        if type(number) is not int:
            return
        last, self._sequence = self._sequence, number
        if last is not None and number != last + 1:
            self.damage(f"sequence_number jumps from {last} to {number}: events are missing")

    def _key(self, event: dict[str, Any]) -> int:
        index = event.get("output_index")
        return index if type(index) is int else len(self._items)

    def _slot(self, event: dict[str, Any]) -> dict[str, Any]:
        key = self._key(event)
        slot = self._items.get(key)
        if slot is None:
            slot = self._items[key] = {"type": "message", "status": "in_progress"}
            if not as_str(event.get("type")).startswith("response.output_item."):
                self.damage(f"an event for output {key}, whose output_item.added never arrived")
        return slot

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event into the turn; a response created after one ended starts the turn anew.

        (A recording of several requests holds several responses; the last one is the turn.)
        """
        kind = as_str(event.get("type"))
        if kind == "response.created" and self._final is not None:
            self._start()
        self._check_sequence(event)
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = as_dict(event.get("item"))
            slot = self._slot(event)
            slot.clear()
            slot.update(item)
            if kind == "response.output_item.done":  # the whole item: nothing is missing
                self._done.add(self._key(event))
                self._holes.pop(self._key(event), None)
        elif kind.startswith("response.function_call_arguments."):
            self._arguments(event, done=kind.endswith(".done"))
        elif kind == "response.output_text.delta":
            self._append(event, "text", "output_text")
        elif kind == "response.refusal.delta":
            self._append(event, "refusal", "refusal")
        elif kind in _TERMINAL:
            self._final = as_dict(event.get("response"))
        elif kind in ("error", "response.error"):
            self._error = _error_text(event)

    def _arguments(self, event: dict[str, Any], done: bool) -> None:
        """An arguments delta, or the whole arguments string (`.done`)."""
        slot = self._slot(event)
        key = "arguments" if done else "delta"
        piece = event.get(key)
        if type(piece) is not str:
            self._holes.setdefault(self._key(event), f"an arguments {key} that is no string")
        elif done and slot.get("type") == "function_call":
            self._holes.pop(self._key(event), None)  # the whole arguments string
        old = "" if done else as_str(slot.get("arguments"))
        slot["arguments"] = old + as_str(piece)

    def _append(self, event: dict[str, Any], key: str, part_type: str) -> None:
        slot = self._slot(event)
        parts = slot.get("content", [])
        if type(parts) is not list:
            return
        # Copies: the list and its parts came from the host's events, which are never changed.
        parts = list(parts)
        if not parts or as_dict(parts[-1]).get("type") != part_type:
            parts.append({"type": part_type, key: ""})
        last = dict(as_dict(parts[-1]))
        last[key] = as_str(last.get(key)) + as_str(event.get("delta"))
        parts[-1] = last
        slot["content"] = parts

    def draft(self) -> Draft:
        """The turn so far, as a draft."""
        final = self._final or {}
        whole = bool(as_list(final.get("output")))  # the terminal event has every item whole
        if not whole:
            items = [self._item(key) for key in sorted(self._items)]
            final = {**final, "output": items}
        draft = read_body(final, self._provider)
        if self._final is None:
            draft.truncated = True
        if self._error is not None:  # truncated unless a terminal event ended the response
            draft.error = self._error
        if not whole:
            draft.damaged(self._damage)
        return draft

    def _item(self, key: int) -> dict[str, Any]:
        hole = self._holes.get(key)
        if hole is None and self._final is None and key not in self._done:
            hole = "the stream ended before the item was done"
        return self._items[key] if hole is None else {**self._items[key], _HOLE: hole}

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()
