"""Seams the cross-seam properties did not reach: Agents SDK handoffs, pydantic-ai streamed,
a LangGraph graph the user built.

Random policies and model outputs from tests/seam_strategies.py (duplicate and missing call
ids, `parallel` wrappers, handoff calls, siblings of `ask` calls) go through each path on the
framework's own test double, with tools that log every run by the call's `n`. Oracle: the
policy's verdict per call. No denied call runs, an `ask` call runs only once a human approved
it, no call runs twice (`check_log`), and a handoff transfers control only when allowed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import FunctionTool, RunConfig, Runner, function_tool
from agents.exceptions import ModelBehaviorError
from agents.handoffs import handoff
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import assume, event, example, given
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from pydantic import BaseModel
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import agentfsm as af
from agentfsm.exceptions import RunError
from agentfsm.integrations.langgraph import Decide
from agentfsm.integrations.openai_agents import GovernedModel as SdkGovernedModel
from agentfsm.integrations.openai_agents import governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.seam_strategies import (
    HANDOFF,
    Call,
    SideEffects,
    calls_by_n,
    chat_body,
    check_log,
    human_answers,
    policies,
    raw_calls,
    turns_of_a_run,
)

SDK_CONFIG = RunConfig(tracing_disabled=True)
DONE = "done"


def check_cleared(cleared: list[af.ToolCall], policy: af.Policy, approved: set[int]) -> None:
    """No decision cleared a call the policy asks about unless the human approved that very
    call: a sibling's yes is not its answer."""
    for call in cleared:
        if policy.permission_for(call) == "ask":
            assert n_of(call.arguments) in approved, f"{call} cleared unapproved"


def cleared_by(made: list[af.Decision]) -> list[af.ToolCall]:
    """The calls the decisions cleared to run (or hand off)."""
    clearing = (af.Action.EXECUTE_TOOLS, af.Action.HANDOFF)
    return [c for d in made if d.action in clearing for c in d.tool_calls]


def parent_decisions(parent: SdkAgent[Any]) -> list[af.Decision]:
    """Every decision the governed parent's model made in its last run."""
    model = parent.model
    assert isinstance(model, SdkGovernedModel)
    return list(model.decisions)


def n_of(arguments: Any) -> int:
    """The `n` of a call's arguments (a JSON string or a mapping); 0 when it has none."""
    parsed = json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
    return int(parsed.get("n", 0)) if isinstance(parsed, dict) else 0


# -- OpenAI Agents SDK: handoffs --------------------------------------------------------


class Task(BaseModel):
    """A handoff's input: the task, ending in the `#<n>` of the call that asked for it."""

    task: str
    n: int


def sdk_tools(effects: SideEffects) -> list[FunctionTool]:
    """The logging tools but the handoff, as the SDK's function tools (non-strict schemas:
    the drawn calls leave arguments out)."""
    return [function_tool(t, strict_mode=False) for t in effects.tools() if t.__name__ != HANDOFF]


def sdk_items(output: dict[str, Any]) -> list[Any]:
    """A drawn output as the SDK's output items."""
    calls = raw_calls(output)
    if not calls:
        return [assistant_message(DONE)]
    return [function_call(name, arguments, call_id=i) for i, name, arguments in calls]


def sdk_agents(
    effects: SideEffects, policy: af.Policy, outputs: list[dict[str, Any]]
) -> tuple[SdkAgent[Any], ScriptedModel]:
    """The governed parent scripted with `outputs`, and the model of the child it hands off to
    (the handoff logs `(research, n)` when control passes)."""
    child_model = ScriptedModel([[assistant_message("child done")]] * 4)

    def on_handoff(_ctx: Any, given: Task) -> None:
        effects.log.append((HANDOFF, given.n))

    to_child = handoff(
        SdkAgent(name="child", model=child_model),
        tool_name_override=HANDOFF,
        on_handoff=on_handoff,
        input_type=Task,
    )
    steps = [sdk_items(o) for o in outputs] + [[assistant_message(DONE)]] * 12
    parent = SdkAgent(
        name="parent",
        model=ScriptedModel(steps),
        tools=list(sdk_tools(effects)),
        handoffs=[to_child],
    )
    return governed(parent, policy, on_decline="feedback"), child_model


