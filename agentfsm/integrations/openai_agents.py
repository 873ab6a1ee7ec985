"""OpenAI Agents SDK: agentfsm decides each turn through a `Model` wrapper in front of `Runner`.

`governed(agent, policy)` returns a clone of the agent whose model is wrapped; nothing else
about the agent or the `Runner` call changes. After every model response the wrapper asks the
Controller and maps its decision onto what the SDK already does:

- EXECUTE_TOOLS / HANDOFF: the response goes on with only the calls agentfsm lets run, its call
  items rebuilt from agentfsm's calls by call id (a `parallel` wrapper's calls become items of
  their own); a call it refused (undeclared tool, broken arguments, denied) is removed from the
  output, so the SDK neither crashes with `ModelBehaviorError` nor runs half a call, and that
  call with the controller's error result is put back into the next request so the model reads
  why; each tool asks `may_run` by call id right before it runs, and each handoff (its hook
  gets no call id) by the id of the pending call it matches (see `_guarded`);
- RETRY: the model is called again inside the same turn, without the broken output (a cut
  output doubles `max_tokens` when one was set); the usage of every attempt is counted
  (streamed runs count only the accepted attempt's);
- ASK_HUMAN: the SDK's own approval flow: the call's tool reports `needs_approval`, the run
  returns with `result.interruptions`, and `state.approve(...)` / `state.reject(...)` resume it,
  each item its own answer (a rejection without a `rejection_message` ends the run unless
  `on_decline="feedback"`); `remember(result, item, scope)` beside `state.approve(item)`
  remembers that approval for a scope (docs/approvals.md; the SDK's `always_approve=True`
  is not one: it stays a yes for its own item only);
  the allowed calls of the same turn are held, then handed to the SDK once approved (a response
  of their own, no model call) or answered with the decline's error;
- CONTINUE after an answer that fails the completion checks: the model is called again;
- FINAL: the response goes on unchanged and the SDK ends the run with it; after a final
  tool's result the SDK gets that result as the final output, without a model call;
- STOP: the run ends with a final message `"[agentfsm stop: <exit reason>] <reason>"`, so
  `result.final_output` shows it; `decisions(result)` lists every decision, RETRY included.

The SDK's own approval holds beside the policy, the strongest verdict winning: a tool's own
`needs_approval` (a bool, or a callable asked before the decision) makes a call the policy allows
an ASK_HUMAN; a policy deny still denies. The MCP servers' tools are governed like function tools
(`_GovernedAgent.get_all_tools` wraps every tool of each turn); a tool that is not a function tool
(hosted, computer, shell, apply-patch, custom) is refused with a DefinitionError.

Streaming (`Runner.run_streamed`) is supported. By default (`stream="text"`) the events that only
show text (text, refusal and reasoning deltas, message parts, the response's start) are passed on
as they arrive and only the tool-call events and the terminal event wait for the decision: text
appears token by token, and a retried attempt's text may already have been shown
(`decisions(result)` lists the RETRY). With `governed(agent, policy, stream="held")` every event
of a response is held until agentfsm has decided on it, then released (the terminal event
carrying the filtered output), so nothing of a retried or refused attempt reaches the consumer. One
governed agent serves one run at a time; a run that does not carry on the last run's calls (an
interrupted run never resumed, one ended by `stop_on_first_tool`) gets a new Controller. Needs
the `openai-agents` extra.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from agents import Agent, FunctionTool, ModelSettings, RunContextWrapper
from agents.exceptions import AgentsException
from agents.handoffs import Handoff, handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.models.multi_provider import MultiProvider
from agents.result import RunResultBase
from agents.tool import DEFAULT_APPROVAL_REJECTION_MESSAGE, Tool
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agentfsm._engine.controller import Controller
from agentfsm._engine.events import Observer, as_observers
from agentfsm._engine.policy import Policy, as_policy, as_shadow
from agentfsm._model.types import Action, Decision, ModelTurn, ToolCall, ToolResult
from agentfsm._permissions import Permission
from agentfsm.exceptions import AgentFSMError, DefinitionError, InvalidInputError, RunError
from agentfsm.integrations import _decline
from agentfsm.integrations._tree import (
    ShowBudget,
    budget_text,
    checked_show_budget,
    controller_in_tree,
    running_tools_of,
)
from agentfsm.providers import normalize
from agentfsm.states._approvals import scope_of

__all__ = ["GovernedModel", "decisions", "governed", "remember"]

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_TEXT_ONLY = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
    }
)
"""Stream events that only show text: with `stream="text"` they are not held for the decision."""
_CALL_ITEMS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
    }
)
"""Output items the SDK would execute: only the calls agentfsm cleared reach it."""
_CLEARING = frozenset({Action.EXECUTE_TOOLS, Action.HANDOFF, Action.ASK_HUMAN})
StreamMode = Literal["held", "text"]


def _dump(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    data: dict[str, Any] = item.model_dump(exclude_none=True)
    return data


def _stop_message(decision: Decision) -> ResponseOutputMessage:
    return _message("agentfsm_stop", f"[agentfsm stop: {decision.exit_reason}] {decision.reason}")


def _final_text(decision: Decision) -> str:
    """A FINAL's answer as the text that ends the run (a final tool's result, as text)."""
    answer = decision.answer
    return answer if isinstance(answer, str) else "" if answer is None else json.dumps(answer)


def _message(item_id: str, text: str) -> ResponseOutputMessage:
    """An assistant message the SDK reads as the run's final output."""
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _call_item(call: ToolCall, original: Any) -> ResponseFunctionToolCall:
    """The function_call item of a call agentfsm decided on: its id, name and arguments.

    `original` is the model's item with the same call id and name, if there is one: its item id
    and namespace are kept so the history still refers to what the model produced.
    """
    arguments = json.dumps(call.arguments or {})
    if isinstance(original, ResponseFunctionToolCall):
        return original.model_copy(update={"call_id": call.id, "arguments": arguments})
    return ResponseFunctionToolCall(
        type="function_call", call_id=call.id, name=call.name, arguments=arguments
    )


