"""LangGraph with agentfsm deciding, beside LangGraph's own `tools_condition` loop.

Both graphs run the same scripted `GenericFakeChatModel` (LangChain's own test double) and the
same real `ToolNode`; each test says what LangGraph does natively and what agentfsm does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send

import agentfsm as af
from agentfsm.integrations.langgraph import AgentState, Decide, create_agent, human_reply

A, X = af.Action, af.ExitReason


class Tools:
    """Two real LangChain tools that record every execution."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

        @tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.ran.append(("get_weather", {"city": city}))
            return f"sunny in {city}"

        @tool
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete_file", {"path": path}))
            return f"deleted {path}"

        self.all: list[BaseTool] = [get_weather, delete_file]


def call(name: str, id: str, **args: Any) -> dict[str, Any]:
    """A LangChain tool call."""
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def ai(*calls: dict[str, Any], text: str = "", finish: str | None = "tool_calls") -> AIMessage:
    """A scripted AI message, with the provider's finish claim in response_metadata."""
    metadata = {"finish_reason": finish} if finish else {}
    return AIMessage(content=text, tool_calls=list(calls), response_metadata=metadata)


ANSWER = ai(text="It is sunny in Paris.", finish="stop")
CUT = AIMessage(
    content="",
    invalid_tool_calls=[{"name": "get_weather", "args": '{"city": "Pa', "id": "c9", "error": None}],
    response_metadata={"finish_reason": "length"},
)
PARIS = ai(call("get_weather", "c1", city="Paris"))
CONFIG: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}


def model(script: list[AIMessage]) -> GenericFakeChatModel:
    """LangChain's fake chat model, replaying `script` in order."""
    messages: Iterator[AIMessage] = iter([m.model_copy() for m in script])
    return GenericFakeChatModel(messages=messages)


def native(script: list[AIMessage], tools: Tools) -> list[BaseMessage]:
    """LangGraph's own loop: the model, `tools_condition`, a ToolNode, back to the model."""

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [fake.invoke(state["messages"])]}

    fake = model(script)
    builder: Any = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools.all))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    out = builder.compile().invoke({"messages": [("user", "weather in Paris?")]}, CONFIG)
    messages: list[BaseMessage] = out["messages"]
    return messages


def governed(
    script: list[AIMessage], tools: Tools, policy: af.Policy | None = None
) -> tuple[Any, dict[str, Any]]:
    """The same loop with agentfsm deciding (the prebuilt graph), and its first result."""
    graph = create_agent(model(script), tools.all, policy, checkpointer=InMemorySaver())
    return graph, graph.invoke({"messages": [("user", "weather in Paris?")]}, CONFIG)


def actions(out: dict[str, Any]) -> list[str]:
    """The actions agentfsm decided, in order."""
    return [d["action"] for d in out["decisions"]]


