"""Layer 3 guards: is the task done? Completion checks are pluggable verifiers.

A verifier is a function `verifier(snapshot) -> str | bool | None`: None or
True when the answer passes, False or a string saying what is missing when it
does not. The built-in `non_empty_answer` always runs first. The answer is
`snapshot.output`: a model output without tool calls, or, when a final tool
(`Policy(final_tools=...)`) returned, that result as an answer's text (phase
`tool_results`; the result itself is in `snapshot.results`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import ExitReason, FinishReason, Priority
from agentfsm.exceptions import InvalidInputError
from agentfsm.guards._base import ON_OUTPUT, ON_RESULTS, Guard, Hit

__all__ = ["AnswerComplete", "AnswerIncomplete", "Paused", "Verifier", "non_empty_answer"]

Verifier = Callable[[RunSnapshot], str | bool | None]

ON_ANSWERS = ON_OUTPUT | ON_RESULTS
"""Where an answer is checked: a model output, or the results holding a final tool's."""


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
    """End the run as completed when the answer passes every completion check.

    The answer is a model output without tool calls, or (phase `tool_results`) a final
    tool's successful result, which the snapshot's `output` holds as an answer's text.
    """

    phases = ON_ANSWERS
    layer = 3
    priority = Priority.P3
    exit_reason = ExitReason.COMPLETED

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or out.tool_calls or out.finish_reason is FinishReason.PAUSE:
            return None
        if _first_problem(self.verifiers, snap) is not None:
            return None
        what = "the final tool's result" if snap.phase == "tool_results" else "the answer"
        return Hit(self, f"{what} passes the completion checks", self.exit_reason)


class AnswerIncomplete(_Verifying):
    """Continue (or ask the user) when an answer without tool calls is not done.

    A final tool's result (phase `tool_results`) is an answer too: one that fails a
    check continues the run with the check's reason, as a model's answer does.
    """

    phases = ON_ANSWERS
    layer = 3
    priority = Priority.P4

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or snap.phase == "human_reply":
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
