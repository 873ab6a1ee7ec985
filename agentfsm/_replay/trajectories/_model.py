"""The recorded steps a trajectory reader yields, in the order they happened.

A recorded run is a sequence of four kinds of step: a model output, the
results of the tool calls it made (paired by position, never by id alone:
tau-bench reuses ids within a run), a user message and a human reply. Steps
are plain slotted dataclasses because replay builds millions of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentfsm._model.types import ModelTurn, ToolResult, Usage

__all__ = [
    "ApprovalChange",
    "Charged",
    "HumanReply",
    "ModelOutput",
    "RecordedRun",
    "Step",
    "Stopped",
    "ToolResults",
    "UserMessage",
]


@dataclass(frozen=True, slots=True)
class ModelOutput:
    """One model output, normalized."""

    turn: ModelTurn
    elapsed: float | None = None
    """The run's time when the output was routed, where the recording says (agentfsm traces)."""


@dataclass(frozen=True, slots=True)
class ToolResults:
    """The recorded results of the previous model output's calls, in call order.

    Result `i` answers call `i` of that output; `call_id` is the recorded id,
    which replay does not trust.
    """

    results: tuple[ToolResult, ...]
    elapsed: float | None = None
    """The run's time when the results were routed, where the recording says."""


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message from the user (or a user simulator) to the agent."""

    text: str


@dataclass(frozen=True, slots=True)
class HumanReply:
    """A human's answer to an ASK_HUMAN decision, as an agentfsm trace records it."""

    approved: bool | dict[str, bool]
    """One answer for every asked call, or each asked call's answer by call id."""
    message: str | None = None
    elapsed: float | None = None
    """The run's time when the reply was routed, where the recording says."""
    messages: dict[str, str] | None = None
    """Each asked call's own text, by call id, when the reply gave them."""
    arguments: dict[str, dict[str, Any]] | None = None
    """Edited arguments of approved calls, by call id, when the reply gave them."""
    remember: dict[str, dict[str, Any]] | None = None
    """The scope each approved call was remembered with, by call id, when the reply gave one
    (`on_human_reply(remember=)`, docs/approvals.md)."""


@dataclass(frozen=True, slots=True)
class ApprovalChange:
    """The host granted (`Controller.grant`) or revoked (`Controller.revoke`) a remembered
    approval, as an agentfsm trace records it."""

    granted: bool
    """True for a grant, False for a revocation."""
    approval: dict[str, Any]
    """The Approval record as the event holds it."""


@dataclass(frozen=True, slots=True)
class Stopped:
    """The host ended the run from outside (`Controller.stop`), as an agentfsm trace records it.

    Replay stops the run at the same point with the same exit reason, unless the policy
    it replays under ended the run before then.
    """

    reason: str
    """The exit reason's value (`interrupted`, `completed`, ...)."""
    message: str | None = None
    """What the host said when it stopped the run, if anything."""


@dataclass(frozen=True, slots=True)
class Charged:
    """Spend counted outside a model output (`Controller.charge`: a host's own report, or a
    run below this one in its run tree spending, each turn as it is counted), as an agentfsm
    trace records it. Replay charges it again, so the run's budgets decide as they did."""

    usage: Usage


Step = ModelOutput | ToolResults | UserMessage | HumanReply | Stopped | ApprovalChange | Charged


@dataclass(slots=True)
class RecordedRun:
    """One recorded run: where it came from, its steps, and how the recording ended.

    `end` is how the recording itself says the run ended (`Submitted`,
    `###STOP###`, `give_up`, ...). Streaming readers learn it only when the
    steps are exhausted, so read it after iterating `steps`.
    """

    id: str
    """The run's id in its source, or its index in the file."""
    source: str
    """The file the run was read from."""
    format: str
    """The name of the format the file was read as."""
    steps: Iterable[Step]
    """The steps, lazily for streaming formats: iterate once."""
    end: str | None = None
    """How the recording says the run ended, when it says so."""
    info: dict[str, Any] = field(default_factory=dict)
    """Small extra facts from the source (reward, model, ...); an agentfsm trace's
    `policy` and `tools` (None: any tool name) as its `run_started` event recorded them."""
    recorded: list[tuple[str, str, str, str | None]] | None = None
    """The decisions an agentfsm trace recorded, as (action, priority, guard, exit reason),
    filled while `steps` is read; None for formats that do not record decisions."""
    shadow: list[dict[str, Any]] = field(default_factory=list)
    """The shadow verdicts an agentfsm trace recorded (`Decision.shadow`, each with its
    `turn`), filled while `steps` is read; empty when the run had no shadow policy."""
    open_at: int | None = None
    """For an agentfsm trace, once `steps` is read: the line of the run's last event when
    its last decision did not end it (the process writing it was killed, or the run was
    never stopped), else None. Always None for formats that record no decisions."""

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)