async def sdk_run(
    agent: SdkAgent[Any], stream: bool, answers: Iterator[str], approved: set[int]
) -> Any:
    """Run to the end with `Runner.run` or `Runner.run_streamed`, answering each interrupted
    call with the next answer, call by call: `"yes"`, `"always"` (`always_approve=True`, which
    the SDK keeps for every later call of the tool) or `"no"`. Only the `n` of the items a
    human answered yes go into `approved`; a rejection says why every other time."""

    async def once(given: Any) -> Any:
        if not stream:
            return await Runner.run(agent, given, run_config=SDK_CONFIG, max_turns=30)
        result = Runner.run_streamed(agent, given, run_config=SDK_CONFIG, max_turns=30)
        async for _ in result.stream_events():
            pass
        return result

    result = await once("go")
    while result.interruptions:
        state = result.to_state()
        for i, item in enumerate(result.interruptions):
            said = next(answers, "no")
            if said != "no":
                approved.add(n_of(item.raw_item.arguments))
                state.approve(item, always_approve=said == "always")
            else:
                state.reject(item, rejection_message="not this one" if i % 2 else None)
        result = await once(state)
    return result


class TestAgentsSDKHandoffs:
    """The Agents SDK on its own ScriptedModel: a handoff named `research` to a child agent."""

    @given(
        policies(hooks=True),
        turns_of_a_run(),
        st.lists(st.sampled_from(["yes", "always", "no"]), min_size=4, max_size=4),
        st.booleans(),
    )
    @example(  # one asked call approved, its sibling rejected: each keeps its own answer
        af.Policy(permissions={"sql": "ask"}, on_deny="feedback"),
        [chat_body([("c1", "sql", {"n": 9001}), ("c2", "sql", {"n": 9002})])],
        ["yes", "no", "no", "no"],
        False,
    )
    @example(  # an always on one call is no human's yes for the tool's next call
        af.Policy(permissions={"sql": "ask"}, on_deny="feedback"),
        [chat_body([("c1", "sql", {"n": 9001})]), chat_body([("c2", "sql", {"n": 9002})])],
        ["always", "no", "no", "no"],
        False,
    )
    def test_a_handoff_transfers_only_when_cleared(
        self,
        policy: af.Policy,
        outputs: list[dict[str, Any]],
        answers: list[str],
        stream: bool,
    ) -> None:
        """No denied or unapproved call runs and none twice, an `always_approve` answering
        only its own item; control passes to the child only through an allowed handoff, with
        `Runner.run` and `Runner.run_streamed`."""
        # The handoff takes only `Task`'s fields: a rule naming another argument of it is
        # refused when the Controller is built (it could never match), so it is not drawn.
        takes = set(Task.model_fields)
        assume(
            all(
                rule.tool != HANDOFF or {name for name, _ in rule.args} <= takes
                for rule in policy.permission_rules
            )
        )
        effects = SideEffects()
        parent, child_model = sdk_agents(effects, policy, outputs)
        approved: set[int] = set()
        result: Any = None
        error: Exception | None = None
        try:
            result = asyncio.run(sdk_run(parent, stream, iter(answers * 4), approved))
        except (RunError, ModelBehaviorError) as exc:
            error = exc
        if isinstance(error, ModelBehaviorError):  # the SDK's own check: ids reused across turns
            assert "reused a completed tool call ID" in str(error)
            event("the SDK refused a reused call id")
        elif error is not None:  # a handoff the hook refused: control stayed with the parent
            assert f"handoff {HANDOFF!r} not run" in str(error)
            asked = "awaits a human's approval" in str(error)
            event(f"a refused handoff ended the run (asked about: {asked})")
        calls = calls_by_n(outputs)
        check_log(effects, calls, policy, approved)
        check_cleared(cleared_by(parent_decisions(parent)), policy, approved)
        handed = [n for name, n in effects.log if name == HANDOFF]
        for n in handed:  # no human can approve a handoff through the SDK: only `allow` hands off
            assert policy.permission_for(calls[n]) == "allow"
        assert len(child_model.calls) == len(handed)
        if result is not None:
            assert (result.last_agent.name == "child") == bool(handed)
        event(f"handed off: {bool(handed)}")


# -- pydantic-ai: streamed --------------------------------------------------------------


