"""What agent frameworks hold, read into turns and results: recognised by shape, never imported.

- a LangChain `AIMessage` / `AIMessageChunk` (or its `model_dump()`, `type: "ai"`), with its
  `invalid_tool_calls` and `response_metadata` finish reason;
- an OpenAI Agents SDK `ModelResponse` (`output` items of the Responses API, `usage`);
- a pydantic-ai `ModelResponse` (`parts`, `finish_reason`, `usage`);
- as tool results: OpenAI `tool` and legacy `function` message dicts, and LangChain `ToolMessage`s.

An object whose class carries one of these names but not the fields read here (a framework
version this module does not know) raises `PayloadError` naming the type and the fields looked
for, never an `AttributeError` from deep inside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm._model.types import FinishReason, ModelTurn, ToolResult
from agentfsm.exceptions import PayloadError
from agentfsm.providers import _anthropic, _gemini, _openai_chat, _openai_responses
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_list,
    as_str,
    call_from_object,
    checked_call,
    make_usage,
)

__all__ = [
    "LOOKED_FOR",
    "is_langchain",
    "read_langchain",
    "read_object",
    "tool_result",
]

LANGCHAIN_FIELDS = ("type", "content", "tool_calls", "invalid_tool_calls", "response_metadata")
AGENTS_FIELDS = ("output", "usage", "response_id")
PYDANTIC_AI_FIELDS = ("parts", "kind", "finish_reason", "usage")
LOOKED_FOR: dict[str, tuple[str, ...]] = {
    "langchain AIMessage": LANGCHAIN_FIELDS,
    "openai_agents ModelResponse": AGENTS_FIELDS,
    "pydantic_ai ModelResponse": PYDANTIC_AI_FIELDS,
}
"""The attributes each object reader looks for, as error messages name them."""

_FRAMEWORKS = frozenset({"langchain_core", "langchain", "agents", "pydantic_ai"})
_AI_TYPES = frozenset({"ai", "AIMessageChunk"})
# LangChain copies each provider's own finish claim into response_metadata.
_LANGCHAIN_TABLE: dict[str, FinishReason] = {
    **_gemini.TABLE,
    **_anthropic.TABLE,
    **_openai_chat.TABLE,
}
_LANGCHAIN_FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason")
_PYDANTIC_AI_TABLE: dict[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    "tool_call": FinishReason.TOOL_CALLS,
    "error": FinishReason.ERROR,
}
_SERVER_PARTS = frozenset({"builtin-tool-call"})
_QUIET_PARTS = frozenset({"builtin-tool-return", "compaction"})
"""pydantic-ai parts that carry nothing for the host; `file` and `speech` (generated media)
and any kind not named here are output a turn cannot hold: never dropped silently."""
_QUIET_BLOCKS = frozenset(
    {
        # calls, also listed in `tool_calls` / `invalid_tool_calls`, which are read
        "tool_use",
        "tool_call",
        "tool_call_chunk",
        "invalid_tool_call",
        "function_call",
        # calls the provider ran itself, and what it says about them
        "server_tool_call",
        "server_tool_call_chunk",
        "server_tool_result",
        "server_tool_use",
        "mcp_tool_use",
        "mcp_list_tools",
        "mcp_call",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "executable_code",
        "code_execution_result",
        "redacted_thinking",
        "citation",
    }
)
"""LangChain content blocks that hold no answer text, refusal or reasoning of their own."""


# -- LangChain ------------------------------------------------------------------------------


def is_langchain(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a LangChain AI message's `model_dump()`."""
    kind = payload.get("type")
    return type(kind) is str and kind in _AI_TYPES and "tool_calls" in payload


def _langchain_text(draft: Draft, content: object) -> None:
    if type(content) is str:
        draft.text = content
        return
    for block in as_list(content):
        if type(block) is str:
            draft.text += block
        else:
            _langchain_block(draft, as_dict(block))


def _langchain_block(draft: Draft, entry: dict[str, Any]) -> None:
    kind = entry.get("type")
    if kind in ("thinking", "reasoning"):
        draft.reasoning = (draft.reasoning or "") + (
            as_str(entry.get("thinking")) or as_str(entry.get("reasoning"))
        )
    elif kind in ("text", None):
        draft.text += as_str(entry.get("text"))
    elif kind == "refusal":  # langchain-openai keeps a Responses refusal part as a block
        draft.refusal = (draft.refusal or "") + as_str(entry.get("refusal"))
    elif type(kind) is not str or (kind not in _QUIET_BLOCKS and not kind.endswith("_result")):
        draft.not_understood(f"a content block of type {kind!r:.60}")


