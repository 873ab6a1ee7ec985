"""Helpers shared by the integration tests."""

from __future__ import annotations

from typing import Any


async def scripted_events(items: list[Any]) -> list[Any]:
    """The stream events the Agents SDK's ScriptedModel sends for a response of `items`."""
    # Imported here so that the other integrations' tests do not need the Agents SDK.
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
