"""agentfsm in a LangGraph graph the user built: the documented program, MessagesState, retries."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Send
from typing_extensions import TypedDict

import agentfsm as af
from agentfsm.exceptions import DefinitionError, InvalidInputError
from agentfsm.integrations.langgraph import Decide
from tests.integrations.test_langgraph import CappedFake
from tests.processes import python
from tests.strategies import Raising, RaisingMapping, hostile_values

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "integrations" / "langgraph_own_graph.py"
PAGE = ROOT / "docs" / "integrations" / "langgraph.md"
CONFIG: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
KEYS = ["messages", "decisions", "agentfsm"]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def call(id: str) -> dict[str, Any]:
    """A LangChain tool call of get_weather."""
    return {"name": "get_weather", "args": {"city": "Paris"}, "id": id, "type": "tool_call"}


CUT = AIMessage(
    content="",
    invalid_tool_calls=[{"name": "get_weather", "args": '{"city": "Pa', "id": "c9", "error": None}],
    response_metadata={"finish_reason": "length"},
)
PARIS = AIMessage(
    content="", tool_calls=[call("c1")], response_metadata={"finish_reason": "tool_calls"}
)
ANSWER = AIMessage(content="Sunny.", response_metadata={"finish_reason": "stop"})


class Mine(MessagesState):
    """A user's state with a key of its own."""

    topic: str


def own_graph(model: Any, schema: type[Any], policy: af.Policy | None = None) -> Any:
    """The documented wiring on `schema`, the model called through `decide.adjusted`."""
    decide = Decide(policy or af.Policy(), [get_weather])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [decide.adjusted(model, state).invoke(state["messages"])]}

    builder: Any = StateGraph(schema)
    builder.add_node("agent", decide.wrap(agent))
    builder.add_node("tools", ToolNode([get_weather], wrap_tool_call=decide.wrap_tool_call))
    builder.add_node("human", decide.human)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", decide.route, decide.destinations)
    builder.add_edge("tools", "agent")
    builder.add_conditional_edges("human", decide.route, decide.destinations)
    return builder.compile(checkpointer=InMemorySaver())


class TestDocumentedProgram:
    """The page's "In a graph you built" block is the example program, and it runs."""

    def test_the_page_shows_the_example_verbatim(self) -> None:
        """The page's Python block in that section equals the example file."""
        section = PAGE.read_text().split("## In a graph you built", 1)[1]
        block = re.search(r"```python\n(.*?)```", section, re.S)
        assert block is not None
        assert block.group(1) == EXAMPLE.read_text()

    def test_the_example_runs_as_written(self) -> None:
        """The program runs in a fresh interpreter and prints agentfsm's decisions."""
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        done = python(str(EXAMPLE), timeout=300, cwd=ROOT, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            "sunny in Paris",
            "Sunny.",
            "['execute_tools', 'continue', 'final'] completed",
        ]


