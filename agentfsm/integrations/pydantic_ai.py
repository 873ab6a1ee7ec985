"""pydantic-ai: agentfsm decides every step of the agent graph through a `Model` wrapper.

`GovernedModel(model, policy)` wraps any pydantic-ai model (`FunctionModel`, `TestModel` or a
provider's); `model.toolset(tools)` wraps the agent's tools (or any toolset, an MCP server
too), and `model.capability()` every tool of the agent, so each call asks `may_run` and
agentfsm's approvals use pydantic-ai's own deferred-tool flow. A request declaring a tool
pydantic-ai would run without asking agentfsm (a plain `@agent.tool_plain`, a native tool)
raises ToolDefinitionError before the model is called. After every response the Controller
decides, and:

- EXECUTE_TOOLS: the response goes on with only the calls agentfsm lets run (its call parts
  rebuilt from agentfsm's calls by call id; the toolset asks `may_run` before each), and without its
  text, so the graph's end strategy cannot end the run on text beside tool calls; a refused
  call (undeclared tool, broken arguments, denied) is taken out, and in the next request it is
  put back with the controller's error as a failed `ToolReturnPart`, so the model reads why;
- RETRY: the model is called again inside the same step without the broken response (doubling
  `max_tokens` after a cut output when one was set), instead of pydantic-ai sending the broken
  call back as a validation retry; agentfsm's `max_retries` bounds it;
- ASK_HUMAN: the tool raises `ApprovalRequired`; the run ends with `DeferredToolRequests`
  (give the agent `output_type=[str, DeferredToolRequests]`) and resumes with
  `DeferredToolResults(approvals={call_id: True | False | ToolDenied(...)})`, each asked call
  its own answer (a denial without a message of its own ends the run unless
  `on_decline="feedback"`); `ToolApproved(override_args=...)` edits a call, which the
  Controller checks as a new call, and a tool runs only with the arguments it cleared;
  `metadata={call_id: {"agentfsm_remember": SCOPE}}` remembers an approval for a scope
  (docs/approvals.md); the allowed calls
  of the same turn are held, then run once approved (a response of their own, no model call)
  or answered with the decline's error;
- FINAL: the response goes on unchanged (after a final tool's result, the run ends with that
  result as its text, without a model call); STOP: the run ends with the text
  `"[agentfsm stop: <exit reason>] <reason>"`; `model.decisions` lists every decision.

Streaming (`run_stream`, `run_stream_events`, an `event_stream_handler`) works: text and thinking
deltas pass on as the wrapped model sends them, while tool-call parts wait until agentfsm has
decided on the whole response; then only the calls it cleared are streamed, and the graph reads
the decided response (`get()`), so no call of a retried or refused attempt reaches it (a retried
attempt's text may already have been shown; `model.decisions` lists the RETRY). One
GovernedModel serves one run at a time; a run that does not carry on the last run's calls gets a
new Controller. Needs the `pydantic-ai` extra.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic import ValidationError
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import (
    CompletedStreamedResponse,
    Model,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from agentfsm._engine.controller import Controller
from agentfsm._engine.events import Observer, as_observers
from agentfsm._engine.policy import Policy, as_policy, as_shadow
from agentfsm._model.approvals import SCOPES
from agentfsm._model.types import Action, Decision, ToolCall, ToolResult
from agentfsm.exceptions import DefinitionError, RunError, ToolDefinitionError
from agentfsm.integrations import _decline
from agentfsm.integrations._pydantic_stream import Attempt, TextFirstStream
from agentfsm.integrations._tree import (
    ShowBudget,
    budget_text,
    checked_show_budget,
    controller_in_tree,
    running_tools_of,
)

__all__ = ["OFFERED", "REMEMBER", "GovernTools", "GovernedModel", "GovernedToolset"]

REMEMBER = "agentfsm_remember"
"""The key of an approval's `DeferredToolResults.metadata[call_id]` holding the scope to
remember it for (docs/approvals.md): `metadata={call_id: {REMEMBER: "uses=5"}}`."""
OFFERED = "agentfsm_scopes"
"""The key of an asked call's `DeferredToolRequests.metadata[call_id]` listing the scopes a
host may offer with its approval."""


_CLEARING = frozenset({Action.EXECUTE_TOOLS, Action.HANDOFF, Action.ASK_HUMAN})
_HELD = "agentfsm:held"
"""The model name of a response made of held calls, not by the model."""
_MARK = "agentfsm_governed_by"
"""The key of a tool definition's metadata naming the GovernedToolset that asks `may_run`."""
_EXTERNAL = "agentfsm_external"
"""The key of a tool definition's metadata saying the tool is external (run by the caller)."""


