"""Remembered approvals: a human's answer that covers more than the one call it was given for.

A human who approves the same safe call dozens of times an hour switches approvals off; an
answer that carries a scope keeps the human in charge without the fatigue. An `Approval`
is a plain frozen record (`agentfsm._model.records`): which tool (by exact name and by the
identity of its definition, so a changed tool is never covered), which arguments (the
exact ones approved, or a pattern in the permission rules' syntax), and for how long (a
number of uses, a number of seconds of the run's time, this episode, this conversation, or
the deployment the host keeps it for).

Only a call the permission sources answer "ask" can be covered: a deny stays a deny, and the
guards that stop or ask after validate (repetition, budgets) read the covered call like any
other. The matching lives in `agentfsm.states._approvals`; this module is the vocabulary.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from agentfsm._model.records import Record

__all__ = ["SCOPES", "Approval", "Scope", "tool_identity"]

Scope = Literal["uses", "seconds", "run", "conversation", "deployment"]
"""How long a remembered approval holds (`"once"`, this call only, remembers nothing)."""

SCOPES: tuple[str, ...] = ("once", "uses", "seconds", "run", "conversation", "deployment")
"""The scopes a human's answer may carry, as a host offers them, narrowest first."""


class Approval(Record):
    """A human's approval remembered: later calls it covers run without asking again.

    It covers a call only when the permission sources answer "ask" for it (never a deny,
    never a call a guard stops), the tool's name is `tool`, the tool's identity now is
    `identity`, the arguments are `arguments` exactly (or match `pattern`), and it is live:
    uses left, not expired, in its episode for the scope `run`.
    """

    id: str
    """The approval's id within the run (`a1`, `a2`, ...): what `revoke` and decisions name."""
    tool: str
    """The exact name of the tool it covers (never a glob)."""
    identity: str | None = None
    """The digest of the tool's definition when it was granted (`tool_identity`, or an MCP
    tool's pin): a tool whose definition changed since is not covered. None only for a run
    that declares no tools and was told none."""
    scope: Scope = "conversation"
    """How long it holds: `uses` (until `uses_left` is 0), `seconds` (until `expires_at`),
    `run` (this episode of the conversation), `conversation` (the Controller and its dumps),
    `deployment` (as `conversation` here; the host keeps it for its other runs)."""
    arguments: dict[str, Any] | None = None
    """The exact arguments it covers (compared as JSON), when it has no `pattern`."""
    pattern: str | None = None
    """The arguments it covers, in the permission rules' syntax (`path^=/srv/out/*`,
    `command~git status`); `*` covers any arguments of the tool."""
    uses_left: int | None = None
    """Calls it may still cover (scope `uses`), else None."""
    expires_at: float | None = None
    """The run's time, in seconds since it started, after which it covers nothing (scope
    `seconds`), else None."""
    episode: int | None = None
    """The episode of the conversation it holds in (scope `run`), else None."""
    granted_at: float = 0.0
    """The run's time, in seconds since it started, when it was granted."""
    granted_turn: int = 0
    """The run's turn when it was granted."""
    call_id: str | None = None
    """The asked call whose answer granted it; None when the host granted it (`grant`)."""
    source: str = "human"
    """Who granted it: `human` (an answer to an ASK_HUMAN) or what the host said (`grant`)."""

    def describe(self) -> str:
        """The approval in one line, as reasons and reports name it."""
        if self.pattern is not None:
            what = f"{self.tool}({self.pattern})"
        else:
            what = f"{self.tool}({json.dumps(self.arguments, sort_keys=True)[:120]})"
        if self.scope == "uses":
            held = f"{self.uses_left} use(s) left"
        elif self.scope == "seconds":
            held = f"until {self.expires_at:g}s of the run"
        else:
            held = f"for this {self.scope}" if self.scope != "run" else "for this run"
        return f"remembered approval {self.id} of {what}, {held}"


def tool_identity(definition: Mapping[str, Any]) -> str:
    """A digest of a tool's definition: its name, description and argument schema as JSON.

    Equal definitions give equal digests; any change to one of them gives another, so an
    approval granted for a tool never covers the tool once redefined.
    """
    text = json.dumps(
        {k: definition.get(k) for k in ("name", "description", "parameters")},
        sort_keys=True,
        ensure_ascii=False,
        default=repr,
    )
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
