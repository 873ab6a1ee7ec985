"""mini-swe-agent: a `DefaultAgent` whose `step()` asks agentfsm what to do with each output.

`GovernedAgent(model, env, policy=..., approve=..., **agent_config)` is used like
`DefaultAgent`. Each step queries the model as mini-swe-agent does, then the Controller decides
(from the full provider response when the model kept it in `extra.response`, so the finish
reason counts; from the message otherwise; for a text-based model, from the fenced actions its
own `action_regex` finds, each a `bash` call):

- EXECUTE_TOOLS: only the calls agentfsm lets run reach `env.execute`, each after `may_run`
  says so by call id; the controller's error
  results (undeclared tool, arguments that fit no schema, denied) become `tool` messages beside
  the real observations; ids agentfsm issued are written into the assistant message;
- a response the model class refused with `FormatError` (mini-swe-agent's LitellmModel rejects
  a whole message for one unknown tool or one cut call) is decided by agentfsm instead: the
  valid calls run, a cut output is retried;
- RETRY: the broken message is dropped and the model is asked again;
- ASK_HUMAN: `approve(calls)` answers: True approves, False declines, a string declines with
  that message, `(approved, message, remember)` also remembers an approval for a scope
  (docs/approvals.md); a decline without a message ends the run (`on_decline="stop"`) or is told to
  the model (`"feedback"`); without `approve` no human can be asked, so the run ends
  PERMISSION_DENIED and nothing asked about runs (fail closed, no decline is claimed);
- the submit command (`COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`): its output answers the call,
  then the submission is decided as the run's final answer (a text output, one turn of its own,
  no model call), so the completion checks (`Policy.verifiers`) judge it like any answer: FINAL
  ends the run with mini-swe-agent's own `Submitted` exit; a refused submission goes back to
  the model as a user message and the run goes on;
- FINAL on a text answer: the run exits `Submitted` with that text; STOP: it exits with the exit
  reason as `exit_status` and the reason as content.

`agent.decisions` lists every decision. Needs the `mini-swe-agent` extra.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from minisweagent.agents.default import DefaultAgent
from minisweagent.exceptions import FormatError, Submitted
from minisweagent.models.utils.actions_toolcall import BASH_TOOL
from pydantic import ValidationError

from agentfsm._engine.controller import Controller
from agentfsm._engine.events import Observer, as_observers
from agentfsm._engine.policy import Policy, as_policy, as_shadow
from agentfsm._model._checked import listed, problems_of
from agentfsm._model.types import (
    Action,
    Decision,
    ExitReason,
    FinishReason,
    ModelTurn,
    ToolCall,
    ToolResult,
)
from agentfsm.exceptions import DefinitionError
from agentfsm.integrations import _decline
from agentfsm.providers import normalize

__all__ = ["Approver", "GovernedAgent"]

Approver = Callable[[list[ToolCall]], bool | str | tuple[bool, str | None, Any]]
"""Answers an ASK_HUMAN: True approves, False declines, a string declines with that message;
`(approved, message, remember)` with `remember` a scope (`"uses=N"`, `"run"`, `{"scope": ...,
"pattern": ...}`, docs/approvals.md) remembers the approval for each asked call."""


def _answer(answer: object) -> tuple[bool, str | None, Any]:
    """An approver's answer as (approved, message, remember); anything else declines with its
    text, as a string does (fail closed: only True approves)."""
    if isinstance(answer, bool):
        return answer, None, None
    if (
        isinstance(answer, tuple)
        and len(answer) == 3
        and isinstance(answer[0], bool)
        and (answer[1] is None or isinstance(answer[1], str))
    ):
        return answer
    return False, str(answer), None


def _action_regex(model: Any) -> str | None:
    """The regex a text-based model finds its actions with (`action_regex` in its config)."""
    regex = getattr(getattr(model, "config", None), "action_regex", None)
    return regex if isinstance(regex, str) and regex else None


def _commands(regex: str | None, content: object, actions: object) -> list[tuple[str, str]]:
    """The (call id, command) pairs of a text-based output, as mini-swe-agent reads them.

    With the model's `action_regex`, the fenced actions are found in the text the way
    mini-swe-agent's `parse_regex_actions` finds them (every match, stripped), whatever their
    number: agentfsm decides on each. Without one (its `DeterministicModel`), the actions the
    model parsed itself (`extra.actions`).
    """
    if regex is not None:
        found = re.findall(regex, content, re.DOTALL) if isinstance(content, str) else []
        return [("", a.strip()) for a in found if isinstance(a, str)]
    listed_actions = actions if isinstance(actions, list) else []
    return [
        (str(a.get("tool_call_id") or ""), a["command"])
        for a in listed_actions
        if isinstance(a, dict) and isinstance(a.get("command"), str)
    ]


def _text_turn(commands: list[tuple[str, str]], content: object, response: object) -> ModelTurn:
    """A text-based output as a turn of bash calls; the finish reason from the response."""
    calls = [ToolCall(id=i, name="bash", arguments={"command": c}) for i, c in commands]
    text = content if isinstance(content, str) else ""
    if not isinstance(response, dict):
        return ModelTurn(text=text, tool_calls=calls)
    turn = normalize(response)
    update: dict[str, Any] = {"tool_calls": calls}
    if calls and turn.finish_reason is FinishReason.STOP:
        update["finish_reason"] = FinishReason.TOOL_CALLS  # the calls are in the text by design
    return turn.model_copy(update=update)


class GovernedAgent(DefaultAgent):
    """A mini-swe-agent `DefaultAgent` whose every step agentfsm decides.

    Args:
        model: A mini-swe-agent model.
        env: A mini-swe-agent environment.
        policy: The run's policy; `Policy()` when omitted.
        approve: Answers calls that need a human (see `Approver`); None declines them.
        observers: Receive every event of each run's Controller (e.g. a `TraceWriter`).
        on_decline: What a decline without a message does: `"stop"` ends the run (the
            Controller's default), `"feedback"` tells the model and goes on.
        shadow: A candidate policy judged beside `policy` on every call and recorded
            (`Decision.shadow`, the trace), never enforced; see docs/shadow.md.
        **kwargs: `AgentConfig` fields, as for `DefaultAgent`.
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        *,
        policy: Policy | None = None,
        approve: Approver | None = None,
        observers: Iterable[Observer] = (),
        on_decline: _decline.OnDecline = "stop",
        shadow: Policy | Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.policy = as_policy(policy, "GovernedAgent: policy")
        self.shadow = as_shadow(shadow, None)
        self.on_decline = _decline.checked(on_decline, "GovernedAgent")
        if approve is not None and not callable(approve):
            raise DefinitionError(
                f"GovernedAgent: approve must be a function of the calls, or None, not "
                f"{type(approve).__name__}"
            )
        try:
            super().__init__(model, env, **kwargs)
        except ValidationError as exc:  # mini-swe-agent's AgentConfig
            problems = listed(problems_of(exc))
            raise DefinitionError(f"GovernedAgent: mini-swe-agent's config: {problems}") from exc
        self.approve = approve
        self.observers = as_observers(observers, "GovernedAgent")
        self.controller = self._controller()
        self.decisions: list[Decision] = []
        self._as_text = False
        """Whether the output being acted on is text-based (its results go as user messages)."""

    def _controller(self) -> Controller:
        return Controller(
            self.policy, [BASH_TOOL["function"]], observers=self.observers, shadow=self.shadow
        )

    def run(self, task: str = "", **kwargs: Any) -> dict[str, Any]:
        """Run the task to its end with a fresh Controller."""
        self.controller = self._controller()
        self.decisions = []
        result: dict[str, Any] = super().run(task, **kwargs)
        return result

    def _decide(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        return decision

    def step(self) -> list[dict[str, Any]]:
        """Query the model, ask agentfsm, and do what it decided."""
        try:
            message: dict[str, Any] | None = self.query()
        except FormatError as error:
            return self._refused_by_model(error)
        assert message is not None
        return self._act(
            self._decide(self.controller.on_model_output(self._output(message))), message
        )

    @property
    def text_based(self) -> bool:
        """Whether the model writes its actions in text (an `action_regex`), not tool calls."""
        return _action_regex(self.model) is not None

    def _output(self, message: dict[str, Any]) -> Any:
        """What agentfsm decides on: the full response, the message, or its text actions."""
        extra = message.get("extra", {})
        response = extra.get("response")
        content = message.get("content")
        calls = message.get("tool_calls")
        self._as_text = self.text_based or (calls is None and not isinstance(response, dict))
        if self._as_text:
            found = _commands(_action_regex(self.model), content, extra.get("actions"))
            return _text_turn(found, content, response)
        if isinstance(response, dict):
            return response
        return {k: v for k, v in message.items() if k != "extra"}

    def _refused_by_model(self, error: FormatError) -> list[dict[str, Any]]:
        """A response the model class refused with FormatError: agentfsm decides on it."""
        response = error.messages[0].get("extra", {}).get("response") if error.messages else None
        if not isinstance(response, dict):
            raise error
        choice = (response.get("choices") or [{}])[0].get("message") or {}
        self._as_text = self.text_based
        if self._as_text:
            found = _commands(_action_regex(self.model), choice.get("content"), None)
            output: Any = _text_turn(found, choice.get("content"), response)
        else:
            output = response
        decision = self._decide(self.controller.on_model_output(output))
        return self._act(decision, self._adopt(dict(choice)))

    def _adopt(self, choice: dict[str, Any]) -> dict[str, Any]:
        """Put a message the model class refused into the history, so its calls are answered."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": choice.get("content"),
            "extra": {"actions": []},
        }
        if choice.get("tool_calls"):
            message["tool_calls"] = choice["tool_calls"]
        self.add_messages(message)
        return message

    def _act(self, decision: Decision, message: dict[str, Any]) -> list[dict[str, Any]]:
        action = decision.action
        if action is Action.RETRY:
            if self.messages and self.messages[-1] is message:
                self.messages.pop()
            return []
        self._write_ids(message)
        if action is Action.ASK_HUMAN:
            return self._ask(decision, message)
        if action in (Action.EXECUTE_TOOLS, Action.HANDOFF):
            return self._execute(decision)
        out = self._error_messages(decision.results)
        if action is Action.FINAL:
            text = self.controller.last_output.text if self.controller.last_output else ""
            out.append(self._exit("Submitted", text, decision))
        elif action is Action.STOP:
            out.append(self._exit(str(decision.exit_reason), decision.reason, decision))
        return self.add_messages(*out)

    def _write_ids(self, message: dict[str, Any]) -> None:
        """Write agentfsm's calls (their issued ids) into the assistant message's tool calls.

        The message's calls and agentfsm's are the same calls in the same order (one chat
        tool call each); only an id agentfsm issued (missing or duplicate) differs.
        """
        last = self.controller.last_output
        calls = message.get("tool_calls")
        if last is None or not isinstance(calls, list) or len(calls) != len(last.tool_calls):
            return
        for call, issued in zip(calls, last.tool_calls, strict=True):
            if isinstance(call, dict) and call.get("id") != issued.id:
                call["id"] = issued.id

    def _exit(self, status: str, content: str, decision: Decision) -> dict[str, Any]:
        submission = content if status == "Submitted" else ""
        return {
            "role": "exit",
            "content": content,
            "extra": {
                "exit_status": status,
                "submission": submission,
                "agentfsm": decision.model_dump(mode="json", include={"action", "exit_reason"}),
            },
        }

    def _error_messages(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """The controller's own results: tool messages, or user messages for a text-based model."""
        if self._as_text:
            return [self.model.format_message(role="user", content=str(r.content)) for r in results]
        return [
            {"role": "tool", "tool_call_id": r.call_id, "content": str(r.content)} for r in results
        ]

    def _ask(self, decision: Decision, message: dict[str, Any]) -> list[dict[str, Any]]:
        # The turn's refused calls were answered in the ASK_HUMAN decision, not in the reply.
        refused = self.add_messages(*self._error_messages(decision.results))
        if self.approve is None:  # no human to ask: refuse, without saying a human declined
            why = "the policy asks a human, and GovernedAgent was given no `approve`"
            stop = self._decide(self.controller.stop(ExitReason.PERMISSION_DENIED, why))
            return refused + self._act(stop, message)
        # Copies: an approver that edits a call must not change the call that runs.
        answer = self.approve([c.model_copy(deep=True) for c in decision.tool_calls])
        approved, note, scope = _answer(answer)
        if not approved:
            note = _decline.message(self.on_decline, note)
        # The scope holds for each asked call; the Controller checks it (a bad one raises
        # InvalidInputError, the run unchanged).
        remember = {c.id: scope for c in decision.tool_calls} if scope is not None else None
        reply = self._decide(self.controller.on_human_reply(approved, note, remember=remember))
        return refused + self._act(reply, message)

    def _execute(self, decision: Decision) -> list[dict[str, Any]]:
        """Run the cleared calls, each only if `may_run` says so right before it runs."""
        ran: list[dict[str, Any]] = []
        outputs: list[dict[str, Any]] = []
        refused: list[ToolResult] = []
        pending = {c.id for c in self.controller.pending_calls}
        started: set[str] = set()
        try:
            for call in decision.tool_calls:
                arguments = call.arguments or {}
                if call.id in started or not self.controller.may_run(call.id, call.name, arguments):
                    if call.id in pending - started:  # the rest have their answer already
                        refused.append(_not_cleared(call))
                    continue
                started.add(call.id)
                ran.append({"command": arguments.get("command", ""), "tool_call_id": call.id})
                outputs.append(self.env.execute(ran[-1]))
        except Submitted as submitted:
            if self._submitted(submitted, ran, outputs, refused):
                raise
            return self._after_submit()
        observed = self.model.format_observation_messages(
            {"extra": {"actions": ran}}, outputs, self.get_template_vars()
        )
        added = self.add_messages(*self._error_messages([*decision.results, *refused]), *observed)
        after = self._decide(self.controller.on_tool_results([*_results(ran, outputs), *refused]))
        if decision.note and after.action is not Action.STOP:
            # A note (the loop ladder's warning, a human's with an approval) is for the model:
            # a user message after the observations it speaks of.
            added += self.add_messages(
                self.model.format_message(role="user", content=decision.note)
            )
        if after.action is Action.STOP:
            added += self.add_messages(self._exit(str(after.exit_reason), after.reason, after))
        return added

    def _submitted(
        self,
        submitted: Submitted,
        actions: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        refused: list[ToolResult],
    ) -> bool:
        """Decide the submission as the run's final answer; True when it ends the run FINAL.

        The commands that ran (the submit last, its submission as its output) are answered
        first (calls of the same message after the submit never ran: they are answered as not
        cleared); then the submission is the text of an output of its own, decided like any
        answer, so the completion checks judge it.
        """
        text = str(submitted.messages[0].get("content", "")) if submitted.messages else ""
        results = [*_results(actions[: len(outputs)], outputs), *refused]
        results.append(ToolResult(call_id=actions[-1]["tool_call_id"], content=text))
        self._decide(self.controller.on_tool_results(results))
        if self.controller.done:
            return False
        if not text.strip() and not self._checks_completion():
            # mini-swe-agent's own prompts submit with the bare command: the work is in the
            # environment, and an empty submission ends the run natively. Deciding it as an
            # answer would meet the built-in non-empty check and send the model back forever.
            why = "mini-swe-agent's submit command ended the run (an empty submission)"
            self._decide(self.controller.stop(ExitReason.COMPLETED, why))
            return True
        answer = ModelTurn(text=text, finish_reason=FinishReason.STOP)
        decision = self._decide(self.controller.on_model_output(answer))
        return decision.action is Action.FINAL

    def _checks_completion(self) -> bool:
        """Whether the policy asks for completion checks of its own (verifiers, or a human
        asked about an incomplete answer): they then judge an empty submission as an answer."""
        return bool(self.policy.verifiers) or self.policy.on_incomplete == "ask"

    def _after_submit(self) -> list[dict[str, Any]]:
        """A submission that did not end the run FINAL: a human asked (`on_incomplete="ask"`),
        the stop's exit, or the model is told why and the run goes on."""
        last = self.decisions[-1]
        added = self._ask(last, {}) if last.action is Action.ASK_HUMAN else []
        if added and added[-1].get("role") == "exit":
            return added
        if self.controller.done:
            return self.add_messages(self._exit(str(last.exit_reason), last.reason, last))
        why = f"the submission was not accepted: {last.reason}"
        return added + self.add_messages(self.model.format_message(role="user", content=why))


def _not_cleared(call: ToolCall) -> ToolResult:
    """The result of a call `may_run` refused: it did not run."""
    why = f"not executed: agentfsm did not clear call {call.id!r} ({json.dumps(call.arguments)})"
    return ToolResult(call_id=call.id, content=why, is_error=True, name=call.name)


def _results(actions: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> list[ToolResult]:
    """The commands' outputs as results of their calls, one each, in order."""
    return [
        ToolResult(
            call_id=a["tool_call_id"],
            content=o.get("output", ""),
            is_error=o.get("returncode") != 0,
        )
        for a, o in zip(actions, outputs, strict=True)
    ]