def _call_part(call: ToolCall) -> ToolCallPart:
    """The ToolCallPart of a call agentfsm decided on: its id, name and a copy of its arguments.

    A copy all the way down: pydantic-ai validates the tool's arguments from the part, and an
    `Any` argument passes through as the very object, which a tool may edit in place.
    """
    arguments = copy.deepcopy(dict(call.arguments or {}))
    return ToolCallPart(tool_name=call.name, args=arguments, tool_call_id=call.id)


def _final_text(decision: Decision) -> str:
    """A FINAL's answer as the text that ends the run (a final tool's result, as text)."""
    answer = decision.answer
    return answer if isinstance(answer, str) else "" if answer is None else json.dumps(answer)


def _held_response(message: ModelMessage) -> bool:
    return isinstance(message, ModelResponse) and message.model_name == _HELD


def _returns(
    messages: list[ModelMessage], pending: set[str]
) -> list[ToolReturnPart[Any] | RetryPromptPart]:
    """The answers to pending calls since the model's last response (held calls' included)."""
    found: list[ToolReturnPart[Any] | RetryPromptPart] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse) and not _held_response(message):
            break
        if isinstance(message, ModelRequest):
            found[:0] = [
                p
                for p in message.parts
                if isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_call_id in pending
            ]
    return found


