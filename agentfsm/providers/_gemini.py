"""Gemini / Vertex AI generateContent: body and streamGenerateContent chunks.

Function calls under `STOP` stay STOP (the controller reconciles). The safety
family and `promptFeedback.blockReason` are CONTENT_FILTER. The error family
(`MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, ...) is ERROR with the
`finishMessage` as the turn's error; a malformed call is also never executable.
A numbered reason (the google SDKs' int enum encoding, `"finishReason": 2`) is read as
the name it stands for where Vertex AI and the Gemini API agree on its meaning.
Streamed arguments (`partialArgs` with `willContinue`) need a terminal
`functionCall` part; without one the call is kept broken and the turn truncated.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from agentfsm._model.limits import MAX_JSON_PATH_STEPS
from agentfsm._model.types import FinishReason, ModelTurn, ToolCall
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_int,
    as_list,
    as_str,
    broken,
    call_from_object,
    checked_call,
    json_text,
    make_usage,
)

__all__ = ["TABLE", "GeminiStream", "is_gemini", "read_body"]

# The `Candidate.FinishReason` enum of the Gemini API and Vertex AI (google-genai types,
# Vertex AI v1 reference): every value but STOP and MAX_TOKENS says the generation did
# not end normally. The filter family blocked content; the rest failed.
_FILTERS = (
    "SAFETY RECITATION BLOCKLIST PROHIBITED_CONTENT SPII MODEL_ARMOR IMAGE_SAFETY "
    "IMAGE_PROHIBITED_CONTENT IMAGE_RECITATION"
)
_ERRORS = (
    "MALFORMED_FUNCTION_CALL UNEXPECTED_TOOL_CALL TOO_MANY_TOOL_CALLS MALFORMED_RESPONSE "
    "MISSING_THOUGHT_SIGNATURE LANGUAGE OTHER IMAGE_OTHER NO_IMAGE"
)
TABLE: dict[str, FinishReason] = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "FINISH_REASON_UNSPECIFIED": FinishReason.UNKNOWN,
    **dict.fromkeys(_FILTERS.split(), FinishReason.CONTENT_FILTER),
    **dict.fromkeys(_ERRORS.split(), FinishReason.ERROR),
}
"""Gemini finish reasons; unlisted -> UNKNOWN."""
BROKEN = frozenset(
    {"MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}
)
"""Reasons that say the calls themselves are wrong: none may run, and a retry may fix them."""
_ALIKE = ("FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER")
NUMBERED: dict[str, tuple[str, ...]] = {
    # google.cloud.aiplatform.v1 Candidate.FinishReason, from 6 on.
    "Vertex AI": (
        *_ALIKE,
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "MODEL_ARMOR",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
        "UNEXPECTED_TOOL_CALL",
        "NO_IMAGE",
    ),
    # google.ai.generativelanguage.v1beta Candidate.FinishReason, from 6 on (LANGUAGE is 6).
    "the Gemini API": (
        *_ALIKE,
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
        "UNEXPECTED_TOOL_CALL",
    ),
}
"""The finish reasons by number, as the google SDKs' int enum encoding (`"finishReason": 1`)
writes them. The two APIs number 0-5 alike and differ from 6 on."""
_PATH = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
_SYNTAX = re.compile(r"\$(?:\.[^.\[\]]+|\[\d+\])*")
_MAX_INDEX_DIGITS = 9
_VALUES = ("stringValue", "numberValue", "boolValue")
_QUIET_PARTS = frozenset(
    {"thought", "thoughtSignature", "codeExecutionResult", "videoMetadata", "partMetadata"}
)
"""Part fields that carry nothing for the host (thought markers and signatures, the result of
code Gemini ran itself, metadata). A part holding anything else, such as generated media
(`inlineData`, `fileData`), is output a turn cannot hold: never dropped silently."""
_CUT = "the stream ended before a terminal functionCall closed the streamed arguments"


def is_gemini(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a generateContent body or stream chunk."""
    return type(payload.get("candidates")) is list or "promptFeedback" in payload


