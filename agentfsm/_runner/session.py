"""One run of the runner: the Controller, the message list it grows, and the result.

The session is the runner's bookkeeping, free of I/O so `run` and `arun` share
it: it turns each decision into messages (the assistant turn, the tool results,
the controller's own results beside them, a failed completion check's reason as
the user's message) and the next request's arguments (the tools not denied by
name, `max_tokens` raised after a truncation).
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ConfigDict, Field

from agentfsm._engine.controller import Controller
from agentfsm._engine.policy import Policy, as_policy
from agentfsm._model._checked import Checked
from agentfsm._model.ledger import Account, Hold, Ledger
from agentfsm._model.tools import ToolSpec, tool_specs
from agentfsm._model.types import (
    Action,
    Decision,
    ExitReason,
    ModelTurn,
    ToolCall,
    ToolResult,
    Usage,
)
from agentfsm.guards.completion import AnswerIncomplete

__all__ = ["Answer", "Inbox", "RunResult", "Session"]

DEFAULT_MAX_TOKENS = 4096
"""The output limit assumed when a truncated call set none and reported no usage."""
_AWAITING_HOST = (Action.EXECUTE_TOOLS, Action.HANDOFF, Action.ASK_HUMAN)
_INCOMPLETE = f"{AnswerIncomplete.__name__}("
"""How a decision's `fired` starts when a completion check failed (CONTINUE at P4)."""


class Answer(NamedTuple):
    """One model call's output: the turn, and what goes back to the provider as it came."""

    turn: ModelTurn
    message: dict[str, Any] | None = None
    """litellm's own assistant message of a paused turn (Anthropic `pause_turn`): its
    provider blocks (server tool uses and their results, signed thinking) must be sent
    back unchanged for the provider to go on where it paused."""


_KEPT = ("provider_specific_fields", "thinking_blocks")
"""The fields of litellm's assistant message that carry the provider's own blocks."""


class RunResult(Checked):
    """How a run ended, and everything it produced on the way."""

    model_config = ConfigDict(frozen=True)

    exit_reason: ExitReason
    """Why the run ended; `COMPLETED` is the only normal end."""
    decisions: list[Decision] = Field(default_factory=list)
    """Every decision the Controller made, in order."""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The conversation at the end, in OpenAI chat format, the input messages first."""
    text: str = ""
    """The final answer (the last model text when the run did not complete)."""
    turns: int = 0
    """Model outputs the Controller saw, retries included."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens (and cost, when known) summed over every model output, sub-agents' included."""
    error: str | None = None
    """What failed, when the run ended with `PROVIDER_ERROR` or `CONTEXT_EXHAUSTED` (the
    provider's error saying the input does not fit)."""


class Inbox:
    """User messages for a run in progress; `send` is safe from any thread.

    A message sent while tools run skips the calls not yet started ("skipped: a
    user message arrived") and reaches the model next; one sent while the model
    answers continues the conversation as the next episode.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[str] = []
        self.arrived = threading.Event()
        """Set while messages wait to be taken."""

    def send(self, text: str) -> None:
        """Queue a user message."""
        if not isinstance(text, str):
            from agentfsm.exceptions import InvalidInputError

            raise InvalidInputError(f"a user message must be a str, not {type(text).__name__}")
        with self._lock:
            self._texts.append(text)
            self.arrived.set()

    def take(self) -> list[str]:
        """Take every queued message, oldest first."""
        with self._lock:
            texts, self._texts = self._texts, []
            self.arrived.clear()
        return texts


_TOOLS_OF: ContextVar[Session | None] = ContextVar("agentfsm_tools_of", default=None)
"""The run whose tools are running in this context (None outside a batch of tools).

A run started inside a tool (`af.run` called by the tool's code, in its thread or
task: contexts travel with both) finds the run that called the tool here, and takes
its tools when given none of its own."""

_PARENT: ContextVar[Session | None] = ContextVar("agentfsm_parent", default=None)
"""The run whose tools or handoffs are running in this context: a run started here is its
child. The child runs under its own policy narrowed by the parent's (never wider), and
joins the parent's ledger, which it charges with every turn as the turn is counted."""