def _held_call(messages: list[ModelMessage], call_id: str | None) -> ToolCallPart | None:
    """The call with this id as the graph holds it, in the latest response that has it."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                    return part
    return None


def _continues(ctl: Controller, messages: list[ModelMessage]) -> bool:
    """Whether the messages carry on `ctl`'s run: after the model's last response, before any
    user prompt, they answer a call of the run's last output (pydantic-ai resuming, or going
    on after the tools ran).

    A new run's messages end with its user prompt (alone, or after a history).
    """
    last = ctl.last_output
    if last is None:
        return False
    made = {c.id for c in last.tool_calls}
    for message in reversed(messages):
        if isinstance(message, ModelResponse) and not _held_response(message):
            return False
        for part in reversed(message.parts) if isinstance(message, ModelRequest) else ():
            if isinstance(part, UserPromptPart):
                return False
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id in made:
                return True
    return False


def _declared(params: ModelRequestParameters) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description or "", "parameters": t.parameters_json_schema}
        for t in (*params.function_tools, *params.output_tools)
    ]


def _ungoverned(params: ModelRequestParameters, mark: str) -> str | None:
    """Why pydantic-ai could run a tool of this request without agentfsm asking `may_run`.

    A function tool not served through this model's governed toolset would run whatever the
    policy says of it (an `ask` would run unasked); a native tool runs on the provider's server
    during the model call, before agentfsm sees it.
    """
    loose = [
        t.name
        for t in params.function_tools
        if not isinstance(t.metadata, dict) or not str(t.metadata.get(_MARK, "")).startswith(mark)
    ]
    native = [getattr(t, "kind", type(t).__name__) for t in params.native_tools]
    if loose:
        names = ", ".join(repr(n) for n in loose)
        return (
            f"GovernedModel: pydantic-ai would run tool(s) {names} without asking agentfsm "
            f"(Controller.may_run), so the policy's 'ask' could not hold: put them in the "
            f"governed toolset, Agent(model, toolsets=[model.toolset([...])]), or govern every "
            f"tool of the agent (@agent.tool, tools=[...], MCP servers) with "
            f"Agent(model, ..., capabilities=[model.capability()])"
        )
    if native:
        names = ", ".join(repr(n) for n in native)
        return (
            f"GovernedModel: native tool(s) {names} run on the provider's server during the "
            f"model call, before agentfsm can ask Controller.may_run: remove them from the agent"
        )
    return None


def _text(part: ToolReturnPart[Any] | RetryPromptPart) -> str:
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    return part.model_response_str()


class GovernedModel(WrapperModel):
    """A pydantic-ai `Model` that asks agentfsm about every response of the model it wraps.

    Args:
        wrapped: The model that really answers.
        policy: The run's policy; `Policy()` when omitted.
        on_decline: What a denial without a message of its own (`False`, `ToolDenied()`) does:
            `"stop"` ends the run (the Controller's default), `"feedback"` tells the model and
            goes on.
        observers: Receive every event of each run's Controller (e.g. `DecisionSpans`).
        shadow: A candidate policy judged beside `policy` on every call and recorded
            (`Decision.shadow`, the trace), never enforced; see docs/shadow.md.
        show_budget: Show the model what its run tree has left with each request: True adds
            `Left.text()` ("Budget left: 3 model turns, 100 tokens.") to the request's
            instructions; a function of `af.Left` returns the text (None: nothing); False,
            the default, shows nothing (docs/budgets.md).
    """

    def __init__(
        self,
        wrapped: Model | str,
        policy: Policy | None = None,
        *,
        on_decline: _decline.OnDecline = "stop",
        observers: Iterable[Observer] = (),
        shadow: Policy | Mapping[str, Any] | None = None,
        show_budget: ShowBudget = False,
    ) -> None:
        self.policy = as_policy(policy, "GovernedModel: policy")
        self.shadow = as_shadow(shadow, None)
        self.on_decline = _decline.checked(on_decline, "GovernedModel")
        self.observers = as_observers(observers, "GovernedModel")
        self.show_budget = checked_show_budget(show_budget, "GovernedModel")
        if not isinstance(wrapped, Model | str):
            raise DefinitionError(
                f"GovernedModel wraps a pydantic-ai Model or a model name, not "
                f"{type(wrapped).__name__}"
            )
        try:
            super().__init__(wrapped)
        except UserError as exc:  # an unknown model name
            raise DefinitionError(f"GovernedModel: model {wrapped!r}: {exc}") from exc
        self.controller: Controller | None = None
        self.decisions: list[Decision] = []
        self._refused: list[tuple[ToolCallPart, ToolResult]] = []
        # Notes for the model (the loop ladder's warning), sent after the results they follow.
        self._notes: list[str] = []
        self._held: list[ToolCall] = []
        self._started: set[str] = set()
        self._approving: dict[str, dict[str, Any] | None] = {}
        """The asked calls pydantic-ai validated as approved, with their edited arguments."""
        self._scopes: dict[str, Any] = {}
        """The scopes the approvals of those calls carry (`DeferredToolResults.metadata`)."""
        self._edits: dict[str, dict[str, Any]] = {}
        """The edited arguments of approved calls, as the Controller cleared them, by call id."""
        self._stop: Decision | None = None
        self._outputs: frozenset[str] = frozenset()
        """The output tools of the request being decided: pydantic-ai cannot defer them."""
        self.mark = f"agentfsm:{uuid.uuid4().hex}"
        """What this model's governed toolsets write into the metadata of the tools they serve."""

    def toolset(self, tools: AbstractToolset[Any] | Sequence[Any]) -> GovernedToolset:
        """The agent's tools, asking for a human's approval whenever agentfsm says so."""
        if isinstance(tools, AbstractToolset):
            return GovernedToolset(tools, self)
        if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
            raise ToolDefinitionError(
                f"toolset takes a toolset or a list of tools, not {type(tools).__name__}"
            )
        try:
            wrapped = FunctionToolset(list(tools))
        except (UserError, TypeError, ValueError, AttributeError) as exc:
            why = f"toolset: pydantic-ai cannot make tools of these: {exc}"
            raise ToolDefinitionError(why) from exc
        return GovernedToolset(wrapped, self)

    def capability(self) -> GovernTools:
        """A pydantic-ai capability governing every tool of the agent it is given to: its own
        (`@agent.tool`, `tools=[...]`), its toolsets and MCP servers."""
        return GovernTools(self)

    # -- the run's Controller -------------------------------------------------------------

    def _start(self, params: ModelRequestParameters, messages: list[ModelMessage]) -> Controller:
        """The run's Controller: the current one while the messages carry on its run, else a
        new one.

        A run left deferred (never resumed) or ended by pydantic-ai itself (a usage limit, an
        error) leaves its Controller waiting; the next `agent.run` is a new run and must not
        inherit its question, decisions or budgets.
        """
        ctl = self.controller
        if ctl is None or (ctl.done and self._stop is None) or not _continues(ctl, messages):
            # Declared even when empty: a rule or permission naming no tool the model can call
            # is refused, and a call of a name the model was not given is never cleared.
            declared = _declared(params)
            # A run started by a governed tool of another run is its child (`_tree`).
            ctl = self.controller = controller_in_tree(
                self.policy, declared, observers=self.observers, shadow=self.shadow
            )
            self.decisions, self._refused, self._held, self._started = [], [], [], set()
            self._stop, self._approving, self._edits = None, {}, {}
            self._scopes = {}
        return ctl

    def _decide(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        # A stop decided while pydantic-ai runs tools is reported on its next model request.
        self._stop = decision if decision.action is Action.STOP else None
        return decision

    def awaits_approval(self, call_id: str | None) -> bool:
        """Whether agentfsm is waiting for a human to approve this call."""
        ctl = self.controller
        return (
            ctl is not None
            and ctl.state == "await_human"
            and any(c.id == call_id for c in ctl.pending_calls)
        )

    def _note_approved(
        self, call_id: str | None, edited: dict[str, Any] | None, metadata: object = None
    ) -> None:
        """pydantic-ai validated an approved call (`edited`: its arguments, when the approval
        changed them; `metadata`: the approval's `DeferredToolResults.metadata`, which may
        carry a scope to remember it for): note it for the Controller's reply.

        pydantic-ai validates every approved call of a response before it runs any, so when
        the first one runs the human's answer on each asked call is known.
        """
        if self.awaits_approval(call_id) and call_id is not None:
            self._approving[call_id] = edited
            self._note_scope(call_id, metadata)

    def _note_scope(self, call_id: str, metadata: object) -> None:
        """The scope an approval's metadata carries under `REMEMBER`, noted for the reply (the
        Controller checks it: a bad one raises InvalidInputError, the run unchanged)."""
        if isinstance(metadata, Mapping) and metadata.get(REMEMBER) is not None:
            self._scopes[call_id] = metadata[REMEMBER]

    def approved(self, call_id: str | None, metadata: object = None) -> None:
        """pydantic-ai runs an approved call: give the Controller the human's answer on each
        asked call.

        The calls pydantic-ai validated as approved are approved, with the arguments the
        approval gave them (`ToolApproved(override_args=...)`): the Controller checks those as
        a new call. Every other asked call was denied (pydantic-ai answers it itself).
        """
        ctl = self.controller
        if ctl is None or call_id is None or not self.awaits_approval(call_id):
            return
        self._note_scope(call_id, metadata)
        noted, self._approving = self._approving, {}
        scopes, self._scopes = self._scopes, {}
        answers = {c.id: c.id == call_id or c.id in noted for c in ctl.pending_calls}
        edits = {i: e for i, e in noted.items() if e is not None and answers.get(i)}
        remember = {i: v for i, v in scopes.items() if answers.get(i)} or None
        decision = self._decide(
            ctl.on_human_reply(answers, arguments=edits or None, remember=remember)
        )
        cleared = {c.id: c for c in decision.tool_calls}
        self._edits = {i: dict(cleared[i].arguments or {}) for i in edits if i in cleared}

    def _refusal(self, call_id: str | None, name: str) -> str:
        """What the model reads for a call pydantic-ai was about to run and agentfsm did not
        clear: the Controller's own error result for it, when the last decision gave one."""
        last = self.decisions[-1] if self.decisions else None
        for result in last.results if last is not None else ():
            if result.call_id == call_id:
                return str(result.content)
        return f"not executed: agentfsm did not clear call {call_id!r} of {name!r}"

    def _runs_as_cleared(
        self, ctx: RunContext[Any], tool: ToolsetTool[Any], tool_args: dict[str, Any]
    ) -> bool:
        """Whether the arguments about to run are those agentfsm cleared.

        An approval's edited arguments are what the Controller checked; any other call runs
        the validated arguments of its call part. A hook that rewrote the arguments after
        that (a validation or execution hook) makes them another call: it does not run.
        """
        edit = self._edits.get(ctx.tool_call_id or "")
        if edit is not None:
            return bool(to_jsonable_python(tool_args) == edit)
        return _as_sent(ctx, tool, tool_args)

    def _feed(self, messages: list[ModelMessage]) -> Decision | None:
        """Give the Controller the returns (or the human's denial) of its pending calls."""
        ctl = self.controller
        # A HANDOFF awaits its call's result as EXECUTE_TOOLS does (a handoff run as a tool).
        if ctl is None or ctl.state not in ("execute", "handoff", "await_human"):
            return None
        parts = _returns(messages, {c.id for c in ctl.pending_calls})
        if ctl.state == "await_human":  # denied: pydantic-ai answered without running the calls
            denials = {p.tool_call_id: _text(p) for p in parts}
            texts = {
                call_id: text
                for call_id, said in denials.items()
                if (text := _decline.message(self.on_decline, said, (ToolDenied().message,)))
            }
            decision = self._decide(ctl.on_human_reply(False, messages=texts))
        else:
            results = [
                ToolResult(
                    call_id=p.tool_call_id,
                    content=_text(p),
                    is_error=isinstance(p, RetryPromptPart) or p.outcome != "success",
                    name=p.tool_name,
                )
                for p in parts
            ]
            decision = self._decide(ctl.on_tool_results(results))
        held = {c.id: c for c in self._held}
        for result in decision.results:  # pydantic-ai never saw the held calls: answer them here
            call = held.pop(result.call_id, None)
            if call is not None:
                self._refused.append((_call_part(call), result))
        self._held = list(held.values())
        return decision

    def may_run(self, call_id: str | None, messages: list[ModelMessage]) -> bool:
        """Whether pydantic-ai may execute this call now: agentfsm cleared it, and it has not run.

        The name and arguments compared are those of the call as the graph holds it (its
        `ToolCallPart`), not the validated arguments, which carry defaults and coercions.
        """
        ctl = self.controller
        part = _held_call(messages, call_id)
        if ctl is None or part is None or call_id is None or call_id in self._started:
            return False
        try:
            arguments = self._edits.get(call_id) or part.args_as_dict()
        except ValueError:
            return False
        if not ctl.may_run(call_id, part.tool_name, arguments):
            return False
        self._started.add(call_id)
        return True

    def _release(self) -> ModelResponse | None:
        """The held calls as a response for pydantic-ai to run, once the human approved."""
        ctl = self.controller
        if not self._held or ctl is None or ctl.state != "execute":
            return None
        calls, self._held = self._held, []
        parts = [_call_part(c) for c in calls if ctl.may_run(c.id)]
        return ModelResponse(parts=parts, model_name=_HELD) if parts else None

    # -- shaping -----------------------------------------------------------------------------

    def _with_refused(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history with the refused calls put back, each answered by its error."""
        if not self._refused or len(messages) < 2:
            return messages
        response, request = messages[-2], messages[-1]
        if not isinstance(response, ModelResponse) or not isinstance(request, ModelRequest):
            return messages
        calls = [call for call, _ in self._refused]
        errors = [
            ToolReturnPart(
                tool_name=c.tool_name,
                content=str(r.content),
                tool_call_id=c.tool_call_id,
                outcome="failed",
            )
            for c, r in self._refused
        ]
        return [
            *messages[:-2],
            dataclasses.replace(response, parts=[*response.parts, *calls]),
            dataclasses.replace(request, parts=[*request.parts, *errors]),
        ]

    def _with_notes(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history with the notes of the last decision as user prompts after its results."""
        notes, self._notes = self._notes, []
        if not notes or not messages or not isinstance(messages[-1], ModelRequest):
            return messages
        request = messages[-1]
        said = [UserPromptPart(content=note) for note in notes]
        return [*messages[:-1], dataclasses.replace(request, parts=[*request.parts, *said])]

    def _shape(self, response: ModelResponse, decision: Decision) -> ModelResponse:
        """The response pydantic-ai acts on: its call parts are the calls agentfsm cleared.

        The call parts are rebuilt from agentfsm's calls, matched by call id (ids it issued
        replace missing and duplicate ones); a refused call goes to the next request with its
        error, and the allowed calls of a turn that awaits a human are held until the human
        answers. Any other call part never reaches pydantic-ai.
        """
        if decision.action is Action.STOP:
            self._stop = None
            text = f"[agentfsm stop: {decision.exit_reason}] {decision.reason}"
            return dataclasses.replace(response, parts=[TextPart(content=text)])
        asked = [c.name for c in decision.tool_calls if c.name in self._outputs]
        if decision.action is Action.ASK_HUMAN and asked:
            raise RunError(
                f"GovernedModel: the policy asks a human about output tool {asked[0]!r}, which "
                f"pydantic-ai ends the run with and cannot defer for approval; nothing of the "
                f"turn ran: allow or deny it in the policy"
            )
        ctl = self.controller
        turn = ctl.last_output.tool_calls if ctl is not None and ctl.last_output else []
        self._started = set()  # a model may use an id again in a later turn
        clearing = decision.action in _CLEARING
        cleared = {c.id for c in decision.tool_calls} if clearing else set()
        if decision.note and cleared:
            self._notes.append(decision.note)
        refused = {r.call_id: r for r in decision.results}
        parts: list[Any] = []
        for call in turn:
            if call.id in cleared:
                parts.append(_call_part(call))
            elif call.id in refused:
                self._refused.append((_call_part(call), refused[call.id]))
            elif decision.action is Action.ASK_HUMAN:
                self._held.append(call)
        # Text beside calls that run would let the graph's end strategy end the run on it.
        dropped = (ToolCallPart, TextPart) if clearing else (ToolCallPart,)
        other = [p for p in response.parts if not isinstance(p, dropped)]
        if not clearing and len(other) == len(response.parts):
            return response
        return dataclasses.replace(response, parts=[*other, *parts])

    def _continued(
        self, history: list[ModelMessage], response: ModelResponse, decision: Decision
    ) -> list[ModelMessage]:
        """The next request after a CONTINUE: the output, every call it made answered by its
        error result."""
        shaped = self._shape(response, decision)
        if not self._refused:
            return [*history, shaped]
        answered = self._with_refused([*history, shaped, ModelRequest(parts=[])])
        self._refused = []
        return answered

    @staticmethod
    def _adjusted(settings: ModelSettings | None, decision: Decision) -> ModelSettings | None:
        factor = decision.adjust.get("max_tokens_factor")
        if factor and settings and settings.get("max_tokens"):
            return {**settings, "max_tokens": int(settings["max_tokens"] * factor)}
        return settings

    # -- the Model interface --------------------------------------------------------------

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Call the wrapped model until agentfsm accepts a response, and shape it."""

        async def ask(history: list[ModelMessage], settings: ModelSettings | None) -> ModelResponse:
            return await self.wrapped.request(history, settings, model_request_parameters)

        return await self._accepted(messages, model_settings, model_request_parameters, ask)

    def _prepare(
        self, messages: list[ModelMessage], params: ModelRequestParameters
    ) -> tuple[Controller, ModelResponse | None, list[ModelMessage]]:
        """The run's Controller, a response that needs no model call (held calls, a stop), and
        the history to send the model otherwise.

        Raises:
            ToolDefinitionError: the agent has a tool pydantic-ai would run without asking
                agentfsm; nothing was run or sent.
        """
        refused = _ungoverned(params, self.mark)
        if refused is not None:
            raise ToolDefinitionError(refused)
        ctl = self._start(params, messages)
        self._outputs = frozenset(t.name for t in params.output_tools)
        released = self._release()
        if released is not None:
            return ctl, released, messages
        fed = self._feed(messages)
        if self._stop is not None:
            return ctl, self._shape(ModelResponse(parts=[]), self._stop), messages
        if fed is not None and fed.action is Action.FINAL:  # a final tool's result ends the run
            return ctl, ModelResponse(parts=[TextPart(content=_final_text(fed))]), messages
        history = self._with_budget(ctl, self._with_notes(self._with_refused(messages)))
        self._refused = []
        return ctl, None, history

    def _with_budget(self, ctl: Controller, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history with what the run tree has left added to the last request's
        instructions, when the host asked (`show_budget`); the history pydantic-ai keeps is
        not changed."""
        said = budget_text(ctl, self.show_budget)
        if said is None or not messages or not isinstance(messages[-1], ModelRequest):
            return messages
        request = messages[-1]
        given = request.instructions
        instructions = f"{given}\n\n{said}" if given else said
        return [*messages[:-1], dataclasses.replace(request, instructions=instructions)]

    def _judge(
        self,
        ctl: Controller,
        response: ModelResponse,
        history: list[ModelMessage],
        settings: ModelSettings | None,
    ) -> tuple[ModelResponse | None, list[ModelMessage], ModelSettings | None]:
        """Decide on one response: the shaped response when accepted, else None with the
        history and settings of the next attempt."""
        decision = self._decide(ctl.on_model_output(response))
        if decision.action is Action.RETRY:
            return None, history, self._adjusted(settings, decision)
        if decision.action is Action.CONTINUE:  # refused calls, or a refused answer
            return None, self._continued(history, response, decision), settings
        return self._shape(response, decision), history, settings

    async def _accepted(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        params: ModelRequestParameters,
        ask: Callable[[list[ModelMessage], ModelSettings | None], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Ask the wrapped model (`ask`) until agentfsm accepts a response; shape that one."""
        ctl, early, history = self._prepare(messages, params)
        if early is not None:
            return early
        while True:
            response = await ask(history, model_settings)
            done, history, model_settings = self._judge(ctl, response, history, model_settings)
            if done is not None:
                return done

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        """Stream the wrapped model: text as it arrives, the rest once agentfsm decided."""
        ctl, early, history = self._prepare(messages, model_request_parameters)
        if early is not None:
            yield CompletedStreamedResponse(
                early, model_request_parameters=model_request_parameters, replay_events=True
            )
            return
        attempt = Attempt(ctl, history, model_settings, run_context)
        yield TextFirstStream(model_request_parameters, model=self, attempt=attempt)


@dataclasses.dataclass
class GovernedToolset(WrapperToolset[Any]):
    """Tools that run only once agentfsm cleared their call (`may_run`), and raise
    `ApprovalRequired` while agentfsm waits for a human on it.

    The tools keep their own deferrals: a `requires_approval=True` tool still waits for
    pydantic-ai's approval (both approvals must hold), and an external tool (`ExternalToolset`)
    is handed to the caller with `CallDeferred` only once agentfsm cleared it (after the human's
    approval when the policy asks). A tool another GovernedToolset of the same model already
    serves (a toolset inside `model.capability()`) is left to that one.
    """

    model: GovernedModel
    key: str = ""
    """What this toolset writes into the tools it serves; kept when pydantic-ai copies it."""

    def __post_init__(self) -> None:
        self.key = self.key or f"{self.model.mark}/{uuid.uuid4().hex}"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The wrapped tools, each marked as served here (see `GovernedModel`)."""
        tools = await super().get_tools(ctx)
        return {name: self._marked(tool) for name, tool in tools.items()}

    def _marked(self, tool: ToolsetTool[Any]) -> ToolsetTool[Any]:
        metadata = dict(tool.tool_def.metadata or {})
        if str(metadata.get(_MARK, "")).startswith(self.model.mark):
            return tool  # an inner governed toolset serves it
        metadata[_MARK] = self.key
        kind = tool.tool_def.kind
        metadata[_EXTERNAL] = kind == "external"
        # An external tool is deferred here (CallDeferred), after agentfsm cleared its call,
        # not by pydantic-ai before any toolset is asked.
        tool_def = dataclasses.replace(
            tool.tool_def, metadata=metadata, kind="function" if kind == "external" else kind
        )
        noting = _Noting(self.model, tool, tool.args_validator_func)
        return dataclasses.replace(tool, tool_def=tool_def, args_validator_func=noting)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the call if agentfsm cleared it (`may_run`); ask for approval first when it waits."""
        metadata = tool.tool_def.metadata or {}
        if metadata.get(_MARK) != self.key:  # served by a governed toolset inside this one
            return await super().call_tool(name, tool_args, ctx, tool)
        if self.model.awaits_approval(ctx.tool_call_id):
            if not ctx.tool_call_approved:
                # The ask offers the scopes an approval may be remembered for (REMEMBER).
                raise ApprovalRequired(metadata={OFFERED: list(SCOPES)})
            self.model.approved(ctx.tool_call_id, ctx.tool_call_metadata)
        ran = self.model._runs_as_cleared(ctx, tool, tool_args)
        if not ran or not self.model.may_run(ctx.tool_call_id, ctx.messages):
            return self.model._refusal(ctx.tool_call_id, name)
        if metadata.get(_EXTERNAL):
            raise CallDeferred
        # A governed agent the tool runs (delegation) is a child of this run.
        with running_tools_of(self.model.controller):
            return await super().call_tool(name, tool_args, ctx, tool)


class _Noting:
    """A governed tool's `args_validator_func`: notes each approved call pydantic-ai
    validates (and the arguments it validated, when the approval edited them), then asks the
    tool's own validator function, if it has one."""

    def __init__(
        self, model: GovernedModel, tool: ToolsetTool[Any], inner: Callable[..., Any] | None
    ) -> None:
        self.model, self.tool, self.inner = model, tool, inner

    def __call__(self, *given: Any, **args: Any) -> Any:
        # The context comes first, by position: a tool may take an argument named `ctx`.
        ctx = given[0]
        if isinstance(ctx, RunContext) and ctx.tool_call_approved:
            edited = self._edited(ctx, args)
            self.model._note_approved(ctx.tool_call_id, edited, ctx.tool_call_metadata)
        return self.inner(*given, **args) if self.inner is not None else None

    def _edited(self, ctx: RunContext[Any], args: dict[str, Any]) -> dict[str, Any] | None:
        """The validated arguments as JSON when they are not those of the call as the model
        sent it (`ToolApproved(override_args=...)`), else None."""
        if _as_sent(ctx, self.tool, args):
            return None
        edited: dict[str, Any] = to_jsonable_python(args)
        return edited


def _as_sent(ctx: RunContext[Any], tool: ToolsetTool[Any], args: dict[str, Any]) -> bool:
    """Whether `args` are what the tool's validator makes of the call as the graph holds it
    (its `ToolCallPart`): the arguments the model sent, with defaults and coercions."""
    part = _held_call(ctx.messages, ctx.tool_call_id)
    if part is None:
        return False
    try:
        sent = part.args_as_dict()
        checked = tool.args_validator.validate_python(sent, context=ctx.validation_context)
    except (ValidationError, ValueError, TypeError):
        return False
    return bool(checked == args)


@dataclasses.dataclass
class GovernTools(AbstractCapability[Any]):
    """A pydantic-ai capability that puts every tool of the agent under agentfsm.

    `Agent(model, tools=[...], capabilities=[model.capability()])`: the agent's assembled
    toolset (its own tools, `toolsets=`, MCP servers; not output tools) is wrapped in a
    `GovernedToolset` for each run, so every call asks `may_run` right before it runs.
    """

    model: GovernedModel

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not in pydantic-ai's specs: it holds a live model."""
        return None

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        """The agent's toolset, governed."""
        return GovernedToolset(toolset, self.model)
