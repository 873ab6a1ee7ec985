"""Pairing recorded tool results with the calls a controller executes.

Recorded results are matched to the model turn's calls by call id when the
id names exactly one call of that turn, else by position: tau-bench reuses
ids within a run, and legacy `function_call` chats have no ids at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentfsm._model.types import ToolCall, ToolResult

__all__ = ["pair_results"]


def pair_results(
    turn_calls: list[ToolCall], executed: list[ToolCall], results: tuple[ToolResult, ...]
) -> tuple[list[ToolResult], int]:
    """Pair recorded results with executed calls; return them re-addressed, and how many lack one.

    Result `i` answers the turn's call whose recorded id it names when exactly
    one call has that id, else the turn's call `i`. Calls the controller did
    not execute (it answered them itself) take no recorded result.
    """
    if _in_order(turn_calls, executed, results):
        return list(results), 0
    return paired_by_rules(turn_calls, executed, results)


def paired_by_rules(
    turn_calls: list[ToolCall], executed: list[ToolCall], results: tuple[ToolResult, ...]
) -> tuple[list[ToolResult], int]:
    """`pair_results` without its shortcut for results in call order (the tests compare them)."""
    positions = _positions_by_id(turn_calls, results)
    executed_at = _executed_positions(turn_calls, executed)
    paired = [
        _addressed(result, executed_at[position].id)
        for result, position in zip(results, positions, strict=True)
        if position in executed_at
    ]
    return paired, len(executed) - len(paired)


def _in_order(
    turn_calls: list[ToolCall], executed: list[ToolCall], results: tuple[ToolResult, ...]
) -> bool:
    """Whether result `i` names call `i`, executed as it was recorded: each pairs with itself.

    The usual case, checked first: then every rule below gives result `i` to call
    `i` under the id it already names, and nothing needs building.
    """
    return len(results) == len(turn_calls) == len(executed) and all(
        result.call_id == call.id == done.id
        for result, call, done in zip(results, turn_calls, executed, strict=True)
    )


def _addressed(result: ToolResult, call_id: str) -> ToolResult:
    """The result answering `call_id`: itself when it already names it, else a copy that does."""
    if result.call_id == call_id:
        return result
    return result.model_copy(update={"call_id": call_id})


def _positions_by_id(turn_calls: list[ToolCall], results: tuple[ToolResult, ...]) -> list[int]:
    counts: dict[str, int] = {}
    for call in turn_calls:
        counts[call.id] = counts.get(call.id, 0) + 1
    index = {call.id: i for i, call in enumerate(turn_calls) if counts[call.id] == 1}
    taken: set[int] = set()
    positions = []
    for i, result in enumerate(results):
        position = index.get(result.call_id, i)
        if position in taken:
            position = i
        taken.add(position)
        positions.append(position)
    return positions


def _executed_positions(
    turn_calls: list[ToolCall], executed: list[ToolCall]
) -> Mapping[int, ToolCall]:
    """Where each executed call stands in the turn: by its id when that names one call, else
    the next call of its name (a denied call between two of one name is not the next one)."""
    if len(executed) == len(turn_calls):
        return dict(enumerate(executed))
    counts: dict[str, int] = {}
    for call in turn_calls:
        counts[call.id] = counts.get(call.id, 0) + 1
    unique = {call.id: i for i, call in enumerate(turn_calls) if counts[call.id] == 1}
    found: dict[int, ToolCall] = {}
    start = 0
    for call in executed:
        at = unique.get(call.id)
        if at is None or at < start:
            at = next(
                (p for p in range(start, len(turn_calls)) if turn_calls[p].name == call.name), None
            )
        if at is not None:
            found[at] = call
            start = at + 1
    return found