class Session:
    """Feed one run's model outputs, tool results and human answers to its Controller."""

    def __init__(
        self, model: str, messages: Sequence[Mapping[str, Any]], controller: Any, specs: Any
    ) -> None:
        self.model = model
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self.controller = controller
        self.specs: dict[str, ToolSpec] | None = specs
        policy: Policy = controller.policy
        self.offered: list[ToolSpec] = [
            spec for name, spec in (specs or {}).items() if not denied_by_name(policy, name)
        ]
        """The tools each request offers: those the policy does not deny by name."""
        self.max_tokens: int | None = None
        self.decisions: list[Decision] = []
        self.error: str | None = None
        self._pending: ModelTurn | None = None
        self._provided: dict[str, Any] | None = None
        """The provider's own message of the pending turn, when it must go back as it came."""
        self._answers: list[ToolResult] = []
        self._users: list[str] = []
        self._text = ""
        self._usage = Usage()
        self._charging = threading.Lock()  # tools on several threads may charge at once
        self.account: Account | None = None
        """The run's account in its run tree's ledger (set by `open`)."""
        self.show_budget: Any = False
        """Whether (True) or how (a function of the `Left`) each request shows what is left."""
        self.child = False
        """Whether the run is a child in its run tree (it holds an estimate before each call)."""
        self._last_spend: Usage | None = None
        """What the run's latest model call spent (priced when the run prices turns)."""

    @classmethod
    @contextmanager
    def open(
        cls,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Any] | None,
        policy: Any,
        observers: Sequence[Callable[[Mapping[str, Any]], Any]],
        trace: str | os.PathLike[str] | None,
        *,
        max_tokens: int | None = None,
        shadow: Any = None,
        show_budget: Any = False,
    ) -> Iterator[Session]:
        """Build the Controller (and the trace writer) for one run; close the trace after.

        A run started inside a tool without tools of its own takes the calling run's.
        """
        from agentfsm._replay.trace import TraceWriter

        caller, parent = _TOOLS_OF.get(), _PARENT.get()
        if tools is None and caller is not None:
            tools, policy = caller.inherited(policy)
        policy = as_policy(policy)
        run_id = uuid.uuid4().hex[:12]
        if parent is None:
            account = Ledger().open(policy, run_id=run_id)
        else:
            policy = policy.narrowed_by(parent.controller.policy)
            above = parent.tree()
            account = above.ledger.open(policy, run_id=run_id, parent=above)
        specs = tool_specs(tools)
        writer = None
        if trace is not None:
            Path(trace).parent.mkdir(parents=True, exist_ok=True)
            writer = TraceWriter(trace)
        try:
            controller = Controller(
                policy,
                tools=None if specs is None else list(specs.values()),
                run_id=run_id,
                observers=(*observers, *([writer] if writer else [])),
                shadow=shadow,
                ledger=account,
            )
            session = cls(model, messages, controller, specs)
            session.max_tokens = max_tokens
            session.account = account
            session.show_budget = show_budget
            session.child = parent is not None
            account.listen(session._mirror)
            # Inside this run nothing is a tool or a child of the caller's run until a batch
            # or a handoff says so; its spend reached the caller through the ledger.
            tools_token, parent_token = _TOOLS_OF.set(None), _PARENT.set(None)
            try:
                yield session
            finally:
                _PARENT.reset(parent_token)
                _TOOLS_OF.reset(tools_token)
        finally:
            if writer is not None:
                writer.close()

    def inherited(self, policy: Any) -> tuple[list[ToolSpec] | None, Any]:
        """The tools (and policy) of a run started by one of this run's tools without its own.

        It gets the tools this run offers; without a policy of its own, this run's
        permissions come with them, so no tool runs there that would be refused here.
        """
        if self.specs is None:
            return None, policy
        if policy is None:
            own: Policy = self.controller.policy
            policy = Policy(
                permissions=own.permissions,
                permission_rules=own.permission_rules,
                permission=own.permission,
                ask_floor=own.ask_floor,
            )
        return list(self.offered), policy

    @contextmanager
    def running_tools(self) -> Iterator[None]:
        """Mark this context as running this run's tools: runs started by them are its
        children, and take its tools when given none."""
        tools_token, parent_token = _TOOLS_OF.set(self), _PARENT.set(self)
        try:
            yield
        finally:
            _PARENT.reset(parent_token)
            _TOOLS_OF.reset(tools_token)

    @contextmanager
    def delegating(self) -> Iterator[None]:
        """Mark this context as running this run's handoffs: their runs are its children."""
        token = _PARENT.set(self)
        try:
            yield
        finally:
            _PARENT.reset(token)

    def tree(self) -> Account:
        """The run's account in its run tree's ledger."""
        if self.account is None:  # a Session is made by `open`, which sets it
            raise AssertionError("a runner session without a ledger account")
        return self.account

    def _mirror(self, usage: Usage) -> None:
        """Add spend below this run (a child's turn, charged live) to its usage."""
        with self._charging:
            self._usage = _add_usage(self._usage, usage)

    @property
    def usage(self) -> Usage:
        """Tokens and cost so far: the run's model calls and what was charged to it."""
        return self._usage

    @property
    def finished(self) -> bool:
        """Whether the run has ended (the Controller ended it, or the provider failed)."""
        return self.error is not None or bool(self.controller.done)

    def request(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Return the keyword arguments of the next model call."""
        request: dict[str, Any] = {"model": self.model, "messages": list(self.messages)}
        note = self.budget_note()
        if note is not None:
            request["messages"].append(note)
        if self.offered:
            request["tools"] = [spec.to_openai() for spec in self.offered]
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        request.update(options)
        return request

    def hold_turn(self) -> Hold | None:
        """Before a child's model call: hold what its last call spent on the tree's ledger.

        When that does not fit what is left on the path (a parent's budget, less what the
        runs going on beside it hold), the call is not made: the run stops with the budget's
        exit reason, through its Controller. A root run holds nothing (its own budgets bind
        it as before); a child's first call holds nothing (its cost is not known yet).
        """
        spend = self._last_spend
        if not self.child or self.account is None or spend is None or self.finished:
            return None
        tokens, cost = spend.input_tokens + spend.output_tokens, spend.cost or 0.0
        hold = self.account.reserve(tokens=tokens, cost=cost)
        if hold is None:
            left = self.account.left()
            short = left.tokens is not None and left.tokens < tokens
            reason = ExitReason.TOKEN_BUDGET if short else ExitReason.COST_BUDGET
            what = f"{tokens} tokens" if short else f"${cost:.4f}"
            self._settle(
                self.controller.stop(
                    reason,
                    message=f"the next model call would spend about {what} (as the last did), "
                    f"more than the run tree has left ({left.text()})",
                )
            )
        return hold

    def release(self, hold: Hold | None) -> None:
        """Release the hold of a model call that answered (its Controller charged the turn)."""
        if hold is not None and self.account is not None:
            self.account.settle(hold)

    def budget_note(self) -> dict[str, Any] | None:
        """The message showing the model what is left, when the host asked for one."""
        show = self.show_budget
        if show is False or self.account is None:
            return None
        left = self.account.left(turns=self.controller.turns_left)
        said = left.text() if show is True else show(left)
        if said is None:
            return None
        if isinstance(said, str):
            return {"role": "system", "content": said}
        if isinstance(said, Mapping) and all(type(k) is str for k in said):
            return dict(said)
        from agentfsm.exceptions import DefinitionError

        raise DefinitionError(
            f"show_budget returned {type(said).__name__}: it returns a str, a message "
            "(a dict with 'role' and 'content') or None"
        )

    def on_turn(self, turn: ModelTurn, message: Mapping[str, Any] | None = None) -> Decision:
        """Give one model output to the Controller; the history keeps the ids it issued.

        `message`, litellm's own assistant message of the turn, sends the provider's
        blocks back with it (a paused turn's server tool work).
        """
        decision = self.controller.on_model_output(turn)
        self._pending = self.controller.last_output
        self._provided = dict(message) if message is not None else None
        self._text = turn.text or self._text
        self._usage = _add_usage(self._usage, turn.usage)
        routed = self._pending.usage if self._pending is not None else None
        self._last_spend = routed or turn.usage or self._last_spend
        return self._settle(decision)

    def on_results(self, results: Sequence[ToolResult]) -> Decision:
        """Send tool results to the model (beside the controller's own) and the Controller."""
        self._answers.extend(results)
        self._flush()
        return self._settle(self.controller.on_tool_results(list(results)))

    def on_human(
        self, asked: Decision, approved: bool, message: str | None, remember: Any = None
    ) -> Decision:
        """Give a human's answer to the Controller; a clarification goes to the model too.

        `remember`, a scope, holds the approval for each asked call (docs/approvals.md).
        """
        if not asked.tool_calls and message:
            self._flush()
            self.messages.append({"role": "user", "content": message})
        scopes = {c.id: remember for c in asked.tool_calls} if approved and remember else None
        return self._settle(self.controller.on_human_reply(approved, message, remember=scopes))

    def fail(self, exc: BaseException) -> None:
        """End the run on a provider failure that retries did not fix; the trace records it.

        An input the model's context cannot hold ends CONTEXT_EXHAUSTED, the messages kept.
        """
        self.error = str(exc)
        details = getattr(exc, "details", None) or {}
        reason = (
            ExitReason.CONTEXT_EXHAUSTED
            if details.get("context_exhausted")
            else ExitReason.PROVIDER_ERROR
        )
        if not self.controller.done:
            self._settle(self.controller.stop(reason, message=self.error))

    def interrupt(self) -> None:
        """End the run as INTERRUPTED, keeping every message and result produced so far."""
        if not self.controller.done:
            self._settle(self.controller.stop(ExitReason.INTERRUPTED, message="cancelled"))

    def steer(self, inbox: Inbox | None) -> None:
        """Give the queued user messages to the Controller; they reach the model next."""
        if inbox is None or not inbox.arrived.is_set():
            return
        for text in inbox.take():
            self.controller.on_user_message(text)
            self._users.append(text)
        if not self.controller.pending_calls:
            self._flush_users()

    def take(self, inbox: Inbox | None) -> bool:
        """Before a model call: take queued messages (after FINAL, they open the next episode).

        Returns whether the run goes on.
        """
        if inbox is not None and inbox.arrived.is_set():
            done = self.controller.done
            if not done or self.controller.exit_reason is ExitReason.COMPLETED:
                self.steer(inbox)
        return not self.finished

    def charge(self, usage: Usage) -> None:
        """Charge spend made outside the ledger (a sub-agent of another framework) to this
        run's budgets, usage and ledger (so the runs above it see it too)."""
        with self._charging:
            self.controller.charge(usage)
            self._usage = _add_usage(self._usage, usage)

    def result(self) -> RunResult:
        """Return the run's result."""
        exit_reason = self.controller.exit_reason or ExitReason.INTERRUPTED
        return RunResult(
            exit_reason=exit_reason,
            decisions=list(self.decisions),
            messages=list(self.messages),
            text=self._text,
            turns=int(self.controller.turn),
            usage=self._usage,
            error=self.error,
        )

    def _settle(self, decision: Decision) -> Decision:
        """Record a decision and write what it settles into the messages."""
        self.decisions.append(decision)
        if decision.note:
            # A note (a human's with an approval, the loop ladder's warning) reaches the model
            # after the calls' results, as a user message: the calls' turn is answered first.
            self._users.append(decision.note)
        self._answers.extend(decision.results)
        self._adjust(decision)
        if decision.action in _AWAITING_HOST:
            return decision
        if decision.action is Action.RETRY and not self._answers:
            self._pending = self._provided = None  # a broken output is not in the conversation
        if decision.action is Action.FINAL and decision.answer is not None:
            answer = decision.answer
            self._text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        self._flush()
        self._flush_users()
        if decision.action is Action.CONTINUE and decision.fired.startswith(_INCOMPLETE):
            # The model must be told what is missing, or it answers the same way again.
            self.messages.append({"role": "user", "content": f"Not done yet: {decision.reason}"})
        return decision

    def _flush_users(self) -> None:
        self.messages.extend({"role": "user", "content": text} for text in self._users)
        self._users = []

    def _adjust(self, decision: Decision) -> None:
        factor = decision.adjust.get("max_tokens_factor")
        if "max_tokens" in decision.adjust:
            self.max_tokens = int(decision.adjust["max_tokens"])
        elif factor:
            used = self._pending.usage.output_tokens if self._pending and self._pending.usage else 0
            self.max_tokens = int((self.max_tokens or used or DEFAULT_MAX_TOKENS) * factor)

    def _flush(self) -> None:
        """Append the pending assistant turn with its answered calls, then their results."""
        turn, answers = self._pending, {r.call_id: r for r in self._answers}
        kept = _provider_blocks(self._provided)
        self._pending, self._provided, self._answers = None, None, []
        if turn is None:
            return
        # A call that did not arrive whole (cut, or not JSON) stays out with its result: the
        # model never sent it as a call, and a provider rejects it sent back as one (its raw
        # text is not an argument object). The turn's text and its whole calls stay.
        calls = [c for c in turn.tool_calls if c.id in answers and c.complete]
        if turn.text or calls or kept:
            self.messages.append({**_assistant_message(turn.text, calls), **kept})
        self.messages.extend(_tool_message(answers[c.id]) for c in calls)


def denied_by_name(policy: Policy, name: str) -> bool:
    """Whether the policy denies every call of the tool `name`, whatever its arguments.

    A `permissions` entry, or a rule without an argument pattern, that denies it; or the
    table's `"*"` deny when nothing else can speak for the tool (no entry, no rule that
    names it, no hook). A deny with an argument pattern leaves the tool offered.
    """
    rules = [r for r in policy.permission_rules if fnmatch.fnmatchcase(name, r.tool)]
    if any(r.action == "deny" and r.names_tool_only for r in rules):
        return True  # a deny is never overridden
    table = policy.permissions
    if name in table:
        return table[name] not in ("allow", "ask")
    if rules or policy.permission is not None:
        return False
    return table.get("*", "allow") not in ("allow", "ask")


def _add_usage(total: Usage, usage: Usage | None) -> Usage:
    if usage is None:
        return total
    cost = (
        None if total.cost is None and usage.cost is None else (total.cost or 0) + (usage.cost or 0)
    )
    return Usage(
        input_tokens=total.input_tokens + usage.input_tokens,
        output_tokens=total.output_tokens + usage.output_tokens,
        cost=cost,
    )


def _assistant_message(text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments(c)},
            }
            for c in calls
        ]
    return message


def _provider_blocks(message: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of litellm's assistant message that carry the provider's own blocks."""
    if message is None:
        return {}
    return {key: message[key] for key in _KEPT if message.get(key)}


def _call_entry(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": _arguments(call)},
    }


def _arguments(call: ToolCall) -> str:
    # Only whole calls go back (see `Session._flush`); `{}` is a call sent without arguments.
    return json.dumps(call.arguments or {}, ensure_ascii=False)


def _tool_message(result: ToolResult) -> dict[str, Any]:
    content = result.content
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    message = {"role": "tool", "tool_call_id": result.call_id, "content": content}
    if result.name:
        message["name"] = result.name
    return message
