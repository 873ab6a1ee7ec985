"""Layer 5 guards: budgets, permissions, safety and the human in the loop.

Budgets bind when the run needs another model call or a tool execution; a
complete final answer needs neither, so it still ends as COMPLETED.
"""

from __future__ import annotations

from typing import Literal

from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import ExitReason, FinishReason, Priority
from agentfsm.exceptions import PolicyError
from agentfsm.guards._base import ON_OUTPUT, ON_REPLY, Guard, Hit, check_number, runs_any

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
    "TreeBudget",
]


class _Limit(Guard):
    layer = 5
    priority = Priority.P6
    acts_on_answers = False

    def __init__(self, limit: float) -> None:
        check_number(type(self).__name__, "limit", limit, minimum=0)
        self.limit = limit

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.limit,), {}


class MaxTurns(_Limit):
    """Stop when the episode has used `max_turns` model turns and needs another.

    In a conversation each episode (opened by a user message after a final
    answer) gets `max_turns` turns of its own; turn numbers go on.
    """

    exit_reason = ExitReason.MAX_TURNS

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        used = snap.turn - snap.episode_start
        if used < self.limit:
            return None
        return Hit(
            self,
            f"turn {used} of {self.limit}: no model call is left to read what comes next",
            self.exit_reason,
        )


class MaxToolCalls(_Limit):
    """Stop before the calls of this turn would take the run past `limit` tool calls."""

    exit_reason = ExitReason.MAX_TOOL_CALLS

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        wanted = snap.tool_calls_used + len(snap.executable)
        if wanted <= self.limit:
            return None
        return Hit(
            self, f"{wanted} tool calls would exceed the limit of {self.limit}", self.exit_reason
        )


class TokenBudget(_Limit):
    """Stop when the run has used `limit` tokens (input plus output)."""

    exit_reason = ExitReason.TOKEN_BUDGET

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.tokens_used < self.limit:
            return None
        return Hit(
            self, f"{snap.tokens_used} tokens used of a budget of {self.limit}", self.exit_reason
        )


class CostBudget(_Limit):
    """Stop when the run has cost `limit` US dollars.

    A turn's cost is the payload's own figure, else its usage priced by
    `genai-prices`. When a turn's price is unknown the budget cannot be checked:
    `on_unknown="warn"` says so once in a decision's reason and counts the turn
    as $0; `on_unknown="stop"` ends the run with COST_BUDGET.
    """

    exit_reason = ExitReason.COST_BUDGET

    def __init__(self, limit: float, on_unknown: Literal["warn", "stop"] = "warn") -> None:
        super().__init__(limit)
        if on_unknown not in ("warn", "stop"):
            raise PolicyError(
                f"CostBudget: on_unknown must be 'warn' or 'stop', not {on_unknown!r}"
            )
        self.on_unknown = on_unknown

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.limit,), ({} if self.on_unknown == "warn" else {"on_unknown": "stop"})

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.cost_unknown and self.on_unknown == "stop":
            return Hit(
                self,
                f"{snap.cost_unknown}: a cost budget of ${self.limit:.4f} cannot be checked",
                self.exit_reason,
            )
        if snap.cost_used < self.limit:
            return None
        return Hit(
            self, f"${snap.cost_used:.4f} spent of a budget of ${self.limit:.4f}", self.exit_reason
        )


class Deadline(_Limit):
    """Stop when the run has taken `limit` seconds of wall time."""

    exit_reason = ExitReason.DEADLINE

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.elapsed < self.limit:
            return None
        return Hit(self, f"{snap.elapsed:.1f}s elapsed of {self.limit}s", self.exit_reason)


class TreeBudget(Guard):
    """Stop when a budget of the run's tree is spent: this run's, or a run's above it.

    The run's tree is its parent and the runs started under it (handoffs, runs started
    by tools); its ledger is charged live (`agentfsm.Ledger`), so a child stops when its
    parent's budget is spent, with that budget's exit reason (TOKEN_BUDGET, COST_BUDGET,
    DEADLINE). A run in no tree (`snap.tree` is None) is never stopped by it.
    """

    layer = 5
    priority = Priority.P6
    acts_on_answers = False
    exit_reason = ExitReason.TOKEN_BUDGET

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        tree = snap.tree
        if tree is None or tree.spent is None:
            return None
        return Hit(self, tree.why, tree.spent)


class ContextLimit(_Limit):
    """Stop when the latest output shows the context holds `limit` tokens or more."""

    exit_reason = ExitReason.CONTEXT_EXHAUSTED

    def __init__(self, limit: int) -> None:
        super().__init__(limit)

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.context_tokens < self.limit:
            return None
        return Hit(
            self,
            f"context holds {snap.context_tokens} tokens, limit {self.limit}",
            self.exit_reason,
        )


class Refused(Guard):
    """Stop when the model refused; a refusal is never a completed task."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.REFUSAL

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None:
            return None
        if out.finish_reason is FinishReason.REFUSAL or out.refusal:
            return Hit(
                self,
                f"the model refused: {(out.refusal or out.text or '')[:120]!r}",
                self.exit_reason,
            )
        return None


class ContentFiltered(Guard):
    """Stop when the provider filtered the output (safety, guardrail, blocked prompt)."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.CONTENT_FILTER

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        out = snap.output
        if out is None or out.finish_reason is not FinishReason.CONTENT_FILTER:
            return None
        return Hit(
            self, f"the provider filtered the output ({out.raw_finish_reason})", self.exit_reason
        )


class NeedsApproval(Guard):
    """Ask a human before running calls the permission hook marks `ask`."""

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if not snap.needs_approval:
            return None
        names = ", ".join(c.name for c in snap.needs_approval)
        why = f" ({'; '.join(snap.asked_because)})" if snap.asked_because else ""
        return Hit(self, f"{names} need(s) a human's approval{why}", self.exit_reason)


class PermissionDenied(Guard):
    """Stop when the permission sources denied a call (policy `on_deny="stop"`).

    With `feedback=True` (policy `on_deny="feedback"`) it reports denied calls whose
    error results go back to the model: it applies only when none of the turn's calls
    runs, waits for a human or hands off.
    """

    phases = ON_OUTPUT
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.PERMISSION_DENIED

    def __init__(self, *, feedback: bool = False) -> None:
        if not isinstance(feedback, bool):
            raise PolicyError(f"PermissionDenied: feedback must be True or False, not {feedback!r}")
        self.feedback = feedback

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (), ({"feedback": True} if self.feedback else {})

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if not snap.denied or (self.feedback and runs_any(snap)):
            return None
        said = "; the model is told why" if self.feedback else ""
        return Hit(
            self,
            f"permission denied for {', '.join(c.name for c in snap.denied)}{said}",
            self.exit_reason,
        )


class HumanDeclined(Guard):
    """Stop when the human declined without a message for the model."""

    phases = ON_REPLY
    layer = 5
    priority = Priority.P6
    exit_reason = ExitReason.HUMAN_DECLINED

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.human_approved is not False or snap.human_message:
            return None
        return Hit(self, "the human declined", self.exit_reason)


class HumanApproved(Guard):
    """Run the calls a human approved."""

    phases = ON_REPLY
    layer = 5
    priority = Priority.P1

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        approved = snap.executable or snap.handoffs
        if snap.human_approved is not True or not approved:
            return None
        return Hit(self, f"the human approved {len(approved)} call(s)", self.exit_reason)
