"""MCP tool annotations as permission defaults that a policy can override, never loosen.

An MCP server describes each tool with hints (`readOnlyHint`, `destructiveHint`, ...). The
specification calls them untrusted: a server may say anything. So a hint only ever asks for
more care. A tool that may change its environment (not declared read-only, and not declared
non-destructive: the specification's defaults are `readOnlyHint=false`,
`destructiveHint=true`) is `ask` unless the policy names the tool itself, in its permission
table or in a rule for exactly that name; a policy that names it decides, either way. A
read-only hint allows nothing: the policy's own verdict (its `"*"` entry, its default) holds.

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
    """`policy` with `ask` (a deny under `"*": "deny"`) for each tool in `annotations`
    (name -> its annotations) that may change things and that the policy does not name
    itself; `policy` itself when none."""
    named = set(policy.permissions) | {rule.tool for rule in policy.permission_rules}
    # An entry for the tool replaces the table's "*" (which speaks only when nothing else
    # does): under `"*": "deny"` the entry must stay a deny, or the hint would loosen it.
    care = "deny" if policy.permissions.get("*") == "deny" else "ask"
    added = {
        name: care
        for name, hints in annotations.items()
        if name not in named and changes_things(hints)
    }
    if not added:
        return policy
    # agentfsm's `model_copy` validates and builds a new route table (pydantic's kept the old).
    return policy.model_copy(update={"permissions": {**policy.permissions, **added}})


def _hint(annotations: Any, name: str) -> bool | None:
    """The hint `name` (its wire spelling, `readOnlyHint`) as a bool, None when not given.

    A mapping is the wire's JSON; an object is the `mcp` package's model, whose 2.x
    attributes are snake case (`read_only_hint`) and 1.x ones the wire's spelling.
    """
    if annotations is None:
        return None
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    if isinstance(annotations, Mapping):
        value = annotations.get(name)
    else:
        value = getattr(annotations, snake, getattr(annotations, name, None))
    return value if isinstance(value, bool) else None