def pydantic_stream(outputs: list[dict[str, Any]]) -> FunctionModel:
    """A FunctionModel streaming the drawn outputs in turn (their calls as deltas), then text."""
    turns = iter(outputs)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        output = next(turns, None)
        calls = raw_calls(output) if output is not None else []
        if not calls:
            yield DONE
            return
        for index, (call_id, name, arguments) in enumerate(calls):
            yield {index: DeltaToolCall(name, json.dumps(arguments), tool_call_id=call_id or None)}

    return FunctionModel(stream_function=stream)


async def streamed_once(
    agent: PydanticAgent[None, str | DeferredToolRequests], how: str, **kw: Any
) -> tuple[Any, list[ModelMessage]]:
    """One streamed run: `run_stream_events`, or `iter` streaming each model request."""
    if how == "events":
        async with agent.run_stream_events(**kw) as events:
            async for found in events:
                if found.event_kind == "agent_run_result":
                    return found.result.output, found.result.all_messages()
        raise AssertionError("the event stream ended without the run's result")
    async with agent.iter(**kw) as run:
        async for node in run:
            if PydanticAgent.is_model_request_node(node):
                streaming: Any = node.stream(run.ctx)
                async with streaming as streamed:
                    async for _ in streamed:
                        pass
        assert run.result is not None
        return run.result.output, run.result.all_messages()


async def streamed_run(
    agent: PydanticAgent[None, str | DeferredToolRequests],
    how: str,
    answers: Iterator[bool],
    approved: set[int],
) -> None:
    """Stream to the end, answering each call asked about with the next answer, call by call
    (a denial says why every other time)."""
    output, messages = await streamed_once(agent, how, user_prompt="go")
    while isinstance(output, DeferredToolRequests):
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for i, call in enumerate(output.approvals):
            yes = next(answers, False)
            if yes:
                approved.add(n_of(call.args))
            approvals[call.tool_call_id] = yes or (ToolDenied("not this one") if i % 2 else False)
        output, messages = await streamed_once(
            agent,
            how,
            message_history=messages,
            deferred_tool_results=DeferredToolResults(approvals=approvals),
        )


class TestPydanticAIStreamed:
    """pydantic-ai on its own FunctionModel, streamed through `run_stream_events` or `iter`."""

    @given(
        policies(hooks=True),
        turns_of_a_run(),
        human_answers(),
        st.sampled_from(["events", "iter"]),
    )
    @example(  # one asked call approved, its sibling denied: each keeps its own answer
        af.Policy(permissions={"sql": "ask"}, on_deny="feedback"),
        [chat_body([("c1", "sql", {"n": 9001}), ("c2", "sql", {"n": 9002})])],
        [True, False, False, False],
        "iter",
    )
    def test_no_denied_call_runs_when_streaming(
        self,
        policy: af.Policy,
        outputs: list[dict[str, Any]],
        answers: list[bool],
        how: str,
    ) -> None:
        """Streamed, no denied or unapproved call runs, and none runs twice."""
        effects = SideEffects()
        model = GovernedModel(pydantic_stream(outputs), policy, on_decline="feedback")
        agent: PydanticAgent[None, str | DeferredToolRequests] = PydanticAgent(
            model,
            toolsets=[model.toolset(effects.tools())],
            output_type=[str, DeferredToolRequests],
        )
        approved: set[int] = set()
        try:
            asyncio.run(streamed_run(agent, how, iter(answers * 4), approved))
        except UnexpectedModelBehavior:  # pydantic-ai's own limit on a tool's retries
            event("pydantic-ai ended the run (tool retries)")  # what ran before still counts
        check_log(effects, calls_by_n(outputs), policy, approved)
        check_cleared(cleared_by(model.decisions), policy, approved)
        event(f"calls ran: {bool(effects.log)}")


# -- LangGraph: a graph the user built --------------------------------------------------


def langchain_tools(effects: SideEffects) -> list[StructuredTool]:
    """The logging tools as LangChain tools."""
    return [StructuredTool.from_function(t) for t in effects.tools()]


def ai_message(output: dict[str, Any]) -> AIMessage:
    """A drawn output as the AI message a chat model returns."""
    return calls_message(raw_calls(output))


def calls_message(calls: list[Call]) -> AIMessage:
    """The AI message a chat model returns with these calls (text when none)."""
    if not calls:
        return AIMessage(content=DONE, response_metadata={"finish_reason": "stop"})
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": arguments, "id": i, "type": "tool_call"}
            for i, name, arguments in calls
        ],
        response_metadata={"finish_reason": "tool_calls"},
    )


