"""Time to first text of a streamed answer, natively and under agentfsm, in both SDKs.

Run: `python bench/bench_stream_first_text.py` from the repo root. Each run asks a real OpenAI
client (the Agents SDK's `OpenAIChatCompletionsModel`, pydantic-ai's `OpenAIChatModel`) over
HTTP to `agentfsm.testing.ScriptedServer` on 127.0.0.1, which streams a 240-character answer in
12-character chunks, `CHUNK_DELAY` seconds apart (a model writing as it goes). Measured from the
call to the first text delta the consumer reads, and to the end of the run; native and governed
runs alternate. Writes its section of bench/RESULTS-integrations.md.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agentfsm.testing import ScriptedServer  # noqa: E402
from agentfsm.testing.scripted import Reply  # noqa: E402
from bench.results import write_section  # noqa: E402  (needs the repo on sys.path)

CHUNK_DELAY = 0.05
ANSWER = "It is sunny in Paris. " * 10 + "Enjoy it."
REPEATS = 7

Timed = Callable[[str], Awaitable[tuple[float, float]]]
"""One run against a base URL: seconds to the first text delta, and to the end."""


async def agents_sdk(base: str, governed: str | None) -> tuple[float, float]:
    """`Runner.run_streamed` on the SDK's chat-completions model; governed with `stream` mode."""
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
    from openai import AsyncOpenAI

    from agentfsm.integrations.openai_agents import governed as govern

    client = AsyncOpenAI(base_url=base, api_key="unused")
    agent = Agent(name="a", model=OpenAIChatCompletionsModel("scripted", openai_client=client))
    if governed is not None:
        agent = govern(agent, stream=governed)  # type: ignore[arg-type]
    start = time.perf_counter()
    first = None
    result = Runner.run_streamed(agent, "weather?", run_config=RunConfig(tracing_disabled=True))
    async for event in result.stream_events():
        text = event.type == "raw_response_event" and event.data.type.endswith("text.delta")
        if first is None and text:
            first = time.perf_counter() - start
    end = time.perf_counter() - start
    await client.close()
    assert result.final_output == ANSWER, result.final_output
    return first if first is not None else end, end


async def pydantic_ai(base: str, governed: str | None) -> tuple[float, float]:
    """`run_stream_events` on pydantic-ai's OpenAI chat model, wrapped by GovernedModel or not."""
    from pydantic_ai import Agent, AgentRunResultEvent
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from agentfsm.integrations.pydantic_ai import GovernedModel

    model: Any = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=base, api_key="x"))
    if governed is not None:
        model = GovernedModel(model)
    agent = Agent(model)
    start = time.perf_counter()
    first, output = None, None
    async with agent.run_stream_events("weather?") as events:
        async for event in events:
            shows = isinstance(event, PartDeltaEvent) or (
                isinstance(event, PartStartEvent)
                and isinstance(event.part, TextPart)
                and event.part.content
            )
            if first is None and shows:
                first = time.perf_counter() - start
            if isinstance(event, AgentRunResultEvent):
                output = event.result.output
    end = time.perf_counter() - start
    assert output == ANSWER, output
    return first if first is not None else end, end


SDKS: dict[str, tuple[Callable[[str, str | None], Awaitable[tuple[float, float]]], list[Any]]] = {
    "OpenAI Agents SDK (OpenAIChatCompletionsModel, Runner.run_streamed)": (
        agents_sdk,
        [None, "text", "held"],
    ),
    "pydantic-ai (OpenAIChatModel, run_stream_events)": (pydantic_ai, [None, "text"]),
}


def label(mode: str | None) -> str:
    """How a column names a run mode."""
    return {None: "native", "text": "governed (default)", "held": 'governed, stream="held"'}[mode]


async def measure() -> list[tuple[str, str, float, float]]:
    """Median seconds to first text and to the end, per SDK and mode, modes alternating."""
    rows = []
    for name, (run, modes) in SDKS.items():
        samples: dict[Any, list[tuple[float, float]]] = {m: [] for m in modes}
        for repeat in range(REPEATS + 1):
            for mode in modes:
                reply = Reply(text=ANSWER, chunk_delay=CHUNK_DELAY)
                with ScriptedServer([reply]) as server:
                    figures = await run(server.openai_base, mode)
                if repeat:  # the first round warms imports and clients
                    samples[mode].append(figures)
        for mode in modes:
            first = statistics.median(f for f, _ in samples[mode])
            end = statistics.median(e for _, e in samples[mode])
            rows.append((name, label(mode), first, end))
            print(f"{name} | {label(mode)} | first text {first:.3f} s | end {end:.3f} s")
    return rows


def main() -> int:
    """Measure and write the section of bench/RESULTS-integrations.md."""
    rows = asyncio.run(measure())
    chunks = -(-len(ANSWER) // 12)
    lines = [
        "## Time to first streamed text",
        "",
        (
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with "
            f"`python bench/bench_stream_first_text.py` on {platform.machine()} "
            f"({os.cpu_count()} cores shared with other helpers' test runs: the machine is "
            f"loaded, load average {os.getloadavg()[0]:.1f} at the end), "
            f"Python {platform.python_version()}."
        ),
        (
            f"Real OpenAI clients over HTTP to `ScriptedServer` on 127.0.0.1, streaming a "
            f"{len(ANSWER)}-character answer in {chunks} chunks {CHUNK_DELAY * 1000:.0f} ms apart "
            f"(`Reply(chunk_delay=...)`). Medians of {REPEATS} runs, modes alternating."
        ),
        "",
        "| SDK | run | first text, s | whole run, s |",
        "|---|---|---|---|",
        *(f"| {n} | {m} | {f:.3f} | {e:.3f} |" for n, m, f, e in rows),
        "",
        "Before this change the Agents SDK integration held every event by default (what",
        '`stream="held"` still does) and pydantic-ai had no other way: the first text came',
        "with the whole answer.",
        "",
    ]
    write_section("stream-first-text", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
