"""Cohere chat: v2 bodies and stream events, and v1 `/chat` bodies.

`TOOL_CALL` is TOOL_CALLS, `MAX_TOKENS` a cut, `COMPLETE`/`STOP_SEQUENCE` STOP.
`tool_plan` (the model's plan before calling tools) and `thinking` content are kept
as reasoning. Arguments `"null"` are valid JSON for "no arguments", read as `{}`.
A stream is `message-start`, content and tool-call start/delta/end events and
`message-end` with the finish reason; without `message-end` it is truncated, and a
call with no `tool-call-end` is incomplete.

A v1 `/chat` body holds the reply as top-level `text` beside a `generation_id` (or
`response_id`), `chat_history` and `meta`; its `tool_calls` carry a `name` and a
`parameters` object and no id (agentfsm issues one). With tool calls, v1's `text` is
the model's plan (v2's `tool_plan`) and is kept as reasoning.

A v1 stream is JSON lines of `event_type` events (with `is_finished`): `stream-start`,
`text-generation` text deltas, `tool-calls-chunk` (plan text deltas, and `tool_call_delta`
pieces of each call by `index`: its `name`, then its `parameters` text), then
`tool-calls-generation` with the plan and the whole calls, and last `stream-end` with
the `finish_reason` and the whole v1 body as `response`. That body is read as a v1 body
is, the stream's reason where the body has none. A stream without `stream-end` is
truncated (finish UNKNOWN unless claimed, as a chat stream without its finish): its
calls are whole only if `tool-calls-generation` gave them; a call known only from its
chunks is incomplete, whatever its pieces parse to. Search queries, results and
citations carry nothing a turn holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    make_usage,
)

__all__ = ["TABLE", "CohereStream", "is_cohere", "is_event", "read_body"]

TABLE: dict[str, FinishReason] = {
    # Cohere Chat API reference, v2 `finish_reason` (COMPLETE, STOP_SEQUENCE, MAX_TOKENS,
    # TOOL_CALL, ERROR, TIMEOUT) and v1's (ERROR_TOXIC, ERROR_LIMIT, USER_CANCEL).
    "COMPLETE": FinishReason.STOP,
    "STOP_SEQUENCE": FinishReason.STOP,
    "TOOL_CALL": FinishReason.TOOL_CALLS,
    "MAX_TOKENS": FinishReason.LENGTH,
    "ERROR": FinishReason.ERROR,
    "TIMEOUT": FinishReason.ERROR,
    "ERROR_TOXIC": FinishReason.CONTENT_FILTER,
    "ERROR_LIMIT": FinishReason.LENGTH,
    "USER_CANCEL": FinishReason.ERROR,
}
"""Cohere finish reasons; unlisted -> UNKNOWN."""
_CALL_EVENTS = frozenset({"tool-call-start", "tool-call-delta", "tool-call-end"})
_TEXT_EVENTS = frozenset({"message-start", "content-start", "content-delta", "tool-plan-delta"})
_QUIET_EVENTS = frozenset({"content-end", "citation-start", "citation-end", "debug"})
"""Events that carry nothing a turn holds (a content part closing, citations, debug data)."""
_EVENTS = _CALL_EVENTS | _TEXT_EVENTS | _QUIET_EVENTS | {"message-end"}
_CUT = "the stream ended before tool-call-end closed the call"


def is_cohere(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a v2 chat body (a `message` object and a top-level reason)
    or a v1 one (see `is_v1`)."""
    return (type(payload.get("message")) is dict and "finish_reason" in payload) or is_v1(payload)


