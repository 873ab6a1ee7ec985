"""The named states of the loop: one module each, one `enter(run, step)` function.

`ENTRY` maps each state that does work on entry to that work; `verify` and
`budget_check` do theirs in their guards, so the walk does not call them.
"""

from __future__ import annotations

from collections.abc import Callable

from agentfsm._model.run_state import Run, Step
from agentfsm._model.types import State
from agentfsm.states import (
    await_human,
    await_model,
    budget_check,
    end,
    execute,
    handoff,
    parse,
    recover,
    validate,
    verify,
)

__all__ = ["ENTRY", "NO_WORK", "State"]

ENTRY: dict[State, Callable[[Run, Step], None]] = {
    State.AWAIT_MODEL: await_model.enter,
    State.PARSE: parse.enter,
    State.VALIDATE: validate.enter,
    State.EXECUTE: execute.enter,
    State.RECOVER: recover.enter,
    State.HANDOFF: handoff.enter,
    State.AWAIT_HUMAN: await_human.enter,
    State.END: end.enter,
}
"""The entry function of every state that records something on entry."""

NO_WORK: dict[State, Callable[[Run, Step], None]] = {
    State.VERIFY: verify.enter,
    State.BUDGET_CHECK: budget_check.enter,
}
"""States whose entry records nothing (kept for completeness and documentation)."""
