"""Copies of call arguments, so that no one else holds a structure the run's record keeps.

A tool, a host or a framework that edits the argument dict it was given must not
rewrite what the Controller decided on: the record keeps its own copy of every
call's arguments, and every call it hands out (a decision's calls, the pending
calls, the last output) carries a copy of its own.
"""

from __future__ import annotations

from typing import Any

from agentfsm._model._checked import replaced
from agentfsm._model.types import ModelTurn, ToolCall

__all__ = ["copied", "own_call", "own_turn"]


def copied(value: Any) -> Any:
    """A copy of a JSON-like structure: every dict and list new, tuples copied inside.

    Leaves (text, numbers, booleans, None, and any other object, which arguments parsed
    from JSON never hold) are shared: none of the JSON leaves can be changed in place.
    Arguments are bounded in depth (`MAX_DEPTH`) before they get here.
    """
    kind = type(value)
    if kind is dict:
        # Most arguments are flat: a leaf is taken as it is, without a call to find that out.
        return {
            key: item if type(item) not in _CONTAINERS else copied(item)
            for key, item in value.items()
        }
    if kind is list:
        return [item if type(item) not in _CONTAINERS else copied(item) for item in value]
    if kind is tuple:
        return tuple(copied(item) for item in value)
    return value


_CONTAINERS = frozenset({dict, list, tuple})
"""The types `copied` makes new (exactly these: a subclass is a leaf, as before)."""


def own_call(call: ToolCall) -> ToolCall:
    """`call` with arguments no one else holds (the call itself when it has none).

    The copy is validated by the model's own validator, from the fields the call holds
    (`exclude_unset` dumps it alike): pydantic-core builds it in one call, where `model_copy`
    copies the instance's dict, its set of fields and its extras in Python.
    """
    if not call.arguments:
        return call if call.arguments is None else replaced(call, {"arguments": {}})
    if type(call) is not ToolCall:  # a host's subclass keeps its class and private values
        return replaced(call, {"arguments": copied(call.arguments)})
    given = call.model_fields_set
    # A field holds its default unless given (`model_construct` can say otherwise, so a value
    # that differs from the default is taken too): the copy reports the same fields as set.
    values = {
        name: value
        for name, value in vars(call).items()
        if name in given or value != _CALL_DEFAULTS.get(name)
    }
    values["arguments"] = copied(call.arguments)
    made: ToolCall = ToolCall.__pydantic_validator__.validate_python(values)
    return made


_CALL_DEFAULTS = {name: field.default for name, field in ToolCall.model_fields.items()}
"""Each field of a `ToolCall` and its default (`PydanticUndefined` for the required name)."""


def own_turn(turn: ModelTurn) -> ModelTurn:
    """`turn` with calls whose arguments no one else holds (the turn itself without calls)."""
    if not turn.tool_calls:
        return turn
    return replaced(turn, {"tool_calls": [own_call(call) for call in turn.tool_calls]})
