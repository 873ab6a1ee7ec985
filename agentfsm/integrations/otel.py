"""Decisions as OpenTelemetry spans, nested under whatever span is current.

Give a `DecisionSpans` to a Controller (or to `af.run`) as an observer::

    from agentfsm.integrations.otel import DecisionSpans

    ctl = af.Controller(policy, observers=[DecisionSpans()])

Each decision becomes one span named `agentfsm.decision`, a child of the span that is
current where the Controller decides: inside LangGraph, the Agents SDK or pydantic-ai,
that is the framework's own model or agent span, so Logfire, Langfuse, Phoenix or
LangSmith show agentfsm's decisions in the trace they already draw. The span carries
agentfsm's attributes (`agentfsm.action`, `.priority`, `.layer`, `.guard`, `.reason`,
`.exit_reason`, `.state`, `.run_id`, `.turn`, `.input`) and, for a model output, the
GenAI semantic conventions' `gen_ai.*` attributes of the response (provider, model,
finish reasons, token usage); each tool call the decision names is a span event
`gen_ai.tool.call` with `gen_ai.tool.name` and `gen_ai.tool.call.id`.

Content stays out unless asked for, as the GenAI semantic conventions have it for
`gen_ai.tool.call.arguments` and message content (opt-in, off by default): the
decision's `agentfsm.reason` (it may quote a call's arguments, a result or a message)
and each call's `gen_ai.tool.call.arguments` are recorded only with
`DecisionSpans(capture_content=True)`, or, when `capture_content` is not given, with the
environment variable `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` set to `true`,
`span_only` or `span_and_event` (any case) when the `DecisionSpans` is made. Without
them a span names what decided (action, priority, guard, layer) and never what was said.

Every attribute is bounded, content or not: a string longer than `max_chars`
(`MAX_ATTRIBUTE_CHARS`, 4096 characters, by default) is cut to `max_chars` characters
ending in a marker `...[cut: N chars]`; a list keeps at most `MAX_LIST_ITEMS` items, the
last one then a marker `...[cut: N items]`; a span carries at most `MAX_TOOL_CALL_EVENTS`
tool-call events (`agentfsm.tool_calls` gives the decision's number of calls, and
`agentfsm.tool_calls.omitted` how many have no event). So one span holds at most about
`(16 + 3 * MAX_TOOL_CALL_EVENTS) * max_chars` characters (some 400,000 by default), however
large the body it answers.

Only `opentelemetry-api` is needed (extra `agentfsm[otel]`). With no tracer provider
configured, the API's spans record nothing and nothing is emitted. Called by hand with
an event it cannot read, it raises InvalidInputError and sends no span.

A span is ended when it is emitted, so it cannot be taken back: when a later observer
fails and the Controller retracts the input, a span `agentfsm.step_retracted` follows
(with the number of events taken back). Put `DecisionSpans` last among the observers to
keep that from happening.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from agentfsm._model._checked import read
from agentfsm.exceptions import DefinitionError, InvalidInputError

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "MAX_ATTRIBUTE_CHARS",
    "MAX_LIST_ITEMS",
    "MAX_TOOL_CALL_EVENTS",
    "DecisionSpans",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' opt-in for content on spans (read when `DecisionSpans` is made)."""
_CAPTURING = frozenset({"true", "span_only", "span_and_event"})
"""Its values that put content on spans (`no_content`, `event_only`, anything else: none)."""
MAX_ATTRIBUTE_CHARS = 4096
"""The default longest string attribute, in characters, its cut marker included."""
MAX_LIST_ITEMS = 32
"""The most items a list attribute keeps, its cut marker included."""
MAX_TOOL_CALL_EVENTS = 32
"""The most `gen_ai.tool.call` events one decision span carries."""
_SHORTEST = 64
"""The smallest `max_chars`: room for a marker and some text before it."""

_INPUTS = ("model_output", "tool_results", "human_reply")
"""The events that say which input a decision answers."""


def _api() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise DefinitionError(
            "DecisionSpans needs the OpenTelemetry API: pip install 'agentfsm[otel]'"
        ) from exc
    return trace


