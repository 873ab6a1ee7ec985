"""The frozen view of a run that every guard reads.

A snapshot is built once per input (model output, tool results, human reply)
from the controller's counters and the analysis of the parse and validate
states. Guards are pure functions of it, so they are trivial to test: build
one with `agentfsm.testing.snapshot(...)` and call the guard.

A snapshot is a plain frozen record, not a pydantic model: the step builds two or
three of them from values it checked itself, and a pydantic copy cost several times
the rest of the work (issue 36). A snapshot a user builds, `RunSnapshot(turn=3)`, is
validated field by field as before, by a pydantic model made from the annotations
below, and raises `DataError` naming each bad field.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, get_type_hints

from pydantic import ConfigDict, create_model

from agentfsm._model._checked import Checked
from agentfsm._model.types import ModelTurn, ToolCall, ToolResult
from agentfsm.exceptions import DataError

__all__ = ["Phase", "RunSnapshot", "unchecked_evolve", "unchecked_snapshot"]

Phase = Literal["model_output", "tool_results", "human_reply"]


class RunSnapshot:
    """What a run looks like at the moment a guard is asked."""

    run_id: str = "run"
    """The run's id."""
    phase: Phase = "model_output"
    """Which input is being routed."""
    turn: int = 0
    """Model outputs seen so far, this one included; retries count."""
    episode_start: int = 0
    """The turn before the current episode's first model output (0 in the first episode)."""
    output: ModelTurn | None = None
    """The model output being routed (phase `model_output`)."""
    executable: tuple[ToolCall, ...] = ()
    """Calls that passed validation and may run (or approved calls, phase `human_reply`)."""
    rejected: tuple[ToolResult, ...] = ()
    """Error results the controller made for calls it will not run."""
    denied: tuple[ToolCall, ...] = ()
    """Calls the permission hook denied."""
    needs_approval: tuple[ToolCall, ...] = ()
    """Calls the permission hook wants a human to approve."""
    asked_because: tuple[str, ...] = ()
    """Why each call of `needs_approval` waits for a human (`name: source`), in turn order: the
    rule or entry that asks, or why a rule could not be evaluated on the call."""
    handoffs: tuple[ToolCall, ...] = ()
    """Calls that hand the task to another agent."""
    repeat_streak: int = 0
    """Identical consecutive calls, counting this turn's calls."""
    repeated: str = ""
    """The calls that repeat, as `name(args)`, for reasons (set once the streak passes 1)."""
    notes: tuple[str, ...] = ()
    """What the controller fixed on its own (issued ids, unwrapped calls)."""
    results: tuple[ToolResult, ...] = ()
    """Results received, synthesized ones for missing ids included (phase `tool_results`)."""
    missing: tuple[str, ...] = ()
    """Call ids that got no result from the host."""
    skipped: tuple[str, ...] = ()
    """Call ids a user message skipped before they ran (phase `tool_results`): each has its
    one result, an error result saying so, and none of them failed."""
    tool_errors_in_a_row: int = 0
    """Failed repair rounds in a row, this input's included: a round (one turn's calls and
    their results) fails when any of its calls failed or was refused, however many did."""
    same_results_in_a_row: int = 0
    """Tool rounds in a row that repeated a recent round: same calls, same results."""
    incomplete_in_a_row: int = 0
    """Consecutive answers that failed verification, this one included."""
    retries_in_a_row: int = 0
    """P0 recoveries in a row before this output."""
    tool_calls_used: int = 0
    """Tool calls already executed in the run."""
    tokens_used: int = 0
    """Input plus output tokens over the run, this output's included."""
    cost_used: float = 0.0
    """Cost in US dollars over the run, reported or priced (see `agentfsm._model.pricing`)."""
    cost_unknown: str = ""
    """Why this output's cost is unknown, when the run has a cost budget and cannot price it."""
    context_tokens: int = 0
    """Input plus output tokens of the latest output: how full the context is."""
    elapsed: float = 0.0
    """Seconds since the run started."""
    human_approved: bool | None = None
    """The human's answer (phase `human_reply`)."""
    human_message: str | None = None
    """What the human said, if anything."""

    def __init__(self, **fields: Any) -> None:
        """`fields` over the defaults, each validated: `DataError` names every bad one."""
        checked = _validator().model_validate(fields)
        vars(self).update(checked.__dict__)

    def replace(self, **changes: Any) -> RunSnapshot:
        """A copy with `changes`, validated like the constructor."""
        return RunSnapshot(**{**vars(self), **changes})

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (a new dict; the values are the snapshot's own)."""
        return dict(vars(self))

    def __setattr__(self, name: str, value: Any) -> None:
        raise DataError(
            f"RunSnapshot is frozen: {name} cannot be set; build another with replace()",
            model="RunSnapshot",
            problems=[(name, "the snapshot is frozen")],
        )

    def __delattr__(self, name: str) -> None:
        raise DataError(
            f"RunSnapshot is frozen: {name} cannot be deleted",
            model="RunSnapshot",
            problems=[(name, "the snapshot is frozen")],
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not RunSnapshot:
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # equal by value, so not hashable (as a dict)

    def __repr__(self) -> str:
        return f"RunSnapshot({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


FIELDS: tuple[str, ...] = tuple(RunSnapshot.__annotations__)
"""The snapshot's fields, in their order."""

_DEFAULTS: dict[str, Any] = {name: getattr(RunSnapshot, name) for name in FIELDS}


@functools.cache
def _validator() -> type[Checked]:
    """The pydantic model that checks a snapshot a user builds, made on first use."""
    hints = get_type_hints(RunSnapshot)
    fields: dict[str, Any] = {name: (hints[name], _DEFAULTS[name]) for name in FIELDS}
    model: type[Checked] = create_model("RunSnapshot", __base__=_Frozen, **fields)
    return model


class _Frozen(Checked):
    model_config = ConfigDict(frozen=True, extra="forbid")


def unchecked_snapshot(values: dict[str, Any]) -> RunSnapshot:
    """A snapshot of `values` (every field), unvalidated: the step's own data, checked already."""
    snap = object.__new__(RunSnapshot)
    vars(snap).update(values)
    return snap


def unchecked_evolve(snap: RunSnapshot, **changes: Any) -> RunSnapshot:
    """A copy of `snap` with `changes`, unvalidated: the routing path's own data."""
    made = object.__new__(RunSnapshot)
    fields = vars(made)
    fields.update(vars(snap))
    fields.update(changes)
    return made


def default_snapshot(run_id: str) -> RunSnapshot:
    """The defaults with `run_id`: what a run's first input starts from."""
    return unchecked_snapshot({**_DEFAULTS, "run_id": run_id})