def answered(messages: list[BaseMessage]) -> bool:
    """Every tool call in the history has exactly one ToolMessage."""
    ids = [str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    replies = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    return sorted(ids) == sorted(replies)


class TestToolCallsUnderStop:
    """Tool calls whose finish reason says `stop`."""

    def test_both_execute_agentfsm_names_the_conflict(self) -> None:
        """Natively the calls run; with agentfsm they run too, and P7 says structure won."""
        script = [ai(call("get_weather", "c1", city="Paris"), finish="stop"), ANSWER]
        tools = Tools()
        native(script, tools)
        assert tools.ran == [("get_weather", {"city": "Paris"})]
        tools = Tools()
        _, out = governed(script, tools)
        assert tools.ran == [("get_weather", {"city": "Paris"})]
        assert out["decisions"][0]["priority"] == "P7"
        assert actions(out) == [A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]


class TestLengthCutCall:
    """A tool call cut by the token limit (LangChain puts it in invalid_tool_calls)."""

    def test_native_ends_on_the_broken_message_agentfsm_retries(self) -> None:
        """Natively the graph ends normally on the cut message; agentfsm removes it and retries."""
        script = [CUT, PARIS, ANSWER]
        tools = Tools()
        messages = native(script, tools)
        assert messages[-1].response_metadata["finish_reason"] == "length"
        assert tools.ran == []  # the user got a broken message as the answer
        tools = Tools()
        _, out = governed(script, tools)
        assert actions(out) == [A.RETRY, A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]
        assert not any(m.invalid_tool_calls for m in out["messages"] if isinstance(m, AIMessage))
        assert tools.ran == [("get_weather", {"city": "Paris"})]
        assert out["messages"][-1].content == "It is sunny in Paris."


class TestUndeclaredTool:
    """A call to a tool nobody declared, beside a valid call."""

    def test_only_the_valid_call_runs_and_the_error_is_a_tool_message(self) -> None:
        """Natively ToolNode answers the unknown tool with an error; agentfsm never sends it."""
        script = [ai(call("get_weather", "c1", city="Paris"), call("rm_rf", "c2")), ANSWER]
        tools = Tools()
        messages = native(script, tools)
        errors = [m for m in messages if isinstance(m, ToolMessage) and m.status == "error"]
        assert [m.tool_call_id for m in errors] == ["c2"]
        tools = Tools()
        _, out = governed(script, tools)
        assert tools.ran == [("get_weather", {"city": "Paris"})]
        error = next(
            m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"
        )
        assert error.tool_call_id == "c2"
        assert "rm_rf" in str(error.content)
        assert answered(out["messages"])


class TestThirdIdenticalCall:
    """The same call made three times in a row."""

    def test_native_runs_it_every_time_agentfsm_stops_at_the_third(self) -> None:
        """Natively the loop runs until LangGraph's recursion limit; agentfsm stops (DOOM_LOOP)."""
        same = [ai(call("get_weather", f"c{i}", city="Paris")) for i in range(30)]
        tools = Tools()
        with pytest.raises(GraphRecursionError):
            native(same, tools)
        assert len(tools.ran) >= 10
        tools = Tools()
        _, out = governed(same, tools)
        assert len(tools.ran) == 2
        last = out["decisions"][-1]
        assert (last["action"], last["exit_reason"]) == (A.STOP, X.DOOM_LOOP)
        assert answered(out["messages"])  # the unexecuted third call still has a result


class TestApproval:
    """A call that needs a human's approval."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})

    def script(self) -> list[AIMessage]:
        """The model asks to delete a file, then answers."""
        return [ai(call("delete_file", "c1", path="/tmp/x")), ai(text="Deleted.", finish="stop")]

    def test_interrupt_then_approve(self) -> None:
        """Natively the call just runs; agentfsm interrupts and runs it once approved."""
        tools = Tools()
        native(self.script(), tools)
        assert tools.ran == [("delete_file", {"path": "/tmp/x"})]
        tools = Tools()
        graph, out = governed(self.script(), tools, self.POLICY)
        assert tools.ran == []
        assert out["__interrupt__"][0].value["tool_calls"][0]["name"] == "delete_file"
        out = graph.invoke(Command(resume=True), CONFIG)
        assert tools.ran == [("delete_file", {"path": "/tmp/x"})]
        assert actions(out) == [A.ASK_HUMAN, A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]

    def test_interrupt_then_decline_with_a_message(self) -> None:
        """A declined call never runs; the model reads why, as an error ToolMessage."""
        tools = Tools()
        graph, _ = governed(self.script(), tools, self.POLICY)
        out = graph.invoke(Command(resume={"approved": False, "message": "not that one"}), CONFIG)
        assert tools.ran == []
        assert any("not that one" in str(m.content) for m in out["messages"])
        assert answered(out["messages"])

    def test_a_note_with_the_approval_follows_the_results(self) -> None:
        """The human's note given with an approval reaches the model after the call's result."""
        tools = Tools()
        graph, _ = governed(self.script(), tools, self.POLICY)
        out = graph.invoke(Command(resume={"approved": True, "message": "only /tmp"}), CONFIG)
        assert tools.ran == [("delete_file", {"path": "/tmp/x"})]
        kinds = [(type(m).__name__, str(m.content)) for m in out["messages"]]
        result = next(i for i, (kind, _) in enumerate(kinds) if kind == "ToolMessage")
        assert kinds[result + 1] == ("HumanMessage", "only /tmp")
        assert actions(out) == [A.ASK_HUMAN, A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]

    @pytest.mark.parametrize(
        ("answer", "expected"),
        [(True, (True, None)), ("why?", (False, "why?")), ({"approved": "yes"}, (False, None))],
    )
    def test_resume_values(self, answer: object, expected: tuple[bool, str | None]) -> None:
        """A resume value approves only when it says True; anything unclear declines."""
        assert human_reply(answer) == expected


class TestRefusal:
    """The provider says the model refused."""

    def test_native_ends_as_if_answered_agentfsm_stops_with_refusal(self) -> None:
        """Natively the refusal is the final answer; agentfsm stops with REFUSAL, not COMPLETED."""
        refusal = AIMessage(content="I can't help.", response_metadata={"stop_reason": "refusal"})
        messages = native([refusal], Tools())
        assert messages[-1].content == "I can't help."
        _, out = governed([refusal], Tools())
        last = out["decisions"][-1]
        assert (last["action"], last["exit_reason"]) == (A.STOP, X.REFUSAL)


class TestFinalAnswer:
    """A normal final answer."""

    def test_both_end_agentfsm_says_completed(self) -> None:
        """Both graphs end with the answer; agentfsm's decision is FINAL, COMPLETED."""
        assert native([ANSWER], Tools())[-1].content == ANSWER.content
        _, out = governed([ANSWER], Tools())
        assert out["messages"][-1].content == ANSWER.content
        assert (out["decisions"][-1]["action"], out["decisions"][-1]["exit_reason"]) == (
            A.FINAL,
            X.COMPLETED,
        )


class TestIssuedIds:
    """Calls without ids get agentfsm's ids, written back into the graph's messages."""

    def test_ids_written_back(self) -> None:
        """The AI message in the state carries the issued id, and its ToolMessage answers it."""
        script = [ai(call("get_weather", "", city="Paris")), ANSWER]
        _, out = governed(script, Tools())
        message = next(m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls)
        issued = message.tool_calls[0]["id"]
        assert issued
        assert any(isinstance(m, ToolMessage) and m.tool_call_id == issued for m in out["messages"])


class TestOwnGraph:
    """`Decide` in a graph the user built, in place of `tools_condition`."""

    def test_decide_replaces_tools_condition(self) -> None:
        """Five lines turn the native graph into a governed one that stops the doom loop."""
        tools = Tools()
        fake = model([ai(call("get_weather", f"c{i}", city="Paris")) for i in range(30)])

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [fake.invoke(state["messages"])]}

        decide = Decide(af.Policy(), tools.all)
        graph = decided_graph(agent, decide, ToolNode(tools.all), human_routes=True)
        out = graph.invoke({"messages": [("user", "hi")]}, CONFIG)
        assert len(tools.ran) == 2
        assert out["decisions"][-1]["exit_reason"] == X.DOOM_LOOP


