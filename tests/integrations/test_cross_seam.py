"""A deny is final and once means once, across the seam into each framework.

Random policies (text rules and table entries with deny, ask and allow) and random model
outputs (duplicate and missing ids, `parallel` wrappers, siblings of calls that need a human,
approvals yes or no) run through each integration on the framework's own test double, with
tools that append to a side-effect log. Oracle: the policy's verdict per call. No denied call
executes; every allowed call executes exactly once (all of the turn's allowed and asked calls
when a human approves it, none when the human declines); every call the model made gets
exactly one result.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from agents import Agent as SdkAgent
from agents import FunctionTool, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicModel, make_output
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent
from agentfsm.integrations.mini_swe_agent import GovernedAgent
from agentfsm.integrations.openai_agents import governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.integrations.conftest import sdk_run
from tests.integrations.test_mini_swe_agent import CONFIG as MINI_CONFIG
from tests.integrations.test_mini_swe_agent import SUBMIT, LitellmShaped, bash, output

ARGUMENT = {"get_weather": "city", "delete_file": "path"}
VALUES = {
    "get_weather": ("Paris", "Rome", "Oslo"),
    "delete_file": ("/etc/passwd", "/tmp/x", "/home/u"),
}
RULES = (
    "deny delete_file(path=/etc/*)",
    "ask delete_file",
    "allow delete_file(path=/tmp/*)",
    "deny get_weather(city=R*)",
    "ask get_weather(city=P*)",
    "deny *(path=/home/*)",
    "allow *",
)
BASH_RULES = (
    "deny bash(command=*delete_file:/etc/*)",
    "ask bash(command=*delete_file*)",
    "allow bash(command=*/tmp/*)",
    "deny bash(command=*get_weather:R*)",
    "ask bash(command=*get_weather:P*)",
    "deny bash(command=*/home/*)",
)
VERDICTS = ("allow", "ask", "deny")
SDK_CONFIG = RunConfig(tracing_disabled=True)
EXAMPLES = settings(max_examples=30, deadline=None)


@dataclass(frozen=True)
class Scenario:
    """One policy, one turn of calls (id, tool, value), and the human's answer."""

    policy: af.Policy
    calls: tuple[tuple[str, str, str], ...]
    approve: bool
    wrapped: int
    """How many leading calls a `parallel` wrapper carries (Agents SDK only; 0 for none)."""

    def expected(self, verdict: Any) -> Counter[tuple[str, str]]:
        """The (tool, value) executions the policy allows, as a multiset."""
        verdicts = [verdict(self.policy, name, value) for _, name, value in self.calls]
        runs = {"allow"}
        if "ask" in verdicts:  # the turn waits for the human: all of it runs, or none
            runs = {"allow", "ask"} if self.approve else set()
        return Counter(
            (name, value)
            for (_, name, value), v in zip(self.calls, verdicts, strict=True)
            if v in runs
        )


def tool_verdict(policy: af.Policy, name: str, value: str) -> str:
    """The policy's verdict on a call of `name` with its argument set to `value`."""
    return policy.permission_for(af.ToolCall(id="x", name=name, arguments={ARGUMENT[name]: value}))


def command(name: str, value: str) -> str:
    """The bash command standing for a call in the mini-swe-agent runs."""
    return f"echo {name}:{value} >> log"


def bash_verdict(policy: af.Policy, name: str, value: str) -> str:
    """The policy's verdict on the bash command standing for the call."""
    return policy.permission_for(
        af.ToolCall(id="x", name="bash", arguments={"command": command(name, value)})
    )


@st.composite
def scenarios(draw: st.DrawFn, rules: tuple[str, ...] = RULES, bash_only: bool = False) -> Scenario:
    """A random policy, turn of calls, and human answer."""
    names = ["bash", "*"] if bash_only else ["get_weather", "delete_file", "*"]
    table = draw(st.dictionaries(st.sampled_from(names), st.sampled_from(VERDICTS), max_size=2))
    chosen = draw(st.lists(st.sampled_from(rules), max_size=3, unique=True))
    policy = af.Policy(permission_rules=chosen, permissions=table)
    call = st.sampled_from(list(ARGUMENT)).flatmap(
        lambda name: st.tuples(
            st.sampled_from(["c1", "c2", "c3", ""]), st.just(name), st.sampled_from(VALUES[name])
        )
    )
    calls = tuple(draw(st.lists(call, min_size=1, max_size=4)))
    wrapped = draw(st.sampled_from([0, 0, 1, 2, len(calls)]))
    return Scenario(policy, calls, draw(st.booleans()), min(wrapped, len(calls)))


def once_each(calls: list[str], answers: list[str]) -> bool:
    """Every call id has exactly one answer, and every answer a call."""
    return Counter(answers) == Counter(calls) and all(n == 1 for n in Counter(calls).values())


class Log:
    """The side-effect log the tools append to."""

    def __init__(self) -> None:
        self.ran: Counter[tuple[str, str]] = Counter()

    def tools(self) -> list[Callable[[str], str]]:
        """The two tools as plain functions that append here; each framework wraps them."""

        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.ran[("get_weather", city)] += 1
            return f"sunny in {city}"

        def delete_file(path: str) -> str:
            """Delete a file."""
            self.ran[("delete_file", path)] += 1
            return f"deleted {path}"

        return [get_weather, delete_file]