class TestMessagesState:
    """The usual `MessagesState` holds agentfsm's keys because the nodes declare them."""

    def test_a_messages_state_graph_runs_and_checkpoints_the_controller(self) -> None:
        """The run ends FINAL and the checkpoint holds a loadable Controller."""
        graph = own_graph(GenericFakeChatModel(messages=iter([PARIS, ANSWER])), MessagesState)
        out = graph.invoke({"messages": [("user", "weather?")]}, CONFIG, output_keys=KEYS)
        assert [d["action"] for d in out["decisions"]] == ["execute_tools", "continue", "final"]
        assert [m.content for m in out["messages"] if m.type == "tool"] == ["sunny in Paris"]
        saved = graph.get_state(CONFIG)
        assert saved.next == ()
        assert af.Controller.load(out["agentfsm"]).state == "end"

    def test_an_approval_pauses_and_resumes(self) -> None:
        """An ASK_HUMAN interrupts a MessagesState graph; approving runs the call once."""
        from langgraph.types import Command

        fake = GenericFakeChatModel(messages=iter([PARIS, ANSWER]))
        graph = own_graph(fake, MessagesState, af.Policy(permissions={"get_weather": "ask"}))
        paused = graph.invoke({"messages": [("user", "weather?")]}, CONFIG, output_keys=KEYS)
        assert paused["decisions"][-1]["action"] == "ask_human"
        done = graph.invoke(Command(resume=True), CONFIG, output_keys=KEYS)
        actions = [d["action"] for d in done["decisions"]]
        assert actions == ["ask_human", "execute_tools", "continue", "final"]
        assert [m.content for m in done["messages"] if m.type == "tool"] == ["sunny in Paris"]

    def test_a_state_with_its_own_keys_keeps_them(self) -> None:
        """A node annotated with a larger state still reads its own keys beside agentfsm's."""
        seen: list[str] = []
        decide = Decide(af.Policy(), [get_weather])
        fake = GenericFakeChatModel(messages=iter([ANSWER]))

        def agent(state: Mine) -> dict[str, Any]:
            seen.append(state["topic"])
            return {"messages": [fake.invoke(state["messages"])]}

        builder: Any = StateGraph(Mine)
        builder.add_node("agent", decide.wrap(agent))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", decide.route, decide.destinations)
        builder.add_node("tools", ToolNode([get_weather]))
        builder.add_node("human", decide.human)
        builder.compile().invoke({"messages": [("user", "hi")], "topic": "weather"})
        assert seen == ["weather"]

    def test_a_state_whose_decisions_cannot_accumulate_is_refused(self) -> None:
        """A state declaring `decisions` without a reducer fails when built, naming the key."""

        class Plain(TypedDict):
            messages: Annotated[list[Any], add_messages]
            decisions: list[Any]

        with pytest.raises(ValueError, match="decisions"):
            own_graph(GenericFakeChatModel(messages=iter([ANSWER])), Plain)

    def test_an_async_node_is_refused_when_wrapped(self) -> None:
        """`wrap` takes a plain function; an async one fails at once, by name."""

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": []}

        with pytest.raises(DefinitionError, match="not async"):
            Decide().wrap(agent)

    def test_routing_without_a_decision_says_what_is_missing(self) -> None:
        """Routing a state no agentfsm node wrote raises a clear error, not a KeyError."""
        with pytest.raises(InvalidInputError, match="no agentfsm decision"):
            Decide().route({"messages": []})


class TestRetryInYourGraph:
    """A RETRY after a cut output reaches the model of a graph the user built."""

    def test_max_tokens_doubles_on_the_retry(self) -> None:
        """The call after the cut gets twice the model's max_tokens; the next call the default."""
        fake = CappedFake(
            messages=iter([CUT.model_copy(), PARIS.model_copy(), ANSWER.model_copy()])
        )
        out = own_graph(fake, MessagesState).invoke(
            {"messages": [("user", "weather?")]}, CONFIG, output_keys=KEYS
        )
        assert fake.seen == [None, 200, None]
        assert out["decisions"][0]["action"] == "retry"
        assert not any(m.invalid_tool_calls for m in out["messages"] if isinstance(m, AIMessage))


class TestNoAddedSteps:
    """Deciding inside the model node adds no graph step to LangGraph's own loop."""

    def test_the_same_steps_as_tools_condition(self) -> None:
        """A turn with a tool call takes the model and tools steps only, as natively."""
        graph = own_graph(GenericFakeChatModel(messages=iter([PARIS, ANSWER])), MessagesState)
        steps = [
            next(iter(chunk))
            for chunk in graph.stream({"messages": [("user", "weather?")]}, CONFIG)
        ]
        assert steps == ["agent", "tools", "agent"]


_odd = hostile_values()
_DECISION = {"action": "execute_tools", "tool_calls": [call("c1")], "adjust": {}}


def _states() -> st.SearchStrategy[Any]:
    """Anything; or a state whose decisions, or whose last decision, holds anything."""
    decision = st.fixed_dictionaries(
        {},
        optional={"action": _odd | st.sampled_from(["retry", "final", "execute_tools"])}
        | {k: _odd for k in ("tool_calls", "adjust")},
    )
    return st.one_of(
        _odd,
        st.builds(lambda d: {"decisions": d}, _odd),
        st.builds(lambda d: {"decisions": [d]}, _odd | decision),
    )


def _copy(value: Any) -> Any:
    """New lists and dicts holding the same leaves: `==` then compares leaves by identity
    first, so a changed container is seen and a hostile leaf's `__eq__` is never asked."""
    if type(value) is list:
        return [_copy(v) for v in value]
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    return value


