"""Events: every transition is one flat, snake_case event.

Observers are a list of callables run in order, like structlog's processors.
structlog is the logging layer, and the application's configuration decides
where its events go; a library must not configure logging, nor print on its own:

- once the application has configured structlog, every event is logged through
  `structlog.get_logger("agentfsm")`, with the application's processors;
- otherwise, once the application enables the standard library's `"agentfsm"`
  logger at INFO (`logging.basicConfig(level=logging.INFO)` does), each event is
  rendered by structlog's console renderer as one readable line on that logger
  (`transition  src=parse dst=validate guard=... priority=P1 turn=1`);
- otherwise nothing is logged, and no event is even built unless an observer listens.

One input's events are delivered together, all or nothing. The Controller
builds the whole list of an input's events (`model_output`, one `transition`
per edge, `decision`; or one event such as `user_message`) once the input is
decided, then hands it to each observer in turn (structlog last). When an
observer raises, the input did not happen: the Controller puts the run back
as it was and the host may give the same input again. So that nobody keeps
events of an input that never happened, every observer that had received
some of them (the one that raised too, best effort, with the events it took
before raising) is then given one retraction:

    {"event": "step_retracted", "run_id": ..., "turn": ...,
     "events": <how many of this input's events it had received>,
     "error": <the exception's type name>}

The retracted events are always the last `events` events that observer was
given, right before the retraction. Then the observer's exception propagates
unchanged. Trace readers drop the retracted events and the retraction, so a
trace holding one reads exactly like a trace where the failed input never
happened. An observer must take an event whole or not at all: one that
raises has not taken the event it raised on (the trace writer cuts a line it
could not finish back off the file).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agentfsm._model._checked import read
from agentfsm.exceptions import DefinitionError

if TYPE_CHECKING:
    from agentfsm._engine.routes import Route
    from agentfsm._model.types import Decision, ModelTurn, ToolCall, ToolResult
    from agentfsm.guards import Hit

__all__ = [
    "RETRACTED",
    "SCHEMA",
    "Emitter",
    "Observer",
    "as_observers",
    "dump",
    "logging_enabled",
    "structlog_configured",
]

Observer = Callable[[Mapping[str, Any]], None]

SCHEMA = 1
"""The version of the events' shape; traces record it."""
RETRACTED = "step_retracted"
"""The `event` name of a retraction: the events just before it, of an input that failed."""


def as_observers(observers: object, where: str = "") -> list[Observer]:
    """Observers as a list, each checked to be callable; DefinitionError naming `where`.

    A list, a tuple or any other iterable of items (not a str, bytes or mapping) is read
    once; an iterable that fails while it is read is named too, not passed on as its error.
    """
    at = f"{where}: " if where else ""
    if not isinstance(observers, list | tuple) and (
        isinstance(observers, str | bytes | Mapping) or not isinstance(observers, Iterable)
    ):
        raise DefinitionError(
            f"{at}observers must be a list of callables, not {type(observers).__name__}"
        )
    found: list[Observer] = read(f"{at}observers", DefinitionError, lambda: list(observers))
    for index, observer in enumerate(found):
        if not callable(observer):
            raise DefinitionError(
                f"{at}observers[{index}] must be callable (it gets every event), "
                f"not {type(observer).__name__}"
            )
    return found


def structlog_configured() -> bool:
    """Whether the application configured structlog (never imports it)."""
    module = sys.modules.get("structlog")
    return module is not None and bool(module.is_configured())


_LOGGER = logging.getLogger("agentfsm")
"""The standard library's logger of agentfsm's events: silent until the application enables it."""


def logging_enabled() -> bool:
    """Whether the application asked for agentfsm's events on the `"agentfsm"` logger."""
    return _LOGGER.isEnabledFor(logging.INFO)


def _log(event: Mapping[str, Any]) -> None:
    """Log one event through structlog as the application configured it."""
    import structlog

    fields = {k: v for k, v in event.items() if k != "event"}
    structlog.get_logger("agentfsm").info(event["event"], **fields)