def is_v1(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a v1 `/chat` body: the reply's `text` beside the ids only
    Cohere's v1 gives it (`generation_id`, `response_id`), no `message` object."""
    return (
        type(payload.get("text")) is str
        and ("generation_id" in payload or "response_id" in payload)
        and "message" not in payload
        and "choices" not in payload
    )


_V1_QUIET = frozenset(
    {"stream-start", "search-queries-generation", "search-results", "citation-generation", "debug"}
)
"""v1 events that carry nothing a turn holds (the generation's id, search, citations)."""
_V1_EVENTS = _V1_QUIET | {
    "text-generation",
    "tool-calls-chunk",
    "tool-calls-generation",
    "stream-end",
}
_V1_CUT = "the stream ended before tool-calls-generation gave the call whole"


def is_event(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a chat stream event: v2 (`type`: `message-start`,
    `content-delta`, ...) or v1 (`event_type`: `text-generation`, `stream-end`, ...)."""
    kind = payload.get("type")
    if type(kind) is str:
        return kind in _EVENTS
    v1 = payload.get("event_type")
    return type(v1) is str and v1 in _V1_EVENTS


def _text(content: object) -> str:
    if type(content) is str:
        return content
    return "".join(as_str(as_dict(part).get("text")) for part in as_list(content))


def _thinking(content: object) -> str:
    return "".join(as_str(as_dict(part).get("thinking")) for part in as_list(content))


def _usage(draft: Draft, usage: object) -> None:
    tokens = as_dict(as_dict(usage).get("tokens"))
    if tokens:
        draft.usage = make_usage(tokens.get("input_tokens"), tokens.get("output_tokens"))


def read_body(payload: dict[str, Any], provider: str = "cohere") -> Draft:
    """Read a v2 chat body, or a v1 one."""
    if is_v1(payload):
        return _read_v1(payload, provider)
    message = as_dict(payload.get("message"))
    draft = Draft(provider, model=as_str(payload.get("model")))
    content = message.get("content")
    draft.text = _text(content)
    draft.reasoning = _thinking(content) + as_str(message.get("tool_plan"))
    for item in as_list(message.get("tool_calls")):
        entry = as_dict(item)
        function = as_dict(entry.get("function"))
        draft.calls.append(
            call_from_string(entry.get("id"), function.get("name"), function.get("arguments"))
        )
    draft.set_finish(payload.get("finish_reason"), TABLE)
    _usage(draft, payload.get("usage"))
    return draft


def _read_v1(payload: dict[str, Any], provider: str) -> Draft:
    """Read a v1 `/chat` body: `text`, `tool_calls` of `name` and `parameters`, `meta`."""
    draft = Draft(provider)
    for item in as_list(payload.get("tool_calls")):
        entry = as_dict(item)
        draft.calls.append(call_from_object(None, entry.get("name"), entry.get("parameters")))
    text = as_str(payload.get("text"))
    if draft.calls:
        draft.reasoning = text  # the plan it states before calling tools
    else:
        draft.text = text
    _finish_v1(draft, payload.get("finish_reason"), payload)
    return draft


def _finish_v1(draft: Draft, finish: object, body: dict[str, Any]) -> None:
    """Set a v1 turn's finish reason, its usage from the body's `meta`, and its error."""
    draft.set_finish(finish, TABLE)
    meta = as_dict(body.get("meta"))
    _usage(draft, meta if "tokens" in meta else {"tokens": meta.get("billed_units")})
    if draft.finish is FinishReason.ERROR:
        draft.error = f"the provider stopped with {draft.raw_finish}"


@dataclass(slots=True)
class _Call:
    """A streamed call: its start's id and name, its argument pieces, whether it ended."""

    id: object
    name: object
    parts: list[str] = field(default_factory=list)
    ended: bool = False
    hole: str | None = None

    def call(self) -> ToolCall:
        made = call_from_string(self.id, self.name, "".join(self.parts))
        if not self.ended:
            return broken(made, _CUT)
        return made if self.hole is None else broken(made, self.hole)


class CohereStream:
    """Accumulate chat stream events into one turn: v2 events, or v1 ones (`_V1Stream`)."""

    def __init__(self, provider: str = "cohere") -> None:
        self._draft = Draft(provider)
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._plan: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._ended = False
        self._damage: str | None = None
        self._v1: _V1Stream | None = None
        """The v1 reader, once the stream's first event said it is a v1 stream."""
        self._v2 = False

    def damage(self, why: str) -> None:
        """Note an unreadable event: every call still open may have lost a piece in it."""
        if self._v1 is not None:
            self._v1.damage(why)
            return
        self._damage = self._damage or why
        for call in self._calls.values():
            if not call.ended:
                call.hole = call.hole or f"its arguments may have a hole: {why}"

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event into the turn; a stream is v1 or v2 throughout, never both."""
        if "type" not in event and "event_type" in event:
            if self._v2:
                self.damage("a v1 event (event_type) in a v2 stream")
                return
            if self._v1 is None:
                self._v1 = _V1Stream(self._draft.provider)
            self._v1.add(event)
            return
        if self._v1 is not None:
            self._v1.damage("a v2 event (type) in a v1 stream")
            return
        self._v2 = True
        kind = as_str(event.get("type"))
        message = as_dict(as_dict(event.get("delta")).get("message"))
        if kind in _CALL_EVENTS:
            self._call_event(kind, event.get("index"), as_dict(message.get("tool_calls")))
        elif kind in _TEXT_EVENTS:
            content = as_dict(message.get("content"))
            self._text.append(as_str(content.get("text")))
            self._thinking.append(as_str(content.get("thinking")))
            self._plan.append(as_str(message.get("tool_plan")))
        elif kind == "message-end":
            self._end(as_dict(event.get("delta")))
        elif kind not in _QUIET_EVENTS:
            self.damage(f"a stream event of a type agentfsm does not read ({kind!r:.60})")

    def _call_event(self, kind: str, index: object, piece: dict[str, Any]) -> None:
        key = index if type(index) is int else len(self._calls) - (kind != "tool-call-start")
        function = as_dict(piece.get("function"))
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(piece.get("id"), function.get("name"))
            if kind != "tool-call-start":
                call.hole = f"a {kind} for call {key}, whose tool-call-start never arrived"
        arguments = function.get("arguments")
        if type(arguments) is str:
            call.parts.append(arguments)
        elif arguments is not None:
            call.hole = call.hole or "an argument piece that is no string"
        call.ended = call.ended or kind == "tool-call-end"

    def _end(self, delta: dict[str, Any]) -> None:
        self._ended = True
        self._draft.set_finish(delta.get("finish_reason"), TABLE)
        _usage(self._draft, delta.get("usage"))
        error = delta.get("error")
        if error:
            self._draft.error = as_str(error) or str(error)

    def draft(self) -> Draft:
        """The turn so far; a stream without `message-end` (v1: `stream-end`) is truncated."""
        if self._v1 is not None:
            return self._v1.draft()
        draft = Draft(self._draft.provider)
        draft.finish, draft.raw_finish = self._draft.finish, self._draft.raw_finish
        draft.truncated, draft.usage = self._draft.truncated, self._draft.usage
        draft.error = self._draft.error
        draft.text = "".join(self._text)
        draft.reasoning = "".join(self._thinking) + "".join(self._plan)
        draft.calls = [self._calls[key].call() for key in sorted(self._calls)]
        if not self._ended or draft.error is not None:
            draft.truncated = True
            if draft.error is not None and draft.raw_finish is None:
                draft.finish = FinishReason.ERROR
        draft.damaged(self._damage)
        return draft

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()


class _V1Stream:
    """Accumulate v1 chat stream events (`event_type`) into one turn."""

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._text: list[str] = []
        self._plan: list[str] = []
        self._said: str | None = None
        """The whole plan, as `tool-calls-generation` gives it."""
        self._pieces: dict[int, _Call] = {}
        self._whole: list[ToolCall] | None = None
        """The calls `tool-calls-generation` gave whole; None until it arrives."""
        self._end: dict[str, Any] | None = None
        self._damage: str | None = None

    def damage(self, why: str) -> None:
        """Note an unreadable event: the turn is damaged (a call in pieces is incomplete anyway)."""
        self._damage = self._damage or why

    def add(self, event: dict[str, Any]) -> None:
        """Fold one v1 event into the turn."""
        kind = as_str(event.get("event_type"))
        if kind == "text-generation":
            self._text.append(as_str(event.get("text")))
        elif kind == "tool-calls-chunk":
            self._plan.append(as_str(event.get("text")))
            self._piece(event.get("tool_call_delta"))
        elif kind == "tool-calls-generation":
            self._said = as_str(event.get("text"))
            calls = as_list(event.get("tool_calls"))
            self._whole = [self._generated(as_dict(item)) for item in calls]
        elif kind == "stream-end":
            self._end = event
        elif kind not in _V1_QUIET:
            self.damage(f"a v1 stream event of a type agentfsm does not read ({kind!r:.60})")

    @staticmethod
    def _generated(entry: dict[str, Any]) -> ToolCall:
        return call_from_object(None, entry.get("name"), entry.get("parameters"))

    def _piece(self, delta: object) -> None:
        """One `tool_call_delta`: a call's name or a piece of its parameters text, by index."""
        if delta is None:
            return
        piece = as_dict(delta)
        index = piece.get("index")
        key = index if type(index) is int else max(self._pieces, default=0)
        call = self._pieces.setdefault(key, _Call(None, None))
        name = piece.get("name")
        if type(name) is str and name:
            call.name = name
        parameters = piece.get("parameters")
        if type(parameters) is str:
            call.parts.append(parameters)
        elif parameters is not None:
            call.hole = call.hole or "a parameters piece that is no string"

    @staticmethod
    def _cut(call: _Call) -> ToolCall:
        """A call known only from its pieces: kept as received, never executable."""
        made = call_from_string(None, call.name, "".join(call.parts))
        return broken(made, call.hole or _V1_CUT)

    def draft(self) -> Draft:
        """The turn so far: the body `stream-end` carries, or what the events gave."""
        end = self._end
        response = as_dict(end.get("response")) if end is not None else {}
        if end is not None and is_v1(response):
            body = (
                response
                if "finish_reason" in response
                else {**response, "finish_reason": end.get("finish_reason")}
            )
            draft = _read_v1(body, self._provider)
        else:
            draft = self._events_draft(end, response)
        draft.damaged(self._damage)
        return draft

    def _events_draft(self, end: dict[str, Any] | None, response: dict[str, Any]) -> Draft:
        """The turn the events make, when no whole v1 body ends the stream."""
        draft = Draft(self._provider)
        draft.text = "".join(self._text)
        draft.reasoning = self._said if self._said else "".join(self._plan)
        if self._whole is not None:
            draft.calls = list(self._whole)
        else:  # only pieces: whatever they parse to, the whole call never arrived
            draft.calls = [self._cut(self._pieces[k]) for k in sorted(self._pieces)]
        if end is None:
            draft.truncated = True
            return draft
        _finish_v1(draft, end.get("finish_reason"), response)
        return draft
