"""Helpers shared by the integration tests (they import the Agents SDK only when called)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from agents import Agent, RunResult, RunResultStreaming
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def memory() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider writing every finished span to memory."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


async def scripted_events(items: list[Any]) -> list[Any]:
    """The stream events the Agents SDK's ScriptedModel sends for a response of `items`."""
    from agents import ModelSettings, ModelTracing
    from agents.testing import ScriptedModel

    model = ScriptedModel([items])
    return [
        event
        async for event in model.stream_response(
            None,
            "hi",
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
    ]


async def sdk_run(
    agent: Agent[Any], given: Any, stream: bool, **options: Any
) -> RunResult | RunResultStreaming:
    """`Runner.run`, or `Runner.run_streamed` with its events consumed; `options` go to both."""
    from agents import Runner

    if not stream:
        return await Runner.run(agent, given, **options)
    result = Runner.run_streamed(agent, given, **options)
    async for _ in result.stream_events():
        pass
    return result
