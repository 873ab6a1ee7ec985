"""A Cedar source on the integrations not covered by test_cedar_paths: LangGraph, pydantic-ai
and mini-swe-agent, each on its own test double. The call Cedar forbids never runs; the one it
permits does."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from minisweagent.environments.local import LocalEnvironment
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent
from agentfsm.integrations.mini_swe_agent import GovernedAgent
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.integrations.test_cross_seam import Log, command, langchain_tools
from tests.integrations.test_mini_swe_agent import CONFIG as MINI_CONFIG
from tests.integrations.test_mini_swe_agent import SUBMIT, LitellmShaped, bash, output
from tests.integrations.test_shadow_seams import CALLS, RAN

pytestmark = pytest.mark.needs("cedarpy")

CEDAR = af.Policy(
    cedar="""
permit(principal, action, resource);
@id("no-etc") forbid(principal, action, resource == Tool::"delete_file")
  when { context.arguments.path like "/etc/*" };
"""
)


def test_pydantic_ai_runs_only_what_cedar_permits() -> None:
    log = Log()

    told: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            told.append(repr(messages[-1]))
            return ModelResponse(parts=[TextPart("Done.")])
        return ModelResponse(
            parts=[ToolCallPart(n, {k: v}, tool_call_id=i) for i, n, k, v in CALLS]
        )

    model = GovernedModel(FunctionModel(respond), CEDAR, on_decline="feedback")
    agent: PydanticAgent[None, str] = PydanticAgent(model, toolsets=[model.toolset(log.tools())])
    asyncio.run(agent.run("go"))
    assert log.ran == RAN
    assert "cedar forbid 'no-etc'" in told[0]  # the model is told which Cedar policy refused


def test_langgraph_runs_only_what_cedar_permits() -> None:
    log = Log()
    turn = AIMessage(
        content="",
        tool_calls=[
            {"name": n, "args": {k: v}, "id": i, "type": "tool_call"} for i, n, k, v in CALLS
        ],
        response_metadata={"finish_reason": "tool_calls"},
    )
    answer = AIMessage(content="Done.", response_metadata={"finish_reason": "stop"})
    fake = GenericFakeChatModel(messages=iter([turn, answer, answer]))
    graph = create_agent(fake, langchain_tools(log), CEDAR, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
    graph.invoke({"messages": [("user", "go")]}, config)
    assert log.ran == RAN


def test_mini_swe_agent_runs_only_what_cedar_permits() -> None:
    policy = af.Policy(
        cedar="""
permit(principal, action, resource);
@id("no-etc") forbid(principal, action, resource == Tool::"bash")
  when { context.arguments.command like "*delete_file:/etc/*" };
"""
    )
    commands = [command(n, v) for _, n, _, v in CALLS]
    turn = output(*[bash(c[0], line) for c, line in zip(CALLS, commands, strict=True)])
    model = LitellmShaped(outputs=[turn, *[output(bash(f"s{n}", SUBMIT)) for n in range(4)]])
    with TemporaryDirectory() as folder:
        root = Path(folder)
        agent = GovernedAgent(model, LocalEnvironment(cwd=str(root)), policy=policy, **MINI_CONFIG)
        agent.run("task")
        log = root / "log"
        ran = log.read_text().split() if log.exists() else []
    assert Counter(ran) == Counter(["get_weather:Rome"])
