"""Events: every transition is one flat, snake_case event.

Observers are a list of callables run in order, like structlog's processors.
Events also go to `structlog.get_logger("agentfsm")`, but only once the
application has configured structlog: a library must not configure logging,
nor print to stdout on its own. structlog is imported only when the
application has imported it, so `import agentfsm` stays cheap.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentfsm.core.types import Decision, ModelTurn, ToolCall, ToolResult
    from agentfsm.guards import Hit, Route

__all__ = ["SCHEMA", "Emitter", "Observer", "dump", "structlog_configured"]

Observer = Callable[[Mapping[str, Any]], None]

SCHEMA = 1
"""The version of the events' shape; traces record it."""


def structlog_configured() -> bool:
    """Whether the application configured structlog (never imports it)."""
    module = sys.modules.get("structlog")
    return module is not None and bool(module.is_configured())


class Emitter:
    """Send events to the observers and, when configured, to structlog."""

    __slots__ = ("observers", "run_id")

    def __init__(self, run_id: str, observers: Iterable[Observer] = ()) -> None:
        self.run_id = run_id
        self.observers: list[Observer] = list(observers)

    @property
    def active(self) -> bool:
        """Whether anyone listens; events are not even built otherwise."""
        return bool(self.observers) or structlog_configured()

    def emit(self, event: dict[str, Any]) -> None:
        """Deliver one event to every observer, then to structlog."""
        for observer in self.observers:
            observer(event)
        if structlog_configured():
            import structlog

            fields = {k: v for k, v in event.items() if k != "event"}
            structlog.get_logger("agentfsm").info(event["event"], **fields)

    def record(self, name: str, turn: int, **fields: Any) -> None:
        """Emit one event of the run, with its id and turn."""
        self.emit({"event": name, "run_id": self.run_id, "turn": turn, **fields})

    def started(self, policy: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> None:
        """Emit the start of the run: the policy that routes it and the declared tools.

        `tools` is None when any tool name is accepted, else each tool's name,
        description and JSON schema: replay rebuilds the same Controller from them.
        """
        self.emit(
            {
                "event": "run_started",
                "run_id": self.run_id,
                "schema": SCHEMA,
                "policy": policy,
                "tools": tools,
            }
        )

    def step(
        self,
        turn: int,
        output: ModelTurn | None,
        fired: list[tuple[Route, Hit]],
        decision: Decision,
        elapsed: float = 0.0,
    ) -> None:
        """Emit a routed input: the model output, one event per transition, the decision.

        `elapsed` is the run's time when the input was routed; the input's event
        records it, so a replay reads the clock the live run read.
        """
        if output is not None:
            self.record(
                "model_output", turn, output=output.model_dump(mode="json"), elapsed=elapsed
            )
        for route, hit in fired:
            self.record(
                "transition",
                turn,
                src=route.source.value,
                dst=route.dest.value,
                guard=route.code,
                priority=hit.guard.leaf_priority().value,
                layer=hit.guard.leaf_layer(),
                reason=hit.reason,
            )
        self.decided(turn, decision)

    def stopped(self, turn: int, source: str, decision: Decision) -> None:
        """Emit an end decided from outside: its transition to `end`, then the decision."""
        self.record(
            "transition",
            turn,
            src=source,
            dst="end",
            guard=decision.guard,
            priority=decision.priority.value,
            layer=decision.layer,
            reason=decision.reason,
        )
        self.decided(turn, decision)

    def decided(self, turn: int, decision: Decision) -> None:
        """Emit a decision event: what the step decided, with its calls and results."""
        self.record(
            "decision",
            turn,
            action=decision.action.value,
            priority=decision.priority.value,
            layer=decision.layer,
            guard=decision.guard,
            fired=decision.fired,
            reason=decision.reason,
            exit_reason=None if decision.exit_reason is None else decision.exit_reason.value,
            state=decision.state.value,
            tool_calls=dump(decision.tool_calls),
            results=dump(decision.results),
        )


def dump(items: Iterable[ToolCall | ToolResult]) -> list[dict[str, Any]]:
    """Calls or results as JSON-compatible dicts."""
    return [item.model_dump(mode="json") for item in items]
