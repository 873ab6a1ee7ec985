"""What a report shows of one run: its steps through the machine, gathered from replay events.

Every format `replay` reads is replayed through the policy with an observer attached; each
routed input (a model output, tool results, a human reply) becomes one `StepView` with the
normalized output, the transitions taken, the decision, the results and the budgets used so
far. Text longer than `MAX_TEXT` is cut here, so a page never embeds megabytes of tool output.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfsm._engine.policy import Policy
from agentfsm._replay.engine import DecisionRecord, ReplayResult, compare, keyed, replay_run
from agentfsm._replay.trajectories import RecordedRun
from agentfsm._report._approvals import ApprovalNotes

__all__ = ["MAX_TEXT", "Budgets", "Difference", "RunView", "StepView", "clip", "collect_run"]

MAX_TEXT = 20_000
"""Characters of one text (an answer, arguments, a tool result) kept in a report."""

_INPUTS = {"model_output", "tool_results", "human_reply"}


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, cut to `limit` characters with a marker giving the original size."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [cut: {len(text) - limit:,} more characters of {len(text):,}]"


@dataclass(frozen=True, slots=True)
class Budgets:
    """What the run had used when a step was decided."""

    turn: int
    tokens: int
    cost: float
    tool_calls: int


@dataclass(slots=True)
class StepView:
    """One routed input and what the controller decided about it."""

    index: int
    episode: str
    kind: str
    """`model_output`, `tool_results` or `human_reply`."""
    turn: int
    output: dict[str, Any] | None
    """The model output as normalized (text and arguments clipped)."""
    given: list[dict[str, Any]]
    """Results the host gave (for `tool_results`), or the human's reply (for `human_reply`)."""
    notes: list[str]
    """User messages recorded before this input."""
    path: list[str]
    transitions: list[dict[str, Any]]
    decision: dict[str, Any]
    budgets: Budgets


@dataclass(frozen=True, slots=True)
class Difference:
    """A decision where the second policy decided otherwise."""

    step: int
    """Index of the step in the run (first policy)."""
    turn: int
    mine: DecisionRecord
    theirs: DecisionRecord | None


@dataclass(slots=True)
class RunView:
    """One replayed run as a report shows it."""

    source: str
    run: str
    format: str
    result: ReplayResult
    steps: list[StepView] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    against_exit: str | None = None
    compared: bool = False
    shadow: list[dict[str, Any]] = field(default_factory=list)
    """The shadow verdicts the trace recorded (`Decision.shadow`, each with its turn)."""
    approvals: ApprovalNotes | None = None
    """The remembered approvals granted, used and revoked in the replay."""

    @property
    def exit_reason(self) -> str:
        """The exit reason, or what the run still awaited when its recording ended."""
        return self.result.exit_reason or "still waiting"

    @property
    def differs(self) -> bool:
        """Whether a second policy decided otherwise anywhere (or ended differently)."""
        return bool(self.differences) or (
            self.compared and self.against_exit != self.result.exit_reason
        )


class _Collector:
    """An observer that groups a replay's events into steps."""

    def __init__(self) -> None:
        self.steps: list[StepView] = []
        self.kind = ""
        self.output: dict[str, Any] | None = None
        self.given: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.transitions: list[dict[str, Any]] = []
        self.tokens = 0
        self.cost = 0.0
        self.tool_calls = 0
        self.approvals = ApprovalNotes()

    def __call__(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        self.approvals.see(event)
        if kind == "model_output":
            self.kind, self.output = "model_output", _clipped_output(event.get("output") or {})
            self._count_usage(self.output)
        elif kind == "tool_results":
            self.kind, self.given = "tool_results", _clipped(event.get("results") or [])
        elif kind == "human_reply":
            reply = {"approved": event.get("approved"), "message": event.get("message")}
            self.kind, self.given = "human_reply", [reply]
        elif kind == "user_message":
            self.notes.append(clip(str(event.get("text", ""))))
        elif kind == "charged":  # spent outside a model output: a run below this one, a host
            self._count_usage(event)
        elif kind == "transition":
            self.transitions.append(dict(event))
        elif kind == "decision":
            self._close(event)

    def _count_usage(self, output: Mapping[str, Any]) -> None:
        usage = output.get("usage") or {}
        self.tokens += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        self.cost += float(usage.get("cost") or 0.0)

    def _close(self, event: Mapping[str, Any]) -> None:
        decision = dict(event)
        decision["tool_calls"] = _clipped(decision.get("tool_calls") or [])
        decision["results"] = _clipped(decision.get("results") or [])
        if decision.get("action") == "execute_tools":
            self.tool_calls += len(decision["tool_calls"])
        turn = int(event.get("turn") or 0)
        path = [str(self.transitions[0]["src"])] if self.transitions else []
        path += [str(t["dst"]) for t in self.transitions]
        self.steps.append(
            StepView(
                index=len(self.steps),
                episode=str(event.get("run_id", "")),
                kind=self.kind if self.kind in _INPUTS else "input",
                turn=turn,
                output=self.output if self.kind == "model_output" else None,
                given=self.given,
                notes=self.notes,
                path=path,
                transitions=self.transitions,
                decision=decision,
                budgets=Budgets(
                    int(event.get("turn") or 0), self.tokens, self.cost, self.tool_calls
                ),
            )
        )
        self.kind, self.output, self.given, self.notes, self.transitions = "", None, [], [], []


def _clipped_output(output: Mapping[str, Any]) -> dict[str, Any]:
    data = dict(output)
    data["text"] = clip(str(data.get("text") or ""))
    data["tool_calls"] = _clipped(data.get("tool_calls") or [])
    return data


def _clipped(items: Iterable[Any]) -> list[dict[str, Any]]:
    """Calls or results with every long string field clipped."""
    out = []
    for item in items:
        entry = dict(item) if isinstance(item, Mapping) else {"value": item}
        for key in ("content", "raw_arguments", "error"):
            if isinstance(entry.get(key), str):
                entry[key] = clip(entry[key])
        if "arguments" in entry and entry["arguments"] is not None:
            entry["arguments_text"] = clip(
                json.dumps(entry["arguments"], ensure_ascii=False, indent=1, default=str)
            )
            entry.pop("arguments")
        out.append(entry)
    return out


def collect_run(run: RecordedRun, policy: Policy | None, against: Policy | None = None) -> RunView:
    """Replay `run` through `policy` (None: the recorded one), keeping every step."""
    if against is not None:
        run.steps = list(run.steps)  # replayed twice
    collector = _Collector()
    result = replay_run(run, policy, observers=[collector])
    view = RunView(run.source, run.id, run.format, result, collector.steps)
    view.approvals = collector.approvals
    view.shadow = list(run.shadow)  # read with the steps: what the live run recorded
    if against is not None:
        other = replay_run(run, against)
        view.compared = True
        view.against_exit = other.exit_reason
        view.differences = _differences(result, other)
    return view


def _differences(mine: ReplayResult, theirs: ReplayResult) -> list[Difference]:
    """Decisions of `mine` that `theirs` made otherwise, aligned as `compare` aligns them."""
    marks = compare(mine, theirs).against
    if not marks:
        return []
    by_key = dict(keyed(theirs.decisions))
    differences = []
    for index, (key, record) in enumerate(keyed(mine.decisions)):
        if index in marks:
            differences.append(Difference(index, record.turn, record, by_key.get(key)))
    return differences