def read_langchain(payload: dict[str, Any], provider: str = "langchain") -> Draft:
    """Read a LangChain AI message: valid and invalid calls, the provider's finish claim."""
    draft = Draft(provider)
    _langchain_text(draft, payload.get("content"))
    for item in as_list(payload.get("tool_calls")):
        entry = as_dict(item)
        draft.calls.append(call_from_object(entry.get("id"), entry.get("name"), entry.get("args")))
    for item in as_list(payload.get("invalid_tool_calls")):
        entry = as_dict(item)
        call = call_from_object(entry.get("id"), entry.get("name"), entry.get("args"))
        why = as_str(entry.get("error")) or "LangChain could not parse this call"
        values = dict(call.__dict__)
        values["arguments"], values["error"] = None, call.error or why
        draft.calls.append(checked_call(values))
    metadata = as_dict(payload.get("response_metadata"))
    for key in _LANGCHAIN_FINISH_KEYS:
        if type(metadata.get(key)) is str:
            draft.set_finish(metadata[key], _LANGCHAIN_TABLE)
            break
    draft.model = as_str(metadata.get("model_name")) or as_str(metadata.get("model"))
    # langchain-openai keeps OpenAI's refusal (chat `message.refusal`) in additional_kwargs.
    refusal = as_str(as_dict(payload.get("additional_kwargs")).get("refusal"))
    draft.refusal = (draft.refusal or "") + refusal
    usage = as_dict(payload.get("usage_metadata"))
    if usage:
        draft.usage = make_usage(usage.get("input_tokens"), usage.get("output_tokens"))
    return draft


def _langchain_dict(value: object) -> dict[str, Any]:
    names = (*LANGCHAIN_FIELDS, "usage_metadata", "additional_kwargs")
    return {name: getattr(value, name, None) for name in names}


# -- OpenAI Agents SDK -----------------------------------------------------------------------


def _item_dict(item: object) -> dict[str, Any]:
    if type(item) is dict:
        return item
    dump = getattr(item, "model_dump", None)
    return as_dict(dump(exclude_none=True)) if callable(dump) else {}


def read_agents_response(value: object, provider: str = "openai_agents") -> Draft:
    """Read an Agents SDK `ModelResponse` through the Responses reader.

    The SDK keeps the output items but drops the response's status and its
    `incomplete_details`, so an item left `incomplete` (a call cut by the token
    limit, the reason the Responses API gives for an incomplete output) marks the
    whole output truncated with finish reason LENGTH (the raw reason stays
    `incomplete`).
    """
    items = [_item_dict(item) for item in as_list(list(getattr(value, "output", None) or []))]
    cut = any(_cut(item) for item in items)
    usage = getattr(value, "usage", None)
    body = {
        "object": "response",
        "output": items,
        "status": "incomplete" if cut else "completed",
        "usage": {
            "input_tokens": getattr(usage, "input_tokens", 0),
            "output_tokens": getattr(usage, "output_tokens", 0),
        },
    }
    draft = _openai_responses.read_body(body, provider)
    if cut and draft.finish is FinishReason.UNKNOWN:
        draft.finish = FinishReason.LENGTH
    return draft


def _cut(item: dict[str, Any]) -> bool:
    """Whether an item says the output was cut; a program's call in progress waits, it is whole."""
    status = item.get("status")
    waiting = as_dict(item.get("caller")).get("type") == "program"
    return status == "incomplete" or (status == "in_progress" and not waiting)


# -- pydantic-ai ------------------------------------------------------------------------------


def _pydantic_ai_part(draft: Draft, part: object) -> None:
    kind = getattr(part, "part_kind", None)
    if kind == "text":
        draft.text += as_str(getattr(part, "content", ""))
    elif kind == "tool-call":
        draft.calls.append(
            call_from_object(
                getattr(part, "tool_call_id", ""),
                getattr(part, "tool_name", ""),
                getattr(part, "args", None),
            )
        )
    elif kind == "thinking":
        draft.reasoning = (draft.reasoning or "") + as_str(getattr(part, "content", ""))
    elif kind in _SERVER_PARTS:
        draft.server_tool_calls += 1
    elif type(kind) is not str or kind not in _QUIET_PARTS:
        draft.not_understood(f"a part of kind {kind!r:.60}")


