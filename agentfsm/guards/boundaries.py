"""Layer 5 guards: budgets, permissions, safety and the human in the loop.

Budgets bind when the run needs another model call or a tool execution; a
complete final answer needs neither, so it still ends as COMPLETED.
"""

from __future__ import annotations

import math

from agentfsm._snapshot import RunSnapshot
from agentfsm._types import ExitReason, FinishReason, Priority
from agentfsm.guards._base import ON_OUTPUT, ON_REPLY, Guard

__all__ = [
    "ContentFiltered",
    "ContextLimit",
    "CostBudget",
    "Deadline",
    "HumanApproved",
    "HumanDeclined",
    "MaxToolCalls",
    "MaxTurns",
    "NeedsApproval",
    "PermissionDenied",
    "Refused",
    "TokenBudget",
]


class _Limit(Guard):
    layer = 5
    priority = Priority.P6

    def __init__(self, limit: float) -> None:
        if not math.isfinite(limit) or limit < 0:
            raise ValueError(f"{type(self).__name__} needs a finite limit >= 0, got {limit}")
        self.limit = limit

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.limit,), {}


class MaxTurns(_Limit):
    """Stop when the run has used `max_turns` model turns and needs another."""

    exit_reason = ExitReason.MAX_TURNS

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.turn < self.limit:
            return None
        return f"turn {snap.turn} of {self.limit}: no model call is left to read what comes next"


class MaxToolCalls(_Limit):
    """Stop before the calls of this turn would take the run past `limit` tool calls."""

    exit_reason = ExitReason.MAX_TOOL_CALLS

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def check(self, snap: RunSnapshot) -> str | None:
        wanted = snap.tool_calls_used + len(snap.executable)
        if wanted <= self.limit:
            return None
        return f"{wanted} tool calls would exceed the limit of {self.limit}"


class TokenBudget(_Limit):
    """Stop when the run has used `limit` tokens (input plus output)."""

    exit_reason = ExitReason.TOKEN_BUDGET

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.tokens_used < self.limit:
            return None
        return f"{snap.tokens_used} tokens used of a budget of {self.limit}"


class CostBudget(_Limit):
    """Stop when the run has cost `limit` US dollars."""

    exit_reason = ExitReason.COST_BUDGET

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.cost_used < self.limit:
            return None
        return f"${snap.cost_used:.4f} spent of a budget of ${self.limit:.4f}"


class Deadline(_Limit):
    """Stop when the run has taken `limit` seconds of wall time."""

    exit_reason = ExitReason.DEADLINE

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.elapsed < self.limit:
            return None
        return f"{snap.elapsed:.1f}s elapsed of {self.limit}s"


class ContextLimit(_Limit):
    """Stop when the latest output shows the context holds `limit` tokens or more."""

    exit_reason = ExitReason.CONTEXT_EXHAUSTED

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.context_tokens < self.limit:
            return None
        return f"context holds {snap.context_tokens} tokens, limit {self.limit}"


class Refused(Guard):
    """Stop when the model refused; a refusal is never a completed task."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.REFUSAL

    def check(self, snap: RunSnapshot) -> str | None:
        out = snap.output
        if out is None:
            return None
        if out.finish_reason is FinishReason.REFUSAL or out.refusal:
            return f"the model refused: {(out.refusal or out.text or '')[:120]!r}"
        return None


class ContentFiltered(Guard):
    """Stop when the provider filtered the output (safety, guardrail, blocked prompt)."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.CONTENT_FILTER

    def check(self, snap: RunSnapshot) -> str | None:
        out = snap.output
        if out is None or out.finish_reason is not FinishReason.CONTENT_FILTER:
            return None
        return f"the provider filtered the output ({out.raw_finish_reason})"


class NeedsApproval(Guard):
    """Ask a human before running calls the permission hook marks `ask`."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6

    def check(self, snap: RunSnapshot) -> str | None:
        if not snap.needs_approval:
            return None
        names = ", ".join(c.name for c in snap.needs_approval)
        return f"{names} need(s) a human's approval"


class PermissionDenied(Guard):
    """Stop when the permission hook denied a call (policy `on_deny="stop"`)."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.PERMISSION_DENIED

    def check(self, snap: RunSnapshot) -> str | None:
        if not snap.denied:
            return None
        return f"permission denied for {', '.join(c.name for c in snap.denied)}"


class HumanDeclined(Guard):
    """Stop when the human declined without a message for the model."""

    phases = ON_REPLY
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.HUMAN_DECLINED

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.human_approved is not False or snap.human_message:
            return None
        return "the human declined"


class HumanApproved(Guard):
    """Run the calls a human approved."""

    phases = ON_REPLY
    layer = 5
    priority = Priority.P1

    def check(self, snap: RunSnapshot) -> str | None:
        if snap.human_approved is not True or not snap.executable:
            return None
        return f"the human approved {len(snap.executable)} call(s)"
