"""What a run has done so far, as a permission source that reads it (Cedar) sees it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from agentfsm._model.records import Record

__all__ = ["CallHistory", "counted"]

_LONG = 2**63


class CallHistory(Record):
    """What a run has done so far, as a Cedar source sees it in `context.history`."""

    calls: int = 0
    """Tool calls the run has executed."""
    tokens: int = 0
    """Tokens the run's model turns used."""
    cost_micros: int = 0
    """What the run cost, in whole micro-dollars (millionths of a dollar), rounded up:
    Cedar has no floats."""
    turn: int = 0
    """Model outputs the run has seen."""
    tool_calls: dict[str, int] = {}  # noqa: RUF012  # never changed: a Record is frozen
    """Tool calls executed by tool name (tools not called yet are absent)."""

    @classmethod
    def of_run(cls, run: Any) -> CallHistory:
        """The history of a `Run` (agentfsm._model.run_state) now."""
        cost = run.cost
        micros = math.ceil(cost * 1_000_000) if math.isfinite(cost) else _LONG - 1
        return cls._made(
            {
                "calls": run.tool_calls_used,
                "tokens": run.tokens,
                "cost_micros": min(micros, _LONG - 1),
                "turn": run.turn,
                "tool_calls": dict(run.tool_counts),
            }
        )


def counted(counts: Mapping[str, int], calls: Iterable[Any], step: int) -> dict[str, int]:
    """`counts` with each call of `calls` (anything with a `name`) counted `step` more, as a
    new dict (a run's fields are replaced, never changed in place); counts of 0 drop out."""
    new = dict(counts)
    for call in calls:
        n = new.get(call.name, 0) + step
        if n > 0:
            new[call.name] = n
        else:
            new.pop(call.name, None)
    return new