def read_pydantic_ai(value: object, provider: str = "pydantic_ai") -> Draft:
    """Read a pydantic-ai `ModelResponse`: its parts, finish reason and usage."""
    draft = Draft(provider, model=as_str(getattr(value, "model_name", None)))
    for part in list(getattr(value, "parts", None) or []):
        _pydantic_ai_part(draft, part)
    details = as_dict(getattr(value, "provider_details", None))
    draft.set_finish(getattr(value, "finish_reason", None), _PYDANTIC_AI_TABLE)
    raw = details.get("finish_reason")
    if type(raw) is str:  # the provider's own word is finer than pydantic-ai's five values
        known = _LANGCHAIN_TABLE.get(raw)
        draft.raw_finish = raw
        if known is not None:
            draft.finish = known
            draft.truncated = draft.truncated or known is FinishReason.LENGTH
    # pydantic-ai answers an OpenAI refusal with no parts and the text in provider_details
    # (and Anthropic's `refusal` stop with its explanation there): a refusal, not an empty answer.
    refusal = as_str(details.get("refusal"))
    if refusal:
        draft.refusal, draft.finish = refusal, FinishReason.REFUSAL
    usage = getattr(value, "usage", None)
    if usage is not None:
        draft.usage = make_usage(
            getattr(usage, "input_tokens", 0), getattr(usage, "output_tokens", 0)
        )
    return draft


# -- objects ----------------------------------------------------------------------------------


def _has(value: object, fields: tuple[str, ...]) -> bool:
    return all(hasattr(value, name) for name in fields)


def _describe(value: object) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


def read_object(value: object, provider: str | None = None) -> ModelTurn | None:
    """Read a framework's model-output object, or None when `value` is none of them.

    Raises:
        PayloadError: The object comes from a framework's package (LangChain, the Agents SDK,
            pydantic-ai) but is no model output with the fields read here (a HumanMessage, or
            a version this reader does not know), or it does not fit `provider`.
    """
    if isinstance(value, type) or type(value) is dict:
        return None
    found = _match(value)
    if found is None:
        if type(value).__module__.split(".")[0] in _FRAMEWORKS:
            raise unknown_object(value)  # a framework's object, but no model output we know
        return None
    name, draft = found
    if provider is not None and provider != name:
        raise PayloadError(f"this {_describe(value)} is a {name} object, not {provider}")
    return draft.build()


def _match(value: object) -> tuple[str, Draft] | None:
    kind = getattr(value, "type", None)
    if type(kind) is str and kind in _AI_TYPES and _has(value, LANGCHAIN_FIELDS):
        return "langchain", read_langchain(_langchain_dict(value))
    if getattr(value, "kind", None) == "response" and _has(value, ("parts", "usage")):
        return "pydantic_ai", read_pydantic_ai(value)
    if _has(value, AGENTS_FIELDS) and isinstance(getattr(value, "output", None), list):
        return "openai_agents", read_agents_response(value)
    return None


def unknown_object(value: object) -> PayloadError:
    """The error for an object no reader recognises: its type and the fields looked for."""
    looked = "; ".join(f"{what}: {', '.join(fields)}" for what, fields in LOOKED_FOR.items())
    return PayloadError(
        f"no reader recognises a {_describe(value)} object; looked for model_dump(), or the "
        f"fields of {looked}",
        tried=[*LOOKED_FOR, "model_dump()"],
    )


# -- tool results -----------------------------------------------------------------------------


def tool_result(item: object, pending: Mapping[str, Any]) -> ToolResult | None:
    """Read a tool message (OpenAI `tool`/`function` dict, LangChain `ToolMessage`) as a result.

    A legacy `function` message has no call id: it answers the first pending call with that
    name. Returns None when `item` is not a tool message.

    Raises:
        PayloadError: A `function` message names no pending call.
    """
    if type(item) is dict:
        role = item.get("role") or item.get("type")
        if role == "tool" and "tool_call_id" in item:
            return _result(item.get("tool_call_id"), item.get("content"), item)
        if role == "function":
            return _function_result(item, pending)
        return None
    if getattr(item, "type", None) == "tool" and hasattr(item, "tool_call_id"):
        fields = {"name": getattr(item, "name", None), "status": getattr(item, "status", None)}
        return _result(item.tool_call_id, getattr(item, "content", ""), fields)
    return None


def _result(call_id: object, content: object, item: Mapping[str, Any]) -> ToolResult:
    if type(call_id) is not str or not call_id:
        raise PayloadError(f"a tool message needs a non-empty tool_call_id, not {call_id!r}")
    if isinstance(content, list):  # text blocks, as chat histories and LangChain allow
        texts = [as_str(as_dict(p).get("text")) if type(p) is dict else p for p in content]
        content = "".join(t for t in texts if type(t) is str)
    name = item.get("name")
    return ToolResult(
        call_id=call_id,
        content="" if content is None else content,
        is_error=item.get("status") == "error" or item.get("is_error") is True,
        name=name if type(name) is str else None,
    )


def _function_result(item: dict[str, Any], pending: Mapping[str, Any]) -> ToolResult:
    name = item.get("name")
    for call_id, call in pending.items():
        if getattr(call, "name", None) == name:
            return _result(call_id, item.get("content"), item)
    waiting = sorted({getattr(c, "name", "?") for c in pending.values()})
    raise PayloadError(
        f"a function message for {name!r} answers no pending call; pending: {waiting or 'none'}"
    )