def decided_graph(agent: Any, decide: Decide, tools_node: Any, *, human_routes: bool) -> Any:
    """The agent, its tools and `decide` (and its human node) wired as a user would: the model
    and the tools both lead to `decide`, which routes; the human node routes too when
    `human_routes`."""
    builder: Any = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools_node)
    builder.add_node("decide", decide)
    builder.add_node("human", decide.human)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "decide")
    builder.add_edge("tools", "decide")
    builder.add_conditional_edges("decide", decide.route, decide.destinations)
    if human_routes:
        builder.add_conditional_edges("human", decide.route, decide.destinations)
    return builder.compile()


class Unrouted(Decide):
    """A Decide whose routing sends every call of the last AI message (a mis-mapping)."""

    def route(self, state: AgentState) -> Any:
        """Every call the model made, cleared or not, to the tools node."""
        routed = super().route(state)
        if not isinstance(routed, list):
            return routed
        last = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
        return [Send(self.tools_node, [c]) for c in last.tool_calls]


class TestMayRun:
    """The ToolNode's wrapper asks `may_run` by call id right before the tool runs."""

    def test_a_denied_call_sent_to_the_tools_never_runs(self) -> None:
        """A denied call that the routing sends to the ToolNode anyway never runs, and the
        model reads exactly one result for it."""
        tools = Tools()
        script = [
            ai(call("delete_file", "d1", path="/etc/x"), call("get_weather", "c1", city="Oslo")),
            ANSWER,
        ]
        fake = model(script)

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [fake.invoke(state["messages"])]}

        policy = af.Policy(permission_rules=["deny delete_file(path=/etc/*)"])
        decide = Unrouted(policy, tools.all)
        tools_node = ToolNode(tools.all, wrap_tool_call=decide.wrap_tool_call)
        graph = decided_graph(agent, decide, tools_node, human_routes=False)
        out = graph.invoke({"messages": [("user", "hi")]}, CONFIG)
        assert tools.ran == [("get_weather", {"city": "Oslo"})]
        assert answered(out["messages"])


