"""Building blocks every wire-format normalizer shares.

The normalizers read untrusted JSON, so every access goes through the small
coercions here (`as_dict`, `as_list`, `as_str`, `as_int`): a value of the wrong
type reads as empty instead of raising. Turns and calls are assembled in a
mutable `Draft` and frozen once, at the end, through the models' own validation
(`checked_call`, `checked_turn`): what a payload holds never becomes a model
unchecked. A value that still does not validate leaves the call or the turn
damaged (an error on it, routed to a retry), never an exception or an invalid model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentfsm._model.copies import copied
from agentfsm._model.limits import MAX_DEPTH, nesting_exceeds
from agentfsm._model.types import FinishReason, ModelTurn, ToolCall, Usage
from agentfsm.exceptions import DataError

__all__ = [
    "Draft",
    "as_dict",
    "as_int",
    "as_list",
    "as_str",
    "broken",
    "call_from_object",
    "call_from_string",
    "checked_call",
    "checked_turn",
    "json_loads",
    "json_text",
    "make_usage",
    "of_kind",
    "too_deep",
]

_EMPTY: dict[str, Any] = {}


def as_dict(value: object) -> dict[str, Any]:
    """Read a value as a JSON object; anything else reads as an empty one."""
    return value if type(value) is dict else _EMPTY


def as_list(value: object) -> list[Any]:
    """Read a value as a JSON array; anything else reads as an empty one."""
    return value if type(value) is list else []


def as_str(value: object) -> str:
    """Read a value as a string; anything else reads as `""`."""
    return value if type(value) is str else ""


def as_int(value: object) -> int:
    """Read a value as a token count; booleans and non-numbers read as 0."""
    if type(value) is int:
        return value
    if type(value) is float and value == value and abs(value) < 1e18:
        return int(value)
    return 0


_DECODER = json.JSONDecoder()


def json_loads(text: str) -> Any:
    """`json.loads(text)`, the common case (a JSON document with no white space around it)
    in one call of the decoder's public `raw_decode`.

    Anything else (white space around the document, a byte-order mark, text that is not
    JSON) goes to `json.loads` itself, so values and errors are exactly its own.
    """
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def json_text(value: object) -> str:
    """`value` as JSON text, for an error message or a raw copy of arguments.

    Values JSON has no form for are written with `str`; keys it cannot hold (a tuple, in
    a payload built in Python) or a cycle leave the whole value written with `repr`.
    """
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _noted(earlier: object, note: str) -> str:
    """`note` after an error already recorded (when it is a string), or alone."""
    return f"{earlier}; {note}" if type(earlier) is str and earlier else note


def checked_call(values: dict[str, Any], own: bool = False) -> ToolCall:
    """A `ToolCall` of values read from a payload, validated.

    Values that do not validate (arguments a framework keyed by non-strings, say)
    leave the call broken, with the id, name and raw text that do validate kept:
    the model is asked again, as for arguments that are not JSON.

    The call's arguments are its own: a payload's argument object (Anthropic's `input`,
    a framework's `args`) stays the caller's, and changing it later changes no call.

    Args:
        values: The call's fields.
        own: The arguments were made here (parsed from JSON text) and no one else holds
            them, so they need no copy.
    """
    arguments = values.get("arguments")
    if not own and type(arguments) is dict:
        values = {**values, "arguments": copied(arguments)}
    try:
        return ToolCall(**values)
    except DataError as exc:
        raw = values.get("raw_arguments")
        return ToolCall(
            id=as_str(values.get("id")),
            name=as_str(values.get("name")),
            arguments=None,
            raw_arguments=raw if type(raw) is str else None,
            error=_noted(values.get("error"), f"the call does not validate: {exc.message}"),
            kind=as_str(values.get("kind")) or "function",
        )


def checked_turn(values: dict[str, Any]) -> ModelTurn:
    """A `ModelTurn` of values read from a payload, validated.

    Fields that do not validate are left out and the turn is marked damaged
    (truncated, with an error naming them), so it is retried, never read as an answer.
    """
    try:
        return ModelTurn(**values)
    except DataError as exc:
        problems: list[tuple[str, str]] = exc.details.get("problems") or []
        bad = {field.split(".")[0] for field, _ in problems}
        kept = {name: value for name, value in values.items() if name not in bad}
        kept["truncated"] = True
        kept["error"] = _noted(kept.get("error"), f"the output does not validate: {exc.message}")
        return ModelTurn(**kept)


def make_usage(input_tokens: object, output_tokens: object, cost: object = None) -> Usage:
    """Make a `Usage` from raw counts; a count or cost that is not a number reads as 0 or None."""
    real_cost = None
    if cost is not None and isinstance(cost, int | float) and not isinstance(cost, bool):
        real_cost = float(cost)
    # Whole-number counts, the usual ones, need no coercion.
    return Usage(
        input_tokens=input_tokens if type(input_tokens) is int else as_int(input_tokens),
        output_tokens=output_tokens if type(output_tokens) is int else as_int(output_tokens),
        cost=real_cost,
    )


def _call(
    call_id: object,
    name: object,
    arguments: dict[str, Any] | None,
    raw: str | None,
    error: str | None,
    own: bool,
) -> ToolCall:
    tool = name if type(name) is str else ""
    if not tool and error is None:
        arguments, error = None, "the call has no tool name"
    return checked_call(
        {
            "id": call_id if type(call_id) is str else "",
            "name": tool,
            "arguments": arguments,
            "raw_arguments": raw,
            "error": error,
            "kind": "function",
        },
        own,
    )


def _parse(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    if not raw or raw.isspace():
        return {}, None
    try:
        value = json_loads(raw)
    except ValueError as exc:
        return None, f"arguments are not valid JSON ({exc})"
    except RecursionError:
        return None, f"arguments nest deeper than {MAX_DEPTH} levels"
    if type(value) is dict:  # the common case, flat, is settled here
        for item in value.values():
            if type(item) is dict or type(item) is list:
                return _as_arguments(value)
        return value, None
    return _as_arguments(value)


def _as_arguments(value: object) -> tuple[dict[str, Any] | None, str | None]:
    if type(value) is dict:
        if too_deep(value):
            return None, f"arguments nest deeper than {MAX_DEPTH} levels"
        return value, None
    if value is None:
        return {}, None
    kind = type(value).__name__
    return None, f"arguments are a JSON {kind}, not an object"


def too_deep(arguments: dict[str, Any]) -> bool:
    """Whether arguments nest deeper than `MAX_DEPTH`; flat arguments answer at once."""
    for value in arguments.values():
        if type(value) is dict or type(value) is list:
            return nesting_exceeds(arguments, MAX_DEPTH)
    return False


def call_from_string(call_id: object, name: object, raw: object) -> ToolCall:
    """Make a call whose arguments arrived as a JSON string; empty or `null` means `{}`.

    Args:
        call_id: The provider's id; anything but a string becomes `""`.
        name: The tool's name.
        raw: The argument string as received.
    """
    if type(raw) is str:
        arguments, error = _parse(raw)
        return _call(call_id, name, arguments, raw, error, True)  # parsed here: no one else's
    if raw is None:
        return _call(call_id, name, {}, None, None, True)
    return call_from_object(call_id, name, raw)


def call_from_object(call_id: object, name: object, value: object) -> ToolCall:
    """Make a call whose arguments arrived as a JSON value; `null` means `{}`.

    A string is read as JSON text (some servers send either form).
    """
    if type(value) is str:
        return call_from_string(call_id, name, value)
    arguments, error = _as_arguments(value)
    return _call(call_id, name, arguments, None, error, False)


def broken(call: ToolCall, why: str) -> ToolCall:
    """Mark a call as not executable, keeping what was received of it."""
    if call.error is not None:
        return call
    values = dict(call.__dict__)
    values["arguments"] = None
    values["error"] = why
    return checked_call(values)


def of_kind(call: ToolCall, kind: str) -> ToolCall:
    """The call as an item of `kind` (its result goes back as that kind's output item)."""
    values = dict(call.__dict__)
    values["kind"] = kind
    return checked_call(values)


@dataclass(slots=True)
class Draft:
    """A turn being assembled; `build` freezes it into a `ModelTurn`."""

    provider: str
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    finish: FinishReason = FinishReason.UNKNOWN
    raw_finish: str | None = None
    truncated: bool = False
    usage: Usage | None = None
    refusal: str | None = None
    reasoning: str | None = None
    error: str | None = None
    model: str | None = None
    server_tool_calls: int = 0

    def set_finish(self, raw: object, table: dict[str, FinishReason]) -> None:
        """Record the provider's finish claim; an unrecognised one maps to UNKNOWN."""
        if type(raw) is not str:
            return
        self.raw_finish = raw
        self.finish = table.get(raw, FinishReason.UNKNOWN)
        if self.finish is FinishReason.LENGTH:
            self.truncated = True

    def damaged(self, why: str | None) -> None:
        """Mark the turn incomplete because a stream event was lost or unreadable."""
        if why is not None:
            self.truncated = True
            note = f"the stream is damaged: {why}"
            self.error = f"{self.error}; {note}" if self.error else note

    def not_understood(self, what: str) -> None:
        """Mark the turn unusable because it holds output of a kind agentfsm does not read.

        Such output is never dropped silently: the turn is routed like a broken one
        (retried, within `max_retries`), never read as an answer or an empty turn.
        """
        self.truncated = True
        note = f"the output holds {what}, which agentfsm does not read"
        self.error = f"{self.error}; {note}" if self.error else note

    def break_calls(self, why: str) -> None:
        """Mark every call not executable (the provider said the calls are broken)."""
        self.calls = [broken(call, why) for call in self.calls]

    def build(self) -> ModelTurn:
        """Freeze the draft into a validated `ModelTurn` (see `checked_turn`)."""
        return checked_turn(
            {
                "text": self.text,
                "tool_calls": self.calls,
                "finish_reason": self.finish,
                "raw_finish_reason": self.raw_finish,
                "truncated": self.truncated,
                "usage": self.usage,
                "refusal": self.refusal or None,
                "reasoning": self.reasoning or None,
                "error": self.error,
                "provider": self.provider,
                "model": self.model or None,
                "server_tool_calls": self.server_tool_calls,
            },
        )
