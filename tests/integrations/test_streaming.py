"""Streamed text reaches the consumer as the model sends it; tool calls wait for the decision.

Each model is the framework's own test double streaming its answer in chunks: after the first
chunk it waits (up to 2 s) until the consumer has shown that chunk, then sends the rest. So a
consumer that sees text only at the end of the response makes the wait time out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import AgentRunResultEvent
from pydantic_ai.messages import ModelMessage, PartDeltaEvent, PartStartEvent, TextPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import agentfsm as af
from agentfsm.integrations.openai_agents import governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.integrations.conftest import scripted_events

WAIT = 2.0
CHUNKS = ["It is ", "sunny ", "in Paris."]


class Gate:
    """The model's side waits here after its first chunk until the consumer has seen it."""

    def __init__(self) -> None:
        self.shown = asyncio.Event()
        self.in_time: list[bool] = []

    async def wait(self) -> None:
        """Wait until the consumer shows the first chunk; record whether it did in time."""
        try:
            await asyncio.wait_for(self.shown.wait(), timeout=WAIT)
            self.in_time.append(True)
        except TimeoutError:
            self.in_time.append(False)


# -- pydantic-ai ---------------------------------------------------------------------------


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def pydantic_model(gate: Gate, rogue_call: bool = False) -> FunctionModel:
    """A FunctionModel whose stream sends the answer in chunks, gated after the first; with
    `rogue_call`, the first response is a call to an undeclared tool sent before its text."""
    calls = {"n": 0}

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        calls["n"] += 1
        if rogue_call and calls["n"] == 1:
            yield {0: DeltaToolCall("rm_rf", '{"path": "/"}', tool_call_id="c0")}
            return
        for index, chunk in enumerate(CHUNKS):
            yield chunk
            if index == 0:
                await gate.wait()

    return FunctionModel(stream_function=stream)


class TestPydanticAIStreamsText:
    """pydantic-ai's `run_stream_events` under GovernedModel."""

    def test_the_first_chunk_arrives_before_the_model_ends(self) -> None:
        """The consumer sees the first text delta while the model is still streaming."""

        async def go() -> tuple[Gate, str, GovernedModel]:
            gate = Gate()
            model = GovernedModel(pydantic_model(gate))
            agent = PydanticAgent(model)
            output = ""
            async with agent.run_stream_events("weather?") as stream:
                async for event in stream:
                    starts = isinstance(event, PartStartEvent) and isinstance(event.part, TextPart)
                    if starts or isinstance(event, PartDeltaEvent):
                        gate.shown.set()
                    if isinstance(event, AgentRunResultEvent):
                        output = event.result.output
            return gate, output, model

        gate, output, model = asyncio.run(go())
        assert gate.in_time == [True]
        assert output == "".join(CHUNKS)
        assert model.decisions[-1].action is af.Action.FINAL

    def test_a_refused_call_is_never_streamed(self) -> None:
        """The undeclared tool's call parts never reach the consumer; the text still streams."""

        async def go() -> tuple[Gate, list[Any]]:
            gate = Gate()
            model = GovernedModel(pydantic_model(gate, rogue_call=True))
            agent = PydanticAgent(model, toolsets=[model.toolset([get_weather])])
            parts: list[Any] = []
            async with agent.run_stream_events("weather?") as stream:
                async for event in stream:
                    if isinstance(event, PartStartEvent):
                        parts.append(event.part)
                        gate.shown.set()
            return gate, parts

        gate, parts = asyncio.run(go())
        assert gate.in_time == [True]
        assert [p.part_kind for p in parts] == ["text"]


# -- OpenAI Agents SDK -------------------------------------------------------------------------


class TestAgentsSDKStreamsText:
    """`Runner.run_streamed` on a governed agent, with the default stream mode."""

    def run(self, first_step: list[Any] | None = None) -> tuple[Gate, Any, list[str]]:
        """Run the governed agent streamed; the gate, the result, and the tools that ran."""

        async def go() -> tuple[Gate, Any, list[str]]:
            gate = Gate()
            events = await scripted_events([assistant_message("".join(CHUNKS))])
            first = next(i for i, e in enumerate(events) if e.type == "response.output_text.delta")

            async def stream(_call: Any) -> Any:
                for index, event in enumerate(events):
                    yield event
                    if index == first:
                        await gate.wait()

            ran: list[str] = []

            @function_tool
            def get_weather(city: str) -> str:
                """The weather in a city."""
                ran.append(city)
                return "sunny"

            steps: list[Any] = [first_step] if first_step else []
            model = ScriptedModel([*steps, ModelStep.stream(stream, output=[])])
            agent = governed(Agent(name="w", model=model, tools=[get_weather]))
            result = Runner.run_streamed(
                agent, "weather?", run_config=RunConfig(tracing_disabled=True)
            )
            async for event in result.stream_events():
                if event.type == "raw_response_event" and event.data.type.endswith("text.delta"):
                    gate.shown.set()
            return gate, result, ran

        return asyncio.run(go())

    def test_the_first_delta_arrives_before_the_model_ends(self) -> None:
        """By default the first text delta reaches the consumer while the model still streams."""
        gate, result, _ = self.run()
        assert gate.in_time == [True]
        assert result.final_output == "".join(CHUNKS)

    def test_calls_still_wait_for_the_decision(self) -> None:
        """An undeclared call never runs, a declared one runs once, and the text streams after."""
        calls = [function_call("rm_rf", {"path": "/"}, call_id="c0")]
        calls.append(function_call("get_weather", {"city": "Paris"}, call_id="c1"))
        gate, result, ran = self.run(calls)
        assert ran == ["Paris"]
        assert gate.in_time == [True]
        assert result.final_output == "".join(CHUNKS)


class TestPydanticAITextBesideCalls:
    """A streamed response with text before its call, under `run_stream_events`."""

    def test_the_call_runs_once_and_the_run_goes_on(self) -> None:
        """The text streams, the call runs once after the decision, the next answer is output."""
        ran: list[str] = []

        def weather(city: str) -> str:
            """The weather in a city."""
            ran.append(city)
            return "sunny"

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            if len(messages) == 1:
                yield "Let me check. "
                yield {0: DeltaToolCall("weather", '{"city": "Paris"}', tool_call_id="c1")}
                return
            yield "Sunny in Paris."

        async def go() -> Any:
            model = GovernedModel(FunctionModel(stream_function=stream))
            agent = PydanticAgent(model, toolsets=[model.toolset([weather])])
            async with agent.run_stream_events("weather?") as events:
                async for event in events:
                    if isinstance(event, AgentRunResultEvent):
                        return event.result.output
            return None

        assert asyncio.run(go()) == "Sunny in Paris."
        assert ran == ["Paris"]