# -- OpenAI Agents SDK ------------------------------------------------------------------


def sdk_tools(log: Log) -> list[FunctionTool]:
    """The two tools, as the SDK's function tools."""
    return [function_tool(fn) for fn in log.tools()]


def sdk_items(scenario: Scenario) -> list[Any]:
    """The turn as the SDK's output items, the first calls inside a `parallel` wrapper."""
    items = [
        function_call(name, {ARGUMENT[name]: value}, call_id=call_id)
        for call_id, name, value in scenario.calls[scenario.wrapped :]
    ]
    if not scenario.wrapped:
        return items
    uses = [
        {"recipient_name": f"functions.{name}", "parameters": {ARGUMENT[name]: value}}
        for _, name, value in scenario.calls[: scenario.wrapped]
    ]
    wrapper = function_call(
        "multi_tool_use.parallel", {"tool_uses": uses}, call_id=scenario.calls[0][0]
    )
    return [wrapper, *items]


def run_sdk(scenario: Scenario, log: Log, stream: bool) -> list[dict[str, Any]]:
    """Run the turn through a governed SDK agent; the last request's input items."""
    answer = [assistant_message("Done.")]
    scripted = ScriptedModel([sdk_items(scenario), answer, answer, answer])
    # The model reads every decline, so the last request shows each call's answer.
    agent = governed(
        SdkAgent(name="a", tools=list(sdk_tools(log)), model=scripted),
        scenario.policy,
        on_decline="feedback",
    )

    async def go() -> None:
        result = await sdk_run(agent, "go", stream, run_config=SDK_CONFIG)
        while result.interruptions:
            state = result.to_state()
            for item in result.interruptions:
                (state.approve if scenario.approve else state.reject)(item)
            result = await sdk_run(agent, state, stream, run_config=SDK_CONFIG)

    asyncio.run(go())
    return [i for i in scripted.calls[-1].input if isinstance(i, dict)]


class TestOpenAIAgentsSDK:
    """The Agents SDK on its own ScriptedModel, with real function tools."""

    @EXAMPLES
    @given(scenarios(), st.booleans())
    def test_denied_never_runs_allowed_runs_once(self, scenario: Scenario, stream: bool) -> None:
        """Executions match the verdicts, and every call the model made has one output, with
        `Runner.run` and with `Runner.run_streamed`."""
        log = Log()
        last = run_sdk(scenario, log, stream)
        assert log.ran == scenario.expected(tool_verdict)
        calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
        assert len(calls) == len(scenario.calls)
        assert once_each(calls, outputs)


# -- pydantic-ai ------------------------------------------------------------------------


def run_pydantic(scenario: Scenario, log: Log) -> list[ModelMessage]:
    """Run the turn through a governed pydantic-ai agent; the last request's messages."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) > 1:
            return ModelResponse(parts=[TextPart("Done.")])
        return ModelResponse(
            parts=[
                ToolCallPart(name, {ARGUMENT[name]: value}, tool_call_id=call_id)
                for call_id, name, value in scenario.calls
            ]
        )

    # The model reads every decline, so the last request shows each call's answer.
    model = GovernedModel(FunctionModel(respond), scenario.policy, on_decline="feedback")
    agent: PydanticAgent[None, str | DeferredToolRequests] = PydanticAgent(
        model,
        toolsets=[model.toolset(log.tools())],
        output_type=[str, DeferredToolRequests],
    )

    async def go() -> None:
        # asyncio.run, not run_sync: each run's event loop is closed, none is left to the GC.
        result = await agent.run("go")
        while isinstance(result.output, DeferredToolRequests):
            approvals: dict[str, bool | ToolApproved | ToolDenied] = {
                c.tool_call_id: scenario.approve for c in result.output.approvals
            }
            result = await agent.run(
                message_history=result.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals=approvals),
            )

    asyncio.run(go())
    return seen[-1]


class TestPydanticAI:
    """pydantic-ai on its own FunctionModel, with real function tools."""

    @EXAMPLES
    @given(scenarios())
    def test_denied_never_runs_allowed_runs_once(self, scenario: Scenario) -> None:
        """Executions match the verdicts, and every call the model made has one answer."""
        log = Log()
        last = run_pydantic(scenario, log)
        assert log.ran == scenario.expected(tool_verdict)
        calls = [
            p.tool_call_id
            for m in last
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        ]
        answers = [
            p.tool_call_id
            for m in last
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart | RetryPromptPart)
        ]
        assert len(calls) == len(scenario.calls)
        assert once_each(calls, answers)


# -- LangGraph --------------------------------------------------------------------------


def langchain_tools(log: Log) -> list[BaseTool]:
    """The two tools, as LangChain tools."""
    return [tool(fn) for fn in log.tools()]


def run_langgraph(scenario: Scenario, log: Log) -> list[BaseMessage]:
    """Run the turn through the governed prebuilt graph; the final messages."""
    turn = AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": {ARGUMENT[name]: value}, "id": call_id, "type": "tool_call"}
            for call_id, name, value in scenario.calls
        ],
        response_metadata={"finish_reason": "tool_calls"},
    )
    answer = AIMessage(content="Done.", response_metadata={"finish_reason": "stop"})
    fake = GenericFakeChatModel(messages=iter([turn, answer, answer, answer]))
    graph = create_agent(fake, langchain_tools(log), scenario.policy, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
    out = graph.invoke({"messages": [("user", "go")]}, config)
    while "__interrupt__" in out:
        out = graph.invoke(Command(resume=scenario.approve), config)
    messages: list[BaseMessage] = out["messages"]
    return messages


class TestLangGraph:
    """LangGraph's prebuilt graph on LangChain's GenericFakeChatModel and a real ToolNode."""

    @EXAMPLES
    @given(scenarios())
    def test_denied_never_runs_allowed_runs_once(self, scenario: Scenario) -> None:
        """Executions match the verdicts, and every call the model made has one ToolMessage."""
        log = Log()
        messages = run_langgraph(scenario, log)
        assert log.ran == scenario.expected(tool_verdict)
        calls = [str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
        replies = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
        assert len(calls) == len(scenario.calls)
        assert once_each(calls, replies)


# -- mini-swe-agent ---------------------------------------------------------------------


def text_output(*commands: str) -> dict[str, Any]:
    """A text-based model's message: fenced commands, and the actions it parsed from them."""
    blocks = "".join(f"\n```mswea_bash_command\n{c}\n```\n" for c in commands)
    return make_output(f"THOUGHT: go.{blocks}", [{"command": c} for c in commands])


