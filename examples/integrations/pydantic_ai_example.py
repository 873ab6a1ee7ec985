"""pydantic-ai governed by agentfsm, on its own OpenAI chat model and provider."""

import asyncio
import sys

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import agentfsm as af
from agentfsm.integrations.pydantic_ai import GovernedModel


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def ask(base_url: str, api_key: str) -> str:
    """Ask the model about the weather; print its answer and return the exit reason."""
    async with AsyncOpenAI(base_url=base_url, api_key=api_key) as client:
        chat = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
        model = GovernedModel(chat, af.Policy(max_turns=8))
        agent = Agent(model, toolsets=[model.toolset([get_weather])])
        result = await agent.run("Weather in Paris?")
    print(result.output)
    return str(model.decisions[-1].exit_reason)


def main(base_url: str, api_key: str = "sk-local") -> str:
    """`ask`, from synchronous code."""
    return asyncio.run(ask(base_url, api_key))


if __name__ == "__main__":
    print(main(sys.argv[1]))  # e.g. http://127.0.0.1:8000/v1
