"""Sub-agents: a handoff runs another agent, whose end comes back as the call's result.

A child agent has its own Controller and runs through the same runner (same
provider settings, same cancellation), under its own policy narrowed by the
parent's (never wider). Its final answer, failure, limit or interruption is the
handoff call's result, never the parent's end; each of its turns is charged to
the parent's budgets as it is counted (the run tree's ledger). A child runs only when
the parent's Controller clears its call (`may_run`, by id, name and arguments)
right before it starts; a handoff it does not clear is not run, and the
controller answers it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfsm._model.types import Decision, ExitReason, ToolCall, ToolResult
from agentfsm.exceptions import InvalidInputError

__all__ = ["Agent", "child_messages", "child_result", "cleared"]

_TASK_KEYS = ("task", "input", "message", "prompt", "query", "request", "question")


@dataclass(frozen=True)
class Agent:
    """An agent the runner can hand a task to.

    Args:
        tools: The child's tools (Python callables run by the runner).
        policy: The child's own `agentfsm.Policy`; None uses the defaults.
        model: A litellm model name; None uses the parent's model.
        instructions: A system message for the child.
        options: Further litellm arguments for the child's calls (`temperature`, ...).
    """

    tools: Sequence[Any] | None = None
    policy: Any = None
    model: str | None = None
    instructions: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


def cleared(controller: Any, decision: Decision) -> Iterator[ToolCall]:
    """The decision's calls that `controller` clears, each asked right before it is yielded.

    Lazy on purpose: the caller runs one child before the next call is asked about,
    so a run stopped meanwhile runs nothing more. A call not cleared is skipped: it
    gets no result from the caller, and the controller answers it.
    """
    if not isinstance(decision, Decision):
        raise InvalidInputError(f"decision must be a Decision, not {type(decision).__name__}")
    may_run = getattr(controller, "may_run", None)
    if not callable(may_run):
        raise InvalidInputError(
            f"controller must be the agentfsm Controller (it has may_run), not "
            f"{type(controller).__name__}"
        )
    for call in decision.tool_calls:
        # `is True`: an answer that is not a bool never lets a child run.
        if may_run(call.id, call.name, call.arguments or {}) is True:
            yield call


def _check_handoff(agent: object, call: object) -> None:
    if not isinstance(agent, Agent):
        raise InvalidInputError(f"agent must be an agentfsm Agent, not {type(agent).__name__}")
    if not isinstance(call, ToolCall):
        raise InvalidInputError(f"call must be the handoff ToolCall, not {type(call).__name__}")


def child_messages(agent: Agent, call: ToolCall) -> list[dict[str, Any]]:
    """The child's first messages: its instructions, then the task the parent wrote."""
    _check_handoff(agent, call)
    arguments = call.arguments or {}
    task = next((arguments[k] for k in _TASK_KEYS if isinstance(arguments.get(k), str)), None)
    if task is None:
        task = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    messages: list[dict[str, Any]] = []
    if agent.instructions:
        messages.append({"role": "system", "content": agent.instructions})
    messages.append({"role": "user", "content": task})
    return messages


def child_result(
    call: ToolCall, exit_reason: ExitReason, text: str, error: str | None
) -> ToolResult:
    """The handoff call's result: the child's answer, or an error saying how it ended."""
    if not isinstance(call, ToolCall) or not isinstance(exit_reason, ExitReason):
        raise InvalidInputError(
            "child_result takes the handoff ToolCall and the child's ExitReason, not "
            f"{type(call).__name__} and {type(exit_reason).__name__}"
        )
    if exit_reason is ExitReason.COMPLETED:
        return ToolResult(call_id=call.id, name=call.name, content=text)
    detail = error or text or "no answer"
    return ToolResult(
        call_id=call.id,
        name=call.name,
        is_error=True,
        content=f"sub-agent {call.name!r} ended with {exit_reason.value}: {detail}",
    )