class DecisionSpans:
    """Emit each decision as an `agentfsm.decision` span under the current span.

    Args:
        tracer_provider: The provider to take the tracer from; the global one (as the
            application or a framework set it) when omitted.
        capture_content: Whether spans carry content (the decision's reason, each call's
            arguments); None (the default) reads `CAPTURE_CONTENT_ENV` now.
        max_chars: The longest string attribute, in characters (at least 64).
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        capture_content: bool | None = None,
        max_chars: int = MAX_ATTRIBUTE_CHARS,
    ) -> None:
        if capture_content is not None and not isinstance(capture_content, bool):
            raise DefinitionError(
                f"capture_content must be True, False or None, not {capture_content!r}"
            )
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < _SHORTEST:
            raise DefinitionError(f"max_chars must be an int >= {_SHORTEST}, not {max_chars!r}")
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURING
        self.capture_content = capture_content
        self.max_chars = max_chars
        trace = _api()
        if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
            raise DefinitionError(
                "tracer_provider must be an opentelemetry TracerProvider or None, not "
                f"{type(tracer_provider).__name__}"
            )
        from agentfsm._version import __version__

        self._trace = trace
        self._tracer = trace.get_tracer("agentfsm", __version__, tracer_provider=tracer_provider)
        # The input each run is deciding, by run id: one observer may serve many Controllers.
        self._inputs: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        if not isinstance(event, Mapping):
            raise InvalidInputError(
                f"DecisionSpans: an event is a mapping, not {type(event).__name__}"
            )
        # Read whole before any span starts: an event it cannot read (called by hand with
        # one no Controller sends) is an InvalidInputError, and no half-filled span is sent.
        read("DecisionSpans: the event", InvalidInputError, lambda: self._take(event))

    def _take(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        run_id = str(event.get("run_id", ""))
        if kind in _INPUTS:
            with self._lock:
                self._inputs[run_id] = event
        elif kind == "decision":
            with self._lock:
                given = self._inputs.pop(run_id, None)
            self._emit(event, given)
        elif kind == "step_retracted":
            self._retracted(event)

    def _emit(self, decision: Mapping[str, Any], given: Mapping[str, Any] | None) -> None:
        attributes = _decision_attributes(decision, given)
        if self.capture_content:
            attributes["agentfsm.reason"] = str(decision.get("reason"))
        every = list(decision.get("tool_calls") or ())
        attributes["agentfsm.tool_calls"] = len(every)
        if len(every) > MAX_TOOL_CALL_EVENTS:
            attributes["agentfsm.tool_calls.omitted"] = len(every) - MAX_TOOL_CALL_EVENTS
        calls = [self._bounded(self._call(call)) for call in every[:MAX_TOOL_CALL_EVENTS]]
        attributes = self._bounded(attributes)
        span = self._tracer.start_span("agentfsm.decision")
        try:
            if span.is_recording():  # no provider configured: nothing is sent
                span.set_attributes(attributes)
                for call in calls:
                    span.add_event("gen_ai.tool.call", call)
        finally:
            span.end()

    def _call(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """A tool call's event attributes: its name and id, and its arguments when captured."""
        attributes = {
            "gen_ai.tool.name": str(call.get("name")),
            "gen_ai.tool.call.id": str(call.get("id")),
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(
                call.get("arguments"), ensure_ascii=False, default=repr
            )
        return attributes

    def _bounded(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """`attributes` with every string and list cut to its bound, the cut marked."""
        return {key: _bounded(value, self.max_chars) for key, value in attributes.items()}

    def _retracted(self, event: Mapping[str, Any]) -> None:
        attributes = self._bounded(
            {
                "agentfsm.run_id": str(event.get("run_id", "")),
                "agentfsm.turn": int(event.get("turn", 0)),
                "agentfsm.retracted_events": int(event.get("events", 0)),
                # The Controller sends the exception's type name; anything else is content.
                "agentfsm.error": str(event.get("error", ""))
                if self.capture_content
                else _type_name(event.get("error")),
            }
        )
        span = self._tracer.start_span("agentfsm.step_retracted")
        if span.is_recording():
            span.set_attributes(attributes)
        span.end()


def _decision_attributes(
    decision: Mapping[str, Any], given: Mapping[str, Any] | None
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "agentfsm.run_id": str(decision.get("run_id", "")),
        "agentfsm.turn": int(decision.get("turn", 0)),
        "agentfsm.action": str(decision.get("action")),
        "agentfsm.priority": str(decision.get("priority")),
        "agentfsm.layer": int(decision.get("layer", 0)),
        "agentfsm.guard": str(decision.get("guard")),
        "agentfsm.state": str(decision.get("state")),
        "agentfsm.input": str(given.get("event")) if given is not None else "stop",
    }
    if decision.get("exit_reason") is not None:
        attributes["agentfsm.exit_reason"] = str(decision["exit_reason"])
    if given is not None and given.get("event") == "model_output":
        attributes.update(_response_attributes(given.get("output") or {}))
    return attributes


def _response_attributes(output: Mapping[str, Any]) -> dict[str, Any]:
    """The GenAI semantic conventions' attributes of the model output a decision answers."""
    attributes: dict[str, Any] = {}
    if output.get("provider"):
        attributes["gen_ai.provider.name"] = str(output["provider"])
    if output.get("model"):
        attributes["gen_ai.response.model"] = str(output["model"])
    raw = output.get("raw_finish_reason") or output.get("finish_reason")
    if raw:
        attributes["gen_ai.response.finish_reasons"] = [str(raw)]
    usage = output.get("usage")
    if isinstance(usage, Mapping):
        attributes["gen_ai.usage.input_tokens"] = int(usage.get("input_tokens") or 0)
        attributes["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens") or 0)
    return attributes


def _bounded(value: Any, max_chars: int) -> Any:
    """A string cut to `max_chars` characters, a list to `MAX_LIST_ITEMS` items, marked."""
    if isinstance(value, str):
        return _cut(value, max_chars)
    if isinstance(value, list | tuple):
        items = [_bounded(item, max_chars) for item in value[:MAX_LIST_ITEMS]]
        if len(value) > MAX_LIST_ITEMS:
            items[-1] = f"...[cut: {len(value) - MAX_LIST_ITEMS + 1} items]"
        return items
    return value


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    marker = f"...[cut: {len(text)} chars]"
    return text[: max_chars - len(marker)] + marker


def _type_name(error: object) -> str:
    """An exception's type name as the Controller sends it, or `"(not shown)"` for other text."""
    text = str(error or "")
    return text if text.isidentifier() else "(not shown)"