def _steps(path: str) -> list[str | int] | str:
    """The steps of a `jsonPath` (`$.a[0].b`), or why it cannot be followed."""
    if path.count(".") + path.count("[") > MAX_JSON_PATH_STEPS:
        return f"a jsonPath of more than {MAX_JSON_PATH_STEPS} steps"
    if _SYNTAX.fullmatch(path) is None:
        return f"a jsonPath that is not understood ({path[:60]!r})"
    steps: list[str | int] = []
    for key, index in _PATH.findall(path):
        if len(steps) >= MAX_JSON_PATH_STEPS:
            return f"a jsonPath of more than {MAX_JSON_PATH_STEPS} steps"
        if index and len(index) > _MAX_INDEX_DIGITS:
            return f"a jsonPath index of {len(index)} digits"
        steps.append(int(index) if index else key)
    return steps or "a jsonPath that names no argument"


class _Text(list[str]):
    """A streamed string value, kept in pieces (joining as they come would be quadratic)."""


def _child(node: object, step: str | int) -> tuple[Any, str | None]:
    """The value at `step` of `node` (None when absent), or why the step cannot be taken."""
    if type(step) is int:
        if type(node) is not list:
            return None, f"a jsonPath index [{step}] into something that is not an array"
        if step > len(node):
            return (
                None,
                f"a jsonPath index [{step}] that skips elements (the array has {len(node)})",
            )
        if step == len(node):
            node.append(None)
        return node[step], None
    if type(node) is not dict:
        return None, f"a jsonPath key {step!r} into something that is not an object"
    return node.get(step), None


def _put(root: dict[str, Any], steps: list[str | int], value: object) -> str | None:
    """Set `value` at a parsed JSON path, creating containers; strings concatenate.

    Returns why the value cannot be placed, or None. An array grows one element
    at a time, so a path cannot make it allocate more than the stream sent.
    """
    node: Any = root
    for position, step in enumerate(steps):
        old, problem = _child(node, step)
        if problem is not None:
            return problem
        if position == len(steps) - 1:
            if type(value) is str:
                if type(old) is _Text:
                    old.append(value)
                    return None
                value = _Text([value])
            node[step] = value
            return None
        if old is None:
            old = [] if type(steps[position + 1]) is int else {}
            node[step] = old
        node = old
    return None


def _plain(value: Any) -> Any:
    """The value with every streamed string joined (at most MAX_JSON_PATH_STEPS deep)."""
    if type(value) is _Text:
        return "".join(value)
    if type(value) is dict:
        return {key: _plain(item) for key, item in value.items()}
    if type(value) is list:
        return [_plain(item) for item in value]
    return value


class _Streamed:
    """A function call whose arguments arrive as `partialArgs` pieces."""

    def __init__(self, name: object, call_id: object) -> None:
        self.name, self.id = name, call_id
        self.args: dict[str, Any] = {}
        self.hole: str | None = None
        """Why the arguments may not be what the model wrote, once known."""

    def apply(self, pieces: object) -> None:
        if type(pieces) is not list:
            if pieces is not None:
                self.hole = self.hole or "partialArgs is not a list"
            return
        for piece in pieces:
            if self.hole is not None:
                return  # the arguments are already known to be broken: store no more
            entry = as_dict(piece)
            value = next((entry[k] for k in _VALUES if k in entry), None)
            steps = _steps(as_str(entry.get("jsonPath")))
            self.hole = steps if isinstance(steps, str) else _put(self.args, steps, value)

    def arguments(self) -> dict[str, Any]:
        """The arguments streamed so far, strings joined."""
        return _plain(self.args)  # type: ignore[no-any-return]


