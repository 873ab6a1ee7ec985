"""The frozen view of a run that every guard reads.

A snapshot is built once per input (model output, tool results, human reply)
from the controller's counters and the analysis of the parse and validate
states. Guards are pure functions of it, so they are trivial to test: build
one with `agentfsm.testing.snapshot(...)` and call the guard.

A snapshot is a plain frozen record (`agentfsm._model.records`): the step builds two
or three of them from values it checked itself. One a user builds, `RunSnapshot(turn=3)`,
is validated field by field and raises `DataError` naming each bad field.
"""

from __future__ import annotations

from typing import Any, Literal

from agentfsm._model.ledger import Left
from agentfsm._model.records import Record
from agentfsm._model.types import ModelTurn, ToolCall, ToolResult

__all__ = ["FIELDS", "Phase", "RunSnapshot", "default_snapshot", "unchecked_evolve"]

Phase = Literal["model_output", "tool_results", "human_reply"]


class RunSnapshot(Record):
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
    covered: tuple[tuple[str, str], ...] = ()
    """(call id, approval id) of each call a remembered approval let run without asking."""
    repeat_streak: int = 0
    """Identical consecutive calls, counting this turn's calls."""
    repeated: str = ""
    """The calls that repeat, as `name(args)`, for reasons (set once the streak passes 1)."""
    loop_rung: str = ""
    """The rung of the policy's loop ladder the streak reached: "warn", "ask", "stop" or ""."""
    warning: str = ""
    """A warning for the model (the loop ladder's warn rung): the decision's `note`."""
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
    tree: Left | None = None
    """What the run's tree may still spend, read from its ledger (None: the run is in none)."""


FIELDS: tuple[str, ...] = RunSnapshot._fields
"""The snapshot's fields, in their order."""

_DEFAULTS: dict[str, Any] = dict(RunSnapshot._defaults)


def unchecked_evolve(snap: RunSnapshot, **changes: Any) -> RunSnapshot:
    """A copy of `snap` with `changes`, unvalidated: the routing path's own data."""
    return RunSnapshot._made({**vars(snap), **changes})


def default_snapshot(run_id: str) -> RunSnapshot:
    """The defaults with `run_id`: what a run's first input starts from."""
    return RunSnapshot._made({**_DEFAULTS, "run_id": run_id})