def _originals(output: list[Any]) -> dict[tuple[str, str], Any]:
    """The model's function_call items by (call id, name), the first of each."""
    found: dict[tuple[str, str], Any] = {}
    for item in output:
        if isinstance(item, ResponseFunctionToolCall):
            found.setdefault((item.call_id, item.name), item)
    return found


def _placed(output: list[Any], calls: list[Any]) -> list[Any]:
    """`output` without its call items, `calls` standing where the first of them stood."""
    shaped: list[Any] = []
    placed = False
    for item in output:
        if getattr(item, "type", None) not in _CALL_ITEMS:
            shaped.append(item)
        elif not placed:
            shaped += calls
            placed = True
    return shaped if placed else [*shaped, *calls]


def _about_a_call(event: Any) -> bool:
    """Whether a stream event carries (part of) a call item."""
    kind = str(getattr(event, "type", ""))
    if kind.startswith(("response.function_call_arguments", "response.custom_tool_call_input")):
        return True
    return getattr(getattr(event, "item", None), "type", None) in _CALL_ITEMS


def _completed(output: list[Any], number: int) -> ResponseCompletedEvent:
    """The terminal stream event of a response made of `output`, not of a model call."""
    response = Response(
        id="agentfsm",
        created_at=0,
        model="agentfsm",
        object="response",
        output=output,
        tool_choice="auto",
        tools=[],
        parallel_tool_calls=True,
        status="completed",
    )
    return ResponseCompletedEvent(
        type="response.completed", response=response, sequence_number=number
    )


