"""Remembered approvals at work: which approval covers a call, and how an answer makes one.

validate asks `covering` for a call the permission sources answer "ask" (never for a deny,
and guards read the covered call afterwards like any other); `spent` counts the use. The
Controller reads a human's `remember` (or the host's `grant`) through `scope_of` and
`granted`. Nothing here does I/O: the time is the run's own (`RunSnapshot.elapsed`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from agentfsm._model.approvals import SCOPES, Approval, tool_identity
from agentfsm._model.run_state import Run
from agentfsm._model.types import ToolCall
from agentfsm._permissions import Rule
from agentfsm.exceptions import InvalidInputError, PolicyError

__all__ = ["ScopeSpec", "covering", "granted", "identity_of", "live", "scope_of", "spent"]

ANY_ARGUMENTS = "*"
"""The pattern that covers every call of the tool, whatever its arguments."""


class ScopeSpec(NamedTuple):
    """A scope as given, checked: its name, its count or seconds, and an argument pattern."""

    scope: str
    uses: int | None = None
    seconds: float | None = None
    pattern: str | None = None


def scope_of(value: object, where: str) -> ScopeSpec:
    """Read a scope: `"once"`, `"uses=N"`, `"seconds=T"`, `"run"`, `"conversation"`,
    `"deployment"`, or a mapping `{"scope", "uses", "seconds", "pattern"}`.

    Raises InvalidInputError naming `where` for anything else.
    """
    if isinstance(value, str):
        return _scope_text(value, where)
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"{where} must be a scope ({', '.join(SCOPES)}; uses=N, seconds=T) or a mapping "
            f"{{'scope', 'uses', 'seconds', 'pattern'}}, not {type(value).__name__}"
        )
    extra = sorted(str(k) for k in value if k not in ("scope", "uses", "seconds", "pattern"))
    if extra:
        raise InvalidInputError(f"{where} has unknown key(s) {extra}")
    pattern = value.get("pattern")
    if pattern is not None and (not isinstance(pattern, str) or not pattern.strip()):
        raise InvalidInputError(f"{where}['pattern'] must be a non-empty str, not {pattern!r:.60}")
    scope = value.get("scope")
    if not isinstance(scope, str) or scope not in SCOPES:
        raise InvalidInputError(f"{where}['scope'] must be one of {', '.join(SCOPES)}")
    uses, seconds = value.get("uses"), value.get("seconds")
    if scope == "uses":
        return ScopeSpec("uses", uses=_uses(uses, where), pattern=pattern)
    if scope == "seconds":
        return ScopeSpec("seconds", seconds=_seconds(seconds, where), pattern=pattern)
    if uses is not None or seconds is not None:
        raise InvalidInputError(f"{where}: 'uses' and 'seconds' go with those scopes only")
    return ScopeSpec(scope, pattern=pattern)


def _scope_text(text: str, where: str) -> ScopeSpec:
    name, eq, amount = text.strip().partition("=")
    if name == "uses" and eq:
        return ScopeSpec("uses", uses=_uses(_number(amount, where), where))
    if name == "seconds" and eq:
        return ScopeSpec("seconds", seconds=_seconds(_number(amount, where), where))
    if not eq and name in SCOPES and name not in ("uses", "seconds"):
        return ScopeSpec(name)
    raise InvalidInputError(
        f"{where} is {text!r:.60}: a scope is once, uses=N, seconds=T, run, conversation "
        "or deployment"
    )


def _number(text: str, where: str) -> float:
    try:
        return float(text) if not text.strip().isdigit() else int(text)
    except ValueError:
        raise InvalidInputError(f"{where}: {text!r:.40} is not a number") from None


def _uses(value: object, where: str) -> int:
    if type(value) is not int or value < 1:
        raise InvalidInputError(
            f"{where}: uses must be a whole number of at least 1, not {value!r:.40}"
        )
    return value


def _seconds(value: object, where: str) -> float:
    # `type(...)`, not isinstance: a bool is no number of seconds.
    if (type(value) is int or type(value) is float) and math.isfinite(value) and value > 0:
        return float(value)
    raise InvalidInputError(f"{where}: seconds must be a finite number above 0, not {value!r:.40}")


def _rule(tool: str, pattern: str, where: str) -> Rule:
    """The allow rule a pattern stands for: the tool's exact name and the argument patterns."""
    try:
        return _parsed(tool, pattern)
    except PolicyError as exc:
        raise InvalidInputError(
            f"{where}: the pattern {pattern!r:.80} does not read: {exc}"
        ) from exc


