"""OpenHands event logs: a JSON list of actions and observations.

An agent action made by the model carries `tool_call_metadata` with the raw
chat completion (`model_response`); actions sharing one response id are one
model turn, normalized once. An observation answers the action named by its
`cause`. A result failed when the observation is `error` or a shell exit
code is neither 0 nor -1 (-1: still running). The recording ends with a
`finish` action or an `agent_state_changed` observation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm._model.types import ModelTurn, ToolResult
from agentfsm._replay.trajectories._io import Errors, report, wrap_run_error
from agentfsm._replay.trajectories._model import (
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
)
from agentfsm._replay.trajectories._openai import chat_body, normalized, result_of
from agentfsm.exceptions import RunError

__all__ = ["NAME", "detect", "read_doc"]

NAME = "openhands"


def detect(doc: Any) -> bool:
    """Whether a document is an OpenHands event list."""
    if not isinstance(doc, list) or not doc:
        return False
    head = doc[:5]
    return all(
        isinstance(e, Mapping) and "source" in e and ("action" in e or "observation" in e)
        for e in head
    )


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Yield the file's one run."""
    run = RecordedRun(id=Path(path).stem, source=path, format=NAME, steps=())
    walker = _Walker(path, errors)
    run.steps = walker.steps(doc)
    run.end = _recorded_end(doc)
    yield run


@dataclass
class _Walker:
    path: str
    errors: Errors
    calls_by_event: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    pending: list[ToolResult] = field(default_factory=list)
    response_ids: set[str] = field(default_factory=set)

    def steps(self, events: list[Any]) -> Iterator[Step]:
        for index, event in enumerate(events):
            if "observation" in event:
                self._observe(event)
                continue
            step = self._act(index, event)
            if step is not None:
                yield from self._flush()
                yield step
        yield from self._flush()

    def _flush(self) -> Iterator[Step]:
        if self.pending:
            rank = {call_id: i for i, call_id in enumerate(self.order)}
            ordered = sorted(self.pending, key=lambda r: rank.get(r.call_id, len(rank)))
            yield ToolResults(tuple(ordered))
            self.pending = []

    def _act(self, index: int, event: Mapping[str, Any]) -> Step | None:
        source, action = event.get("source"), event.get("action")
        metadata = event.get("tool_call_metadata")
        if source == "user" and action == "message":
            return UserMessage(str(event.get("message", "")))
        if source != "agent":
            return None
        if isinstance(metadata, Mapping):
            return self._tool_action(index, event, metadata)
        if action == "message":
            body = chat_body({"role": "assistant", "content": event.get("message", "")})
            return self._output(index, body)
        return None

    def _tool_action(
        self, index: int, event: Mapping[str, Any], metadata: Mapping[str, Any]
    ) -> Step | None:
        self.calls_by_event[str(event.get("id"))] = str(metadata.get("tool_call_id"))
        response = metadata.get("model_response")
        response_id = str(response.get("id")) if isinstance(response, Mapping) else ""
        if response_id in self.response_ids or not isinstance(response, dict):
            return None
        self.response_ids.add(response_id)
        return self._output(index, response)

    def _output(self, index: int, body: dict[str, Any]) -> Step | None:
        try:
            turn: ModelTurn = normalized(body, "openai")
        except RunError as exc:
            report(self.errors, wrap_run_error(self.path, f"event {index}", exc))
            return None
        self.order = [call.id for call in turn.tool_calls]
        return ModelOutput(turn)

    def _observe(self, event: Mapping[str, Any]) -> None:
        call_id = self.calls_by_event.get(str(event.get("cause")))
        if call_id is None:
            return
        self.pending.append(result_of(call_id, event.get("content", ""), _failed(event)))


def _failed(event: Mapping[str, Any]) -> bool:
    if event.get("observation") == "error":
        return True
    extras = event.get("extras")
    metadata = extras.get("metadata") if isinstance(extras, Mapping) else None
    code = metadata.get("exit_code") if isinstance(metadata, Mapping) else None
    return isinstance(code, int) and code not in (0, -1)


def _recorded_end(events: list[Any]) -> str | None:
    for event in reversed(events):
        if not isinstance(event, Mapping):
            continue
        if event.get("action") == "finish":
            return "finish"
        if event.get("observation") == "agent_state_changed":
            extras = event.get("extras")
            state = extras.get("agent_state") if isinstance(extras, Mapping) else None
            return f"agent_state: {state}"
    return None
