"""OpenAI Chat Completions, and every server that speaks it: body, stream chunks, and one
assistant message as chat histories hold it.

The same reader serves DeepSeek, Qwen/DashScope, Groq, xAI, Mistral, Cerebras,
OpenRouter, Snowflake Cortex, Moonshot, vLLM-style servers and litellm's dumps.
Their quirks handled here: no `content` key, `finish_reason: ""`, empty call
ids, `reasoning_content` or `reasoning`, the legacy `function_call`, stream
tool-call indexes that start at 1, a later delta repeating `name: ""`, and an
error chunk after the finish.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentfsm._model.types import FinishReason, ModelTurn, ToolCall, Usage
from agentfsm.providers._common import (
    _EMPTY,
    Draft,
    as_dict,
    as_list,
    as_str,
    broken,
    call_from_string,
    make_usage,
)

__all__ = ["TABLE", "ChatStream", "is_body", "is_chat", "is_completion", "is_message", "read_body"]

TABLE: dict[str, FinishReason] = {
    # OpenAI Chat Completions API reference, `choices[].finish_reason`.
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,  # deprecated, still sent by older models
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    # OpenRouter's normalized reasons, and Mistral's API spec (stop, length, model_length,
    # error, tool_calls): "error" is a generation that failed.
    "error": FinishReason.ERROR,
    "model_length": FinishReason.LENGTH,
    # DeepSeek API reference: the server ran out of resources mid-generation.
    "insufficient_system_resource": FinishReason.ERROR,
}
"""Finish reasons of chat completions and the servers that speak it; unlisted -> UNKNOWN."""
_CUT = "the stream ended before the call was complete"


def is_chat(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a chat completion body or chunk."""
    return type(payload.get("choices")) is list