@functools.lru_cache(maxsize=256)
def _parsed(tool: str, pattern: str) -> Rule:
    """The rule of one approval's pattern, parsed once: covering a call reads it every turn."""
    if pattern == ANY_ARGUMENTS:
        return Rule(action="allow", tool=_exact(tool))
    return Rule.parse(f"allow {json.dumps(_exact(tool))}({pattern})")


def _exact(tool: str) -> str:
    """The tool's name as a glob that matches only it (a name may hold `*`, `?` or `[`)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in tool)


def identity_of(run: Run, name: str) -> str | None:
    """The identity of tool `name` now: the host's (`Controller(identify=)`), else the digest of
    its declared definition, else None (a run that declares no tools).

    An identify function that fails or answers something other than a str or None gives an
    identity no approval has, so nothing is covered (fail closed).
    """
    identify = run.identify
    if identify is not None:
        try:
            found = identify(name)
        except Exception:
            return "unknown: the identify function raised"
        return found if found is None or type(found) is str else "unknown: not a str"
    spec = None if run.specs is None else run.specs.get(name)
    if spec is None:
        return None
    return tool_identity(
        {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
    )


def granted(
    run: Run,
    spec: ScopeSpec,
    tool: str,
    arguments: dict[str, Any] | None,
    *,
    now: float,
    where: str,
    call_id: str | None = None,
    source: str = "human",
    identity: str | None = None,
    number: int | None = None,
) -> Approval | None:
    """The approval a scope makes for calls of `tool`: None for `once` (this call only).

    Without a pattern it covers exactly `arguments`. Checked completely before anything
    changes: a pattern that does not read raises InvalidInputError naming `where`. Its id is
    `a<number>`, by default the run's next.
    """
    if spec.scope == "once":
        return None
    if spec.pattern is not None:
        _rule(tool, spec.pattern, where)
    number = run.approval_count + 1 if number is None else number
    return Approval._made(
        {
            "id": f"a{number}",
            "tool": tool,
            "identity": identity if identity is not None else identity_of(run, tool),
            "scope": spec.scope,
            "arguments": None if spec.pattern is not None else _plain(arguments or {}),
            "pattern": spec.pattern,
            "uses_left": spec.uses,
            "expires_at": None if spec.seconds is None else now + spec.seconds,
            "episode": run.episode if spec.scope == "run" else None,
            "granted_at": now,
            "granted_turn": run.turn,
            "call_id": call_id,
            "source": source,
        }
    )


def _plain(arguments: dict[str, Any]) -> dict[str, Any]:
    """A copy of JSON arguments that no later edit of the caller's can change."""
    copied: dict[str, Any] = json.loads(json.dumps(arguments))
    return copied


def is_live(approval: Approval, now: float, episode: int) -> bool:
    """Whether an approval still covers anything at time `now` in `episode`."""
    if approval.uses_left is not None and approval.uses_left < 1:
        return False
    if approval.expires_at is not None and not now < approval.expires_at:
        return False
    return approval.episode is None or approval.episode == episode


def live(approvals: tuple[Approval, ...], now: float, episode: int) -> tuple[Approval, ...]:
    """The approvals still live at `now` in `episode`."""
    return tuple(a for a in approvals if is_live(a, now, episode))


def covers(approval: Approval, call: ToolCall, identity: str | None) -> bool:
    """Whether `approval` (live) covers `call` of a tool whose identity is now `identity`."""
    if approval.tool != call.name or approval.identity != identity or call.error is not None:
        return False
    if approval.pattern is None:
        return _same_json(approval.arguments, call.arguments or {})
    try:
        rule = _rule(approval.tool, approval.pattern, "approval")
    except InvalidInputError:  # a pattern edited in a dump: it covers nothing
        return False
    return rule.matches(call)


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON text: `true` is not `1`, and a value JSON cannot write is never equal."""
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return False


def covering(run: Run, call: ToolCall, now: float) -> Approval | None:
    """The first live approval that covers `call` now, or None."""
    if not run.approvals:
        return None
    identity = identity_of(run, call.name)
    for approval in run.approvals:
        if is_live(approval, now, run.episode) and covers(approval, call, identity):
            return approval
    return None


def spent(approvals: tuple[Approval, ...], used: Approval) -> tuple[Approval, ...]:
    """The approvals after `used` covered one call: one use fewer; used up, it is gone."""
    if used.uses_left is None:
        return approvals
    left = used.uses_left - 1
    return tuple(
        (a if a.id != used.id else Approval._made({**a.as_dict(), "uses_left": left}))
        for a in approvals
        if a.id != used.id or left > 0
    )
