"""The OpenAI Agents SDK governed by agentfsm, on its own Chat Completions model and client."""

import asyncio
import sys

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI

import agentfsm as af
from agentfsm.integrations.openai_agents import decisions, governed


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def ask(base_url: str, api_key: str) -> str:
    """Ask the model about the weather; print its answer and return the exit reason."""
    async with AsyncOpenAI(base_url=base_url, api_key=api_key) as client:
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        agent = Agent(name="weather", tools=[get_weather], model=model)
        ruled = governed(agent, af.Policy(max_turns=8))
        # The SDK's own tracing would upload to OpenAI: off for a local server.
        result = await Runner.run(
            ruled, "Weather in Paris?", run_config=RunConfig(tracing_disabled=True)
        )
    print(result.final_output)
    return str(decisions(result)[-1].exit_reason)


def main(base_url: str, api_key: str = "sk-local") -> str:
    """`ask`, from synchronous code."""
    return asyncio.run(ask(base_url, api_key))


if __name__ == "__main__":
    print(main(sys.argv[1]))  # e.g. http://127.0.0.1:8000/v1
