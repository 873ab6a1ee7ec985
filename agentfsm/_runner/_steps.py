"""A run's bookkeeping, free of I/O: what `run` and `arun` do between their calls.

`steps_of` is a generator: it yields what must be done next (call the model, ask
the human, run sub-agents, run a batch of tools) and is sent how it went. The
sync and async loops in `agentfsm._runner.loop` only do that I/O, so both make
the same decisions in the same order, and neither repeats the other's bookkeeping.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from agentfsm._model.types import Action, Decision, ExitReason, ToolCall, ToolResult
from agentfsm._runner._batch import AbandonedError
from agentfsm._runner._options import Flag, RunOptions
from agentfsm._runner.agents import child_messages, child_result, cleared
from agentfsm._runner.executor import Executor
from agentfsm._runner.session import RunResult, Session
from agentfsm.exceptions import ProviderError

__all__ = [
    "AskHuman",
    "CallModel",
    "Delegate",
    "Loop",
    "Need",
    "RunTools",
    "Steps",
    "open_loop",
    "steps_of",
]

_HOST_WORK = (Action.EXECUTE_TOOLS, Action.HANDOFF, Action.ASK_HUMAN)


class Loop:
    """What one run acts with: its options, session, executor and sub-agents."""

    def __init__(self, options: RunOptions, session: Session) -> None:
        self.options = options
        self.session = session
        self.executor = options.executor or Executor(
            session.specs or {}, parallel_tool_calls=options.parallel_tool_calls is not False
        )
        self.cancel = options.cancel
        self.inbox = options.inbox
        self.agents = dict(options.agents or {})
        self.request = options.request()
        # Set when a child was interrupted: the cancellation (of the task) was meant for all.
        self.interrupted = False

    def cancelled(self) -> bool:
        """Whether the run was cancelled; if so it ends INTERRUPTED, nothing produced lost."""
        if self.interrupted or (self.cancel is not None and self.cancel.is_set()):
            self.session.interrupt()
            return True
        return False

    def going_on(self) -> bool:
        """Before a model call: not cancelled, and (queued messages taken) not finished."""
        return not self.cancelled() and self.session.take(self.inbox)

    def awaits_host(self, decision: Decision) -> bool:
        """Whether the decision asks for tools, a sub-agent or a human, in a run still on."""
        return decision.action in _HOST_WORK and not self.session.finished and not self.cancelled()

    def skip(self) -> Flag | None:
        return None if self.inbox is None else self.inbox.arrived

    def child_run(
        self, call: ToolCall
    ) -> tuple[str, list[dict[str, Any]], dict[str, Any]] | ToolResult:
        """The model, messages and options of the sub-agent's run, or the error result
        when no agent is registered for the call."""
        agent = self.agents.get(call.name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            return Executor.error_of(
                call, f"no agent is registered for handoff {call.name!r}; agents: {known}"
            )
        model, options = self.options.child(agent)
        return model, child_messages(agent, call), options

    def adopt(self, call: ToolCall, child: RunResult) -> ToolResult:
        """Make the child's end the call's result (its spend reached this run live, through
        the ledger)."""
        self.interrupted = self.interrupted or child.exit_reason is ExitReason.INTERRUPTED
        why = child.error
        if why is None and child.exit_reason is not ExitReason.COMPLETED and child.decisions:
            why = child.decisions[-1].reason  # the limit that stopped it, for the parent's model
        return child_result(call, child.exit_reason, child.text, why)


@contextmanager
def open_loop(options: RunOptions) -> Iterator[Loop]:
    """The run's session (its Controller and trace), closed when the run ends."""
    with Session.open(
        options.model,
        options.messages,
        options.tools,
        options.policy,
        options.observers,
        options.trace,
        max_tokens=options.max_tokens,
        shadow=options.shadow,
        show_budget=options.show_budget,
    ) as session:
        yield Loop(options, session)


# What a run's steps ask the loop driving them to do; each is answered by the outcome.
class CallModel(NamedTuple):
    """Call the model with this request: an `Answer`, or the ProviderError (or, on the
    sync path, the AbandonedError of a cancellation) that ended the call."""

    request: dict[str, Any]


class AskHuman(NamedTuple):
    """Ask `on_ask` about the decision: `(approved, message)`."""

    decision: Decision


class Delegate(NamedTuple):
    """Run a sub-agent for each call, pulled one at a time (see `cleared`): their results."""

    calls: Iterator[ToolCall]


class RunTools(NamedTuple):
    """Run the decision's batch of tool calls: their results."""

    decision: Decision


Need = CallModel | AskHuman | Delegate | RunTools
Steps = Generator[Need, Any, None]


def steps_of(loop: Loop) -> Steps:
    """A run's bookkeeping, free of I/O: yield what must be done, receive how it went.

    `run` drives it with blocking calls and `arun` awaiting them, so both make the
    same decisions in the same order.
    """
    session = loop.session
    while loop.going_on():
        hold = session.hold_turn()
        if session.finished:  # the call would not fit what its run tree has left
            return
        try:
            answer = yield CallModel(session.request(loop.request))
        finally:
            session.release(hold)
        if isinstance(answer, ProviderError):
            session.fail(answer)
            return
        if isinstance(answer, AbandonedError):  # cancelled while the model answered
            session.interrupt()
            return
        decision = session.on_turn(answer.turn, answer.message)
        while loop.awaits_host(decision):
            decision = yield from _host_work(loop, decision)


def _host_work(loop: Loop, decision: Decision) -> Generator[Need, Any, Decision]:
    """Have one decision's work done (a human, sub-agents or tools); the next decision."""
    session = loop.session
    if decision.action is Action.ASK_HUMAN:
        approved, message, remember = yield AskHuman(decision)
        return session.on_human(decision, approved, message, remember)
    if decision.action is Action.HANDOFF:
        results = yield Delegate(cleared(session.controller, decision))
        return session.on_results(results)
    results = yield RunTools(decision)
    session.steer(loop.inbox)
    return session.on_results(results)
