"""Shared objects: what a host's code does to the arguments it is handed never rewrites the
Controller's record of the call.

Each integration hands the framework's tools (and the human's approval hook) a call's
arguments; a tool that edits them in place used to edit the decision, the pending call and the
dump too, which then showed (and, for mini-swe-agent's `approve`, ran) a call the model never
sent. Each test runs the framework's own test double with a real tool that mutates what it was
given, and checks that the decisions and the dump still hold what the model sent.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import Agent as SdkAgent
from agents import RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent
from agentfsm.integrations.openai_agents import decisions, governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.integrations.test_mini_swe_agent import SUBMIT, Sandbox, bash, output

SENT: dict[str, Any] = {"rows": ["/tmp/a"], "opts": {"path": "/tmp/b", "nested": {}}}
"""The arguments the model sends."""


def sent() -> dict[str, Any]:
    """A fresh copy of what the model sends."""
    copied: dict[str, Any] = json.loads(json.dumps(SENT))
    return copied


def vandalize(rows: Any, opts: Any) -> str:
    """Edit everything reachable from the arguments, as a careless tool does."""
    rows.append("/etc/passwd")
    opts["path"] = "/etc/shadow"
    opts["nested"]["x"] = 1
    return "stored"


def store(rows: Any, opts: Any) -> str:
    """Store rows."""
    return vandalize(rows, opts)


def recorded(calls: list[af.ToolCall]) -> list[Any]:
    """The arguments of the calls of a decision."""
    return [c.arguments for c in calls]


class TestPydanticAI:
    """pydantic-ai: the tool's arguments are validated from the call part agentfsm built."""

    def test_a_tool_editing_its_arguments_leaves_the_record(self) -> None:
        """The call part shared its nested lists and dicts with the Controller's call."""
        responses = [
            ModelResponse(parts=[ToolCallPart("store", sent(), tool_call_id="c1")]),
            ModelResponse(parts=[TextPart("done")]),
        ]

        def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return responses.pop(0)

        model = GovernedModel(FunctionModel(reply), af.Policy())
        agent = PydanticAgent(model, toolsets=[model.toolset([store])])
        assert agent.run_sync("go").output == "done"
        assert recorded(model.decisions[0].tool_calls) == [SENT]
        assert model.controller is not None
        assert "/etc/" not in json.dumps(model.controller.dump())


class TestAgentsSDK:
    """The Agents SDK: a callable `needs_approval` is asked with the call's arguments."""

    def test_an_approval_check_editing_the_arguments_leaves_the_record(self) -> None:
        """The SDK's own `needs_approval` callable got the Controller's nested objects."""

        async def needs_approval(_ctx: Any, params: dict[str, Any], _call_id: str) -> bool:
            vandalize(params["rows"], params["opts"])
            return False

        ran: list[Any] = []

        @function_tool(needs_approval=needs_approval, strict_mode=False)
        def store_rows(rows: list[str], opts: dict[str, Any]) -> str:
            """Store rows."""
            ran.append((rows, opts))
            return "stored"

        script = [
            [function_call("store_rows", sent(), call_id="c1")],
            [assistant_message("done")],
        ]
        agent = governed(SdkAgent(name="a", tools=[store_rows], model=ScriptedModel(script)))
        result = asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
        assert result.final_output == "done"
        assert recorded(decisions(result)[0].tool_calls) == [SENT]
        assert ran == [(SENT["rows"], SENT["opts"])]


class TestLangGraph:
    """LangGraph: the ToolNode runs the calls of agentfsm's decision record."""

    def test_a_tool_editing_its_arguments_leaves_the_record(self) -> None:
        """The decision record sent to the ToolNode held the Controller's own dict."""
        call = {"name": "store", "args": sent(), "id": "c1", "type": "tool_call"}
        replies = [
            AIMessage(
                content="", tool_calls=[call], response_metadata={"finish_reason": "tool_calls"}
            ),
            AIMessage(content="done", response_metadata={"finish_reason": "stop"}),
        ]
        graph = create_agent(
            GenericFakeChatModel(messages=iter(replies)),
            [tool(store)],
            af.Policy(),
            checkpointer=InMemorySaver(),
        )
        out = graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t"}})
        assert out["messages"][-1].content == "done"
        assert out["decisions"][0]["tool_calls"][0]["args"] == SENT
        assert out["messages"][1].tool_calls[0]["args"] == SENT


class TestMiniSweAgent:
    """mini-swe-agent: `approve` is handed the calls it is asked about."""

    def test_an_approver_editing_the_call_runs_nothing_it_did_not_approve(
        self, tmp_path: Path
    ) -> None:
        """`approve` got the Controller's own calls: rewriting a command there ran the new
        command, which the policy denies, with the record showing it as approved."""
        policy = af.Policy(
            permission_rules=["ask bash(command=echo asked*)", "deny bash(command~*evil*)"]
        )

        def approve(calls: list[af.ToolCall]) -> bool:
            assert calls[0].arguments is not None
            calls[0].arguments["command"] = "echo evil >> log"
            return True

        outputs = [output(bash("c1", "echo asked >> log")), output(bash("c2", SUBMIT))]
        sandbox = Sandbox(tmp_path)
        agent = sandbox.ruled(outputs, policy=policy, approve=approve)
        assert agent.run("task")["exit_status"] == "Submitted"
        assert sandbox.log() == ["asked"]
        asked = agent.decisions[0]
        assert recorded(asked.tool_calls) == [{"command": "echo asked >> log"}]
        assert "echo evil" not in json.dumps(agent.controller.dump())
