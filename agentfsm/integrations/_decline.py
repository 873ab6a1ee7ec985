"""What a human's decline means, the same in every integration (`on_decline`).

- `"stop"` (the default, the Controller's own): a decline without a message of the human's
  ends the run as `HUMAN_DECLINED`; a decline that carries one goes to the model as the
  calls' error result and the run goes on (the model reads what the human said).
- `"feedback"`: every decline goes to the model and the run goes on; a decline without a
  message is told as `declined by the human: no reason given`.

A framework's own default rejection text (the Agents SDK's "Tool execution was not approved.",
pydantic-ai's "The tool call was denied.") is not a message of the human's.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from agentfsm.exceptions import DefinitionError

__all__ = ["NO_REASON", "OnDecline", "checked", "message"]

OnDecline = Literal["stop", "feedback"]
NO_REASON = "no reason given"
"""What the model reads after a decline without a message, with `on_decline="feedback"`."""


def checked(value: object, where: str) -> OnDecline:
    """`value` if it is an `on_decline` setting, else DefinitionError."""
    # The type first: a value's own __eq__ is not asked (it may raise, or claim equality).
    if type(value) is str and value == "stop":
        return "stop"
    if type(value) is str and value == "feedback":
        return "feedback"
    shown = repr(value)[:80] if type(value) is str else f"a {type(value).__name__}"
    raise DefinitionError(f"{where}: on_decline must be 'stop' or 'feedback', not {shown}")


def message(on_decline: OnDecline, said: str | None, defaults: Collection[str] = ()) -> str | None:
    """The message to give `Controller.on_human_reply(approved=False, ...)`.

    `said` is what came with the decline; `defaults` the framework's own texts for a decline
    without one. None (no message) makes the Controller end the run.
    """
    if not said or said in defaults:
        return NO_REASON if on_decline == "feedback" else None
    return said
