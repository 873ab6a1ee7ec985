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

Only `opentelemetry-api` is needed (extra `agentfsm[otel]`). With no tracer provider
configured, the API's spans record nothing and nothing is emitted. Called by hand with
an event it cannot read, it raises InvalidInputError and sends no span.

A span is ended when it is emitted, so it cannot be taken back: when a later observer
fails and the Controller retracts the input, a span `agentfsm.step_retracted` follows
(with the number of events taken back). Put `DecisionSpans` last among the observers to
keep that from happening.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from agentfsm.exceptions import DefinitionError, InvalidInputError
from agentfsm.model._checked import read

__all__ = ["DecisionSpans"]

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
    """

    def __init__(self, tracer_provider: Any = None) -> None:
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
        calls = [
            {"gen_ai.tool.name": str(call.get("name")), "gen_ai.tool.call.id": str(call.get("id"))}
            for call in decision.get("tool_calls") or ()
        ]
        span = self._tracer.start_span("agentfsm.decision")
        try:
            if span.is_recording():  # no provider configured: nothing is sent
                span.set_attributes(attributes)
                for call in calls:
                    span.add_event("gen_ai.tool.call", call)
        finally:
            span.end()

    def _retracted(self, event: Mapping[str, Any]) -> None:
        attributes = {
            "agentfsm.run_id": str(event.get("run_id", "")),
            "agentfsm.turn": int(event.get("turn", 0)),
            "agentfsm.retracted_events": int(event.get("events", 0)),
            "agentfsm.error": str(event.get("error", "")),
        }
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
        "agentfsm.reason": str(decision.get("reason")),
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
