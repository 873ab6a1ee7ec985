"""Cohere v2 chat: body.

`TOOL_CALL` is TOOL_CALLS, `MAX_TOKENS` a cut, `COMPLETE`/`STOP_SEQUENCE` STOP.
`tool_plan` (the model's plan before calling tools) is kept as reasoning.
Arguments `"null"` are valid JSON for "no arguments", read as `{}`.
"""

from __future__ import annotations

from typing import Any

from agentfsm.core.types import FinishReason
from agentfsm.providers._common import (
    Draft,
    as_dict,
    as_list,
    as_str,
    call_from_string,
    make_usage,
)

__all__ = ["TABLE", "is_cohere", "read_body"]

TABLE: dict[str, FinishReason] = {
    # Cohere Chat API reference, v2 `finish_reason` (COMPLETE, STOP_SEQUENCE, MAX_TOKENS,
    # TOOL_CALL, ERROR) and v1's (ERROR_TOXIC, ERROR_LIMIT, USER_CANCEL).
    "COMPLETE": FinishReason.STOP,
    "STOP_SEQUENCE": FinishReason.STOP,
    "TOOL_CALL": FinishReason.TOOL_CALLS,
    "MAX_TOKENS": FinishReason.LENGTH,
    "ERROR": FinishReason.ERROR,
    "ERROR_TOXIC": FinishReason.CONTENT_FILTER,
    "ERROR_LIMIT": FinishReason.LENGTH,
    "USER_CANCEL": FinishReason.ERROR,
}
"""Cohere finish reasons; unlisted -> UNKNOWN."""


def is_cohere(payload: dict[str, Any]) -> bool:
    """Whether a JSON object is a v2 chat body: a `message` object and a top-level reason."""
    return type(payload.get("message")) is dict and "finish_reason" in payload


def _text(content: object) -> str:
    if type(content) is str:
        return content
    return "".join(as_str(as_dict(part).get("text")) for part in as_list(content))


def read_body(payload: dict[str, Any], provider: str = "cohere") -> Draft:
    """Read a v2 chat body."""
    message = as_dict(payload.get("message"))
    draft = Draft(provider, model=as_str(payload.get("model")))
    draft.text = _text(message.get("content"))
    draft.reasoning = as_str(message.get("tool_plan"))
    for item in as_list(message.get("tool_calls")):
        entry = as_dict(item)
        function = as_dict(entry.get("function"))
        draft.calls.append(
            call_from_string(entry.get("id"), function.get("name"), function.get("arguments"))
        )
    draft.set_finish(payload.get("finish_reason"), TABLE)
    tokens = as_dict(as_dict(payload.get("usage")).get("tokens"))
    if tokens:
        draft.usage = make_usage(tokens.get("input_tokens"), tokens.get("output_tokens"))
    return draft
