"""LangGraph: agentfsm decides where the graph goes after every model output and tool batch.

`Decide.wrap(node)` makes the node that calls the model decide on its own output (and on the
tool results before it), and `Decide.route` is the routing function used in place of
`tools_condition`: no graph step is added per turn. `create_agent` builds the ReAct-style graph
with them. (`Decide` is also a node of its own, for a graph that routes through one.) Every
action maps onto LangGraph's own mechanisms:

- EXECUTE_TOOLS / HANDOFF: one `Send` to the `ToolNode` per call agentfsm lets run, and the
  `ToolNode`'s wrapper (`Decide.wrap_tool_call`) asks `Controller.may_run` by call id right
  before each tool runs;
- RETRY: the broken AI message never enters the history (a `Decide` node removes it with
  `RemoveMessage`) and the model node runs again; after a cut output `Decide.adjusted(model,
  state)` is the model with its `max_tokens` doubled, when it declares one;
- ASK_HUMAN: the `human` node calls `interrupt()`; resume with `Command(resume=True)`,
  `Command(resume=False)` or `Command(resume={"approved": ..., "message": ...})`, or call by
  call with `{"approved": {call_id: bool}, "messages": {...}, "arguments": {...}}` (edited
  arguments are checked as a new call); `"remember"` remembers the approval for a scope
  (docs/approvals.md), which the interrupt offers in its `scopes`; a decline without a
  message ends the run unless `on_decline="feedback"` (docs/integrations/README.md);
- FINAL / STOP: the graph ends; every call the model made has exactly one `ToolMessage`;
- the controller's own error results (undeclared tool, bad arguments, denied, declined)
  become `ToolMessage`s with `status="error"`, and ids the controller issued are written back
  into the AI message the graph keeps;
- the Controller's state lives in the graph state (`agentfsm`), so checkpoints carry it, and
  every decision is appended to `decisions` as plain data; a thread's input after its run
  ended starts a new run, one while it waits for a human raises RunError.

Needs the `langgraph` extra: `pip install agentfsm[langgraph]`.
"""

from __future__ import annotations

import copy
import inspect
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, TypedDict, get_type_hints

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Send, interrupt
from typing_extensions import is_typeddict

from agentfsm._engine.controller import Controller
from agentfsm._engine.events import Observer, as_observers
from agentfsm._engine.policy import Policy, as_policy, as_shadow
from agentfsm._model._checked import read
from agentfsm._model.approvals import SCOPES
from agentfsm._model.tools import ToolSpec
from agentfsm._model.types import Action, Decision, ToolCall, ToolResult
from agentfsm.exceptions import DefinitionError, InvalidInputError, RunError, ToolDefinitionError
from agentfsm.integrations import _decline
from agentfsm.integrations._state import restore, save
from agentfsm.integrations._tree import controller_in_tree, running_tools_of

__all__ = ["AgentState", "Decide", "create_agent", "human_reply"]


class AgentState(TypedDict):
    """The graph state: the messages, the Controller's saved state, and every decision."""

    messages: Annotated[list[AnyMessage], add_messages]
    agentfsm: NotRequired[dict[str, Any]]
    decisions: NotRequired[Annotated[list[dict[str, Any]], operator.add]]


_LIVE_RUNS = 256
"""Controllers kept per Decide node to skip `load` while their own data is current."""
_TO_TOOLS = frozenset({Action.EXECUTE_TOOLS, Action.HANDOFF})
_AWAITING_RESULTS = ("execute", "handoff")
"""Controller states whose pending calls the ToolNode answers (a handoff runs as a tool)."""
_TO_MODEL = frozenset({Action.RETRY, Action.CONTINUE})


def _spec(tool: BaseTool | dict[str, Any] | Any) -> Any:
    if isinstance(tool, BaseTool):
        function: dict[str, Any] = convert_to_openai_tool(tool)["function"]
        return function
    return tool


