"""MCP tool annotations as an ask floor that a policy can keep or raise, never lower.

An MCP server describes each tool with hints (`readOnlyHint`, `destructiveHint`, ...). The
specification calls them untrusted: a server may say anything. So a hint only ever asks for
more care. A tool that may change its environment (not declared read-only, and not declared
non-destructive: the specification's defaults are `readOnlyHint=false`,
`destructiveHint=true`) goes into the policy's `ask_floor`: its calls ask unless an allow
written for exactly that tool allows the call (its `permissions` entry "allow", or allow
rules naming it whose patterns match the call). Any other rule, deny and ask included,
keeps the floor: adding a deny never makes a call run unasked. A read-only hint allows
nothing: the policy's own verdict (its `"*"` entry, its default) holds.

Shared by the client side (`agentfsm.integrations.mcp`) and the proxy (`agentfsm mcp-proxy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm._engine.policy import Policy

__all__ = ["changes_things", "with_hints"]


def changes_things(annotations: Any) -> bool:
    """Whether a tool with these annotations (an `mcp.types.ToolAnnotations`, a mapping, or
    None) may change its environment, reading the hints with the specification's defaults.

    A hint that is not a bool is not understood, and is read as its default.
    """
    read_only = _hint(annotations, "readOnlyHint")
    destructive = _hint(annotations, "destructiveHint")
    if read_only is True:
        return False
    return destructive is not False


def with_hints(policy: Policy, annotations: Mapping[str, Any]) -> Policy:
    """`policy` with each tool in `annotations` (name -> its annotations) that may change
    things added to its `ask_floor`; `policy` itself when that adds nothing."""
    added = {name for name, hints in annotations.items() if changes_things(hints)}
    if added <= policy.ask_floor:
        return policy
    # agentfsm's `model_copy` validates and builds a new route table (pydantic's kept the old).
    return policy.model_copy(update={"ask_floor": policy.ask_floor | added})


def _hint(annotations: Any, name: str) -> bool | None:
    """The hint `name` (its wire spelling, `readOnlyHint`) as a bool, None when not given.

    A mapping is the wire's JSON; an object is the `mcp` package's model, whose 2.x
    attributes are snake case (`read_only_hint`) and 1.x ones the wire's spelling.
    """
    if annotations is None:
        return None
    if isinstance(annotations, Mapping):
        value = annotations.get(name)
    else:
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
        value = getattr(annotations, snake, getattr(annotations, name, None))
    return value if isinstance(value, bool) else None
