"""A sub-agent is never wider than its parent: its policy intersected with the parent's.

`narrowed(child, parent)` is the policy a child runs under: every call gets the
strongest verdict of the two (deny wins, ask wins over allow), every limit is the
lesser of the two, the parent's own stop conditions bind the child too, and the
`TreeBudget()` guard stops the child when a budget above it in the run tree's ledger
is spent. The runner applies it to handoffs and to runs started inside tools.
"""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import ToolCall
from agentfsm.guards.boundaries import TreeBudget

__all__ = ["Narrowed", "narrowed"]

_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
_LIMITS = (
    "max_turns",
    "max_tool_calls",
    "max_retries",
    "max_consecutive_tool_errors",
    "repeat_threshold",
    "no_progress_threshold",
    "max_tokens",
    "max_cost",
    "max_seconds",
    "max_context_tokens",
)
"""Fields where the lesser value binds more (None: no limit)."""


class Narrowed:
    """A permission hook: the stronger of the parent's and the child's verdicts on a call.

    It is the narrowed policy's `permission` hook, so it counts beside the child's own
    rules, table, ask floor and Cedar source (the strongest of them wins), and the
    parent's verdict is never lifted by anything the child says.
    """

    __slots__ = ("child", "parent")

    def __init__(self, parent: Any, child: Any) -> None:
        self.parent = parent
        self.child = child

    def __call__(self, call: ToolCall) -> str:
        # The parent's Cedar source reads no history here: one that needs it denies.
        verdicts = (self.parent.permission_verdict(call)[0], self.child.permission_verdict(call)[0])
        # Anything that is not exactly a known verdict counts as deny (fail closed).
        return str(max(verdicts, key=lambda v: _STRENGTH.get(v, 2)))

    def __repr__(self) -> str:
        return "Narrowed(parent, child)"


def narrowed(child: Any, parent: Any) -> Any:
    """The policy a child runs under: `child` never wider than `parent` (both `Policy`s,
    checked by `Policy.narrowed_by`; this module cannot import the one that imports it).

    Deny wins, ask wins over allow (per call, whatever source speaks); each limit is the
    lesser; `on_deny`, `on_unknown_price` take "stop" from either; a repeat the parent
    would not run is not run (`on_repeat="ask"` only when both ask); the parent's
    `guards` are added to the child's, with `TreeBudget()`. The child keeps its own
    tools' names (`handoffs`, `final_tools`), verifiers and `on_incomplete`.
    """
    update: dict[str, Any] = {name: _lesser(child, parent, name) for name in _LIMITS}
    update["on_deny"] = "stop" if "stop" in (child.on_deny, parent.on_deny) else "feedback"
    update["on_unknown_price"] = (
        "stop" if "stop" in (child.on_unknown_price, parent.on_unknown_price) else "warn"
    )
    if child.on_repeat == "ask" and parent.on_repeat != "ask":
        update["on_repeat"] = parent.on_repeat
    if _speaks(parent):
        update["permission"] = Narrowed(parent, child)
    guards = list(child.guards)
    guards += [g for g in parent.guards if g not in guards]
    if not any(isinstance(g, TreeBudget) for g in guards):
        guards.append(TreeBudget())
    update["guards"] = tuple(guards)
    return child.model_copy(update=update)


def _speaks(parent: Any) -> bool:
    """Whether the parent's permissions could say anything but allow."""
    return bool(
        parent.permission_rules
        or parent.permissions
        or parent.permission is not None
        or parent.cedar is not None
        or parent.ask_floor
    )


def _lesser(child: Any, parent: Any, name: str) -> Any:
    mine, theirs = getattr(child, name), getattr(parent, name)
    if mine is None:
        return theirs
    if theirs is None:
        return mine
    return min(mine, theirs)
