"""pydantic-ai streaming under agentfsm: text passes on at once, calls wait for the decision."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Hashable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.models import Model, StreamedResponse
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from agentfsm._engine.controller import Controller

__all__ = ["Attempt", "Judge", "TextFirstStream"]

_SHOWN = (TextPart, ThinkingPart)
"""Parts whose stream passes on before the decision: they run nothing."""


def _text(part: TextPart | ThinkingPart) -> tuple[str, str]:
    return part.part_kind, part.content


def _keeping_shown_text(decided: ModelResponse, response: ModelResponse) -> ModelResponse:
    """`decided` with the text of `response` that the consumer has already been shown.

    Deciding on calls takes the text beside them out; once streamed, that text stays, so the
    response the graph keeps is what the consumer saw (`run_stream` took it as the output).
    """
    if any(isinstance(p, TextPart) for p in decided.parts):
        return decided
    text = [p for p in response.parts if isinstance(p, TextPart)]
    return dataclasses.replace(decided, parts=[*text, *decided.parts]) if text else decided


class Judge(Protocol):
    """What a stream asks of the model that opened it (`GovernedModel`): the model that really
    answers, and agentfsm's decision on each whole response. A protocol, so that this module
    does not import the one that imports it."""

    @property
    def wrapped(self) -> Model: ...

    def _judge(
        self,
        ctl: Controller,
        response: ModelResponse,
        history: list[ModelMessage],
        settings: ModelSettings | None,
    ) -> tuple[ModelResponse | None, list[ModelMessage], ModelSettings | None]: ...


@dataclasses.dataclass
class Attempt:
    """What the next call of the wrapped model sends."""

    ctl: Controller
    history: list[ModelMessage]
    settings: ModelSettings | None
    run_context: RunContext[Any] | None


@dataclasses.dataclass
class TextFirstStream(StreamedResponse):
    """The wrapped model's stream: its text and thinking deltas as they arrive, its other parts
    (tool calls) only as agentfsm decided them, once the whole response was decided.

    `get()` is the decided response once there is one; before, the text shown so far.
    """

    model: Judge | None = None
    attempt: Attempt | None = None
    decided: ModelResponse | None = dataclasses.field(default=None, init=False)
    _inner: StreamedResponse | None = dataclasses.field(default=None, init=False)
    _started_at: datetime = dataclasses.field(
        default_factory=lambda: datetime.now(tz=UTC), init=False
    )

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        model, attempt = self.model, self.attempt
        if model is None or attempt is None:
            return
        number = 0
        while self.decided is None:
            async with model.wrapped.request_stream(
                attempt.history,
                attempt.settings,
                self.model_request_parameters,
                attempt.run_context,
            ) as inner:
                self._inner = inner
                async for event in inner:
                    for out in self._pass(number, event):
                        yield out
                response = inner.get()
            self.decided, attempt.history, attempt.settings = model._judge(
                attempt.ctl, response, attempt.history, attempt.settings
            )
            number += 1
        self.decided = _keeping_shown_text(self.decided, response)
        shown = {_text(p) for p in self._parts_manager.get_parts() if isinstance(p, _SHOWN)}
        for index, part in enumerate(self.decided.parts):
            if not (isinstance(part, _SHOWN) and _text(part) in shown):
                yield self._parts_manager.handle_part(vendor_part_id=("decided", index), part=part)

    def _pass(self, number: int, event: Any) -> Iterator[ModelResponseStreamEvent]:
        """The events of `event` the consumer sees before the decision: text and thinking."""
        key: Hashable = (number, getattr(event, "index", None))
        if isinstance(event, PartStartEvent) and isinstance(event.part, _SHOWN):
            yield self._parts_manager.handle_part(
                vendor_part_id=key, part=dataclasses.replace(event.part)
            )
        elif isinstance(event, PartDeltaEvent) and self._parts_manager.get_part_by_vendor_id(key):
            delta = event.delta
            if isinstance(delta, TextPartDelta):
                yield from self._parts_manager.handle_text_delta(
                    vendor_part_id=key, content=delta.content_delta
                )
            elif isinstance(delta, ThinkingPartDelta):
                yield from self._parts_manager.handle_thinking_delta(
                    vendor_part_id=key, content=delta.content_delta, signature=delta.signature_delta
                )

    def get(self) -> ModelResponse:
        """The decided response, or the text shown so far while the model still streams."""
        if self.decided is not None:
            return self.decided
        return super().get()

    @property
    def usage(self) -> RequestUsage:
        """The decided response's usage, or the wrapped stream's so far."""
        if self.decided is not None:
            return self.decided.usage
        return self._inner.usage if self._inner is not None else RequestUsage()

    async def close_stream(self) -> None:
        """Close the wrapped model's stream."""
        if self._inner is not None:
            await self._inner.close_stream()

    @property
    def model_name(self) -> str:
        """The wrapped model's name."""
        return self.model.wrapped.model_name if self.model is not None else ""

    @property
    def provider_name(self) -> str | None:
        """The wrapped model's provider."""
        return self.model.wrapped.system if self.model is not None else None

    @property
    def provider_url(self) -> str | None:
        """The wrapped model's base URL."""
        return self.model.wrapped.base_url if self.model is not None else None

    @property
    def timestamp(self) -> datetime:
        """When the stream was opened."""
        return self._started_at
