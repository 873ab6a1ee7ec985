"""Run lifetimes: each run of a governed agent gets a Controller of its own.

A run left interrupted (never resumed), or ended by the framework itself (the Agents SDK's
`stop_on_first_tool`, pydantic-ai's usage limit), used to leave its Controller waiting, and
the next run on the same governed agent inherited its question, decisions and budgets. Each
framework runs its own test double; the properties draw sequences of runs (completed,
interrupted then approved, rejected or abandoned, stopped by the framework) and check that
every run starts afresh and that nothing asked about runs unapproved.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Literal

import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import event, given
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied, capture_run_messages
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    repair_messages,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

import agentfsm as af
from agentfsm.exceptions import RunError
from agentfsm.integrations.langgraph import create_agent
from agentfsm.integrations.openai_agents import decisions, governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.integrations.conftest import sdk_run

A = af.Action
CONFIG = RunConfig(tracing_disabled=True)
Kind = Literal["completed", "approved", "rejected", "abandoned", "stopped"]
POLICY = af.Policy(max_turns=2, max_tool_calls=1, permissions={"delete_file": "ask"})
"""One call and one answer per run: a run that inherited the last one's budgets stops."""
ANSWER = "all done"


class Ran:
    """What the tools ran, by the path they were given."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def delete_file(self, path: str) -> str:
        """Delete a file."""
        self.paths.append(path)
        return f"deleted {path}"

    def get_weather(self, path: str) -> str:
        """The weather at a place."""
        self.paths.append(path)
        return f"sunny at {path}"


def tool_of(kind: Kind) -> str:
    """The tool a run of this kind calls: an asked one when a human is involved."""
    return "delete_file" if kind in ("approved", "rejected", "abandoned") else "get_weather"


# -- OpenAI Agents SDK ---------------------------------------------------------------------


def sdk_agent(ran: Ran, script: list[list[Any]], stop_at_tool: bool = False) -> SdkAgent[Any]:
    """A governed agent on the SDK's ScriptedModel; `stop_at_tool` ends a run on get_weather's
    result, as the SDK's `stop_on_first_tool` does."""
    tools: list[Any] = [function_tool(ran.delete_file), function_tool(ran.get_weather)]
    behavior: Any = {"stop_at_tool_names": ["get_weather"]} if stop_at_tool else "run_llm_again"
    agent = SdkAgent(name="a", tools=tools, model=ScriptedModel(script), tool_use_behavior=behavior)
    return governed(agent, POLICY)


def sdk_script(kinds: list[Kind]) -> list[list[Any]]:
    """The model's outputs for the runs: a call (run `i` calls with path `/p/<i>`), then the
    answer, except for a run that ends before the model is called again."""
    steps: list[list[Any]] = []
    for i, kind in enumerate(kinds):
        steps.append([function_call(tool_of(kind), {"path": f"/p/{i}"}, call_id=f"c{i}")])
        if kind not in ("abandoned", "stopped"):
            steps.append([assistant_message(ANSWER)])
    return steps


async def sdk_runs(agent: SdkAgent[Any], kinds: list[Kind], stream: bool = False) -> list[Any]:
    """Each run in turn (`Runner.run`, or `Runner.run_streamed` consumed), answered as its
    kind says; every run's final result."""
    results = []
    for i, kind in enumerate(kinds):
        result: Any = await sdk_run(agent, f"task {i}", stream, run_config=CONFIG)
        if kind in ("approved", "rejected"):
            assert len(result.interruptions) == 1, kind
            state = result.to_state()
            if kind == "approved":
                state.approve(result.interruptions[0])
            else:
                state.reject(result.interruptions[0], rejection_message="not that one")
            result = await sdk_run(agent, state, stream, run_config=CONFIG)
        results.append(result)
    return results


