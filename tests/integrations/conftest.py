"""Helpers shared by the integration tests (they import the Agents SDK only when called)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents import Agent, RunResult, RunResultStreaming


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