def _tool_list(tools: object, where: str) -> list[Any]:
    """`tools` as a list, or ToolDefinitionError: a string is not a list of one-letter tools."""
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ToolDefinitionError(
            f"{where}: tools must be a list of tools (LangChain tools, function specs or "
            f"names), not {type(tools).__name__}"
        )
    return list(tools)


def _lc_call(call: ToolCall) -> dict[str, Any]:
    """A call as LangChain's tool call, with a copy of its arguments: the ToolNode hands the
    record's arguments to the tool, which may edit them in place."""
    arguments = copy.deepcopy(dict(call.arguments or {}))
    return {"name": call.name, "args": arguments, "id": call.id, "type": "tool_call"}


def _tool_message(result: ToolResult) -> ToolMessage:
    content = result.content if isinstance(result.content, str | list) else str(result.content)
    return ToolMessage(
        content=content,
        tool_call_id=result.call_id,
        name=result.name,
        status="error" if result.is_error else "success",
    )


def _record(decision: Decision) -> dict[str, Any]:
    """A decision as plain data a checkpointer stores."""
    data = decision.model_dump(
        mode="json",
        include={"action", "priority", "guard", "reason", "exit_reason", "turn", "note"},
    )
    data["tool_calls"] = [_lc_call(c) for c in decision.tool_calls]
    data["adjust"] = dict(decision.adjust)
    return data


_RESUME_KEYS = ("approved", "message", "messages", "arguments", "remember")
"""The keys a `Command(resume={...})` value may hold; any other is refused."""


def _checked_resume(answer: Mapping[Any, Any], keys: Sequence[str] = _RESUME_KEYS) -> None:
    """Refuse a resume value holding a key not in `keys`: a part of the answer that would be
    dropped unread (a misspelt `argument`, say) never approves the calls as they stand.

    Raises:
        InvalidInputError: naming the unknown keys; nothing was answered.
    """
    unknown = [k for k in answer if k not in keys]
    if unknown:
        raise InvalidInputError(
            f"Command(resume=...) holds key(s) agentfsm does not read: "
            f"{', '.join(map(repr, unknown))}; a resume value is a bool, a str, or a dict of "
            f"{', '.join(map(repr, keys))}; nothing was answered"
        )


def human_reply(answer: object) -> tuple[bool, str | None]:
    """Read a `Command(resume=...)` value: a bool, a str, or `{"approved", "message"}`.

    A string is the human's message (it declines pending calls, answers a clarification);
    any other value not understood declines. A dict holding any other key (`arguments` and
    `messages`, which this reading cannot carry, included) is refused.

    Raises:
        InvalidInputError: a dict with a key other than `approved` and `message`.
    """
    if isinstance(answer, bool):
        return answer, None
    if isinstance(answer, str):
        return False, answer
    if isinstance(answer, dict):
        _checked_resume(answer, ("approved", "message"))
        approved, message = answer.get("approved"), answer.get("message")
        return approved is True, message if isinstance(message, str) else None
    return False, None


def _remembered(ctl: Controller, answer: Mapping[str, Any]) -> Any:
    """A resume value's `remember` as `on_human_reply(remember=)` takes it: `{call_id: scope}`
    as given beside a per-call `approved`, else the one scope for each asked call. The
    Controller checks it (a bad scope raises, and the run is left as it was)."""
    given = answer.get("remember")
    if given is None or isinstance(answer.get("approved"), dict):
        return given
    return {c.id: given for c in ctl.pending_calls}


def _after_tools(messages: Sequence[BaseMessage], pending: set[str]) -> list[ToolMessage]:
    found: list[ToolMessage] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        if isinstance(message, ToolMessage) and message.tool_call_id in pending:
            found.append(message)
    return found[::-1]


_ACTIONS = frozenset(a.value for a in Action)


def _decisions(state: object) -> object:
    """The state's `decisions`, or None when the state is no mapping."""
    if not isinstance(state, Mapping):
        return None
    return read("the graph state", InvalidInputError, lambda: state.get("decisions"))


