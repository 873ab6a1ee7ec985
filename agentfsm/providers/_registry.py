"""The wire formats agentfsm reads, and how each is recognised with cheap key checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agentfsm._model.types import ModelTurn, Vocabulary
from agentfsm.providers import (
    _anthropic,
    _bedrock,
    _cohere,
    _frameworks,
    _gemini,
    _litellm,
    _ollama,
    _openai_chat,
    _openai_responses,
)
from agentfsm.providers._common import Draft

__all__ = [
    "FORMATS",
    "OBJECT_PROVIDERS",
    "Format",
    "Provider",
    "Reader",
    "detect_body",
    "detect_event",
]


class Provider(Vocabulary):
    """The names of the wire formats `normalize` reads."""

    OPENAI = "openai"
    OPENAI_RESPONSES = "openai_responses"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"
    BEDROCK = "bedrock"
    OLLAMA = "ollama"
    COHERE = "cohere"
    LITELLM = "litellm"
    LANGCHAIN = "langchain"
    OPENAI_AGENTS = "openai_agents"
    PYDANTIC_AI = "pydantic_ai"


class Reader(Protocol):
    """A stream accumulator for one format: events in, a turn out."""

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event into the turn."""

    def damage(self, why: str) -> None:
        """Note that an event arrived here but could not be read (a gap in the stream)."""

    def turn(self) -> ModelTurn:
        """The turn so far."""


def _never(payload: dict[str, Any]) -> bool:
    return False


def _langchain_stream(provider: str) -> Reader:
    return _OneShot(provider, _frameworks.read_langchain)


class _OneShot:
    """A stream reader for a format without a stream reader of its own: the last body wins."""

    def __init__(self, provider: str, read: Callable[[dict[str, Any], str], Draft]) -> None:
        self._provider, self._read = provider, read
        self._last: dict[str, Any] = {}
        self._damage: str | None = None

    def add(self, event: dict[str, Any]) -> None:
        self._last = event

    def damage(self, why: str) -> None:
        self._damage = self._damage or why

    def turn(self) -> ModelTurn:
        draft = self._read(self._last, self._provider)
        draft.damaged(self._damage)
        return draft.build()


@dataclass(frozen=True, slots=True)
class Format:
    """How one wire format is recognised and read."""

    name: Provider
    is_body: Callable[[dict[str, Any]], bool]
    read_body: Callable[[dict[str, Any], str], Draft]
    is_event: Callable[[dict[str, Any]], bool]
    stream: Callable[[str], Reader]


FORMATS: dict[str, Format] = {
    fmt.name: fmt
    for fmt in (
        Format(
            Provider.OPENAI,
            _openai_chat.is_body,
            _openai_chat.read_body,
            _openai_chat.is_chat,
            _openai_chat.ChatStream,
        ),
        Format(
            Provider.OPENAI_RESPONSES,
            _openai_responses.is_response,
            _openai_responses.read_body,
            _openai_responses.is_event,
            _openai_responses.ResponsesStream,
        ),
        Format(
            Provider.ANTHROPIC,
            _anthropic.is_message,
            _anthropic.read_body,
            _anthropic.is_event,
            _anthropic.MessagesStream,
        ),
        Format(
            Provider.GEMINI,
            _gemini.is_gemini,
            _gemini.read_body,
            _gemini.is_gemini,
            _gemini.GeminiStream,
        ),
        Format(
            Provider.BEDROCK,
            _bedrock.is_converse,
            _bedrock.read_body,
            _bedrock.is_event,
            _bedrock.ConverseStream,
        ),
        Format(
            Provider.OLLAMA,
            _ollama.is_ollama,
            _ollama.read_body,
            _ollama.is_ollama,
            _ollama.OllamaStream,
        ),
        Format(
            Provider.COHERE,
            _cohere.is_cohere,
            _cohere.read_body,
            _cohere.is_event,
            _cohere.CohereStream,
        ),
        Format(
            Provider.LITELLM,
            _openai_chat.is_completion,
            _litellm.read_body,
            _openai_chat.is_chat,
            _litellm.LitellmStream,
        ),
        Format(
            Provider.LANGCHAIN,
            _frameworks.is_langchain,
            _frameworks.read_langchain,
            _never,
            _langchain_stream,
        ),
    )
}
"""Every dict format, by provider name, in the order detection tries them. The Agents SDK's
and pydantic-ai's `ModelResponse` are objects only: `_frameworks.read_object` reads them."""

OBJECT_PROVIDERS = (Provider.OPENAI_AGENTS, Provider.PYDANTIC_AI)
"""Providers read from framework objects only, never from a JSON object."""


def detect_body(payload: dict[str, Any]) -> str | None:
    """The format of a JSON object read as a whole body, or None if none recognises it."""
    if type(payload.get("choices")) is list:  # a chat completion, the most common body of all
        return Provider.LITELLM if _litellm.is_litellm_dict(payload) else Provider.OPENAI
    for name, fmt in FORMATS.items():
        if fmt.is_body(payload):
            return name
    return detect_event(payload)


def detect_event(payload: dict[str, Any]) -> str | None:
    """The format of a JSON object read as one stream event, or None."""
    for name, fmt in FORMATS.items():
        if fmt.is_event(payload):
            return name
    return None