class TestLangGraphOwnGraph:
    """`Decide.wrap` around the user's model node in their own `MessagesState` graph, with
    LangGraph's `ToolNode` and LangChain's GenericFakeChatModel."""

    @pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
    @given(
        policies(hooks=True),
        turns_of_a_run(),
        human_answers(),
    )
    @example(  # approved at the last turn: the run ends, and the asked call still gets a result
        af.Policy(
            max_turns=2,
            max_consecutive_tool_errors=1,
            on_deny="feedback",
            permissions={"sql": "allow", "research": "ask"},
        ),
        [
            chat_body([("c1", "sql", {"n": 2239})]),
            chat_body([("c1", "research", {"n": 2240, "task": "#2240"})]),
        ],
        [True, False, False, False],
    )
    @example(  # one asked call approved, its sibling declined: each keeps its own answer
        af.Policy(permissions={"sql": "ask"}, on_deny="feedback"),
        [chat_body([("c1", "sql", {"n": 9001}), ("c2", "sql", {"n": 9002})])],
        [True, False, False, False],
    )
    def test_no_denied_call_runs_in_your_graph(
        self, policy: af.Policy, outputs: list[dict[str, Any]], answers: list[bool]
    ) -> None:
        """No denied or unapproved call runs, none runs twice, and every call of every AI
        message the graph keeps has exactly one ToolMessage once the run ends."""
        effects = SideEffects()
        tools = langchain_tools(effects)
        decide = Decide(policy, tools, on_decline="feedback")
        replies = [ai_message(o) for o in outputs] + [ai_message({"choices": [{"message": {}}]})]
        fake = GenericFakeChatModel(messages=iter(replies + replies[-1:] * 12))

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [decide.adjusted(fake, state).invoke(state["messages"])]}

        builder: Any = StateGraph(MessagesState)
        builder.add_node("agent", decide.wrap(agent))
        builder.add_node("tools", ToolNode(tools, wrap_tool_call=decide.wrap_tool_call))
        builder.add_node("human", decide.human)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", decide.route, decide.destinations)
        builder.add_edge("tools", "agent")
        builder.add_conditional_edges("human", decide.route, decide.destinations)
        graph = builder.compile(checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 80}
        approved: set[int] = set()
        asked = iter(answers * 4)
        out = graph.invoke({"messages": [("user", "go")]}, config)
        while "__interrupt__" in out:
            out = graph.invoke(Command(resume=answer(out, asked, approved)), config)
        check_log(effects, calls_by_n(outputs), policy, approved)
        cleared = [
            af.ToolCall(id=c["id"], name=c["name"], arguments=c["args"])
            for d in graph.get_state(config).values["decisions"]
            if d["action"] in ("execute_tools", "handoff")
            for c in d["tool_calls"]
        ]
        check_cleared(cleared, policy, approved)
        messages = out["messages"]
        for issued, answered in exchanges(messages):  # ids may repeat across turns, not within
            assert sorted(answered) == sorted(issued), (issued, answered)
            assert len(set(issued)) == len(issued)
        ran_texts = [m.content for m in messages if isinstance(m, ToolMessage)]
        for name, n in effects.log:  # every call that ran reached the model once
            assert sum(t == f"{name} ran {n}" for t in ran_texts) == 1
        event(f"calls ran: {bool(effects.log)}")


def answer(out: dict[str, Any], asked: Iterator[bool], approved: set[int]) -> Any:
    """The resume value answering the graph's question call by call: a plain bool when every
    call gets the same answer, else `{"approved": {call_id: bool}, "messages": {...}}`."""
    calls = out["__interrupt__"][0].value["tool_calls"]
    said = {c["id"]: next(asked, False) for c in calls}
    approved.update(n_of(c.get("args")) for c in calls if said[c["id"]])
    if len(set(said.values())) <= 1:
        return next(iter(said.values()), False)
    return {"approved": said, "messages": {i: "not this one" for i, yes in said.items() if not yes}}


def exchanges(messages: list[Any]) -> list[tuple[list[str], list[str]]]:
    """Each AI message's call ids and the ids the ToolMessages after it answer."""
    found: list[tuple[list[str], list[str]]] = []
    for m in messages:
        if isinstance(m, AIMessage):
            found.append(([str(c["id"]) for c in m.tool_calls], []))
        elif isinstance(m, ToolMessage) and found:
            found[-1][1].append(m.tool_call_id)
    return found