class TestAgentsSDK:
    """The Agents SDK: a new `Runner.run` on the same governed agent is a new run."""

    def test_a_run_left_interrupted_does_not_decline_the_next(self) -> None:
        """The next run used to stop `human_declined` at once, without calling the model."""
        ran = Ran()
        agent = sdk_agent(ran, sdk_script(["abandoned", "completed"]))
        first, second = asyncio.run(sdk_runs(agent, ["abandoned", "completed"]))
        assert first.interruptions
        assert second.final_output == ANSWER
        assert [d.action for d in decisions(second)] == [A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]
        assert ran.paths == ["/p/1"]

    def test_a_run_stopped_on_its_first_tool_leaves_no_budget_behind(self) -> None:
        """After `stop_on_first_tool`, the next run used to inherit the spent call budget."""
        ran = Ran()
        agent = sdk_agent(ran, sdk_script(["stopped", "stopped"]), stop_at_tool=True)
        first, second = asyncio.run(sdk_runs(agent, ["stopped", "stopped"]))
        assert first.final_output == "sunny at /p/0"
        assert second.final_output == "sunny at /p/1"
        assert [d.action for d in decisions(second)] == [A.EXECUTE_TOOLS]
        assert ran.paths == ["/p/0", "/p/1"]

    @given(
        st.lists(st.sampled_from(["completed", "approved", "rejected", "abandoned"]), max_size=4),
        st.booleans(),
    )
    def test_every_run_starts_afresh(self, kinds: list[Kind], stream: bool) -> None:
        """Whatever the runs before it did, each run decides from its own first turn, within
        its own budgets, and no call asked about runs unless approved (`Runner.run` and
        `Runner.run_streamed`)."""
        self._check([*kinds, "completed"], stop_at_tool=False, stream=stream)

    @given(
        st.lists(st.sampled_from(["stopped", "approved", "abandoned"]), max_size=4), st.booleans()
    )
    def test_every_run_starts_afresh_with_stop_at_tool(
        self, kinds: list[Kind], stream: bool
    ) -> None:
        """The same with an agent that stops on get_weather's result (the SDK ends the run
        without telling the model, or agentfsm, the result)."""
        self._check([*kinds, "stopped"], stop_at_tool=True, stream=stream)

    @staticmethod
    def _check(kinds: list[Kind], stop_at_tool: bool, stream: bool) -> None:
        ran = Ran()
        agent = sdk_agent(ran, sdk_script(kinds), stop_at_tool=stop_at_tool)
        results = asyncio.run(sdk_runs(agent, kinds, stream))
        for i, (kind, result) in enumerate(zip(kinds, results, strict=True)):
            made = decisions(result)
            assert made[0].turn == 1, (i, kind, made)
            if kind == "abandoned":
                assert result.interruptions
            elif kind == "stopped":
                assert result.final_output == f"sunny at /p/{i}"
            else:
                assert result.final_output == ANSWER, (i, kind, result.final_output)
        ran_in = ("completed", "approved", "stopped")
        assert ran.paths == [f"/p/{i}" for i, k in enumerate(kinds) if k in ran_in]
        event(f"runs: {len(kinds)}")


# -- pydantic-ai ---------------------------------------------------------------------------


class PydanticScript:
    """A FunctionModel function answering the runs' turns in order."""

    def __init__(self, kinds: list[Kind]) -> None:
        self.responses: list[ModelResponse] = []
        for i, kind in enumerate(kinds):
            call = ToolCallPart(tool_of(kind), {"path": f"/p/{i}"}, tool_call_id=f"c{i}")
            self.responses.append(ModelResponse(parts=[call]))
            if kind not in ("abandoned", "stopped"):
                self.responses.append(ModelResponse(parts=[TextPart(ANSWER)]))

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The next scripted response."""
        return self.responses.pop(0)


def pydantic_agent(
    ran: Ran, kinds: list[Kind]
) -> tuple[GovernedModel, PydanticAgent[None, str | DeferredToolRequests]]:
    """A governed agent on pydantic-ai's FunctionModel."""
    model = GovernedModel(FunctionModel(PydanticScript(kinds)), POLICY)
    agent: PydanticAgent[None, str | DeferredToolRequests] = PydanticAgent(
        model,
        toolsets=[model.toolset([ran.delete_file, ran.get_weather])],
        output_type=[str, DeferredToolRequests],
    )
    return model, agent


