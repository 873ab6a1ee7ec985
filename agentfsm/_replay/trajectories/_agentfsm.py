"""agentfsm's own trace files, read back as runs, streaming.

A trace may hold several runs one after another; a `run_started` event, or
a change of `run_id`, begins the next. Model outputs are `ModelTurn` dumps
(a raw provider payload is normalized instead); the last decision with an
exit reason is the recorded end. Lines stream from disk: one run's steps are
consumed before the next run is yielded, so memory stays flat.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, TypeVar

from agentfsm._model.types import ExitReason, ModelTurn, ToolResult, Usage
from agentfsm._replay.trace import HEADER_EVENT, read_numbered
from agentfsm._replay.trajectories._io import Errors, located, report, wrap_run_error
from agentfsm._replay.trajectories._model import (
    ApprovalChange,
    Charged,
    HumanReply,
    ModelOutput,
    RecordedRun,
    Step,
    Stopped,
    ToolResults,
    UserMessage,
)
from agentfsm._replay.trajectories._openai import normalized
from agentfsm.exceptions import DataError, RunError

__all__ = ["NAME", "detect_head", "read_file"]

NAME = "agentfsm-trace"
Numbered = tuple[int, dict[str, Any]]
_V = TypeVar("_V")


def detect_head(head: Any) -> bool:
    """Whether the first line of a file is an agentfsm trace line."""
    return isinstance(head, dict) and head.get("event") == HEADER_EVENT


class _Lookahead:
    """An iterator of numbered events that can show the next one without taking it."""

    def __init__(self, events: Iterator[Numbered]) -> None:
        self._events = events
        self._next: Numbered | None = next(events, None)

    def peek(self) -> Numbered | None:
        return self._next

    def take(self) -> Numbered:
        item = self._next
        assert item is not None
        self._next = next(self._events, None)
        return item


def read_file(path: str, errors: Errors = None) -> Iterator[RecordedRun]:
    """Yield the runs of a trace in file order, streaming.

    A run whose steps were not read by the time the next run is asked for is
    read into memory first (one run, not the file), so it can still be replayed.
    """
    events = _Lookahead(read_numbered(path, errors=errors))
    index = 0
    while (head := events.peek()) is not None:
        run = RecordedRun(
            id=str(head[1].get("run_id") or index), source=path, format=NAME, steps=(), recorded=[]
        )
        if head[1].get("event") == "run_started":
            # Known before the steps are read, so replay can build the recorded Controller.
            run.info = {"policy": head[1].get("policy"), "tools": head[1].get("tools")}
            if "shadow" in head[1]:
                run.info["shadow"] = head[1]["shadow"]
        steps = _RunSteps(path, run, events, errors)
        run.steps = steps
        yield run
        steps.detach()
        index += 1


class _RunSteps:
    """The steps of one run, read from the shared event stream until the next run begins."""

    def __init__(self, path: str, run: RecordedRun, events: _Lookahead, errors: Errors) -> None:
        self._path = path
        self._run = run
        self._events = events
        self._errors = errors
        self._buffer: deque[Numbered] | None = None
        self._first = True
        self._done = False

    def __iter__(self) -> Iterator[Step]:
        ended, last = False, None
        while (item := self._next_event()) is not None:
            number, event = item
            last = number
            if event.get("event") == "decision":  # a later episode may reopen an ended run
                ended = bool(event.get("exit_reason"))
            step = _step(self._path, number, event, self._run, self._errors)
            if step is not None:
                yield step
        self._run.open_at = None if ended else last

    def _next_event(self) -> Numbered | None:
        if self._buffer is not None:
            return self._buffer.popleft() if self._buffer else None
        head = self._events.peek()
        if self._done or head is None or (not self._first and _starts_run(head[1], self._run.id)):
            self._done = True
            return None
        self._first = False
        return self._events.take()

    def detach(self) -> None:
        """Read what is left of this run into memory so the shared stream can move on."""
        if self._done or self._buffer is not None:
            return
        rest: deque[Numbered] = deque()
        while (item := self._next_event()) is not None:
            rest.append(item)
        self._buffer = rest


def _starts_run(event: dict[str, Any], run_id: str) -> bool:
    if event.get("event") == "run_started":
        return True
    other = event.get("run_id")
    return other is not None and str(other) != run_id


def _step(
    path: str, number: int, event: dict[str, Any], run: RecordedRun, errors: Errors
) -> Step | None:
    try:
        return _convert(event, run)
    except (RunError, DataError, TypeError, KeyError) as exc:
        error = wrap_run_error(path, number, exc) if isinstance(exc, RunError) else None
        report(errors, error or located(path, number, _describe(event, exc)))
        return None


def _describe(event: dict[str, Any], exc: Exception) -> str:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"bad {event.get('event')!r} event: {detail}"


def _convert(event: dict[str, Any], run: RecordedRun) -> Step | None:
    kind = event.get("event")
    if kind == "model_output":
        return ModelOutput(_turn(event["output"]), _elapsed(event))
    if kind == "tool_results":
        results = tuple(ToolResult.model_validate(r) for r in event["results"])
        return ToolResults(results, _elapsed(event))
    if kind == "user_message":
        return UserMessage(str(event["text"]))
    if kind == "human_reply":
        return _reply(event)
    if kind in ("approval_granted", "approval_revoked"):
        approval = event["approval"]
        if type(approval) is not dict:
            raise TypeError(f"approval must be an object, not {approval!r:.60}")
        return ApprovalChange(kind == "approval_granted", approval)
    if kind == "charged":
        return Charged(Usage.model_validate(event["usage"]))
    if kind == "decision":
        return _decided(event, run)
    return None


def _decided(event: dict[str, Any], run: RecordedRun) -> Stopped | None:
    """A `decision` event: kept for the divergence check; a stop from outside is a step."""
    exit_reason = event.get("exit_reason")
    shadow = event.get("shadow")
    if isinstance(shadow, list):  # recorded beside the decision, never enforced
        turn = event.get("turn")
        run.shadow.extend({"turn": turn, **v} for v in shadow if isinstance(v, dict))
    if run.recorded is not None:
        run.recorded.append(
            (
                str(event["action"]),
                str(event.get("priority")),
                str(event.get("guard")),
                None if exit_reason is None else str(exit_reason),
            )
        )
    if exit_reason:
        run.end = str(exit_reason)
        return _stopped(event, str(exit_reason))
    return None


_EXIT_REASONS = frozenset(reason.value for reason in ExitReason)


def _stopped(decision: dict[str, Any], exit_reason: str) -> Stopped | None:
    """The host's `Controller.stop` behind an end decision, or None for an end a guard decided.

    A stop from outside is an input like a model output: replay must give it again at the
    same point, or the run it replays is still waiting where the recording ended.
    """
    if exit_reason not in _EXIT_REASONS:
        raise TypeError(f"exit_reason {exit_reason!r:.60} is not an ExitReason")
    guard = f"Stop(ExitReason.{ExitReason(exit_reason).name})"
    said = f"stopped from outside ({exit_reason})"
    reason = decision.get("reason")
    if decision.get("guard") != guard or not isinstance(reason, str) or not reason.startswith(said):
        return None
    message = reason[len(said) + 2 :] if reason.startswith(f"{said}: ") else None
    return Stopped(exit_reason, message)


def _reply(event: dict[str, Any]) -> HumanReply:
    """A `human_reply` event: one answer or one per call, with each call's text and edit."""
    message = event.get("message")
    text = None if message is None else str(message)
    approved = event["approved"]
    answers = approved if type(approved) is bool else _by_id(approved, "approved", bool)
    messages = event.get("messages")
    arguments = event.get("arguments")
    return HumanReply(
        answers,
        text,
        _elapsed(event),
        None if messages is None else _by_id(messages, "messages", str),
        None if arguments is None else _by_id(arguments, "arguments", dict),
        _remembered(event.get("remember")),
    )