def _last_decision(state: Mapping[str, Any]) -> dict[str, Any]:
    """The last decision record in the state, checked to be one `_record` wrote."""
    decisions = _decisions(state)
    if not isinstance(decisions, list) or not decisions:
        raise InvalidInputError(
            "the graph state holds no agentfsm decision: route after the node that "
            "`Decide.wrap` made (or a `Decide` node), in a graph whose state keeps "
            "AgentState's 'decisions' key with its reducer"
        )
    last = decisions[-1]
    calls = last.get("tool_calls") if type(last) is dict else None
    if (
        type(last) is not dict
        or type(last.get("action")) is not str
        or last["action"] not in _ACTIONS
        or type(calls) is not list
        or not all(type(c) is dict for c in calls)
    ):
        raise InvalidInputError(
            "the graph state's last decision is not one agentfsm recorded (a dict with an "
            f"'action' and a list of 'tool_calls'): {type(last).__name__}"
        )
    return last


def _with_ids(ctl: Controller, ai: AIMessage) -> AIMessage:
    """`ai` with the ids the controller issued to its calls, or `ai` itself if none changed."""
    issued = [c.id for c in ctl.last_output.tool_calls] if ctl.last_output else []
    valid = len(ai.tool_calls)
    if issued[: valid + len(ai.invalid_tool_calls)] == [
        c.get("id") for c in (*ai.tool_calls, *ai.invalid_tool_calls)
    ]:
        return ai
    return ai.model_copy(
        update={
            "tool_calls": [{**c, "id": i} for c, i in zip(ai.tool_calls, issued, strict=False)],
            "invalid_tool_calls": [
                {**c, "id": i} for c, i in zip(ai.invalid_tool_calls, issued[valid:], strict=False)
            ],
        }
    )


def _takes_config(node: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(node).parameters
    except (TypeError, ValueError):
        return False
    return len(parameters) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters.values())


def _with_agent_state(node: Callable[..., Any]) -> type[Any]:
    """The state a wrapped node reads: its own annotated TypedDict plus AgentState's keys."""
    try:
        hints = get_type_hints(node, include_extras=True)
        first = next(iter(inspect.signature(node).parameters), None)
    except (TypeError, ValueError, NameError):
        return AgentState
    schema = hints.get(first) if first else None
    if schema is None or schema is AgentState or not is_typeddict(schema):
        return AgentState
    keys = get_type_hints(schema, include_extras=True) | get_type_hints(
        AgentState, include_extras=True
    )
    name = f"{schema.__name__}WithAgentFSM"
    merged: type[Any] = TypedDict(name, keys, total=False)  # type: ignore[misc]
    return merged