def _declared(tools: Sequence[Any], handoffs: Sequence[Any]) -> list[dict[str, Any]]:
    specs = [
        {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
        for t in tools
        if isinstance(t, FunctionTool)
    ]
    specs += [
        {"name": h.tool_name, "description": h.tool_description, "parameters": h.input_json_schema}
        for h in handoffs
    ]
    return specs


class GovernedModel(Model):
    """A `Model` that asks agentfsm about every response of the model it wraps.

    Args:
        inner: The model that really answers.
        policy: The run's policy; `Policy()` when omitted.
        stream: `"text"` (the default) passes the events that only show text on as they
            arrive; `"held"` holds a streamed response's events until the decision (see the
            module's docstring).
        on_decline: What a rejection without a message of its own does: `"stop"` ends the run
            (the Controller's default), `"feedback"` tells the model and goes on.
        observers: Receive every event of each run's Controller (e.g. `DecisionSpans`).
        shadow: A candidate policy judged beside `policy` on every call and recorded
            (`Decision.shadow`, the trace), never enforced; see docs/shadow.md.
    """

    def __init__(
        self,
        inner: Model,
        policy: Policy | None = None,
        stream: StreamMode = "text",
        *,
        on_decline: _decline.OnDecline = "stop",
        observers: Iterable[Observer] = (),
        shadow: Policy | Mapping[str, Any] | None = None,
        show_budget: ShowBudget = False,
    ) -> None:
        if stream not in ("held", "text"):
            raise DefinitionError(f"stream must be 'held' or 'text', not {stream!r}")
        if not isinstance(inner, Model):
            raise DefinitionError(
                f"GovernedModel wraps an Agents SDK Model, not {type(inner).__name__}"
            )
        self.inner = inner
        self.stream = stream
        self.policy = as_policy(policy, "GovernedModel: policy")
        self.shadow = as_shadow(shadow, None)
        self.on_decline = _decline.checked(on_decline, "GovernedModel")
        self.observers = as_observers(observers, "GovernedModel")
        self.show_budget = checked_show_budget(show_budget, "GovernedModel")
        self.controller: Controller | None = None
        self.decisions: list[Decision] = []
        self._scopes: dict[str, Any] = {}
        """The scopes `remember` gave the asked calls' approvals, by call id."""
        self._carry: list[dict[str, Any]] = []
        self._held: list[ToolCall] = []
        self._started: set[str] = set()
        self._stop: Decision | None = None
        self._asked: set[str] = set()
        """The ids of the calls the turn's question to a human is about."""
        self._shown: set[str] = set()
        """The ids of the asked calls the SDK interrupted the run on: a human saw them."""
        self._own: dict[str, list[Any]] = {}
        """Each tool's own `needs_approval` setting (the SDK's approval flag), by tool name."""
        self._own_said: dict[str, bool] = {}
        """What the callable settings said about the current response's calls, by `_key`."""
        self.handed_by: Controller | None = None
        """The Controller of the governed run that handed off to this agent, for its next run."""
        self.context: RunContextWrapper[Any] | None = None
        """The run's context, as the SDK gives it to the tools: a callable setting reads it."""
        # The Controller's policy: the given one, and the tools' own approval flags beside it
        # (the strongest verdict wins, as between the policy's own sources).
        self._ruled = self.policy.model_copy(update={"permission": self._permission})
        # The shadow is judged as the policy is: the tools' own flags count beside it too.
        self._shadow = (
            None
            if self.shadow is None
            else self.shadow.model_copy(update={"permission": self._shadow_permission})
        )

    # -- the run's Controller --------------------------------------------------------------

    def _start(
        self,
        tools: Sequence[Any],
        handoffs: Sequence[Any],
        input: str | list[TResponseInputItem],
    ) -> Controller:
        """The run's Controller: the current one while the SDK's input carries on its run,
        else a new one.

        A run left interrupted (never resumed) or ended by the SDK itself (a tool that stops
        the run, `stop_on_first_tool`, an error) leaves its Controller waiting; the next
        `Runner.run` is a new run and must not inherit its question, decisions or budgets.
        """
        ctl = self.controller
        if ctl is None or (ctl.done and self._stop is None) or not _continues(ctl, input):
            # Declared even when empty: a rule or permission naming no tool the model can call
            # is refused, and a call of a name the model was not given is never cleared.
            declared = _declared(tools, handoffs)
            # A run handed off to, or run as a tool of another governed run, is its child.
            ctl = self.controller = controller_in_tree(
                self._ruled,
                declared,
                caller=self.handed_by,
                observers=self.observers,
                shadow=self._shadow,
            )
            self.handed_by = None
            self.decisions, self._carry, self._held, self._started = [], [], [], set()
            self._asked, self._shown, self._stop = set(), set(), None
            self._scopes = {}
        return ctl

    def _decide(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        # A stop decided while the SDK runs tools is reported on its next model call.
        self._stop = decision if decision.action is Action.STOP else None
        return decision

    # -- the tools' own approval flags ------------------------------------------------------

    def keep_own_approval(self, tool: FunctionTool) -> None:
        """Count `tool.needs_approval` (the SDK's own flag, a bool or a callable) in every
        decision on a call of `tool.name`: a call it marks asks a human even where the
        policy allows it; the policy's deny still denies."""
        setting = tool.needs_approval
        if setting is not False and not any(s is setting for s in self._own.get(tool.name, [])):
            self._own.setdefault(tool.name, []).append(setting)

    def _permission(self, call: ToolCall) -> Permission:
        """The policy's verdict on `call`, raised to `ask` when the tool's own flag asks."""
        return self._with_flags(self.policy, call)

    def _shadow_permission(self, call: ToolCall) -> Permission:
        """The shadow's verdict on `call`, raised to `ask` when the tool's own flag asks."""
        assert self.shadow is not None  # only the shadow's copy holds this hook
        return self._with_flags(self.shadow, call)

    def _with_flags(self, policy: Policy, call: ToolCall) -> Permission:
        # Without the Cedar source: the hook has no run history to give it, and the policy
        # this hook sits in (`_ruled`) asks Cedar itself, with the history.
        verdict = policy.native_verdict(call)[0]
        if verdict == "allow" and self._framework_asks(call):
            return "ask"
        return verdict

    def _framework_asks(self, call: ToolCall) -> bool:
        """Whether the SDK itself would ask a human before running `call`.

        A callable setting was asked before the decision (`_ask_own`); one that could not be
        asked (no run context, broken arguments), and any setting that is neither a bool nor
        a callable, asks.
        """
        for setting in self._own.get(call.name, ()):
            if setting is True or not (callable(setting) or setting is False):
                return True
            if callable(setting) and self._own_said.get(_key(call), True):
                return True
        return False

    async def _ask_own(self, turn: ModelTurn) -> None:
        """Ask the callable `needs_approval` settings about the turn's calls, as the SDK
        would ask them (run context, parsed arguments, call id), before the Controller
        decides: it cannot wait for an awaitable itself."""
        self._own_said = {}
        for call in turn.tool_calls:
            settings = [s for s in self._own.get(call.name, ()) if callable(s)]
            if not settings or self.context is None or not isinstance(call.arguments, Mapping):
                continue
            # Each check gets a copy: one that edits its arguments must not edit the call.
            said = [
                await _asks(s, self.context, copy.deepcopy(dict(call.arguments)), call.id)
                for s in settings
            ]
            key = _key(call)
            self._own_said[key] = self._own_said.get(key, False) or any(said)

    async def _decide_on(self, payload: Any) -> Decision:
        """The Controller's decision on one model output, the tools' own flags asked first."""
        turn = normalize(payload)
        await self._ask_own(turn)
        assert self.controller is not None
        return self._decide(self.controller.on_model_output(turn))

    def govern_tools(self, tools: Sequence[Tool], context: RunContextWrapper[Any]) -> list[Tool]:
        """The tools the SDK runs this turn, each asking agentfsm before it runs.

        Called with the agent's every tool, those of its MCP servers included: a function tool
        `governed` has not wrapped yet (an MCP server's, say) is wrapped now, and its own
        approval flag counts. A tool that is not a function tool is refused: the SDK or the
        model provider's server would run it without a call agentfsm can check first.
        """
        self.context = context
        ruled: list[Tool] = []
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                raise DefinitionError(_unsupported(tool))
            ruled.append(tool if _wrapped_by(tool, self) else _approval(self, tool))
        return ruled

    # -- the SDK's approval flow -------------------------------------------------------------

    def needs_approval(self, call_id: str) -> bool:
        """Whether agentfsm is waiting for a human to approve this call."""
        ctl = self.controller
        return (
            ctl is not None
            and ctl.state == "await_human"
            and any(c.id == call_id for c in ctl.pending_calls)
        )

    def _show(self, call_id: str) -> bool:
        """Whether the SDK must ask a human about this call; one it must is noted as shown.

        The SDK asks this only of a call it holds no answer for, and interrupts the run on a
        yes: the call is then among `result.interruptions`, seen by a human.
        """
        asks = self.needs_approval(call_id)
        if asks:
            self._shown.add(call_id)
        return asks

    def approved(self, call_id: str, context: object) -> None:
        """The SDK runs an approved call: give the Controller the human's answer on each
        call asked about, as the SDK's run context holds it (`state.approve(item)` and
        `state.reject(item)` answer call by call).

        Each asked call needs a yes of its own: `state.approve(item)` records one for the
        item's call id. `state.approve(item, always_approve=True)` records only a standing yes
        for the tool, which the SDK also applies to later calls of it without asking anyone:
        it counts as a yes only for the item it was given on, the one call of that tool the
        run was interrupted on that has no answer of its own. Every other call is declined
        with its own rejection message (an unanswered one, or one the standing yes alone
        would run, is declined too: the human did not approve it).
        """
        ctl = self.controller
        if ctl is None or not self.needs_approval(call_id):
            return
        answers = {c.id: _answer(context, c) for c in ctl.pending_calls}
        approved: dict[str, bool] = {}
        messages: dict[str, str] = {}
        for call in ctl.pending_calls:
            approved[call.id] = answers[call.id] is True or self._given_on(call, ctl, answers)
            if approved[call.id]:
                continue
            said = _STANDING if answers[call.id] == "standing" else _rejection(context, call)
            text = _decline.message(self.on_decline, said, (DEFAULT_APPROVAL_REJECTION_MESSAGE,))
            if text:
                messages[call.id] = text
        # What `remember` gave an approved call holds for it; a rejected one remembers nothing.
        scopes, self._scopes = self._scopes, {}
        remember = {i: v for i, v in scopes.items() if approved.get(i)} or None
        self._decide(ctl.on_human_reply(approved, messages=messages, remember=remember))

    def _given_on(
        self, call: ToolCall, ctl: Controller, answers: Mapping[str, bool | str | None]
    ) -> bool:
        """Whether a standing yes (`always_approve=True`) was given on `call`'s own item: it
        was shown, and is the only shown call of its tool that has no answer of its own."""
        if answers[call.id] != "standing" or call.id not in self._shown:
            return False
        standing = [
            c.id
            for c in ctl.pending_calls
            if c.name == call.name and c.id in self._shown and answers[c.id] == "standing"
        ]
        return standing == [call.id]

    def may_run(self, call_id: str, name: str, arguments: str) -> bool:
        """Whether the SDK may execute this call now: agentfsm cleared it, and it has not run.

        Asked by the tool wrapper right before the tool runs, with the call as the SDK holds
        it; arguments that are not a JSON object never run.
        """
        ctl = self.controller
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return False
        if ctl is None or call_id in self._started or not isinstance(parsed, Mapping):
            return False
        if not ctl.may_run(call_id, name, parsed):
            return False
        self._started.add(call_id)
        return True

    def may_hand_off(self, name: str, arguments: str) -> bool:
        """Whether the SDK may run this handoff now, matched by the item the SDK processed.

        The SDK's handoff hook gets no call id. The SDK only holds the call items `_shape`
        rebuilt from agentfsm's calls, so the item it processed is the pending call of this
        name with these arguments that has not run: `may_run` is asked by that call's id.
        No such call, or more than one, hands off nothing; nor does a handoff a human was
        asked about: the SDK's approval flow shows function tools only, so an approval there
        never saw the handoff.
        """
        ctl = self.controller
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return False
        if ctl is None or not isinstance(parsed, Mapping):
            return False
        matches = [
            c
            for c in ctl.pending_calls
            if c.name == name
            and (c.arguments or {}) == dict(parsed)
            and c.id not in self._started | self._asked
        ]
        return len(matches) == 1 and self.may_run(matches[0].id, name, arguments)

    def asked_about(self, name: str) -> bool:
        """Whether the turn's question to a human is about a call of `name`."""
        ctl = self.controller
        turn = ctl.last_output.tool_calls if ctl is not None and ctl.last_output else []
        return any(c.name == name and c.id in self._asked for c in turn)

    def _feed_results(self, items: list[dict[str, Any]]) -> Decision | None:
        """Give the Controller the outputs (or the human's rejections) of its pending calls."""
        ctl = self.controller
        # A HANDOFF awaits its call's result as EXECUTE_TOOLS does (a handoff run as a tool).
        if ctl is None or ctl.state not in ("execute", "handoff", "await_human"):
            return None
        pending = {c.id for c in ctl.pending_calls}
        outputs = {
            i["call_id"]: i.get("output", "")
            for i in items
            if i.get("type") == "function_call_output" and i.get("call_id") in pending
        }
        if ctl.state == "await_human":  # the SDK sent rejections instead of running the calls
            decision = self._decide(ctl.on_human_reply(False, messages=self._rejected(outputs)))
        else:
            results = [
                ToolResult(
                    call_id=k, content=v if isinstance(v, str) else json.dumps(v, default=str)
                )
                for k, v in outputs.items()
            ]
            decision = self._decide(ctl.on_tool_results(results))
        self._answer_held(decision)
        return decision

    def _rejected(self, outputs: Mapping[str, Any]) -> dict[str, str]:
        """Each rejected call's own message, from the outputs the SDK wrote for them."""
        messages: dict[str, str] = {}
        for call_id, text in outputs.items():
            said = text if isinstance(text, str) else None
            message = _decline.message(self.on_decline, said, (DEFAULT_APPROVAL_REJECTION_MESSAGE,))
            if message:
                messages[call_id] = message
        return messages

    def _answer_held(self, decision: Decision) -> None:
        """Carry the results a decision gave the held calls: the SDK never saw those calls."""
        held = {c.id: c for c in self._held}
        for result in decision.results:
            call = held.pop(result.call_id, None)
            if call is not None:
                self._refuse(call, None, result)
        self._held = list(held.values())

    def _refuse(self, call: ToolCall, original: Any, result: ToolResult) -> None:
        """Put a call the SDK does not run, with its result, into the next request."""
        self._carry += [
            _dump(_call_item(call, original)),
            {"type": "function_call_output", "call_id": call.id, "output": str(result.content)},
        ]

    def _release(self) -> list[Any]:
        """The held calls as items for the SDK to run, once the human approved their turn."""
        ctl = self.controller
        if not self._held or ctl is None or ctl.state != "execute":
            return []
        calls, self._held = self._held, []
        return [_call_item(c, None) for c in calls if ctl.may_run(c.id)]

    def _before_model(self, input: str | list[TResponseInputItem]) -> list[Any] | None:
        """What the SDK gets without a model call (held calls, or a stop), else None."""
        released = self._release()
        if released:
            return released
        fed = self._feed_results([] if isinstance(input, str) else [_dump(i) for i in input])
        stop, self._stop = self._stop, None
        if stop is not None:
            return [_stop_message(stop)]
        if fed is not None and fed.action is Action.FINAL:  # a final tool's result ends the run
            return [_message("agentfsm_final", _final_text(fed))]
        return None

    # -- turning a decision into the response the SDK reads ----------------------------------

    def _shape(self, output: list[Any], decision: Decision) -> list[Any]:
        """The output the SDK should act on: its call items are the calls agentfsm cleared.

        Every call item is rebuilt from agentfsm's calls, matched by call id: the calls a
        `parallel` wrapper carries become items of their own, ids agentfsm issued replace
        missing and duplicate ones, and a call it refused is carried to the next request with
        its error result. Allowed calls of a turn that awaits a human are held until the
        human answers. Any other call item never reaches the SDK.
        """
        if decision.action is Action.STOP:
            self._stop = None
            return [_stop_message(decision)]
        ctl = self.controller
        turn = ctl.last_output.tool_calls if ctl is not None and ctl.last_output else []
        self._started = set()  # a model may use an id again in a later turn
        self._shown = set()
        asking = decision.action is Action.ASK_HUMAN
        self._asked = {c.id for c in decision.tool_calls} if asking else set()
        cleared = {c.id for c in decision.tool_calls} if decision.action in _CLEARING else set()
        refused = {r.call_id: r for r in decision.results}
        originals = _originals(output)
        calls: list[Any] = []
        for call in turn:
            original = originals.get((call.id, call.name))
            if call.id in cleared:
                calls.append(_call_item(call, original))
            elif call.id in refused:
                self._refuse(call, original, refused[call.id])
            elif decision.action is Action.ASK_HUMAN:
                self._held.append(call)
        if decision.note and cleared:
            # A note (the loop ladder's warning) is for the model: a user message after the
            # results of the calls it speaks of, in the next request.
            self._carry.append({"role": "user", "content": decision.note})
        return _placed(output, calls)

    def _next_input(self, input: str | list[TResponseInputItem]) -> str | list[TResponseInputItem]:
        if not self._carry:
            return input
        items: list[Any] = (
            [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        )
        return [*items, *self._carry]

    @staticmethod
    def _settings(settings: ModelSettings, decision: Decision) -> ModelSettings:
        factor = decision.adjust.get("max_tokens_factor")
        if factor and settings.max_tokens:
            return dataclasses.replace(settings, max_tokens=int(settings.max_tokens * factor))
        return settings

    def _with_budget(self, instructions: str | None) -> str | None:
        """The system instructions with what the run tree has left, when the host asked."""
        said = budget_text(self.controller, self.show_budget)
        if said is None:
            return instructions
        return f"{instructions}\n\n{said}" if instructions else said

    # -- the Model interface -------------------------------------------------------------

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        """Call the wrapped model until agentfsm accepts a response, and shape it."""
        self._start(tools, handoffs, input)
        usage = Usage()
        early = self._before_model(input)
        if early is not None:
            return ModelResponse(output=early, usage=usage, response_id=None)
        while True:
            response = await self.inner.get_response(
                self._with_budget(system_instructions),
                self._next_input(input),
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            usage.add(response.usage)
            decision = await self._decide_on(response)
            if decision.action is Action.RETRY:
                model_settings = self._settings(model_settings, decision)
                continue
            if decision.action is Action.CONTINUE:  # refused calls, or a refused answer
                input = self._continued(input, response, decision)
                continue
            self._carry = []
            output = self._shape(list(response.output), decision)
            return dataclasses.replace(response, output=output, usage=usage)

    def _continued(
        self, input: str | list[TResponseInputItem], response: ModelResponse, decision: Decision
    ) -> list[Any]:
        """The next request after a CONTINUE: what the model read, its output, and every
        call it made answered by its error result."""
        seen = self._as_items(self._next_input(input))
        self._carry = []
        shaped = dataclasses.replace(response, output=self._shape(list(response.output), decision))
        items = [*seen, *shaped.to_input_items(), *self._carry]
        self._carry = []
        return items

    @staticmethod
    def _as_items(input: str | list[TResponseInputItem]) -> list[Any]:
        return [{"role": "user", "content": input}] if isinstance(input, str) else list(input)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Stream the wrapped model; release its events once agentfsm has decided on them."""
        self._start(tools, handoffs, input)
        early = self._before_model(input)
        if early is not None:
            yield _completed(early, 0)
            return
        while True:
            seen: list[Any] = []  # the attempt's every event, for the decision
            held: list[Any] = []  # those not passed on yet
            async for event in self.inner.stream_response(
                self._with_budget(system_instructions),
                self._next_input(input),
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            ):
                seen.append(event)
                if self.stream == "text" and event.type in _TEXT_ONLY:
                    yield event
                else:
                    held.append(event)
            terminal = next((e for e in reversed(held) if e.type in _TERMINAL), None)
            decision = await self._decide_on([_dump(e) for e in seen])
            if decision.action is Action.RETRY:
                model_settings = self._settings(model_settings, decision)
                continue
            if decision.action is Action.CONTINUE and terminal is not None:
                response = ModelResponse(
                    output=list(terminal.response.output), usage=Usage(), response_id=None
                )
                input = self._continued(input, response, decision)
                continue
            break
        if terminal is None:
            raise AgentFSMError("the wrapped model's stream ended without a terminal event")
        self._carry = []
        output = self._shape(list(terminal.response.output), decision)
        response = terminal.response.model_copy(update={"output": output, "status": "completed"})
        for event in held:
            # A call's own events never reach the SDK: it would run the model's items from
            # them (when the terminal output is empty), not the calls agentfsm cleared.
            if event.type not in _TERMINAL and not _about_a_call(event):
                yield event
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(seen)
        )


def _continues(ctl: Controller, input: str | list[TResponseInputItem]) -> bool:
    """Whether the SDK's input carries on `ctl`'s run: after its last user message, it answers
    a call of the run's last output (the SDK resuming, or going on after the tools ran).

    A new run's input ends with the user's message (a string, `to_input_list()` plus a new
    message, a session's history).
    """
    last = ctl.last_output
    if isinstance(input, str) or last is None:
        return False
    made = {c.id for c in last.tool_calls}
    for item in reversed(input):
        data = _dump(item)
        if data.get("role") == "user":
            return False
        if data.get("type") == "function_call_output" and data.get("call_id") in made:
            return True
    return False


_STANDING = (
    "not approved: the only yes was a standing one (always_approve=True) given on another "
    "call; agentfsm asks a human about each call, so approve each item on its own"
)
"""Why a call the SDK's standing approval alone would run is declined."""


def _answer(context: object, call: ToolCall) -> bool | str | None:
    """What the SDK's run context says of the call: a yes for its own call id (True), a no
    (False), a standing yes for its tool only (`"standing"`), or nothing (None).

    The SDK keeps each answer in a record per tool: a yes for one item is its call id in the
    record's `approved` list, while `always_approve=True` sets `approved` to True, with no call
    id left in it, and the SDK then runs every call of the tool with no human asked.
    """
    if not isinstance(context, RunContextWrapper):
        return None
    try:
        status = context.is_tool_approved(call.name, call.id)
    except AgentsException:  # the SDK cannot tell: not an approval
        return None
    if status is not True:
        return status
    records = getattr(context, "_approvals", None)
    if not isinstance(records, Mapping):  # an SDK that keeps answers otherwise: unsure
        return "standing"
    own = any(
        isinstance(getattr(r, "approved", None), list) and call.id in r.approved
        for r in records.values()
    )
    return True if own else "standing"


def _rejection(context: object, call: ToolCall) -> str | None:
    """The rejection message the SDK's run context holds for the call, if any."""
    if not isinstance(context, RunContextWrapper):
        return None
    try:
        return context.get_rejection_message(call.name, call.id)
    except AgentsException:
        return None


def _key(call: ToolCall) -> str:
    """A call as its name and arguments: ids are issued after the flags are asked."""
    return json.dumps([call.name, call.arguments], sort_keys=True, default=repr)


async def _asks(setting: Any, context: Any, arguments: dict[str, Any], call_id: str) -> bool:
    """What a callable `needs_approval` setting says; one that fails asks (as in the SDK)."""
    try:
        said = setting(context, arguments, call_id)
        if inspect.isawaitable(said):
            said = await said
        return bool(said)
    except Exception:  # a check that fails must not let the call through unasked
        return True


def _unsupported(tool: object) -> str:
    name = getattr(tool, "name", None) or type(tool).__name__
    return (
        f"governed: tool {name!r} ({type(tool).__name__}) is not a function tool: the Agents "
        "SDK or the model provider's server runs it without a call agentfsm can check with "
        "may_run first; remove it from the agent, or give the agent a function tool "
        "(@function_tool) that does the same work"
    )


class _AskFirst:
    """A function tool's `on_invoke_tool` that asks agentfsm right before the tool runs.

    `GovernedModel.may_run` is asked by the SDK's call id (with the name and arguments the SDK
    holds): a call agentfsm did not clear, or one that already ran, never reaches the tool,
    and the model reads why instead.
    """

    def __init__(self, model: GovernedModel, tool: FunctionTool) -> None:
        self.model = model
        self.name = tool.name
        self.invoke = tool.on_invoke_tool

    async def __call__(self, ctx: Any, arguments: str) -> Any:
        call_id = getattr(ctx, "tool_call_id", "")
        self.model.approved(call_id, ctx)
        if not self.model.may_run(call_id, self.name, arguments):
            return f"not executed: agentfsm did not clear call {call_id!r} of {self.name!r}"
        # A governed agent the tool runs (an agent as a tool) is a child of this run.
        with running_tools_of(self.model.controller):
            return await self.invoke(ctx, arguments)


def _wrapped_by(tool: FunctionTool, model: GovernedModel) -> bool:
    """Whether `tool` (or a copy the SDK made of it) already asks `model` before it runs."""
    invoke = tool.on_invoke_tool
    return isinstance(invoke, _AskFirst) and invoke.model is model


def _approval(model: GovernedModel, tool: FunctionTool) -> FunctionTool:
    """The tool, asking agentfsm before it runs and the SDK for approval whenever agentfsm
    waits for a human on its call.

    The tool's own `needs_approval` is not lost: the model counts it in every decision on
    the tool's calls (`GovernedModel.keep_own_approval`), so a call it marks is an ASK_HUMAN
    the SDK's approval flow shows.
    """
    model.keep_own_approval(tool)

    async def needs_approval(_ctx: Any, _params: Any, call_id: str) -> bool:
        return model._show(call_id)

    return dataclasses.replace(
        tool, needs_approval=needs_approval, on_invoke_tool=_AskFirst(model, tool)
    )


class _GovernedAgent(Agent[Any]):
    """An agent whose every tool, its MCP servers' included, asks agentfsm before it runs.

    The SDK asks `get_all_tools` for the tools of each turn, and runs those: the MCP
    servers' tools exist only from then on, so they are wrapped here.
    """

    async def get_all_tools(self, run_context: RunContextWrapper[Any]) -> list[Tool]:
        tools = await super().get_all_tools(run_context)
        model = self.model
        if not isinstance(model, GovernedModel):  # a clone given another model: run nothing
            raise DefinitionError(
                f"agent {self.name!r} was made by governed() but its model was replaced; "
                "call governed() on the agent again"
            )
        return model.govern_tools(tools, run_context)


_GOVERNED_CLASSES: dict[type[Any], type[Agent[Any]]] = {Agent: _GovernedAgent}


def _governed_class(base: type[Agent[Any]]) -> type[Agent[Any]]:
    """`base` with the governed `get_all_tools`: a user's own Agent subclass stays one."""
    if issubclass(base, _GovernedAgent):
        return base
    found = _GOVERNED_CLASSES.get(base)
    if found is None:
        made = type(f"Governed{base.__name__}", (_GovernedAgent, base), {})
        found = _GOVERNED_CLASSES[base] = cast(type[Agent[Any]], made)
    return found


def _guarded(model: GovernedModel, given: Agent[Any] | Handoff[Any, Any]) -> Handoff[Any, Any]:
    """The handoff, transferring control only when agentfsm cleared the SDK's handoff call.

    A refused handoff call never reaches the SDK (`_shape` removes it); this check is the
    last one, right before control passes. The SDK has no approval flow for handoffs, so a
    handoff a human is asked about (`ask`) cannot be approved through it (an approval of the
    turn's function tools never showed it): the run ends with a RunError rather than hand
    off unapproved.
    """
    guarded = copy.copy(given if isinstance(given, Handoff) else handoff(given))
    invoke = guarded.on_invoke_handoff

    async def on_invoke(ctx: Any, arguments: str) -> Any:
        if not model.may_hand_off(guarded.tool_name, arguments):
            waiting = model.asked_about(guarded.tool_name)
            why = (
                "it awaits a human's approval, and the Agents SDK cannot ask one about a "
                "handoff: allow or deny it in the policy"
                if waiting
                else "agentfsm did not clear this call, or it already ran"
            )
            raise RunError(f"handoff {guarded.tool_name!r} not run: {why}")
        target = await invoke(ctx, arguments)
        taking = getattr(target, "model", None)
        if isinstance(taking, GovernedModel):  # its run is a child of this one
            taking.handed_by = model.controller
        return target

    guarded.on_invoke_handoff = on_invoke
    return guarded


def governed(
    agent: Agent[Any],
    policy: Policy | None = None,
    *,
    stream: StreamMode = "text",
    on_decline: _decline.OnDecline = "stop",
    observers: Iterable[Observer] = (),
    shadow: Policy | Mapping[str, Any] | None = None,
    show_budget: ShowBudget = False,
) -> Agent[Any]:
    """A clone of `agent` whose every turn agentfsm decides (see the module's docstring).

    Args:
        agent: The agent to govern; it is not changed.
        policy: The run's policy; `Policy()` when omitted.
        stream: For `Runner.run_streamed`: `"text"`, the default (text events pass on as
            they arrive), or `"held"` (every event waits for the decision).
        on_decline: What `state.reject(...)` without a `rejection_message` does: `"stop"`
            ends the run (the Controller's default), `"feedback"` tells the model and goes on.
        observers: Receive every event of each run's Controller (e.g. `DecisionSpans`).
        shadow: A candidate policy judged beside `policy` on every call and recorded
            (`Decision.shadow`, the trace), never enforced; see docs/shadow.md.
        show_budget: Show the model what its run tree has left before each model call: True
            adds `Left.text()` ("Budget left: 3 model turns, 100 tokens.") to the system
            instructions; a function of `af.Left` returns the text (None: nothing); False,
            the default, shows nothing (docs/budgets.md).
    """
    if not isinstance(agent, Agent):
        raise DefinitionError(f"governed takes an agents.Agent, not {type(agent).__name__}")
    policy = as_policy(policy, "governed: policy")  # before the model is made: it may need a key
    inner = agent.model
    if not isinstance(inner, Model):
        try:
            inner = MultiProvider().get_model(inner)
        except AgentsException as exc:  # e.g. a model name with an unknown prefix
            raise DefinitionError(f"governed: the agent's model {inner!r}: {exc}") from exc
    given: list[FunctionTool] = []
    for tool in agent.tools:
        if not isinstance(tool, FunctionTool):
            raise DefinitionError(_unsupported(tool))
        given.append(tool)
    model = GovernedModel(
        inner,
        policy,
        stream,
        on_decline=on_decline,
        observers=observers,
        shadow=shadow,
        show_budget=show_budget,
    )
    tools = [_approval(model, t) for t in given]
    handoffs: list[Any] = [_guarded(model, h) for h in agent.handoffs]
    clone = agent.clone(model=model, tools=tools, handoffs=handoffs)
    fields = {f.name: getattr(clone, f.name) for f in dataclasses.fields(clone) if f.init}
    return _governed_class(type(agent))(**fields)


def remember(result: RunResultBase, item: object, scope: str | Mapping[str, Any]) -> None:
    """Remember the approval `state.approve(item)` gives for `scope`, covering later calls.

    `item` is an item of `result.interruptions`, or its call id; `scope` is `"uses=N"`,
    `"seconds=T"`, `"run"`, `"conversation"`, `"deployment"`, or `{"scope": ...,
    "pattern": ...}` (docs/approvals.md). Once `state.approve(item)` approved it, later
    calls the scope covers run without an interruption.

    The SDK's approval carries no scope of its own, and its `always_approve=True` is not one
    (agentfsm keeps it a yes for its own item only); this is the agentfsm-side way to give one.
    A rejected item remembers nothing.

    Raises:
        InvalidInputError: a scope that does not read, or an item agentfsm is not asking
            about; nothing is remembered.
    """
    model = _model_of(result, "remember")
    raw = getattr(item, "raw_item", None)
    call_id = item if isinstance(item, str) else getattr(raw, "call_id", None)
    if not isinstance(call_id, str) or not model.needs_approval(call_id):
        asked = [c.id for c in model.controller.pending_calls] if model.controller else []
        raise InvalidInputError(
            f"remember: {call_id!r:.60} is not a call agentfsm asks about (asked: "
            f"{', '.join(asked) or 'none'})"
        )
    scope_of(scope, f"remember({call_id!r})")
    model._scopes[call_id] = scope


def _model_of(result: object, what: str) -> GovernedModel:
    """The GovernedModel of the run that produced `result`."""
    if not isinstance(result, RunResultBase):
        raise InvalidInputError(
            f"{what} takes the result of Runner.run, not {type(result).__name__}"
        )
    model = result.last_agent.model
    if not isinstance(model, GovernedModel):
        raise AgentFSMError("this result did not come from an agent made by governed()")
    return model


def decisions(result: RunResultBase) -> list[Decision]:
    """Every decision agentfsm made in the run that produced `result`, RETRY included."""
    if not isinstance(result, RunResultBase):
        raise InvalidInputError(
            f"decisions takes the result of Runner.run, not {type(result).__name__}"
        )
    model = result.last_agent.model
    if not isinstance(model, GovernedModel):
        raise AgentFSMError("this result did not come from an agent made by governed()")
    return list(model.decisions)
