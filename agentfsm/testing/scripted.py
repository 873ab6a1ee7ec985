"""Scripted model replies: what the local test server answers, one reply per request.

A script is a list of `Reply` objects (or callables that build one from the
request body). Each reply is written once in provider-neutral terms and the
server renders it as OpenAI chat completions or Anthropic Messages, streaming
or not. Faults are replies too: an HTTP error with `Retry-After`, a stream cut
before its terminator, a tool call cut at the length limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ConfigDict, Field

from agentfsm._model._checked import Checked
from agentfsm.exceptions import DataError

__all__ = [
    "Reply",
    "Responder",
    "ScriptedCall",
    "call",
    "cut_tool_call",
    "fault",
    "last_tool_result",
    "say",
    "stop_with_tool_calls",
    "tool_calls",
]

_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


class ScriptedCall(Checked):
    """One tool call in a scripted reply; string arguments are sent verbatim (even cut JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The tool's name."""
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """An argument object, or the exact argument text to send (may be invalid JSON)."""
    id: str | None = None
    """The call id; the server issues `call_<n>` / `toolu_<n>` when None."""

    def raw_arguments(self) -> str:
        """Return the argument text as it goes on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


class Reply(Checked):
    """One scripted answer to one request, or one fault in its place."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = ""
    """The answer text."""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    """Tool calls, in order."""
    finish_reason: str | None = "auto"
    """OpenAI vocabulary (`stop`, `tool_calls`, `length`, ...); `auto` infers it; None omits it."""
    input_tokens: int = 20
    """Prompt tokens reported in the usage block."""
    output_tokens: int = 10
    """Completion tokens reported in the usage block."""
    status: int = 200
    """HTTP status; anything but 200 sends an error body instead of a completion."""
    retry_after: float | None = None
    """Seconds sent in a `Retry-After` header with an error status."""
    error_message: str = "scripted fault"
    """The message of the error body."""
    end_stream: bool = True
    """False cuts a stream before its terminator (`[DONE]`, `message_stop`)."""
    delay: float = 0.0
    """Seconds to wait before answering (to provoke client timeouts)."""
    chunk_delay: float = 0.0
    """Seconds to wait between a streamed reply's events (a model that writes as it goes)."""
    body: dict[str, Any] | None = None
    """A provider body sent as it is to a request that does not stream, instead of one
    rendered from the fields above (a recorded body, say)."""
    events: list[dict[str, Any] | str] | None = None
    """Stream events sent as they are to a streaming request, instead of rendered ones: a dict
    is one server-sent event (`event: <its type>` first on the Anthropic route), a str is
    written verbatim (`"data: [DONE]\n\n"`, a cut line). Nothing is added after them."""

    def openai_finish_reason(self) -> str | None:
        """Return the finish reason in OpenAI's vocabulary, inferring `auto`."""
        if self.finish_reason == "auto":
            return "tool_calls" if self.tool_calls else "stop"
        return self.finish_reason

    def anthropic_stop_reason(self) -> str | None:
        """Return the stop reason in Anthropic's vocabulary (`end_turn`, `tool_use`, ...)."""
        reason = self.openai_finish_reason()
        return None if reason is None else _ANTHROPIC_STOP.get(reason, reason)


Responder = Callable[[Mapping[str, Any]], Reply]
"""Builds a reply from the request body, for answers that depend on the conversation."""


def say(text: str, *, finish_reason: str | None = "auto") -> Reply:
    """Reply with text only."""
    return Reply(text=text, finish_reason=finish_reason)


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ScriptedCall:
    """Describe one tool call for `tool_calls`."""
    return ScriptedCall(name=name, arguments=arguments if arguments is not None else {}, id=id)


def tool_calls(*calls: ScriptedCall, text: str = "", finish_reason: str | None = "auto") -> Reply:
    """Reply with tool calls (finish reason `tool_calls` unless told otherwise)."""
    return Reply(text=text, tool_calls=list(calls), finish_reason=finish_reason)


def stop_with_tool_calls(*calls: ScriptedCall, text: str = "") -> Reply:
    """Reply with tool calls but finish reason `stop`, as some OpenAI-compatible servers do."""
    return tool_calls(*calls, text=text, finish_reason="stop")


def cut_tool_call(name: str, raw_arguments: str, *, id: str | None = None) -> Reply:
    """Reply with a tool call whose arguments were cut at the length limit."""
    return Reply(
        tool_calls=[ScriptedCall(name=name, arguments=raw_arguments, id=id)],
        finish_reason="length",
    )


def fault(status: int, *, retry_after: float | None = None, message: str | None = None) -> Reply:
    """Answer with an HTTP error status (and `Retry-After` when given)."""
    return Reply(
        status=status,
        retry_after=retry_after,
        error_message=message or f"scripted HTTP {status}",
    )


def last_tool_result(body: Mapping[str, Any]) -> str | None:
    """Return the content of the last tool result in an OpenAI or Anthropic request body."""
    if not isinstance(body, Mapping):
        raise DataError(
            f"last_tool_result reads a request body (a mapping), not {type(body).__name__}"
        )
    messages = body.get("messages") or []
    if not isinstance(messages, list):
        raise DataError(f"last_tool_result: messages must be a list, not {type(messages).__name__}")
    for message in reversed(messages):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "tool":
            return _as_text(message.get("content"))
        content = message.get("content")
        if isinstance(content, list):
            for block in reversed(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    return _as_text(block.get("content"))
    return None


def _as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return json.dumps(content)
