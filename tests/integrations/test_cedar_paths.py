"""A Cedar permission source on every path that executes a call: a call Cedar forbids never
runs, through `af.run` with an MCP server's tools, the Controller and Executor over the same
tools, `agentfsm mcp-proxy` between a real host session and server, and the OpenAI Agents
SDK's own Runner (real server processes, real SDK)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import Runner
from agents.testing import assistant_message, function_call

import agentfsm as af
from agentfsm.integrations.mcp import MCPServerTools
from agentfsm.testing import call as tool_call
from agentfsm.testing.scripted import call, say, tool_calls
from tests.cli.test_mcp_proxy import Proxy, text
from tests.conftest import LITELLM_CLIENT
from tests.integrations.test_mcp_client import Notes, drive, executed, params, tool_messages
from tests.integrations.test_openai_agents import CONFIG, Tools, actions, ruled
from tests.runner.conftest import close_litellm_event_loop

pytestmark = [pytest.mark.needs("cedarpy"), *LITELLM_CLIENT]
_ = close_litellm_event_loop

NOTES = af.Policy(
    cedar="""
@id("reads") permit(principal, action, resource == Tool::"read_note");
@id("no-secrets") forbid(principal, action, resource == Tool::"read_note")
  when { context.arguments.key like "secret*" };
@id("two-calls") forbid(principal, action, resource) when { context.history.calls >= 2 };
"""
)


@pytest.fixture
def notes(tmp_path: Path) -> Iterator[Notes]:
    log = tmp_path / "calls.log"
    with MCPServerTools(params(log), timeout=30) as tools:
        yield Notes(log, tools)


class TestMcpClient:
    def test_af_run_sends_only_what_cedar_permits(self, notes: Notes) -> None:
        """`af.run` over an MCP server: the forbidden call and the unpermitted tool never
        reach the server; the permitted one does."""
        script = [
            tool_calls(
                call("read_note", {"key": "secret-1"}, id="c1"),
                call("read_note", {"key": "a"}, id="c2"),
                call("delete_note", {"key": "a"}, id="c3"),
            ),
            say("ok"),
        ]
        result, _ = drive(notes, script, NOTES)
        assert notes.received() == [("read_note", {"key": "a"})]
        messages = tool_messages(result)
        assert "no-secrets" in messages["c1"]
        assert "allow-list" in messages["c3"]

    def test_the_run_history_limits_the_calls(self, notes: Notes) -> None:
        """Cedar reads the run's executed calls: after two, the third is denied."""
        script = [
            tool_calls(call("read_note", {"key": "a"}, id="c1")),
            tool_calls(call("read_note", {"key": "b"}, id="c2")),
            tool_calls(call("read_note", {"key": "c"}, id="c3")),
            say("ok"),
        ]
        result, _ = drive(notes, script, NOTES)
        assert [key for _, key in notes.received()] == [{"key": "a"}, {"key": "b"}]
        assert "two-calls" in tool_messages(result)["c3"]

    def test_the_executor_runs_only_the_cleared_call(self, notes: Notes) -> None:
        """Controller and Executor over the MCP tools: the forbidden call is not sent."""
        results = executed(
            notes,
            tool_call("read_note", {"key": "a"}, id="ok"),
            tool_call("read_note", {"key": "secret-2"}, id="no"),
            policy=NOTES,
        )
        assert notes.received() == [("read_note", {"key": "a"})]
        assert set(results) == {"ok"}


class TestOpenAIAgents:
    POLICY = af.Policy(cedar='permit(principal, action, resource == Tool::"get_weather");')

    def test_a_tool_cedar_does_not_permit_never_runs(self) -> None:
        """Under the SDK's Runner, the call Cedar leaves out is denied and never executes;
        the permitted one runs."""
        tools = Tools()
        script = [
            [
                function_call("delete_file", {"path": "/tmp/x"}, call_id="c1"),
                function_call("get_weather", {"city": "Oslo"}, call_id="c2"),
            ],
            [assistant_message("Done.")],
        ]
        agent = ruled(script, tools, self.POLICY)
        result = asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
        assert tools.ran == [("get_weather", "Oslo")]
        assert actions(result)[0] is af.Action.EXECUTE_TOOLS

    def test_history_reaches_cedar_under_the_sdk(self) -> None:
        """The SDK path gives Cedar the run's history too: the second round is denied."""
        tools = Tools()
        policy = af.Policy(
            cedar="permit(principal, action, resource) when { context.history.calls < 1 };"
        )
        script = [
            [function_call("get_weather", {"city": "Oslo"}, call_id="c1")],
            [function_call("get_weather", {"city": "Rome"}, call_id="c2")],
            [assistant_message("Done.")],
        ]
        asyncio.run(Runner.run(ruled(script, tools, policy), "go", run_config=CONFIG))
        assert tools.ran == [("get_weather", "Oslo")]


class TestMcpProxy:
    def test_the_proxy_forwards_only_what_cedar_permits(self, tmp_path: Path) -> None:
        """`agentfsm mcp-proxy` with a policy file holding Cedar text: the forbidden call gets
        an error result naming the Cedar policy and never reaches the server."""
        cedar = (
            '@id("rows") permit(principal, action, resource == Tool::"read_row");\n'
            '@id("no-admin") forbid(principal, action, resource) '
            'when { context.arguments.key == "admin" };'
        )
        proxy = Proxy(tmp_path, {"cedar_policies": cedar})
        denied, allowed, other = proxy.call(
            ("read_row", {"key": "admin"}),
            ("read_row", {"key": "a"}),
            ("drop_table", {"table": "users"}),
        )
        assert denied.is_error
        assert "no-admin" in text(denied)
        assert not allowed.is_error
        assert other.is_error
        assert proxy.calls() == ['read_row:{"key": "a"}']