class TestOddArguments:
    """wrap, route and adjusted with any value: their answer, or an AgentFSMError."""

    @settings(deadline=None)
    @given(state=_states())
    @example(state={"decisions": [None]})
    @example(state={"decisions": [{}]})
    @example(state={"decisions": [{"action": "bogus", "tool_calls": []}]})
    @example(state={"decisions": [{"action": "execute_tools", "tool_calls": Raising()}]})
    @example(state={"decisions": [{"action": "execute_tools", "tool_calls": [3]}]})
    @example(state={"decisions": [{"action": Raising()}]})
    @example(state=RaisingMapping())
    def test_route(self, state: Any) -> None:
        """route(state): a destination, or InvalidInputError; the state is not changed."""
        decide = Decide()
        before = _copy(state)
        try:
            where = decide.route(state)
        except InvalidInputError:  # any other error, agentfsm's or not, fails the test
            where = END
        if isinstance(where, list):
            assert all(isinstance(s, Send) and s.node == "tools" for s in where)
        else:
            assert where in decide.destinations
        assert before is state or before == state

    @settings(deadline=None)
    @given(model=_odd | st.just(CappedFake(messages=iter([]))), state=_states())
    @example(model=CappedFake(messages=iter([])), state={"decisions": [{"action": "retry"}]})
    @example(
        model=CappedFake(messages=iter([])),
        state={"decisions": [{"action": "retry", "adjust": {"max_tokens_factor": "x"}}]},
    )
    @example(
        model=CappedFake(messages=iter([])),
        state={"decisions": [{"action": "retry", "adjust": {"max_tokens_factor": float("inf")}}]},
    )
    @example(model=CappedFake(messages=iter([])), state={"decisions": [3]})
    @example(model=CappedFake(messages=iter([])), state={"decisions": [{"adjust": None}]})
    @example(model=CappedFake(messages=iter([])), state=RaisingMapping())
    @example(model=Raising(), state={})
    def test_adjusted(self, model: Any, state: Any) -> None:
        """adjusted(model, state): a Runnable, or an AgentFSMError naming the bad value."""
        try:
            adjusted = Decide().adjusted(model, state)
        except (DefinitionError, InvalidInputError):  # any other error fails the test
            return
        assert isinstance(adjusted, Runnable)

    @settings(deadline=None)
    @given(node=_odd, out=_odd, state=_states())
    @example(node=None, out=Raising(), state={"messages": []})
    @example(node=None, out={"messages": [Raising()]}, state={"messages": []})
    @example(node=None, out={"messages": [ANSWER]}, state=RaisingMapping())
    @example(node=None, out=RaisingMapping(), state={"messages": []})
    def test_wrap(self, node: Any, out: Any, state: Any) -> None:
        """wrap(anything) is refused or wraps; the wrapped node of a function returning
        anything, on any state, updates the state or raises InvalidInputError, changing
        neither the state nor the function's output."""
        with contextlib.suppress(DefinitionError):
            Decide().wrap(node)
        decide = Decide()
        step = decide.wrap(lambda state: out)
        before, given = _copy(state), _copy(out)
        try:
            update = step(state, {})
        except InvalidInputError:  # any other error, agentfsm's or not, fails the test
            update = {"decisions": [], "agentfsm": None}
        assert isinstance(update["decisions"], list)
        assert before is state or before == state
        assert given is out or given == out

    def test_a_failed_step_does_not_move_the_run_the_state_holds(self) -> None:
        """A wrapped node that answered the tool results and then got a bad model output
        left its live Controller past the state's data; the node run again on that state
        skipped the results' decision. It now decides as a fresh process would."""
        replies: list[Any] = [{"messages": [PARIS]}]
        decide = Decide(af.Policy(), [get_weather])
        step = decide.wrap(lambda state: replies[0])
        first = step({"messages": [HumanMessage("weather?")]}, {})
        ai = first["messages"][-1]
        state = {
            "messages": [HumanMessage("weather?"), ai, ToolMessage("sunny", tool_call_id="c1")],
            "agentfsm": first["agentfsm"],
            "decisions": first["decisions"],
        }
        replies[0] = {"messages": []}
        with pytest.raises(InvalidInputError, match="must return"):
            step(state, {})
        replies[0] = {"messages": [ANSWER]}
        again = step(state, {})
        fresh = Decide(af.Policy(), [get_weather]).wrap(lambda state: replies[0])(state, {})
        assert [d["action"] for d in again["decisions"]] == ["continue", "final"]
        assert again["decisions"] == fresh["decisions"]