@functools.cache
def _stdlib_logger() -> Any:
    """A structlog logger onto the `"agentfsm"` logger, one readable line per event."""
    import structlog

    return structlog.wrap_logger(
        _LOGGER,
        processors=[structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


def _log_to_stdlib(event: Mapping[str, Any]) -> None:
    """Log one event on the `"agentfsm"` logger, rendered by structlog."""
    fields = {k: v for k, v in event.items() if k != "event"}
    _stdlib_logger().info(event["event"], **fields)


def _log_sink() -> Observer | None:
    """Where the application wants agentfsm's events logged, or None."""
    if structlog_configured():
        return _log
    if logging_enabled():
        return _log_to_stdlib
    return None


class Emitter:
    """Send events to the observers and, when configured, to structlog."""

    __slots__ = ("observers", "run_id")

    def __init__(self, run_id: str, observers: Iterable[Observer] = ()) -> None:
        self.run_id = run_id
        self.observers: list[Observer] = list(observers)

    @property
    def active(self) -> bool:
        """Whether anyone listens; events are not even built otherwise."""
        return bool(self.observers) or structlog_configured() or logging_enabled()

    def deliver(self, turn: int, events: list[dict[str, Any]]) -> None:
        """Deliver one input's events to every observer, all or nothing.

        Each observer (then the log, when the application enabled it) is given the whole list
        in order. When one raises, every observer that had received any of the
        events gets a `step_retracted` event, then the exception propagates.
        """
        sinks = self.observers
        log = _log_sink()
        if log is not None:
            sinks = [*sinks, log]
        for index, sink in enumerate(sinks):
            taken = 0
            try:
                for event in events:
                    sink(event)
                    taken += 1
            except BaseException as exc:
                self._retract(turn, exc, sinks[:index], len(events), sink, taken)
                raise

    def _retract(
        self,
        turn: int,
        exc: BaseException,
        served: list[Observer],
        count: int,
        failed: Observer,
        taken: int,
    ) -> None:
        """Tell the observers that received an input's events that it did not happen."""

        def retraction(events: int) -> dict[str, Any]:
            return {
                "event": RETRACTED,
                "run_id": self.run_id,
                "turn": turn,
                "events": events,
                "error": type(exc).__name__,
            }

        for sink in served:
            try:
                sink(retraction(count))
            except Exception as again:  # the original error must propagate, not this one
                exc.add_note(
                    f"agentfsm: observer {sink!r} raised {type(again).__name__} on the "
                    f"retraction of {count} events of turn {turn} that did not happen"
                )
        with contextlib.suppress(Exception):  # best effort: this observer just failed
            failed(retraction(taken))

    def record(self, name: str, turn: int, **fields: Any) -> None:
        """Deliver one event of the run, with its id and turn."""
        self.deliver(turn, [{"event": name, "run_id": self.run_id, "turn": turn, **fields}])

    def started(
        self,
        policy: dict[str, Any],
        tools: list[dict[str, Any]] | None = None,
        shadow: dict[str, Any] | None = None,
    ) -> None:
        """Deliver the start of the run: the policy that routes it and the declared tools.

        `tools` is None when any tool name is accepted, else each tool's name,
        description and JSON schema: replay rebuilds the same Controller from them.
        `shadow`, the shadow policy, is recorded only when there is one.
        """
        started = {
            "event": "run_started",
            "run_id": self.run_id,
            "schema": SCHEMA,
            "policy": policy,
            "tools": tools,
        }
        if shadow is not None:
            started["shadow"] = shadow
        self.deliver(0, [started])

    def user_message(self, turn: int, text: str, episode: int | None) -> None:
        """Deliver a user message, after the start of the episode it opened (if `episode`)."""
        events = [{"event": "user_message", "run_id": self.run_id, "turn": turn, "text": text}]
        if episode is not None:
            opened = {"event": "episode_started", "run_id": self.run_id, "turn": turn}
            events.insert(0, {**opened, "episode": episode})
        self.deliver(turn, events)

    def step(
        self,
        turn: int,
        output: ModelTurn | None,
        fired: list[tuple[Route, Hit]],
        decision: Decision,
        given: tuple[str, dict[str, Any]] | None = None,
        elapsed: float = 0.0,
    ) -> None:
        """Deliver a routed input: what the host gave (`given`: tool results, a human reply),
        the model output, one event per transition, then the decision.

        `elapsed` is the run's time when the input was routed; the input's event
        records it, so a replay reads the clock the live run read.
        """
        run_id = self.run_id
        events: list[dict[str, Any]] = []
        if given is not None:
            fields = {k: dump(v) if type(v) is list else v for k, v in given[1].items()}
            events.append(
                {"event": given[0], "run_id": run_id, "turn": turn, "elapsed": elapsed, **fields}
            )
        if output is not None:
            out = _as_json(output)
            events.append(
                {
                    "event": "model_output",
                    "run_id": run_id,
                    "turn": turn,
                    "output": out,
                    "elapsed": elapsed,
                }
            )
        for route, hit in fired:
            guard = hit.guard
            events.append(
                {
                    "event": "transition",
                    "run_id": run_id,
                    "turn": turn,
                    "src": route.source.value,
                    "dst": route.dest.value,
                    "guard": route.code,
                    "priority": guard.leaf_priority().value,
                    "layer": guard.leaf_layer(),
                    "reason": hit.reason,
                }
            )
        events.append(self._decision(turn, decision))
        self.deliver(turn, events)

    def stopped(self, turn: int, source: str, decision: Decision) -> None:
        """Deliver an end decided from outside: its transition to `end`, then the decision."""
        transition = {
            "event": "transition",
            "run_id": self.run_id,
            "turn": turn,
            "src": source,
            "dst": "end",
            "guard": decision.guard,
            "priority": decision.priority.value,
            "layer": decision.layer,
            "reason": decision.reason,
        }
        self.deliver(turn, [transition, self._decision(turn, decision)])

    def _decision(self, turn: int, decision: Decision) -> dict[str, Any]:
        """The decision event: what the step decided, with its calls, results and note."""
        event = {
            "event": "decision",
            "run_id": self.run_id,
            "turn": turn,
            "action": decision.action.value,
            "priority": decision.priority.value,
            "layer": decision.layer,
            "guard": decision.guard,
            "fired": decision.fired,
            "reason": decision.reason,
            "exit_reason": None if decision.exit_reason is None else decision.exit_reason.value,
            "state": decision.state.value,
            "tool_calls": dump(decision.tool_calls),
            "results": dump(decision.results),
        }
        if decision.note is not None:  # a human's note with an approval, for the model
            event["note"] = decision.note
        if decision.covered:  # calls a remembered approval let run without asking
            event["covered"] = dict(decision.covered)
        if decision.shadow:  # only with a shadow policy: other traces read as they did
            event["shadow"] = [v.model_dump(mode="json") for v in decision.shadow]
        return event


def dump(items: Iterable[ToolCall | ToolResult]) -> list[dict[str, Any]]:
    """Calls or results as JSON-compatible dicts."""
    return [_as_json(item) for item in items]


def _as_json(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")
