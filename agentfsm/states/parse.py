"""parse: turn the provider payload into one ModelTurn and give every call a usable id.

Layer 1. A payload no normalizer recognises raises PayloadError before the run
changes, so the host can carry on. Missing ids and ids repeated within the
turn are (re)issued deterministically; the snapshot's notes say so.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from agentfsm._model._checked import replaced
from agentfsm._model.copies import own_call
from agentfsm._model.limits import MAX_DEPTH, nesting_exceeds
from agentfsm._model.pricing import turn_cost, unknown_price
from agentfsm._model.run_state import Run, Step
from agentfsm._model.types import ModelTurn, ToolCall

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Normalize the payload, issue missing or duplicate ids, count the turn and its usage."""
    payload = step.payload
    # A turn the host built is bounded here; a raw payload is read (and bounded) by `normalize`.
    # The run keeps calls whose arguments no one else holds: the host's turn may change
    # later. A turn read from a raw payload already holds its own (`normalize` copies
    # argument objects); a host's turn is kept as given beside copies of its calls, which
    # the controller puts in a turn of their own only when something reads it later.
    if isinstance(payload, ModelTurn):
        turn = _bounded(payload)
        calls = [own_call(call) for call in turn.tool_calls]
    else:
        turn = _normalizer()(payload)
        calls = turn.tool_calls
    next_turn = run.turn + 1
    notes: list[str] = []
    if calls and (len(calls) > 1 or not calls[0].id):  # one call with an id: nothing to fix
        calls, notes = _issue_ids(calls, next_turn)
        if notes:  # guards read the issued ids in the output too
            turn = replaced(turn, {"tool_calls": calls})
    unknown = ""
    if run.prices:
        turn, unknown = _priced(turn)
        if unknown and not run.price_warned:
            run.price_warned = True
            notes.append(f"{unknown}, so the cost budget cannot count it (said once per run)")
    run.turn = next_turn
    usage = turn.usage
    if usage is not None:
        run.tokens += usage.input_tokens + usage.output_tokens
        run.cost += usage.cost or 0.0
        run.context_tokens = usage.input_tokens + usage.output_tokens
        if run.tree is not None:
            # Spent is spent, whatever becomes of this input: the tree's budgets (this run's
            # snapshot below, the runs above it) see the turn at once.
            run.tree.charge(usage)
    step.output, step.calls = turn, calls
    changes = {"output": turn, "notes": tuple(notes), "cost_unknown": unknown}
    step.snap = run.snapshot(step.snap, "model_output", changes)


def _bounded(turn: ModelTurn) -> ModelTurn:
    """A hand-built turn, with calls whose arguments nest past `MAX_DEPTH` marked broken.

    `normalize` already checks the turns it makes; this is the same rule for
    turns the host built itself, so no later step meets Python's recursion limit.
    """
    calls = turn.tool_calls
    for call in calls:
        if _nested(call):
            break
    else:
        return turn  # flat arguments, the common case
    deep = [_nested(call) and nesting_exceeds(call.arguments, MAX_DEPTH) for call in calls]
    if not any(deep):  # nested within the bound: the turn stays as given
        return turn
    fixed = [
        replaced(
            call, {"arguments": None, "error": f"arguments nest deeper than {MAX_DEPTH} levels"}
        )
        if too_deep
        else call
        for call, too_deep in zip(calls, deep, strict=True)
    ]
    return replaced(turn, {"tool_calls": fixed})


def _nested(call: ToolCall) -> bool:
    args = call.arguments
    if args:
        for value in args.values():
            if type(value) is dict or type(value) is list:
                return True
    return False


def _priced(turn: ModelTurn) -> tuple[ModelTurn, str]:
    """The turn with its cost filled in from its usage and model, or why it has none."""
    cost = turn_cost(turn)
    usage = turn.usage
    if cost is None or usage is None:
        return turn, unknown_price(turn)
    if usage.cost is None:
        turn = replaced(turn, {"usage": replaced(usage, {"cost": cost})})
    return turn, ""


@functools.cache
def _normalizer() -> Callable[[object], ModelTurn]:
    """`agentfsm.providers.normalize`, imported on the first raw payload (`import agentfsm`
    does not load the readers)."""
    from agentfsm.providers import normalize

    return normalize


def _issue_ids(calls: list[ToolCall], turn: int) -> tuple[list[ToolCall], list[str]]:
    if not calls:
        return calls, []
    ids = {call.id for call in calls}
    if len(ids) == len(calls) and "" not in ids:  # the common case: nothing to fix
        return calls, []
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    notes: list[str] = []
    for index, call in enumerate(calls):
        if call.id and call.id not in seen:
            seen.add(call.id)
            fixed.append(call)
            continue
        new_id = f"afsm_{turn}_{index}"
        while new_id in seen:
            new_id += "_"
        seen.add(new_id)
        why = "had no id" if not call.id else f"repeated id {call.id!r}"
        notes.append(f"issued id {new_id!r} to call #{index} ({call.name}), which {why}")
        fixed.append(replaced(call, {"id": new_id}))
    return fixed, notes