# -- what the properties found, as plain regressions -------------------------------------


class TestFoundByTheProperties:
    """The bugs these properties found, each on its smallest example."""

    def test_an_ask_handoff_never_transfers_in_the_agents_sdk(self) -> None:
        """The SDK has no approval for handoffs: an `ask` handoff used to hand off unapproved;
        now its hook refuses it and the run ends with a RunError, the child never called."""
        effects = SideEffects()
        policy = af.Policy(permissions={HANDOFF: "ask"}, handoffs=frozenset({HANDOFF}))
        task = {"task": "t#1", "n": 1}
        parent, child_model = sdk_agents(effects, policy, [chat_body([("h1", HANDOFF, task)])])
        with pytest.raises(RunError, match="awaits a human's approval"):
            asyncio.run(sdk_run(parent, False, iter(["yes"]), set()))
        assert effects.log == []
        assert not child_model.calls

    def test_approving_a_turn_does_not_approve_its_handoff(self) -> None:
        """The SDK shows the human only the function tool of a turn that asks about both; its
        approval used to clear the handoff too, which then transferred unseen."""
        effects = SideEffects()
        policy = af.Policy(permission_rules=["ask *"])
        turn: list[tuple[str, str, dict[str, Any]]] = [
            ("c1", "sql", {"n": 5}),
            ("c2", HANDOFF, {"task": "t#6", "n": 6}),
        ]
        parent, child_model = sdk_agents(effects, policy, [chat_body(turn)])
        with pytest.raises(RunError, match="awaits a human's approval"):
            asyncio.run(sdk_run(parent, False, iter(["yes"]), set()))
        assert effects.log == [("sql", 5)]
        assert not child_model.calls

    def test_an_allowed_handoff_transfers_in_the_agents_sdk(self) -> None:
        """A cleared handoff still passes control, once."""
        effects = SideEffects()
        policy = af.Policy(handoffs=frozenset({HANDOFF}))
        task = {"task": "t#2", "n": 2}
        parent, child_model = sdk_agents(effects, policy, [chat_body([("h1", HANDOFF, task)])])
        result = asyncio.run(sdk_run(parent, False, iter([]), set()))
        assert effects.log == [(HANDOFF, 2)]
        assert result.last_agent.name == "child"
        assert len(child_model.calls) == 1

    def test_a_final_tool_ends_a_pydantic_ai_run_with_its_result(self) -> None:
        """A final tool's result used to reach a model call on an ended Controller (an error)."""
        effects = SideEffects()
        policy = af.Policy(final_tools=frozenset({"submit"}))
        model = GovernedModel(pydantic_stream([chat_body([("s1", "submit", {"n": 3})])]), policy)
        agent: PydanticAgent[None, str] = PydanticAgent(
            model, toolsets=[model.toolset(effects.tools())]
        )

        async def go() -> Any:
            async with agent.run_stream_events("go") as events:
                async for found in events:
                    if found.event_kind == "agent_run_result":
                        return found.result
            raise AssertionError("the event stream ended without the run's result")

        result = asyncio.run(go())
        assert result.output == "submit ran 3"
        assert effects.log == [("submit", 3)]

    def test_a_handoff_run_as_a_tool_goes_on_in_langgraph(self) -> None:
        """A HANDOFF decision's result used to be left unread: the next model output raised."""
        effects = SideEffects()
        decide = Decide(af.Policy(handoffs=frozenset({HANDOFF})), langchain_tools(effects))
        task = {"task": "t#4", "n": 4}
        replies = [ai_message(chat_body([("h1", HANDOFF, task)])), ai_message(chat_body([]))]
        fake = GenericFakeChatModel(messages=iter(replies))

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [fake.invoke(state["messages"])]}

        builder: Any = StateGraph(MessagesState)
        builder.add_node("agent", decide.wrap(agent))
        builder.add_node(
            "tools", ToolNode(langchain_tools(effects), wrap_tool_call=decide.wrap_tool_call)
        )
        builder.add_node("human", decide.human)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", decide.route, decide.destinations)
        builder.add_edge("tools", "agent")
        out = builder.compile().invoke({"messages": [("user", "go")]}, output_keys=["decisions"])
        assert [d["action"] for d in out["decisions"]] == ["handoff", "continue", "final"]
        assert effects.log == [(HANDOFF, 4)]
