"""Call identity: when two tool calls, or two rounds of calls, are the same.

The repetition guard and the no-progress guard compare calls by these keys;
reasons show calls with `describe`.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable

from agentfsm._model.types import ToolCall

__all__ = ["CallKey", "describe", "round_signature", "signature"]

_FLAT = frozenset({str, int, float, bool, type(None)})

CallKey = Hashable
"""A hashable key of a call: equal for calls with the same name and equal arguments."""


def signature(call: ToolCall) -> CallKey:
    """The call as a key, equal exactly when the name and the arguments are equal.

    Flat arguments (the common case) make a tuple of sorted items, compared as
    Python values (so 1, 1.0 and true are the same argument); nested ones are
    compared as canonical JSON.
    """
    args = call.arguments or {}
    if _FLAT.issuperset(map(type, args.values())):
        return (call.name, tuple(sorted(args.items())))
    return (call.name, json.dumps(args, sort_keys=True, separators=(",", ":"), default=str))


def describe(calls: Iterable[ToolCall]) -> str:
    """The calls as `name({arguments})` for reasons, joined with `+`."""
    return " + ".join(
        f"{c.name}({json.dumps(c.arguments or {}, sort_keys=True, default=str)})" for c in calls
    )


def round_signature(keys: list[CallKey]) -> CallKey:
    """The call keys of one turn as one key: identical turns have identical keys.

    Parallel identical calls inside one turn (Gemini sends them) are one round,
    not a streak: repetition is counted across turns.
    """
    return keys[0] if len(keys) == 1 else frozenset(keys)
