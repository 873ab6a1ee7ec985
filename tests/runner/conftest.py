"""Fixtures for the runner tests: a counting weather tool, retries that never sleep, and runs
on the scripted server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tenacity import wait_none

from agentfsm._cli.demo import get_weather as forecast
from agentfsm._runner.loop import RunResult, arun, run
from agentfsm._runner.retry import ProviderRetry
from agentfsm.testing.server import ScriptedServer

WeatherTool = Callable[[float, float], dict[str, Any]]


def scripted_run(server: ScriptedServer, task: Any, **kwargs: Any) -> RunResult:
    """`run` of `task` on the scripted server's OpenAI route, with a test key unless given."""
    kwargs.setdefault("api_key", "sk-test")
    return run("openai/scripted", task, api_base=server.openai_base, **kwargs)


async def scripted_arun(server: ScriptedServer, task: Any, **kwargs: Any) -> RunResult:
    """`scripted_run` through `arun`, on the caller's event loop."""
    kwargs.setdefault("api_key", "sk-test")
    return await arun("openai/scripted", task, api_base=server.openai_base, **kwargs)


@pytest.fixture
def weather_calls() -> list[tuple[float, float]]:
    """The (latitude, longitude) of every call the weather tool really executed."""
    return []


@pytest.fixture
def get_weather(weather_calls: list[tuple[float, float]]) -> WeatherTool:
    """A real Python weather tool that records its calls."""

    def get_weather(latitude: float, longitude: float) -> dict[str, Any]:
        """Forecast tomorrow's weather at a point."""
        weather_calls.append((latitude, longitude))
        return forecast(latitude, longitude)

    return get_weather


@pytest.fixture
def slept() -> list[float]:
    """The waits the retry loop asked for, in seconds (nothing really sleeps)."""
    return []


@pytest.fixture
def fast_retry(slept: list[float]) -> ProviderRetry:
    """Three attempts, no backoff, sleeps recorded instead of taken."""

    async def async_sleep(seconds: float) -> None:
        slept.append(seconds)

    return ProviderRetry(attempts=3, wait=wait_none(), sleep=slept.append, async_sleep=async_sleep)


@pytest.fixture(autouse=True)
def close_litellm_event_loop() -> Iterator[None]:
    """Close the event loop litellm's sync logging leaves on the main thread after each test.

    litellm (1.110) calls `asyncio.get_event_loop()` from `completion()`, which
    creates and sets a loop that nobody closes; a later `asyncio.run` replaces it
    and the garbage collector then warns about the unclosed loop and its sockets.
    """
    yield
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # set to None already (asyncio.run does that)
        return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)