def _remembered(made: Any) -> dict[str, dict[str, Any]] | None:
    """The scopes a reply remembered, by call id, from the approvals its event records."""
    if made is None:
        return None
    if type(made) is not list or not all(type(a) is dict for a in made):
        raise TypeError(f"remember must be a list of approvals, not {made!r:.60}")
    return {str(a["call_id"]): scope_of_record(a) for a in made}


def scope_of_record(approval: dict[str, Any]) -> dict[str, Any]:
    """The scope an approval was made with, as `remember` and `grant` take it."""
    scope = approval["scope"]
    spec: dict[str, Any] = {"scope": scope}
    if scope == "uses":
        spec["uses"] = approval["uses_left"]
    elif scope == "seconds":
        spec["seconds"] = approval["expires_at"] - approval["granted_at"]
    if approval.get("pattern") is not None:
        spec["pattern"] = approval["pattern"]
    return spec


def _by_id(value: Any, name: str, kind: type[_V]) -> dict[str, _V]:
    """A reply's field by call id, each value of `kind`; TypeError names the field otherwise."""
    if type(value) is not dict or not all(
        type(k) is str and type(v) is kind for k, v in value.items()
    ):
        wanted = f"an object of {kind.__name__} by call id"
        raise TypeError(f"{name} must be {wanted}, not {value!r:.60}")
    return value


def _elapsed(event: dict[str, Any]) -> float | None:
    """The run's time an input event records; a trace written before it was recorded has none."""
    value = event.get("elapsed")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise TypeError(f"elapsed must be a number of seconds >= 0, not {value!r:.60}")
    return float(value)


def _turn(output: Any) -> ModelTurn:
    if isinstance(output, dict) and ("choices" in output or "content" in output):
        return normalized(output, None)
    return ModelTurn.model_validate(output)