async def pydantic_runs(
    model: GovernedModel, agent: PydanticAgent[None, Any], kinds: list[Kind]
) -> list[tuple[Any, list[af.Decision]]]:
    """Each run in turn on the history so far (a chat); every run's output and decisions.

    An abandoned run's open call is closed with `repair_messages`; a stopped run ends on
    pydantic-ai's request limit right after its tool ran.
    """
    history: list[ModelMessage] = []
    found: list[tuple[Any, list[af.Decision]]] = []
    for i, kind in enumerate(kinds):
        limits = UsageLimits(request_limit=1) if kind == "stopped" else None
        with capture_run_messages() as messages:
            try:
                result = await agent.run(f"task {i}", message_history=history, usage_limits=limits)
            except UsageLimitExceeded:  # the tool ran; pydantic-ai ended before the model
                found.append((None, list(model.decisions)))
                history = list(messages)
                continue
        if kind in ("approved", "rejected"):
            answer: bool | ToolDenied = kind == "approved" or ToolDenied("not that one")
            result = await agent.run(
                message_history=result.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals={f"c{i}": answer}),
            )
        found.append((result.output, list(model.decisions)))
        history = repair_messages(result.all_messages())
    return found


class TestPydanticAI:
    """pydantic-ai: a new `agent.run` on a history is a new run."""

    def test_a_run_left_deferred_does_not_carry_into_the_next(self) -> None:
        """The next run on the repaired history used to read the repair as the human's
        decline and go on with the old run's decisions."""
        ran = Ran()
        model, agent = pydantic_agent(ran, ["abandoned", "completed"])
        first, second = asyncio.run(pydantic_runs(model, agent, ["abandoned", "completed"]))
        assert isinstance(first[0], DeferredToolRequests)
        assert second[0] == ANSWER
        assert [d.action for d in second[1]] == [A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]
        assert ran.paths == ["/p/1"]

    def test_a_run_ended_by_its_usage_limit_leaves_no_budget_behind(self) -> None:
        """A run pydantic-ai ended after its tool ran (request limit) used to leave its
        Controller awaiting the result; the next run on that history inherited its budgets."""
        ran = Ran()
        model, agent = pydantic_agent(ran, ["stopped", "completed"])
        first, second = asyncio.run(pydantic_runs(model, agent, ["stopped", "completed"]))
        assert first[0] is None
        assert second[0] == ANSWER
        assert [d.action for d in second[1]] == [A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]
        assert ran.paths == ["/p/0", "/p/1"]

    @given(
        st.lists(
            st.sampled_from(["completed", "approved", "rejected", "abandoned", "stopped"]),
            max_size=4,
        )
    )
    def test_every_run_starts_afresh(self, kinds: list[Kind]) -> None:
        """Each run on the chat's history decides from its own first turn, within its own
        budgets, and no call asked about runs unless approved."""
        ran = Ran()
        model, agent = pydantic_agent(ran, [*kinds, "completed"])
        runs = asyncio.run(pydantic_runs(model, agent, [*kinds, "completed"]))
        for i, (kind, (output, made)) in enumerate(zip([*kinds, "completed"], runs, strict=True)):
            assert made[0].turn == 1, (i, kind, made)
            if kind == "abandoned":
                assert isinstance(output, DeferredToolRequests)
            elif kind == "stopped":
                assert output is None
            else:
                assert output == ANSWER, (i, kind, output)
        ran_in = ("completed", "approved", "stopped")
        expected = [f"/p/{i}" for i, k in enumerate(kinds) if k in ran_in]
        assert ran.paths == [*expected, f"/p/{len(kinds)}"]
        event(f"runs: {len(kinds) + 1}")


