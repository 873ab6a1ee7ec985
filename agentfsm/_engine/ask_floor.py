"""Ask floors: tools whose calls ask even where the policy would allow them.

A floor (`Policy.ask_floor`, filled from MCP tools' annotations by
`agentfsm.integrations.mcp._hints.with_hints`) is lifted only by an allow written for
that very tool: its `permissions` entry "allow", or allow rules whose tool part is the
tool's exact name and that allow this call (shell rules together, as they decide). A
`"*"` entry, a glob rule, a hook or the default never lift it; a deny or ask from any
source stands as it is. So adding a rule never drops the floor: `deny bash(command~rm -rf *)`
leaves `bash(command="dd of=/dev/sda")` asking.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentfsm._model.types import ToolCall, Verdict
from agentfsm._permissions import Permission, Rule, decide

__all__ = ["floored"]


def floored(
    verdict: Verdict,
    call: ToolCall,
    rules: tuple[Rule, ...],
    table: Mapping[str, Permission],
) -> Verdict:
    """`verdict` for a call of a floored tool: an allow becomes ask unless lifted.

    Lifted means the tool's own `permissions` entry is "allow", or the allow rules
    written for exactly this tool allow the call on their own (read with `"*": "deny"`,
    so nothing but those rules can say allow).
    """
    if verdict[0] != "allow":
        return verdict
    if table.get(call.name) == "allow":
        return verdict
    own = tuple(rule for rule in rules if rule.action == "allow" and rule.tool == call.name)
    if own and decide(call, own, {"*": "deny"}, None)[0] == "allow":
        return verdict
    return "ask", (
        f"tool {call.name!r} may change things (its annotations): it asks unless its "
        "permissions entry or an allow rule for exactly this tool allows the call"
    )