class CappedFake(GenericFakeChatModel):
    """LangChain's fake chat model with a declared `max_tokens`, recording what each call got."""

    max_tokens: int = 100
    seen: list[Any] = []  # noqa: RUF012  (a pydantic field: each instance gets its own copy)

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.seen.append(kwargs.get("max_tokens"))
        return super()._generate(messages, stop, run_manager, **kwargs)


class TestRetryRaisesMaxTokens:
    """A retry after a cut output asks the model for more tokens."""

    def test_max_tokens_doubles_on_the_retry(self) -> None:
        """The call after the cut gets twice the model's max_tokens; the next call the default."""
        fake = CappedFake(
            messages=iter([CUT.model_copy(), PARIS.model_copy(), ANSWER.model_copy()])
        )
        graph = create_agent(fake, Tools().all, checkpointer=InMemorySaver())
        graph.invoke({"messages": [("user", "weather?")]}, CONFIG)
        assert fake.seen == [None, 200, None]


class TestDecline:
    """What `Command(resume=False)` means: `on_decline="stop"` (default) or `"feedback"`."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})

    def decline(self, answer: object, **options: Any) -> dict[str, Any]:
        """Run to the interrupt, resume with `answer`, and return the end state."""
        script = [ai(call("delete_file", "c1", path="/tmp/x")), ai(text="Ok.", finish="stop")]
        graph = create_agent(
            model(script), Tools().all, self.POLICY, checkpointer=InMemorySaver(), **options
        )
        graph.invoke({"messages": [("user", "delete /tmp/x")]}, CONFIG)
        out: dict[str, Any] = graph.invoke(Command(resume=answer), CONFIG)
        return out

    def test_by_default_a_plain_decline_ends_the_run(self) -> None:
        """`False` ends the run HUMAN_DECLINED without another model turn."""
        out = self.decline(False)
        assert out["decisions"][-1]["exit_reason"] == X.HUMAN_DECLINED
        assert not any(m.content == "Ok." for m in out["messages"])
        assert answered(out["messages"])

    def test_with_feedback_a_plain_decline_goes_to_the_model(self) -> None:
        """With `on_decline="feedback"` the model reads the decline and answers."""
        out = self.decline(False, on_decline="feedback")
        assert out["decisions"][-1]["exit_reason"] == X.COMPLETED
        assert out["messages"][-1].content == "Ok."
        assert any("declined by the human" in str(m.content) for m in out["messages"])

    def test_a_message_goes_to_the_model_either_way(self) -> None:
        """A decline with the human's message is told to the model, by default too."""
        out = self.decline("not that one")
        assert out["messages"][-1].content == "Ok."


class TestLoopLadder:
    """One call three times in a row under `Policy(loops=...)` (the tool echoes its argument, so
    a paraphrase would be another result: progress)."""

    def test_the_warning_follows_the_results_and_the_loop_stops(self) -> None:
        """Warn at 2, stop at 3: the second call runs and the model reads the warning as a
        human message after its result; the third never runs (DOOM_LOOP)."""
        script = [ai(call("get_weather", f"c{i}", city="Paris")) for i in range(3)]
        tools = Tools()
        policy = af.Policy(loops={"warn": 2, "ask": 0, "stop": 3})
        _, out = governed(script, tools, policy)
        assert tools.ran == [("get_weather", {"city": "Paris"})] * 2
        last = out["decisions"][-1]
        assert (last["action"], last["exit_reason"]) == (A.STOP, X.DOOM_LOOP)
        messages = out["messages"]
        warned = [m for m in messages if str(m.content).startswith("loop warning:")]
        assert len(warned) == 1
        assert isinstance(warned[0], HumanMessage)
        before = messages[messages.index(warned[0]) - 1]
        assert isinstance(before, ToolMessage)
        assert before.tool_call_id == "c1"