def _so_far(state: Mapping[str, Any], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    before = state.get("decisions")
    return [*(before if isinstance(before, list) else []), *records]


class Decide:
    """A LangGraph node that asks agentfsm what follows, with the routing function and human node.

    Args:
        policy: The run's policy; `Policy()` when omitted.
        tools: The tools the model may call (LangChain tools, specs or names); None accepts any.
        agent: The name of the node that calls the model.
        tools_node: The name of the `ToolNode`.
        human: The name of the node that asks a human (`Decide.human`).
        on_decline: What a decline without a message does: `"stop"` ends the run (the
            Controller's default), `"feedback"` tells the model and goes on.
        observers: Receive every event of each run's Controller (e.g. `DecisionSpans`).
        shadow: A candidate policy judged beside `policy` on every call and recorded
            (`Decision.shadow`, the trace), never enforced; see docs/shadow.md.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        tools: Sequence[Any] | None = None,
        *,
        agent: str = "agent",
        tools_node: str = "tools",
        human: str = "human",
        on_decline: _decline.OnDecline = "stop",
        observers: Iterable[Observer] = (),
        shadow: Policy | Mapping[str, Any] | None = None,
    ) -> None:
        self.policy = _returning_direct(as_policy(policy, "Decide: policy"), tools)
        self.shadow = as_shadow(shadow, None)
        self.on_decline = _decline.checked(on_decline, "Decide")
        self.observers = as_observers(observers, "Decide")
        # Specs built once: each run's Controller then skips checking the schemas again.
        self.tools = (
            None
            if tools is None
            else [ToolSpec.from_declaration(_spec(t)) for t in _tool_list(tools, "Decide")]
        )
        for name, value in (("agent", agent), ("tools_node", tools_node), ("human", human)):
            if not isinstance(value, str) or not value:
                raise DefinitionError(f"Decide: {name} must be a node name, not {value!r}")
        self.agent, self.tools_node, self.human_node = agent, tools_node, human
        # A bad policy, shadow or tool list fails here, not mid-run.
        Controller(self.policy, self.tools, shadow=self.shadow)
        self._live: dict[str, tuple[dict[str, Any], Controller]] = {}

    def controller(self, state: Mapping[str, Any]) -> Controller:
        """The run's Controller, restored from the graph state (a new one on the first step).

        The Controller that wrote the state's data is reused while that very data object is
        what the state holds (the same process, no checkpoint read in between); any other
        data (a checkpoint, another process, an older step) is loaded with `Controller.load`.
        """
        if not isinstance(state, Mapping):
            raise InvalidInputError(
                f"the graph state must be a mapping (AgentState), not {type(state).__name__}"
            )
        data = read("the graph state", InvalidInputError, lambda: state.get("agentfsm"))
        if not data:
            return controller_in_tree(
                self.policy, self.tools, observers=self.observers, shadow=self.shadow
            )
        for saved, ctl in self._live.values():
            if saved is data:
                return ctl
        return restore(data, self.policy, self.tools, self.observers, self.shadow)

    def _for_model_step(self, ctl: Controller) -> Controller:
        """The Controller a model step decides with: a new run once the thread's run ended.

        A thread goes on after its run ended (a new input on the same `thread_id`): that is a
        new run, with budgets and decisions of its own. A run waiting for a human is not
        abandoned by a new input: the graph would start over beside calls that have no answer.

        Raises:
            RunError: the thread's run still waits for a human's answer.
        """
        if ctl.done:
            return controller_in_tree(
                self.policy, self.tools, observers=self.observers, shadow=self.shadow
            )
        if ctl.state == "await_human":
            asked = ", ".join(f"{c.name!r} ({c.id})" for c in ctl.pending_calls)
            raise RunError(
                f"this thread's run still waits for a human's answer on "
                f"{f'call(s) {asked}' if asked else 'its question'}: resume it with "
                "Command(resume=True | False | {'approved': ..., 'message': ...}) before "
                "giving the thread a new input"
            )
        return ctl

    def _forget(self, ctl: Controller) -> None:
        """Stop reusing `ctl`: a failed step may have moved it past the state's data."""
        self._live.pop(ctl.run_id, None)

    def _save(self, ctl: Controller) -> dict[str, Any]:
        data = save(ctl)
        self._live.pop(ctl.run_id, None)
        if len(self._live) >= _LIVE_RUNS:
            self._live.pop(next(iter(self._live)))
        self._live[ctl.run_id] = (data, ctl)
        return data

    def _messages(self, state: Mapping[str, Any], ctl: Controller) -> list[BaseMessage]:
        found = read("the graph state", InvalidInputError, lambda: state.get("messages"))
        if not isinstance(found, list):
            raise InvalidInputError(
                f"the graph state's 'messages' must be a list, not {type(found).__name__}",
                state=ctl.state,
                turn=ctl.turn,
            )
        return found

    def _results(
        self, ctl: Controller, state: Mapping[str, Any], messages: list[BaseMessage]
    ) -> tuple[Decision, list[Any]]:
        """Give the tool results to the Controller; the messages the graph adds after them.

        A human's note given with the approval of these calls follows their results, as a
        user message: the model reads it with them.
        """
        pending = {c.id for c in ctl.pending_calls}
        decision = ctl.on_tool_results(_after_tools(messages, pending))
        added: list[Any] = [_tool_message(r) for r in decision.results]
        note = _last_decision(state).get("note")
        if isinstance(note, str) and note:
            added.append(HumanMessage(content=note))
        return decision, added

    def _output(self, ctl: Controller, message: object) -> tuple[Decision, list[Any]]:
        """Decide on the model's message; the messages the graph keeps after it."""
        if not isinstance(message, AIMessage):
            raise InvalidInputError(
                f"the model node must add an AIMessage last, not {type(message).__name__}",
                state=ctl.state,
                turn=ctl.turn,
            )
        decision = ctl.on_model_output(message)
        if decision.action is Action.RETRY:
            return decision, []
        return decision, [_with_ids(ctl, message), *self._after_output(ctl, decision)]

    def __call__(self, state: AgentState) -> dict[str, Any]:
        """Route the last AI message, or the tool results that answer the pending calls."""
        ctl = self._for_model_step(self.controller(state))
        messages = self._messages(state, ctl)
        if ctl.state in _AWAITING_RESULTS:
            decision, added = self._results(ctl, state, messages)
            update: dict[str, Any] = {"messages": added}
        else:
            last = messages[-1] if messages else None
            decision, kept = self._output(ctl, last)
            if decision.action is Action.RETRY:
                kept = [RemoveMessage(id=getattr(last, "id", None) or "")]
            elif kept[0] is last:
                kept = kept[1:]  # the message is in the state already, ids unchanged
            update = {"messages": kept}
        return update | {"agentfsm": self._save(ctl), "decisions": [_record(decision)]}

    def wrap(self, node: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
        """The model node `node`, deciding inside it: no graph step is added per turn.

        The returned node first answers the pending calls with the tool results the state
        holds (a stop there ends the run without calling the model), then runs `node`, which
        returns `{"messages": [AIMessage, ...]}` as a model node does, and decides on the last
        message it adds. Route after it with `route`, and send the `ToolNode` back to it.
        `node` is a plain function taking `(state)` or `(state, config)`; the state it reads
        is the graph's plus `AgentState`'s keys, which the returned node declares, so a
        `MessagesState` graph works.
        """
        if not callable(node) or inspect.iscoroutinefunction(node):
            raise DefinitionError(
                f"Decide.wrap: node must be a plain (not async) function, not {node!r:.80}"
            )
        takes_config = _takes_config(node)

        def step(state: Any, config: RunnableConfig) -> dict[str, Any]:
            ctl = self._for_model_step(self.controller(state))
            try:
                return decide(ctl, state, config)
            except BaseException:
                # The state still holds the data from before this step: a retry of the node
                # (or the next step) must load it, not reuse the Controller this step moved on.
                self._forget(ctl)
                raise

        def decide(ctl: Controller, state: Any, config: RunnableConfig) -> dict[str, Any]:
            messages = self._messages(state, ctl)
            records: list[dict[str, Any]] = []
            added: list[Any] = []
            if ctl.state in _AWAITING_RESULTS:
                decision, added = self._results(ctl, state, messages)
                records.append(_record(decision))
                if decision.action is not Action.CONTINUE:
                    return {"messages": added, "agentfsm": self._save(ctl), "decisions": records}
                state = {
                    **state,
                    "messages": [*messages, *added],
                    "decisions": _so_far(state, records),
                }
            out = node(state, config) if takes_config else node(state)
            if isinstance(out, Mapping):
                out = read("the model node's output", InvalidInputError, lambda: dict(out))
            produced = out.get("messages") if type(out) is dict else None
            if not isinstance(produced, list) or not produced:
                raise InvalidInputError(
                    "the model node must return {'messages': [AIMessage, ...]}, not a "
                    f"{type(out).__name__}",
                    state=ctl.state,
                    turn=ctl.turn,
                )
            decision, kept = self._output(ctl, produced[-1])
            records.append(_record(decision))
            update = {**out, "messages": [*added, *produced[:-1], *kept]}
            return update | {"agentfsm": self._save(ctl), "decisions": records}

        step.__annotations__ = {
            "state": _with_agent_state(node),
            "config": RunnableConfig,
            "return": dict[str, Any],
        }
        step.__name__ = step.__qualname__ = getattr(node, "__name__", "agent")
        return step

    def adjusted(self, model: Runnable[Any, Any], state: Mapping[str, Any]) -> Runnable[Any, Any]:
        """`model` with what the last decision asks of the next call.

        After a RETRY of a cut output that is the model's own `max_tokens` times the retry's
        factor; a model that declares no `max_tokens` is returned unchanged.
        """
        if not isinstance(model, Runnable):
            raise DefinitionError(
                f"Decide.adjusted: model must be a LangChain Runnable, not {type(model).__name__}"
            )
        decisions = _decisions(state)
        limit = _max_tokens(model, decisions if isinstance(decisions, list) else [])
        return model if limit is None else model.bind(max_tokens=limit)

    def _after_output(self, ctl: Controller, decision: Decision) -> list[Any]:
        # A decision that ends the run answers every call of the output itself.
        return [_tool_message(r) for r in decision.results]

    def human(self, state: AgentState) -> dict[str, Any]:
        """Ask a human through `interrupt()`; the resume value approves or declines.

        `Command(resume={"approved": {call_id: bool, ...}, "messages": {call_id: text},
        "arguments": {call_id: {...}}})` answers call by call: the keys of `approved` are the
        asked calls' ids, `messages` gives a declined call its own text, and `arguments` gives
        an approved call edited arguments, which agentfsm checks as a new call (the call that
        runs, and the decision record, hold them). `messages` and `arguments` apply with a
        bool `approved` too (one answer for every asked call). A dict holding any other key
        raises InvalidInputError, the run unchanged: what agentfsm would not read never
        approves.

        `"remember"` remembers the approval for a scope (docs/approvals.md): one scope for
        every approved call with a bool `approved`, `{call_id: scope}` with a per-call one.
        The interrupt's value lists the scopes a host may offer (`scopes`); a scope that does
        not read raises InvalidInputError and nothing is answered.
        """
        ctl = self.controller(state)
        asked = _last_decision(state)
        ask = {"reason": asked["reason"], "tool_calls": asked["tool_calls"]}
        if asked["tool_calls"]:  # what `remember` takes for them, for a host to offer
            ask["scopes"] = list(SCOPES)
        answer = interrupt(ask)
        if isinstance(answer, dict):
            _checked_resume(answer)
        if isinstance(answer, dict) and (
            isinstance(answer.get("approved"), dict)
            or "messages" in answer
            or "arguments" in answer
            or ("remember" in answer and ctl.pending_calls)
        ):
            decision = self._per_call(ctl, answer)
            answered = [_tool_message(r) for r in decision.results]
            return {
                "messages": answered,
                "agentfsm": self._save(ctl),
                "decisions": [_record(decision)],
            }
        approved, message = human_reply(answer)
        had_calls = bool(ctl.pending_calls)
        if had_calls and not approved:
            message = _decline.message(self.on_decline, message)
        decision = ctl.on_human_reply(approved, message)
        out: list[Any] = [_tool_message(r) for r in decision.results]
        if message and not had_calls:
            out.append(HumanMessage(content=message))
        return {"messages": out, "agentfsm": self._save(ctl), "decisions": [_record(decision)]}

    def _per_call(self, ctl: Controller, answer: dict[str, Any]) -> Decision:
        """The Controller's decision on an answer given call by call (see `human`).

        A bool `approved` answers every asked call alike. A declined call without a text of
        its own gets the answer's `message`, else is told as `on_decline` says; an ill-formed
        answer raises InvalidInputError from the Controller, which is left unchanged.
        """
        approved: Any = answer.get("approved", False)
        if isinstance(approved, bool):
            approved = {c.id: approved for c in ctl.pending_calls}
        elif not isinstance(approved, dict):  # not understood: declines, as `human_reply` does
            approved = {c.id: False for c in ctl.pending_calls}
        message = answer.get("message")
        given = answer.get("messages", {})
        texts = dict(given) if isinstance(given, dict) else given
        if isinstance(texts, dict):
            for call_id, yes in approved.items():
                if yes is False:
                    # A call without a text of its own is declined with the human's message.
                    said = texts.pop(call_id, None) or message
                    text = _decline.message(
                        self.on_decline, said if isinstance(said, str) else None
                    )
                    if text:
                        texts[call_id] = text
        return ctl.on_human_reply(
            approved,
            message,
            messages=texts,
            arguments=answer.get("arguments"),
            remember=_remembered(ctl, answer),
        )

    def route(self, state: AgentState) -> str | list[Send]:
        """Where the graph goes after a decision: the tools, the model, a human, or the end."""
        last = _last_decision(state)
        action = Action(last["action"])
        if action in _TO_TOOLS and last["tool_calls"]:
            # Copies: the ToolNode hands a call's arguments to its tool, which may edit them,
            # and the decision record they come from stays in the graph state.
            return [Send(self.tools_node, [copy.deepcopy(call)]) for call in last["tool_calls"]]
        if action in _TO_MODEL or action in _TO_TOOLS:
            return self.agent
        if action is Action.ASK_HUMAN:
            return self.human_node
        return END

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """A `ToolNode` wrapper that runs a call only if agentfsm cleared it (`may_run`).

        The run's Controller is read from the graph state the `ToolNode` sees, and asked by
        the call's id, with its name and arguments, right before the tool runs: a call it did
        not clear never runs and the model reads why. `create_agent` installs it; a graph of
        your own passes it as `ToolNode(tools, wrap_tool_call=decide.wrap_tool_call)`.
        """
        call = request.tool_call
        state = request.state if isinstance(request.state, dict) else {}
        call_id, name, arguments = call.get("id") or "", call.get("name"), call.get("args")
        ctl = self._owner(state, call_id)
        if not isinstance(arguments, Mapping) or not ctl.may_run(call_id, name, arguments):
            if call_id not in {c.id for c in ctl.pending_calls}:
                return Command(update={})  # answered by the decision already, or unknown
            return ToolMessage(
                content=f"not executed: agentfsm did not clear call {call_id!r} of {name!r}",
                tool_call_id=call_id,
                name=name,
                status="error",
            )
        # A governed graph the tool runs (a subgraph invoked by the tool) is a child of this run.
        with running_tools_of(ctl):
            return execute(request)

    def _owner(self, state: Mapping[str, Any], call_id: str) -> Controller:
        """The Controller of the run that made call `call_id`.

        From the state the `ToolNode` reads when it holds agentfsm's key; a `ToolNode` in a
        graph whose own state lacks it (`MessagesState`) reads only the graph's keys, so the
        run is the live one in this process that awaits that call (a fresh Controller, which
        clears nothing, when none does).
        """
        if state.get("agentfsm"):
            return self.controller(state)
        for _, ctl in reversed(self._live.values()):
            if call_id in {c.id for c in ctl.pending_calls}:
                return ctl
        return self.controller({})

    @property
    def destinations(self) -> list[str]:
        """Every node `route` may return, for `add_conditional_edges`."""
        return [self.agent, self.tools_node, self.human_node, END]


def _returning_direct(policy: Policy, tools: object) -> Policy:
    """`policy` with the tools declared `return_direct=True` as final tools.

    LangGraph ends the run once such a tool has answered (its result is the output); the
    Controller does the same for a final tool, so no model call, and no call, follows it.
    """
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes):
        return policy  # Decide reports a bad tool list itself
    direct = frozenset(t.name for t in tools if isinstance(t, BaseTool) and t.return_direct is True)
    if direct <= policy.final_tools:
        return policy
    # agentfsm's `model_copy` validates and builds a new route table (pydantic's kept the old).
    return policy.model_copy(update={"final_tools": policy.final_tools | direct})


def _bind(model: BaseChatModel | Runnable[Any, Any], tools: Sequence[Any]) -> Runnable[Any, Any]:
    """The model with the tools bound; a model that cannot bind tools (a fake) is used as is."""
    bind = getattr(model, "bind_tools", None)
    if not tools or bind is None:
        return model
    try:
        bound: Runnable[Any, Any] = bind(list(tools))
    except NotImplementedError:
        return model
    return bound


def _max_tokens(model: Any, decisions: list[dict[str, Any]]) -> int | None:
    """After retries of cut outputs, the model's own `max_tokens` times their factors.

    A model with tools bound (a `RunnableBinding`) declares its wrapped model's `max_tokens`.
    """
    base = getattr(model, "max_tokens", getattr(getattr(model, "bound", None), "max_tokens", None))
    if not isinstance(base, int) or isinstance(base, bool):
        return None
    factor = 1
    for decision in reversed(decisions):
        adjust = decision.get("adjust") if type(decision) is dict else None
        if type(adjust) is not dict:
            raise InvalidInputError(
                "Decide.adjusted: the state's decisions must be the records agentfsm wrote "
                f"(dicts with an 'adjust' dict), not {type(decision).__name__}"
            )
        step = adjust.get("max_tokens_factor")
        if decision.get("action") != Action.RETRY.value or not step:
            break
        if type(step) is not int or step < 1:
            raise InvalidInputError(
                f"Decide.adjusted: a max_tokens_factor is an int >= 1, not {step!r:.40}"
            )
        factor *= step
    return base * factor if factor > 1 else None


def create_agent(
    model: BaseChatModel | Runnable[Any, Any],
    tools: Sequence[BaseTool | Any],
    policy: Policy | None = None,
    *,
    checkpointer: Any = None,
    state_schema: type[Any] = AgentState,
    on_decline: _decline.OnDecline = "stop",
    observers: Iterable[Observer] = (),
    shadow: Policy | Mapping[str, Any] | None = None,
) -> Any:
    """Build a ReAct-style graph whose every step agentfsm decides.

    Nodes: `agent` (calls the model and decides, `Decide.wrap`), `tools` (LangGraph's
    `ToolNode`), `human` (an `interrupt()`; needs a checkpointer). `on_decline`,
    `observers` and `shadow` are `Decide`'s. Returns the compiled graph.
    """
    if not isinstance(model, Runnable):
        raise DefinitionError(
            f"create_agent: model must be a LangChain chat model or Runnable, not "
            f"{type(model).__name__}"
        )
    tools = _tool_list(tools, "create_agent")
    decide = Decide(policy, tools, on_decline=on_decline, observers=observers, shadow=shadow)
    bound = _bind(model, tools)
    try:
        node = ToolNode(list(tools), wrap_tool_call=decide.wrap_tool_call)
    except (TypeError, ValueError, AttributeError) as exc:  # LangGraph could not make the tools
        raise ToolDefinitionError(
            "create_agent: LangGraph's ToolNode cannot run these tools (it needs LangChain "
            f"tools or Python functions): {exc}"
        ) from exc

    def agent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [decide.adjusted(bound, state).invoke(state["messages"], config)]}

    builder: Any = StateGraph(state_schema)
    builder.add_node("agent", decide.wrap(agent))
    builder.add_node("tools", node)
    builder.add_node("human", decide.human)
    builder.add_edge(START, "agent")
    builder.add_edge("tools", "agent")
    builder.add_conditional_edges("agent", decide.route, decide.destinations)
    builder.add_conditional_edges("human", decide.route, decide.destinations)
    return builder.compile(checkpointer=checkpointer)
