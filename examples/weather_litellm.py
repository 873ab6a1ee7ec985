"""The weather agent through litellm: agentfsm runs the loop, a Python tool answers.

With no key this talks to a local scripted OpenAI-compatible server (a real
HTTP server on 127.0.0.1) through litellm's own client. Set MODEL (for example
`openai/gpt-4o-mini`) and that provider's key to ask a real model instead:

    MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... python examples/weather_litellm.py

With `OPENAI_BASE_URL` set it asks that OpenAI-compatible server instead (model
`openai/scripted` unless MODEL says otherwise), for example one started with
`agentfsm serve-script examples/scripts/weather_litellm.jsonl --port 8000`:

    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 python examples/weather_litellm.py
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import agentfsm as af
from agentfsm.testing import Reply, ScriptedCall, ScriptedServer, say, tool_calls

QUESTION = "What will the weather be like in Shanghai tomorrow?"


def get_weather(latitude: float, longitude: float) -> dict[str, Any]:
    """Forecast tomorrow's weather at a point (offline: computed from the coordinates)."""
    high = round(31 - abs(latitude) * 0.35, 1)
    return {"condition": "light rain", "high_c": high, "low_c": high - 6, "rain_chance": 70}


def answer(body: Mapping[str, Any]) -> Reply:
    """The scripted model's final answer: it reads the tool result it was sent."""
    forecast = json.loads(body["messages"][-1]["content"])
    return say(
        f"Tomorrow in Shanghai: {forecast['condition']}, "
        f"{forecast['low_c']:g}–{forecast['high_c']:g} °C, {forecast['rain_chance']}% rain."
    )


def ask(model: str, **options: Any) -> af.RunResult:
    """Run the weather question to its end and return the result."""
    messages = [{"role": "user", "content": QUESTION}]
    return af.run(model, messages, tools=[get_weather], tool_choice="auto", **options)


def main() -> int:
    """Run the agent, print each decision and how the run ended."""
    model = os.environ.get("MODEL")
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        key = os.environ.get("OPENAI_API_KEY") or "sk-local"
        result = ask(model or "openai/scripted", api_base=base_url, api_key=key)
    elif model:
        result = ask(model)
    else:
        shanghai = ScriptedCall(
            name="get_weather", arguments={"latitude": 31.23, "longitude": 121.47}
        )
        with ScriptedServer([tool_calls(shanghai), answer]) as server:
            result = ask("openai/scripted", api_base=server.openai_base, api_key="sk-local")
    for d in result.decisions:
        print(f"turn {d.turn}: {d.action.value:<13} {d.priority} {d.guard}  {d.reason}")
    print(f"assistant: {result.text}")
    print(f"exit: {result.exit_reason.value} ({result.usage.total_tokens} tokens)")
    return 0 if result.exit_reason is af.ExitReason.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(main())
