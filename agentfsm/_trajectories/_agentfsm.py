"""agentfsm's own trace files, read back as runs, streaming.

A trace may hold several runs one after another; a `run_started` event, or
a change of `run_id`, begins the next. Model outputs are `ModelTurn` dumps
(a raw provider payload is normalized instead); the last decision with an
exit reason is the recorded end. Lines stream from disk: one run's steps are
consumed before the next run is yielded, so memory stays flat.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from agentfsm._trace import HEADER_EVENT, read_numbered
from agentfsm._trajectories._io import Errors, located, report, wrap_run_error
from agentfsm._trajectories._model import (
    HumanReply,
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
)
from agentfsm._trajectories._openai import normalized
from agentfsm._types import ModelTurn, ToolResult
from agentfsm.exceptions import RunError

__all__ = ["NAME", "detect_head", "read_file"]

NAME = "agentfsm-trace"
Numbered = tuple[int, dict[str, Any]]


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
    """Yield the runs of a trace in file order; each must be iterated before the next."""
    events = _Lookahead(read_numbered(path, errors=errors))
    index = 0
    while (head := events.peek()) is not None:
        run_id = str(head[1].get("run_id") or index)
        run = RecordedRun(id=run_id, source=path, format=NAME, steps=())
        steps = _run_steps(path, run, events, errors)
        run.steps = steps
        yield run
        for _ in steps:  # the caller may have stopped early: skip the rest of this run
            pass
        index += 1


def _run_steps(path: str, run: RecordedRun, events: _Lookahead, errors: Errors) -> Iterator[Step]:
    first = True
    while (head := events.peek()) is not None:
        event = head[1]
        if not first and _starts_run(event, run.id):
            return
        first = False
        number, event = events.take()
        if event.get("event") == "run_started":
            run.info = {"policy": event.get("policy")}
        step = _step(path, number, event, run, errors)
        if step is not None:
            yield step


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
    except (RunError, ValidationError, TypeError, KeyError) as exc:
        error = wrap_run_error(path, number, exc) if isinstance(exc, RunError) else None
        report(errors, error or located(path, number, _describe(event, exc)))
        return None


def _describe(event: dict[str, Any], exc: Exception) -> str:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"bad {event.get('event')!r} event: {detail}"


def _convert(event: dict[str, Any], run: RecordedRun) -> Step | None:
    kind = event.get("event")
    if kind == "model_output":
        return ModelOutput(_turn(event["output"]))
    if kind == "tool_results":
        return ToolResults(tuple(ToolResult.model_validate(r) for r in event["results"]))
    if kind == "user_message":
        return UserMessage(str(event["text"]))
    if kind == "human_reply":
        message = event.get("message")
        return HumanReply(bool(event["approved"]), None if message is None else str(message))
    if kind == "decision" and event.get("exit_reason"):
        run.end = str(event["exit_reason"])
    return None


def _turn(output: Any) -> ModelTurn:
    if isinstance(output, dict) and ("choices" in output or "content" in output):
        return normalized(output, None)
    return ModelTurn.model_validate(output)