def is_completion(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a whole chat completion: choices, the first no stream delta."""
    choices = payload.get("choices")
    return type(choices) is list and not _is_chunk(choices)


def is_body(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is read whole: a chat completion, or one assistant message."""
    choices = payload.get("choices")
    if type(choices) is list:
        return not _is_chunk(choices)
    return is_message(payload)


def _is_chunk(choices: list[Any]) -> bool:
    """Whether the choices are a stream chunk's: the first holds a `delta`, no `message`."""
    choice = choices[0] if choices else None
    return type(choice) is dict and "message" not in choice and "delta" in choice


def is_message(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is one chat assistant message (not a body, not a typed block)."""
    return payload.get("role") == "assistant" and "type" not in payload and "choices" not in payload


def _first_choice(payload: dict[str, Any]) -> dict[str, Any]:
    choices = payload.get("choices")
    if type(choices) is list and choices:
        return as_dict(choices[0])
    return as_dict(None)


def _content_text(content: object) -> str:
    if type(content) is str:
        return content
    parts = [as_str(as_dict(part).get("text")) for part in as_list(content)]
    return "".join(parts)


def _transcript(audio: object) -> str:
    """The text of an audio answer (`modalities: ["audio"]` sends no `content`, only audio)."""
    return as_str(audio.get("transcript")) if type(audio) is dict else ""


def _reasoning(message: dict[str, Any]) -> str:
    text = message.get("reasoning_content")
    if type(text) is str and text:
        return text
    text = message.get("reasoning")
    return text if type(text) is str else ""


def _usage(draft: Draft, usage: object) -> None:
    if type(usage) is dict:
        draft.usage = _usage_of(usage)


def _usage_of(usage: dict[str, Any]) -> Usage:
    return make_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("cost"))


def _error_text(error: object) -> str:
    if type(error) is dict:
        message = as_str(error.get("message")) or "provider error"
        code = error.get("code")
        return f"{code}: {message}" if code is not None else message
    return str(error)


def _message(message: dict[str, Any]) -> tuple[str, list[ToolCall], str, str]:
    """An assistant message's answer text, calls, refusal and reasoning.

    The text is `content`, a string or text parts, or an audio answer's transcript. A
    refusal is the message's `refusal`, or a `refusal` content part (chat histories hold
    them). Arguments are JSON text (OpenAI) or an object (Ollama-style histories).
    """
    content = message.get("content")
    refusal = message.get("refusal")
    refused = refusal if type(refusal) is str else ""
    if type(content) is str:
        text = content
    elif not content:
        text = _transcript(message["audio"]) if "audio" in message else ""
    else:
        text = _content_text(content)
        for part in content if type(content) is list else ():
            if type(part) is dict and part.get("type") == "refusal":
                refused += as_str(part.get("refusal"))
    calls = _calls(message) if "tool_calls" in message or "function_call" in message else []
    reasoning = (
        _reasoning(message) if "reasoning_content" in message or "reasoning" in message else ""
    )
    return text, calls, refused, reasoning


def _calls(message: dict[str, Any]) -> list[ToolCall]:
    calls = []
    items = message.get("tool_calls")
    for item in items if type(items) is list else ():
        entry = item if type(item) is dict else _EMPTY
        function = entry.get("function")
        if type(function) is not dict:
            function = _EMPTY
        calls.append(
            call_from_string(entry.get("id"), function.get("name"), function.get("arguments"))
        )
    legacy = message.get("function_call")
    if type(legacy) is dict and as_str(legacy.get("name")):
        calls.append(call_from_string("", legacy.get("name"), legacy.get("arguments")))
    return calls


def read_body(payload: dict[str, Any], provider: str = "openai") -> Draft:
    """Read a chat completion, or one assistant message (see `is_body`; chunks: `ChatStream`).

    `normalize` reads the most common payload of all through this one reader. An assistant
    message (as chat histories and the OpenAI SDK's `ChatCompletionMessage.model_dump()` hold
    it) carries no finish claim, usage or model: its claim is UNKNOWN.
    """
    choices = payload.get("choices")
    if type(choices) is not list:
        text, calls, refusal, reasoning = _message(payload)
        return Draft(provider, text, calls, refusal=refusal, reasoning=reasoning)
    choice = choices[0] if choices else None
    if type(choice) is not dict:
        choice = _EMPTY
    message = choice.get("message")
    if type(message) is not dict:
        message = _EMPTY
    text, calls, refusal, reasoning = _message(message)
    usage = payload.get("usage")
    error = payload.get("error")
    model = payload.get("model")
    draft = Draft(
        provider,
        text,
        calls,
        FinishReason.UNKNOWN,
        None,
        False,
        _usage_of(usage) if type(usage) is dict else None,
        refusal,
        reasoning,
        _error_text(error) if error else None,
        model if type(model) is str else None,
    )
    draft.set_finish(choice.get("finish_reason"), TABLE)
    return draft


class _Pending:
    """A streamed call being assembled from deltas."""

    __slots__ = ("bad", "id", "name", "parts")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.parts: list[str] = []
        self.bad: str | None = None

    def merge(self, call_id: object, function: dict[str, Any]) -> None:
        if not self.id and type(call_id) is str:
            self.id = call_id
        name = function.get("name")
        if not self.name and type(name) is str:
            self.name = name
        arguments = function.get("arguments")
        if type(arguments) is str:
            self.parts.append(arguments)
        elif arguments is not None:
            self.bad = f"an argument fragment is a JSON {type(arguments).__name__}, not a string"

    def call(self, gap: str | None) -> ToolCall:
        call = call_from_string(self.id, self.name, "".join(self.parts))
        if self.bad is not None:
            return broken(call, self.bad)
        return call if gap is None else broken(call, gap)


class ChatStream:
    """Accumulate chat completion chunks, in order, into one turn."""

    def __init__(self, provider: str = "openai") -> None:
        self._draft = Draft(provider)
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[object, _Pending] = {}
        self._finished = False
        self._index: object = None
        self._damage: str | None = None
        self._gap = False
        """A gap came before the finish: any call may have lost a fragment in it."""
        self._ended = False
        """The server ended the stream on purpose (`data: [DONE]`)."""

    def damage(self, why: str) -> None:
        """Note an unreadable chunk; before the finish, every call may have a hole."""
        self._damage = self._damage or why
        self._gap = self._gap or not self._finished

    def ended(self) -> None:
        """Note that the server ended the stream on purpose (`data: [DONE]` arrived)."""
        self._ended = True

    def add(self, chunk: dict[str, Any]) -> None:
        """Fold one chunk into the turn."""
        draft = self._draft
        if chunk.get("error"):
            draft.error = _error_text(chunk["error"])
            draft.truncated = True
        if not draft.model:
            draft.model = as_str(chunk.get("model"))
        _usage(draft, chunk.get("usage"))
        choice = self._choice(chunk)
        if choice:
            self._delta(as_dict(choice.get("delta")))
            reason = choice.get("finish_reason")
            if type(reason) is str:
                draft.set_finish(reason, TABLE)
                self._finished = self._finished or bool(reason)

    def _choice(self, chunk: dict[str, Any]) -> dict[str, Any]:
        """The chunk's piece of the one choice read (the first index seen; `n > 1` streams
        interleave the other choices' chunks, which are other answers, not this one's)."""
        choice = _first_choice(chunk)
        index = choice.get("index")
        if index is None:  # an empty chunk, or a server that numbers no choice
            return choice
        if self._index is None:
            self._index = index
        return choice if index == self._index else _EMPTY

    def _delta(self, delta: dict[str, Any]) -> None:
        content = delta.get("content")
        if content:
            self._text.append(_content_text(content))
        elif "audio" in delta:
            self._text.append(_transcript(delta["audio"]))
        reasoning = _reasoning(delta)
        if reasoning:
            self._reasoning.append(reasoning)
        refusal = delta.get("refusal")
        if refusal and type(refusal) is str:
            self._refusal.append(refusal)
        for item in as_list(delta.get("tool_calls")):
            self._tool_delta(as_dict(item))
        legacy = delta.get("function_call")
        if type(legacy) is dict:
            self._calls.setdefault("function_call", _Pending()).merge("", legacy)

    def _tool_delta(self, item: dict[str, Any]) -> None:
        index = item.get("index")
        if type(index) is not int:
            # No index: a delta naming a new call starts one, others continue the last.
            fresh = item.get("id") or as_dict(item.get("function")).get("name")
            index = len(self._calls) if fresh or not self._calls else list(self._calls)[-1]
        pending = self._calls.get(index)
        if pending is None:
            pending = self._calls[index] = _Pending()
        pending.merge(item.get("id"), as_dict(item.get("function")))

    def draft(self) -> Draft:
        """The turn so far, as a draft.

        A stream with no finish claim is truncated, unless the server ended it on purpose
        (`[DONE]`) and what arrived is whole by its structure: an answer, every call's
        arguments a JSON object, nothing damaged (OpenRouter-style servers send no reason).
        """
        draft = replace(self._draft)  # reading mid-stream must not change the stream
        draft.text = "".join(self._text)
        draft.reasoning = "".join(self._reasoning)
        draft.refusal = "".join(self._refusal)
        gap = f"its arguments may have a hole: {self._damage}" if self._gap else None
        draft.calls = [pending.call(gap) for pending in self._calls.values()]
        if not self._finished and draft.raw_finish is None and not self._whole(draft):
            draft.truncated = True
            if draft.calls:
                draft.calls[-1] = broken(draft.calls[-1], _CUT)
            if draft.error is not None:
                draft.finish = FinishReason.ERROR
        draft.damaged(self._damage)
        return draft

    def _whole(self, draft: Draft) -> bool:
        """Whether a stream without a finish claim is complete by its structure alone."""
        if not self._ended or self._damage is not None or draft.error is not None:
            return False
        if not (draft.text or draft.calls or draft.refusal):
            return False  # nothing arrived: no answer to call complete
        return all(call.complete for call in draft.calls)

    def turn(self) -> ModelTurn:
        """The turn so far."""
        return self.draft().build()
