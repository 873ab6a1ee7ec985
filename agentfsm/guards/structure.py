"""Layer 1 guards: what the model's output structurally asks for."""

from __future__ import annotations

from typing import ClassVar

from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import ExitReason, FinishReason, ModelTurn, Priority, ToolCall
from agentfsm.guards._base import ON_OUTPUT, ON_REPLY, Guard, Hit, cached

__all__ = [
    "HandoffRequested",
    "HasToolCalls",
    "MalformedToolCall",
    "OutputTruncated",
    "ProviderFailed",
    "SignalConflict",
]


class OutputTruncated(Guard):
    """Recover when the output was cut (length limit or a stream cut mid-block); never run it."""

    phases = ON_OUTPUT
    layer = 1
    priority = Priority.P0

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or not (out.truncated or out.finish_reason is FinishReason.LENGTH):
            return None
        raw = out.raw_finish_reason or out.finish_reason.value
        # An error is e.g. Gemini's MALFORMED_FUNCTION_CALL, or an error chunk in a stream.
        why = f"output broken ({raw}: {out.error})" if out.error else f"output cut ({raw})"
        if out.tool_calls:
            calls = len(out.tool_calls)
            return Hit(self, f"{why} inside {calls} tool call(s): none is executed", None)
        return Hit(self, f"{why}: the answer is incomplete", None)


class MalformedToolCall(Guard):
    """Recover when a tool call's arguments are incomplete or not a JSON object."""

    phases = ON_OUTPUT
    layer = 1
    priority = Priority.P0

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.output is None:
            return None
        for call in snap.output.tool_calls:
            if call.error is not None or call.arguments is None:
                return Hit(
                    self,
                    f"tool call {call.name!r} ({call.id}) is unusable: {_why(call)}",
                    self.exit_reason,
                )
        return None


class ProviderFailed(Guard):
    """Stop when the provider reports that the turn failed; none of its calls runs.

    A failed turn (finish reason ERROR, or an error inside the output) is never
    executed and never a completed answer, whatever text or calls it holds. A
    failure a retry may fix (a cut stream, a malformed call) is routed first,
    at P0, by `OutputTruncated` and `MalformedToolCall`.
    """

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.PROVIDER_ERROR

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or not (out.error or out.finish_reason is FinishReason.ERROR):
            return None
        why = (
            f"provider error: {out.error}"
            if out.error
            else (f"provider ended with {out.raw_finish_reason!r}")
        )
        if out.tool_calls:
            why += f"; its {len(out.tool_calls)} tool call(s) are not run"
        return Hit(self, why, self.exit_reason)


class SignalConflict(Guard):
    """Note where the provider's finish reason disagrees with the output; structure wins."""

    phases = ON_OUTPUT
    layer = 1
    priority = Priority.P7

    _agrees: ClassVar[frozenset[FinishReason]] = frozenset({FinishReason.TOOL_CALLS})

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None:
            return None
        if out.tool_calls and out.finish_reason not in self._agrees:
            return Hit(
                self,
                f"provider said {_claim(out)!r} but the output has {len(out.tool_calls)} "
                "tool call(s)",
                self.exit_reason,
            )
        if not out.tool_calls and out.finish_reason is FinishReason.TOOL_CALLS:
            return Hit(
                self,
                f"provider said {_claim(out)!r} but the output has no tool call",
                self.exit_reason,
            )
        if _unclaimed(out):
            return Hit(self, "provider gave no finish reason but the answer is whole", None)
        return None


class HasToolCalls(Guard):
    """Execute when the output has valid tool calls that may run."""

    phases = ON_OUTPUT | ON_REPLY
    layer = 1
    priority = Priority.P1

    def __init__(self) -> None:
        self._hits: dict[str | tuple[str, ...], Hit] = {}
        """Hits by the calls' names: every step of a tool loop asks twice with the same names."""

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        calls = snap.executable
        if not calls:
            return None
        key = calls[0].name if len(calls) == 1 else tuple([c.name for c in calls])
        hit = self._hits.get(key)
        if hit is None:
            hit = cached(self._hits, key, Hit(self, _valid_calls(calls), None))
        return hit


class HandoffRequested(Guard):
    """Delegate when the model hands the task to another agent (or a human approved it)."""

    phases = ON_OUTPUT | ON_REPLY
    layer = 1
    priority = Priority.P2

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if not snap.handoffs:
            return None
        return Hit(self, f"handoff to {snap.handoffs[0].name!r}", self.exit_reason)


def _valid_calls(calls: tuple[ToolCall, ...]) -> str:
    if len(calls) == 1:
        return f"1 valid tool call: {calls[0].name}"
    return f"{len(calls)} valid tool calls: {', '.join([c.name for c in calls])}"


def _why(call: ToolCall) -> str:
    """Why a call cannot run, also for a hand-built call that carries no `error`."""
    if call.error is not None:
        return call.error
    if call.raw_arguments is not None:
        return f"its arguments are not a JSON object: {call.raw_arguments!r:.200}"
    return "it has no arguments (arguments=None)"


def _unclaimed(out: ModelTurn) -> bool:
    """Whether a read answer came with no finish reason at all and was not cut.

    (A stream the server ended with `[DONE]` but no reason, whole by its structure.)
    """
    return (
        out.provider is not None
        and out.raw_finish_reason is None
        and out.finish_reason is FinishReason.UNKNOWN
        and not out.truncated
        and bool(out.text)
    )


def _claim(out: ModelTurn) -> str:
    """The provider's finish reason as it said it; a hand-built turn's mapped value otherwise."""
    if out.raw_finish_reason is not None:
        return out.raw_finish_reason
    if out.finish_reason is not FinishReason.UNKNOWN:
        return out.finish_reason.value
    return "no finish reason"
