"""Shadow mode through each integration: the shadow is recorded and nothing else changes.

Each framework runs one turn (an allowed call and a denied one) on its own test double,
once without a shadow and once with a shadow that says the opposite of the policy on both
calls. The side-effect log is the same both times (the shadow never runs nor stops a call),
and the decisions the shadowed run traces hold each call's shadow verdict.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from agents import Agent as SdkAgent
from agents.testing import ScriptedModel, assistant_message, function_call
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
from agentfsm.integrations.openai_agents import governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from agentfsm.testing.scripted import call, say, tool_calls
from tests.conftest import LITELLM_CLIENT
from tests.integrations.conftest import sdk_run
from tests.integrations.test_cross_seam import SDK_CONFIG, Log, command, langchain_tools, sdk_tools
from tests.integrations.test_mcp_client import Notes, drive, notes
from tests.integrations.test_mini_swe_agent import CONFIG as MINI_CONFIG
from tests.integrations.test_mini_swe_agent import SUBMIT, LitellmShaped, bash, output

CALLS = (("c1", "get_weather", "city", "Rome"), ("c2", "delete_file", "path", "/etc/passwd"))
POLICY = af.Policy(permission_rules=["deny delete_file(path=/etc/*)"])
SHADOW = {"permission_rules": ["deny get_weather"]}
EXPECTED = {("get_weather", "allow", "deny"), ("delete_file", "deny", "allow")}
RAN = Counter({("get_weather", "Rome"): 1})
_ = notes  # the MCP client tests' fixture: a real MCP server process


class Decisions:
    """An observer keeping the shadow verdicts that differ, of every decision event."""

    def __init__(self) -> None:
        self.shadow: set[tuple[str, str, str]] = set()
        self.recorded = 0
        self.decisions = 0

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event["event"] == "decision":
            self.decisions += 1
            for v in event.get("shadow", ()):
                self.recorded += 1
                if v["enforced"] != v["shadow"]:
                    self.shadow.add((v["tool"], v["enforced"], v["shadow"]))


def both(run: Any) -> tuple[Any, Any]:
    """`run(shadow, seen)` without and with the shadow: (log, decisions) of each."""
    plain, shadowed = Decisions(), Decisions()
    return (run(None, plain), plain), (run(SHADOW, shadowed), shadowed)


def check(results: tuple[Any, Any], expected: set[tuple[str, str, str]] = EXPECTED) -> None:
    (plain_ran, plain), (shadow_ran, shadowed) = results
    assert plain_ran == shadow_ran
    assert plain.recorded == 0
    assert plain.decisions == shadowed.decisions
    assert shadowed.shadow == expected


class TestShadowInTheAgentsSDK:
    def test_recorded_and_nothing_else_changes(self) -> None:
        """governed(shadow=...): the same calls run; the decisions record the shadow."""

        def run(shadow: Any, seen: Decisions) -> Counter[tuple[str, str]]:
            log = Log()
            items = [function_call(n, {k: v}, call_id=i) for i, n, k, v in CALLS]
            answer = [assistant_message("Done.")]
            scripted = ScriptedModel([items, answer, answer])
            agent = governed(
                SdkAgent(name="a", tools=list(sdk_tools(log)), model=scripted),
                POLICY,
                on_decline="feedback",
                observers=[seen],
                shadow=shadow,
            )
            asyncio.run(sdk_run(agent, "go", False, run_config=SDK_CONFIG))
            return log.ran

        results = both(run)
        assert results[0][0] == RAN
        check(results)


class TestShadowInPydanticAI:
    def test_recorded_and_nothing_else_changes(self) -> None:
        """GovernedModel(shadow=...): the same calls run; the decisions record the shadow."""

        def run(shadow: Any, seen: Decisions) -> Counter[tuple[str, str]]:
            log = Log()

            def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                if len(messages) > 1:
                    return ModelResponse(parts=[TextPart("Done.")])
                return ModelResponse(
                    parts=[ToolCallPart(n, {k: v}, tool_call_id=i) for i, n, k, v in CALLS]
                )

            model = GovernedModel(
                FunctionModel(respond),
                POLICY,
                on_decline="feedback",
                observers=[seen],
                shadow=shadow,
            )
            agent: PydanticAgent[None, str] = PydanticAgent(
                model, toolsets=[model.toolset(log.tools())]
            )

            async def go() -> None:
                await agent.run("go")

            asyncio.run(go())
            return log.ran

        results = both(run)
        assert results[0][0] == RAN
        check(results)


class TestShadowInLangGraph:
    def test_recorded_and_nothing_else_changes(self) -> None:
        """create_agent(shadow=...): the same calls run; the decisions record the shadow."""

        def run(shadow: Any, seen: Decisions) -> Counter[tuple[str, str]]:
            log = Log()
            turn = AIMessage(
                content="",
                tool_calls=[
                    {"name": n, "args": {k: v}, "id": i, "type": "tool_call"}
                    for i, n, k, v in CALLS
                ],
                response_metadata={"finish_reason": "tool_calls"},
            )
            answer = AIMessage(content="Done.", response_metadata={"finish_reason": "stop"})
            fake = GenericFakeChatModel(messages=iter([turn, answer, answer]))
            graph = create_agent(
                fake,
                langchain_tools(log),
                POLICY,
                checkpointer=InMemorySaver(),
                observers=[seen],
                shadow=shadow,
            )
            config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
            graph.invoke({"messages": [("user", "go")]}, config)
            return log.ran

        results = both(run)
        assert results[0][0] == RAN
        check(results)


class TestShadowInMiniSweAgent:
    def test_recorded_and_nothing_else_changes(self) -> None:
        """GovernedAgent(shadow=...): the same commands run; the decisions record the shadow."""
        policy = af.Policy(permission_rules=["deny bash(command=*delete_file:/etc/*)"])
        shadow = {"permission_rules": ["deny bash(command=*get_weather*)"]}

        def run(given: Any, seen: Decisions) -> list[str]:
            commands = [command(n, v) for _, n, _, v in CALLS]
            turn = output(*[bash(c[0], line) for c, line in zip(CALLS, commands, strict=True)])
            model = LitellmShaped(
                outputs=[turn, *[output(bash(f"s{n}", SUBMIT)) for n in range(4)]]
            )
            with TemporaryDirectory() as folder:
                root = Path(folder)
                agent = GovernedAgent(
                    model,
                    LocalEnvironment(cwd=str(root)),
                    policy=policy,
                    observers=[seen],
                    shadow=shadow if given is not None else None,
                    **MINI_CONFIG,
                )
                agent.run("task")
                log = root / "log"
                return log.read_text().split() if log.exists() else []

        results = both(run)
        assert results[0][0] == ["get_weather:Rome"]
        check(results, {("bash", "allow", "deny"), ("bash", "deny", "allow")})


class TestShadowWithMCPServerTools:
    pytestmark = LITELLM_CLIENT

    def test_recorded_and_nothing_else_changes(self, notes: Notes) -> None:
        """MCPServerTools, shadow floored by the server's hints as the policy is: the server
        receives only what the policy allows, and each decision records the shadow."""
        script = [
            tool_calls(
                call("read_note", {"key": "a"}, id="c1"), call("delete_note", {"key": "b"}, id="c2")
            ),
            say("ok"),
        ]
        policy = af.Policy(permission_rules=["deny delete_note"])
        shadow = af.Policy(permission_rules=["deny read_note", "allow delete_note"])
        runs = []
        for given in (None, notes.tools.policy(shadow)):
            result, _ = drive(notes, script, policy, shadow=given)
            runs.append(result)
        plain, shadowed = runs
        assert notes.received() == [("read_note", {"key": "a"})] * 2
        assert shadowed.messages == plain.messages
        verdicts = {(v.tool, v.enforced, v.shadow) for d in shadowed.decisions for v in d.shadow}
        assert verdicts == {("read_note", "allow", "deny"), ("delete_note", "deny", "allow")}
        assert all(d.shadow == () for d in plain.decisions)
