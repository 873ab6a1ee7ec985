"""Layer 3 guards: is the task done? Completion checks are pluggable verifiers.

A verifier is a function `verifier(snapshot) -> str | bool | None`: None or
True when the answer passes, False or a string saying what is missing when it
does not. The built-in `non_empty_answer` always runs first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import ExitReason, FinishReason, Priority
from agentfsm.exceptions import InvalidInputError
from agentfsm.guards._base import ON_OUTPUT, Guard, Hit

__all__ = ["AnswerComplete", "AnswerIncomplete", "Paused", "Verifier", "non_empty_answer"]

Verifier = Callable[[RunSnapshot], str | bool | None]


def non_empty_answer(snap: RunSnapshot) -> str | None:
    """Fail an answer that has no visible text."""
    if not isinstance(snap, RunSnapshot):
        raise InvalidInputError(f"non_empty_answer reads a RunSnapshot, not {type(snap).__name__}")
    out = snap.output
    if out is None or not out.text.strip():
        return "the answer is empty"
    return None


def _first_problem(verifiers: tuple[Verifier, ...], snap: RunSnapshot) -> str | None:
    for verify in (non_empty_answer, *verifiers):
        verdict = verify(snap)
        if verdict is None or verdict is True:
            continue
        name = getattr(verify, "__name__", repr(verify))
        return verdict if isinstance(verdict, str) else f"verifier {name} failed"
    return None


class _Verifying(Guard):
    def __init__(self, *verifiers: Verifier) -> None:
        self.verifiers = verifiers

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), {}

    def _code(self) -> str:
        names = ", ".join(getattr(v, "__qualname__", repr(v)) for v in self.verifiers)
        return f"{type(self).__name__}({names})"

    def _key(self) -> tuple[Any, ...]:
        return (type(self), self.verifiers)


class AnswerComplete(_Verifying):
    """End the run as completed when the answer passes every completion check."""

    phases = ON_OUTPUT
    layer = 3
    priority = Priority.P3
    exit_reason = ExitReason.COMPLETED

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or out.tool_calls or out.finish_reason is FinishReason.PAUSE:
            return None
        if _first_problem(self.verifiers, snap) is not None:
            return None
        return Hit(self, "the answer passes the completion checks", self.exit_reason)


class AnswerIncomplete(_Verifying):
    """Continue (or ask the user) when an answer without tool calls is not done."""

    phases = ON_OUTPUT
    layer = 3
    priority = Priority.P4

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or snap.phase != "model_output":
            return None
        if out.tool_calls or snap.rejected or snap.executable:
            return None
        problem = _first_problem(self.verifiers, snap)
        return None if problem is None else Hit(self, problem, self.exit_reason)


class Paused(Guard):
    """Call the model again when it paused a long turn (Anthropic `pause_turn`): not final."""

    phases = ON_OUTPUT
    layer = 3
    priority = Priority.P4

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or out.finish_reason is not FinishReason.PAUSE or out.tool_calls:
            return None
        return Hit(
            self,
            f"the provider paused the turn ({out.raw_finish_reason}); it is not final",
            self.exit_reason,
        )