# -- LangGraph -----------------------------------------------------------------------------


def ai_turns(kinds: list[Kind]) -> list[AIMessage]:
    """The model's messages for the runs of a thread."""
    found = []
    for i, kind in enumerate(kinds):
        call = {"name": tool_of(kind), "args": {"path": f"/p/{i}"}, "id": f"c{i}"}
        found.append(
            AIMessage(
                content="",
                tool_calls=[{**call, "type": "tool_call"}],
                response_metadata={"finish_reason": "tool_calls"},
            )
        )
        if kind != "abandoned":
            found.append(AIMessage(content=ANSWER, response_metadata={"finish_reason": "stop"}))
    return found


def langgraph_agent(ran: Ran, kinds: list[Kind]) -> Any:
    """`create_agent` on LangChain's GenericFakeChatModel, with a checkpointer."""
    fake = GenericFakeChatModel(messages=iter(ai_turns(kinds)))
    return create_agent(
        fake, [tool(ran.delete_file), tool(ran.get_weather)], POLICY, checkpointer=InMemorySaver()
    )


class TestLangGraph:
    """LangGraph: a thread's new input after its run ended starts a new run; one given while
    the run waits for a human is refused, naming the question."""

    CONFIG: ClassVar[Any] = {"configurable": {"thread_id": "t"}}

    def test_a_thread_goes_on_after_its_run_ended(self) -> None:
        """A second input on the same thread used to raise "cannot take a model output in
        state 'end'"."""
        ran = Ran()
        graph = langgraph_agent(ran, ["completed", "completed"])
        graph.invoke({"messages": [("user", "task 0")]}, self.CONFIG)
        out = graph.invoke({"messages": [("user", "task 1")]}, self.CONFIG)
        assert out["messages"][-1].content == ANSWER
        assert [d["action"] for d in out["decisions"]][-3:] == [
            "execute_tools",
            "continue",
            "final",
        ]
        assert ran.paths == ["/p/0", "/p/1"]

    def test_a_new_input_while_a_human_is_asked_is_refused(self) -> None:
        """A new input on a thread that waits for a human says so, naming the call; the
        thread goes on once the human answered."""
        ran = Ran()
        graph = langgraph_agent(ran, ["abandoned", "completed"])
        out = graph.invoke({"messages": [("user", "task 0")]}, self.CONFIG)
        assert "__interrupt__" in out
        with pytest.raises(
            RunError, match=r"waits for a human's answer on call\(s\) 'delete_file'"
        ):
            graph.invoke({"messages": [("user", "task 1")]}, self.CONFIG)
        assert ran.paths == []

    @given(st.lists(st.sampled_from(["completed", "approved", "rejected"]), max_size=4))
    def test_every_run_of_a_thread_starts_afresh(self, kinds: list[Kind]) -> None:
        """Each run of a thread decides within its own budgets, and no call asked about runs
        unless approved."""
        ran = Ran()
        graph = langgraph_agent(ran, [*kinds, "completed"])
        seen = 0
        for i, kind in enumerate([*kinds, "completed"]):
            out = graph.invoke({"messages": [("user", f"task {i}")]}, self.CONFIG)
            if kind in ("approved", "rejected"):
                answer = True if kind == "approved" else {"approved": False, "message": "no"}
                out = graph.invoke(Command(resume=answer), self.CONFIG)
            assert out["messages"][-1].content == ANSWER, (i, kind)
            assert out["decisions"][-1]["action"] == "final"
            assert all(d["action"] != "stop" for d in out["decisions"][seen:])
            seen = len(out["decisions"])
        expected = [f"/p/{i}" for i, k in enumerate(kinds) if k in ("completed", "approved")]
        assert ran.paths == [*expected, f"/p/{len(kinds)}"]