class GeminiStream:
    """Accumulate generateContent chunks (or read one body) into one turn."""

    def __init__(self, provider: str = "gemini", streaming: bool = True) -> None:
        self._draft = Draft(provider)
        self._streaming = streaming
        self._streamed: _Streamed | None = None
        self._calls: list[ToolCall] = []
        self._message = ""
        self._name: str | None = None
        """The finish reason's name (a number read as the name it stands for)."""
        self._unsure: str | None = None
        """Why a numbered finish reason cannot be told (the APIs number it differently)."""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._damage: str | None = None

    def damage(self, why: str) -> None:
        """Note an unreadable chunk: a call whose arguments are still streaming may have a hole."""
        self._damage = self._damage or why
        if self._streamed is not None:
            self._streamed.hole = self._streamed.hole or f"its arguments may have a hole: {why}"

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
        if type(blocked) is int:  # every numbered block reason blocked the prompt too
            blocked = str(blocked)
        if type(blocked) is str:
            draft.set_finish(blocked, {blocked: FinishReason.CONTENT_FILTER})
        candidates = as_list(chunk.get("candidates"))
        candidate = as_dict(candidates[0]) if candidates else as_dict(None)
        for part in as_list(as_dict(candidate.get("content")).get("parts")):
            self._part(as_dict(part))
        if "finishReason" in candidate:
            self._finish(candidate["finishReason"])
            self._message = as_str(candidate.get("finishMessage"))

    def _finish(self, raw: object) -> None:
        """Record the finish claim; a number is read as the name it stands for.

        A number the two APIs read differently (a filter in one, broken calls in the
        other) is an ERROR whose calls never run; one neither names is UNKNOWN.
        `raw_finish_reason` keeps the number, as text.
        """
        draft = self._draft
        self._name, self._unsure = (raw if type(raw) is str else None), None
        if type(raw) is not int:
            draft.set_finish(raw, TABLE)
            return
        names = {api: table[raw] for api, table in NUMBERED.items() if 0 <= raw < len(table)}
        readings = {(TABLE[name], name in BROKEN) for name in names.values()}
        if len(readings) > 1:
            draft.set_finish(str(raw), {str(raw): FinishReason.ERROR})
            self._unsure = f"finish reason {raw} is " + " or ".join(
                f"{name} in {api}" for api, name in names.items()
            )
            return
        if names:
            self._name = next(iter(names.values()))  # the readings agree on what it means
        draft.set_finish(str(raw), {str(raw): TABLE.get(str(self._name), FinishReason.UNKNOWN)})

    def _part(self, part: dict[str, Any]) -> None:
        if "functionCall" in part:
            self._function_call(as_dict(part["functionCall"]))
        elif "text" in part:
            text = as_str(part["text"])
            (self._reasoning if part.get("thought") is True else self._text).append(text)
        elif "executableCode" in part:
            self._draft.server_tool_calls += 1
        elif not part.keys() <= _QUIET_PARTS:
            self._draft.not_understood(f"a part with {sorted(map(str, part))[:4]}")

    def _function_call(self, call: dict[str, Any]) -> None:
        pieces = call.get("partialArgs")
        streamed = self._streamed
        if pieces is not None or call.get("willContinue") is True:
            if streamed is None:
                streamed = self._streamed = _Streamed(call.get("name"), call.get("id"))
                if self._damage is not None and not call.get("name"):
                    streamed.hole = f"its first piece may be in a gap: {self._damage}"
            streamed.apply(pieces)
            return
        if streamed is not None:
            self._streamed = None
            self._calls.append(self._closed(streamed, call))
            return
        self._calls.append(call_from_object(call.get("id"), call.get("name"), call.get("args")))

    @staticmethod
    def _closed(streamed: _Streamed, call: dict[str, Any]) -> ToolCall:
        """The call a terminal `functionCall` closes; its own `args`, when sent, are whole."""
        name = call.get("name") or streamed.name
        call_id = call.get("id") or streamed.id
        if "args" in call:
            return call_from_object(call_id, name, call["args"])
        made = call_from_object(call_id, name, streamed.arguments())
        return made if streamed.hole is None else broken(made, streamed.hole)

    def draft(self) -> Draft:
        """The turn so far; see the module docstring for the rules."""
        draft = replace(self._draft)  # reading mid-stream must not change the stream
        draft.text = "".join(self._text)
        draft.reasoning = "".join(self._reasoning) or None
        draft.calls = list(self._calls)
        streamed = self._streamed
        if streamed is not None:
            cut = dict(call_from_object(streamed.id, streamed.name, None).__dict__)
            raw = json_text(streamed.arguments())
            cut.update(arguments=None, raw_arguments=raw, error=streamed.hole or _CUT)
            draft.calls.append(checked_call(cut))
            draft.truncated = True
        if self._streaming and draft.raw_finish is None:
            draft.truncated = True
        if draft.finish is FinishReason.ERROR:
            named = "" if self._name == draft.raw_finish else f" ({self._name})"
            stopped = f"the provider stopped with {draft.raw_finish}{named}"
            draft.error = self._message or self._unsure or stopped
        if self._name in BROKEN:
            draft.truncated = True
            draft.break_calls(f"the provider reported {self._name}")
        elif self._unsure is not None:
            draft.break_calls(self._unsure)  # in one of the two readings the calls are broken
        draft.damaged(self._damage)
        return draft

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()


def read_body(payload: dict[str, Any], provider: str = "gemini") -> Draft:
    """Read a generateContent body."""
    reader = GeminiStream(provider, streaming=False)
    reader.add(payload)
    return reader.draft()
