"""Test doubles for code that embeds agentfsm: they are public API.

- `snapshot(**fields)`: a RunSnapshot with defaults, to call a guard on.
- `turn(...)` and `call(...)`: ModelTurns and ToolCalls in one line.
- `ScriptedModel`: a fake model that returns scripted outputs in order.
- `EventCapture`: an observer that keeps every event.
- `drive(controller, model, tools)`: the host loop, for tests.
- `ScriptedServer` and the `Reply` helpers: a real OpenAI/Anthropic-compatible
  HTTP server on 127.0.0.1 serving a scripted conversation (for litellm);
  `scripted_call` is a tool call in such a script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentfsm import _public
from agentfsm._engine.controller import Controller
from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import (
    Action,
    Decision,
    FinishReason,
    ModelTurn,
    ToolCall,
    ToolResult,
    Usage,
)
from agentfsm.exceptions import DataError
from agentfsm.testing.scripted import (
    Reply,
    Responder,
    ScriptedCall,
    cut_tool_call,
    fault,
    last_tool_result,
    say,
    stop_with_tool_calls,
    tool_calls,
)
from agentfsm.testing.scripted import call as scripted_call
from agentfsm.testing.server import RecordedRequest, ScriptedServer

__all__ = [
    "EventCapture",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedServer",
    "call",
    "cut_tool_call",
    "drive",
    "fault",
    "last_tool_result",
    "say",
    "scripted_call",
    "snapshot",
    "stop_with_tool_calls",
    "tool_calls",
    "turn",
]


def snapshot(**fields: Any) -> RunSnapshot:
    """A validated RunSnapshot with defaults for every field not given."""
    return RunSnapshot(**fields)


def call(name: str, arguments: Mapping[str, Any] | None = None, id: str = "") -> ToolCall:
    """A complete tool call."""
    if arguments is not None and not isinstance(arguments, Mapping):
        raise DataError(f"call: arguments must be a mapping, not {type(arguments).__name__}")
    return ToolCall(id=id, name=name, arguments=dict(arguments or {}))


def turn(
    text: str = "",
    calls: Iterable[ToolCall] = (),
    finish: FinishReason | str | None = None,
    *,
    truncated: bool = False,
    usage: tuple[int, int] | None = None,
    cost: float | None = None,
) -> ModelTurn:
    """A ModelTurn; the finish reason defaults to what the content implies."""
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Iterable):
        raise DataError(f"turn: calls must be a list of ToolCall, not {type(calls).__name__}")
    listed = list(calls)
    if finish is None:
        finish = FinishReason.TOOL_CALLS if listed else FinishReason.STOP
    reason = FinishReason(finish) if finish in FinishReason._value2member_map_ else None
    return ModelTurn(
        text=text,
        tool_calls=listed,
        finish_reason=reason or FinishReason.UNKNOWN,
        raw_finish_reason=str(finish),
        truncated=truncated,
        usage=None
        if usage is None
        else Usage(input_tokens=usage[0], output_tokens=usage[1], cost=cost),
    )


class ScriptedModel:
    """A fake model: each call returns the next scripted output (ModelTurn or payload)."""

    def __init__(self, outputs: Iterable[Any]) -> None:
        if isinstance(outputs, str | bytes | Mapping) or not isinstance(outputs, Iterable):
            raise DataError(
                f"ScriptedModel: outputs must be a list of outputs, not {type(outputs).__name__}"
            )
        self.outputs = list(outputs)
        self.calls = 0

    def __call__(self, *_: Any, **__: Any) -> Any:
        if self.calls >= len(self.outputs):
            raise IndexError(f"the script has only {len(self.outputs)} outputs")
        output = self.outputs[self.calls]
        self.calls += 1
        return output


class EventCapture:
    """An observer that keeps every event it is sent."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))

    def named(self, name: str) -> list[dict[str, Any]]:
        """The events called `name`, in order."""
        return [e for e in self.events if e["event"] == name]

    @property
    def transitions(self) -> list[tuple[str, str]]:
        """Every (src, dst) pair, in order."""
        return [(e["src"], e["dst"]) for e in self.named("transition")]


def drive(
    controller: Controller,
    model: Callable[[], Any],
    tools: Mapping[str, Callable[..., Any]],
    *,
    max_steps: int = 1_000,
) -> list[Decision]:
    """Run the host loop: call the model, run the tools the controller asks for, until the end.

    Tool exceptions become error results. Returns every decision.
    """
    decisions: list[Decision] = []
    decision = controller.on_model_output(model())
    decisions.append(decision)
    for _ in range(max_steps):
        if decision.action in (Action.FINAL, Action.STOP):
            return decisions
        if decision.action in (Action.EXECUTE_TOOLS, Action.HANDOFF):
            decision = controller.on_tool_results(_run_tools(decision.tool_calls, tools))
        elif decision.action is Action.ASK_HUMAN:
            decision = controller.on_human_reply(approved=True)
        else:
            decision = controller.on_model_output(model())
        decisions.append(decision)
    raise RuntimeError(f"no end after {max_steps} steps")


def _run_tools(calls: list[ToolCall], tools: Mapping[str, Callable[..., Any]]) -> list[ToolResult]:
    results = []
    for item in calls:
        try:
            content = tools[item.name](**(item.arguments or {}))
            results.append(ToolResult(call_id=item.id, name=item.name, content=content))
        except Exception as exc:  # a failing tool is a result the model should see
            results.append(
                ToolResult(call_id=item.id, name=item.name, content=f"{exc!r}", is_error=True)
            )
    return results


_public.publish(__name__, globals(), __all__)
