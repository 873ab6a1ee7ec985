"""Permissions: whether a tool call may run, needs a human, or is denied.

A call's permission comes from three sources: rules by tool name and argument
pattern (`"deny bash(command=rm -rf *)"`), the per-tool `permissions` table, and
a hook. Every verdict any source gives counts, and the strongest wins: deny,
then ask, then allow. A deny can never be overridden. Only the exact strings
`"allow"`, `"ask"` and `"deny"` are permissions: a hook that returns anything
else (`"DENY"`, `"no"`, `False`, `None`), or raises, denies the call, and the
reason names what it returned.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import ConfigDict

from agentfsm.core._checked import Checked
from agentfsm.core.types import ToolCall
from agentfsm.exceptions import PolicyError

__all__ = ["PERMISSIONS", "Permission", "PermissionHook", "Rule", "Verdict", "decide"]

Permission = Literal["allow", "ask", "deny"]
PermissionHook = Callable[[ToolCall], Permission]
PERMISSIONS: tuple[Permission, ...] = ("allow", "ask", "deny")
"""The only permission values, weakest first."""

_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
_RULE = re.compile(r"^\s*(allow|ask|deny)\s+([^\s(]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_ARG_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.-]*\s*=)")
_ARG = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*=(.*)$", re.DOTALL)

Verdict = tuple[Permission, str]
"""A permission and why, e.g. `("deny", "rule 'deny bash(command=rm -rf *)'")`."""


class Rule(Checked):
    """Give `action` to calls of tools named like `tool` whose arguments match `args`.

    `tool` and each argument pattern are shell-style globs (`*`, `?`, `[...]`),
    matched against the whole name or value, case-sensitively. A value that is
    not a string is matched as compact JSON. A call lacking a named argument
    does not match. The text form reads `"<action> <tool>[(<arg>=<glob>, ...)]"`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Permission
    """What a matching call gets."""
    tool: str
    """A glob on the tool's name."""
    args: tuple[tuple[str, str], ...] = ()
    """(argument name, glob on its value) pairs; all must match."""

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Read a rule from its text form; a rule that does not parse raises PolicyError."""
        found = _RULE.match(text)
        if found is None:
            raise PolicyError(
                f"permission rule {text!r} does not parse: expected "
                "'<allow|ask|deny> <tool glob>[(<argument>=<glob>, ...)]', "
                "e.g. 'deny bash(command=rm -rf *)'"
            )
        action, tool, inner = found.groups()
        args: list[tuple[str, str]] = []
        if inner is not None:
            for part in _ARG_SPLIT.split(inner):
                arg = _ARG.match(part)
                if arg is None:
                    raise PolicyError(
                        f"permission rule {text!r} does not parse: {part.strip()!r} "
                        "is not '<argument>=<glob>'"
                    )
                args.append((arg.group(1), arg.group(2).strip()))
        return cls(action=action, tool=tool, args=tuple(args))

    @classmethod
    def of(cls, item: Any) -> Rule:
        """Build a rule from a Rule, its text form or a mapping; raise PolicyError otherwise."""
        if isinstance(item, Rule):
            return item
        if isinstance(item, str):
            return cls.parse(item)
        if isinstance(item, Mapping):
            return cls._from_mapping(item)
        raise PolicyError(
            f"permission rule {item!r} is a {type(item).__name__}: expected a string such as "
            "'deny bash(command=rm -rf *)' or a mapping {'action', 'tool', 'args'}"
        )

    @classmethod
    def _from_mapping(cls, item: Mapping[str, Any]) -> Rule:
        action, tool, args = item.get("action"), item.get("tool"), item.get("args") or {}
        extra = sorted(set(item) - {"action", "tool", "args"})
        problem = None
        if action not in _STRENGTH:
            problem = f"'action' must be 'allow', 'ask' or 'deny', not {action!r}"
        elif not isinstance(tool, str) or not tool:
            problem = f"'tool' must be a non-empty glob, not {tool!r}"
        elif not isinstance(args, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in args.items()
        ):
            problem = "'args' must map argument names to glob strings"
        elif extra:
            problem = f"unknown key(s) {extra}"
        if problem is not None:
            raise PolicyError(f"permission rule {dict(item)!r} is invalid: {problem}")
        return cls(action=action, tool=tool, args=tuple(args.items()))

    def matches(self, call: ToolCall) -> bool:
        """Whether the rule applies to `call`."""
        if not fnmatch.fnmatchcase(call.name, self.tool):
            return False
        arguments = call.arguments or {}
        for name, pattern in self.args:
            if name not in arguments:
                return False
            value = arguments[name]
            text = value if isinstance(value, str) else _compact(value)
            if not fnmatch.fnmatchcase(text, pattern):
                return False
        return True

    def __str__(self) -> str:
        inner = ", ".join(f"{name}={pattern}" for name, pattern in self.args)
        return f"{self.action} {self.tool}" + (f"({inner})" if inner else "")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def decide(
    call: ToolCall,
    rules: tuple[Rule, ...],
    table: Mapping[str, Permission],
    hook: Callable[[ToolCall], Any] | None,
) -> Verdict:
    """Return the strongest permission any source gives `call`, and which source gave it.

    Matching rules, the table's entry for the tool and the hook all count; when
    none of them speaks, the table's `"*"` entry (allow when absent) decides.
    """
    best: Verdict | None = None
    for rule in rules:
        if rule.matches(call):
            best = _stronger(best, _understood(rule.action, f"rule {str(rule)!r}"))
            if best[0] == "deny":
                return best
    if call.name in table:
        best = _stronger(best, _understood(table[call.name], f"permissions[{call.name!r}]"))
    if hook is not None:
        best = _stronger(best, _ask_hook(hook, call))
    if best is None:
        if "*" in table:
            return _understood(table["*"], "permissions['*']")
        return "allow", "the default"
    return best


def _understood(value: object, source: str) -> Verdict:
    """`value` as a verdict from `source`; anything but "allow", "ask" or "deny" denies.

    A validated policy holds only those three; this keeps a policy changed behind
    pydantic's back (or a table a caller passes directly) from failing open.
    """
    if type(value) is str and value in _STRENGTH:
        return value, source  # type: ignore[return-value]
    return "deny", f"{source} is {value!r:.60}, not 'allow', 'ask' or 'deny'"


def _ask_hook(hook: Callable[[ToolCall], Any], call: ToolCall) -> Verdict:
    try:
        value = hook(call)
    except Exception as exc:  # a hook that fails must not let the call through
        return "deny", f"the permission hook raised {type(exc).__name__}: {exc}"
    # `type(value) is str` so that a str subclass with a lying __eq__ cannot pass.
    if type(value) is str and value in _STRENGTH:
        return value, "the permission hook"  # type: ignore[return-value]
    return "deny", (
        f"the permission hook returned {value!r}, which is not 'allow', 'ask' or 'deny'"
    )


def _stronger(current: Verdict | None, new: Verdict) -> Verdict:
    if current is None or _STRENGTH[new[0]] > _STRENGTH[current[0]]:
        return new
    return current