def mini_model(scenario: Scenario, text: bool) -> Any:
    """mini-swe-agent's deterministic model: tool calls, or text-based, then submits."""
    commands = [command(name, value) for _, name, value in scenario.calls]
    if text:
        return DeterministicModel(  # type: ignore[no-untyped-call]
            outputs=[text_output(*commands)] + [text_output(SUBMIT)] * 8
        )
    turn = output(*[bash(c[0], line) for c, line in zip(scenario.calls, commands, strict=True)])
    return LitellmShaped(outputs=[turn, *[output(bash(f"s{n}", SUBMIT)) for n in range(8)]])


def run_mini(scenario: Scenario, root: Path, text: bool) -> GovernedAgent:
    """Run the turn (its calls as bash commands) through a GovernedAgent to its end."""
    agent = GovernedAgent(
        mini_model(scenario, text),
        LocalEnvironment(cwd=str(root)),
        policy=scenario.policy,
        approve=lambda _calls: scenario.approve,
        **MINI_CONFIG,
    )
    agent.run("task")
    return agent


class TestMiniSweAgent:
    """mini-swe-agent on its deterministic tool-call model and a real LocalEnvironment."""

    @EXAMPLES
    @given(scenarios(BASH_RULES, bash_only=True), st.booleans())
    def test_denied_never_runs_allowed_runs_once(self, scenario: Scenario, text: bool) -> None:
        """Executions match the verdicts, and every call of the turn has one tool message,
        with a tool-calling model and with a text-based one (fenced commands)."""
        with TemporaryDirectory() as folder:
            root = Path(folder)
            agent = run_mini(scenario, root, text)
            lines = (root / "log").read_text().split() if (root / "log").exists() else []
        ran = Counter(tuple(line.split(":", 1)) for line in lines)
        assert ran == scenario.expected(bash_verdict)
        if text:  # no call ids in a text-based history: one observation or error per call
            turn = next(i for i, m in enumerate(agent.messages) if m["role"] == "assistant")
            after = []
            for message in agent.messages[turn + 1 :]:
                if message["role"] != "user":
                    break
                after.append(message)
            assert len(after) == len(scenario.calls)
            return
        first = next(m for m in agent.messages if m.get("tool_calls"))
        calls = [c["id"] for c in first["tool_calls"]]
        replies = [m["tool_call_id"] for m in agent.messages if m.get("role") == "tool"]
        assert len(calls) == len(scenario.calls)
        assert once_each(calls, [r for r in replies if r in set(calls)])


class TestOracle:
    """The properties' oracle."""

    def test_it_runs_what_the_policy_allows_all_or_nothing_around_a_human(self) -> None:
        """Denied calls never; allowed ones once; with an ask, all on yes and none on no."""
        policy = af.Policy(permission_rules=["deny delete_file(path=/etc/*)", "ask get_weather"])
        calls = (
            ("c1", "delete_file", "/etc/passwd"),
            ("c2", "get_weather", "Oslo"),
            ("c2", "delete_file", "/tmp/x"),
        )
        yes = Scenario(policy, calls, approve=True, wrapped=0)
        no = Scenario(policy, calls, approve=False, wrapped=0)
        both = Counter({("get_weather", "Oslo"): 1, ("delete_file", "/tmp/x"): 1})
        assert yes.expected(tool_verdict) == both
        assert no.expected(tool_verdict) == Counter()
