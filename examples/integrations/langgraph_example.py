"""LangGraph governed by agentfsm, on LangChain's own OpenAI client (`ChatOpenAI`)."""

import sys

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def main(base_url: str, api_key: str = "sk-local") -> str:
    """Ask the model about the weather; print its answer and return the exit reason."""
    model = ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key=api_key, max_tokens=512)
    graph = create_agent(model, [get_weather], af.Policy(max_turns=8))
    out = graph.invoke({"messages": [("user", "Weather in Paris?")]})
    print(out["messages"][-1].content)
    exit_reason: str = out["decisions"][-1]["exit_reason"]
    return exit_reason


if __name__ == "__main__":
    print(main(sys.argv[1]))  # e.g. http://127.0.0.1:8000/v1
