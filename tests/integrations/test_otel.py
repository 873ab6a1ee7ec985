"""Decisions as OpenTelemetry spans: in memory, under the caller's span, and over OTLP/HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentfsm as af
from agentfsm.exceptions import DefinitionError, InvalidInputError
from agentfsm.integrations.otel import DecisionSpans
from agentfsm.runner.retry import ProviderRetry
from agentfsm.testing import ScriptedServer, say, scripted_call, tool_calls
from tests.strategies import Raising, RaisingMapping, hostile_values


def body(*calls: str, finish: str = "tool_calls", text: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {"id": c, "type": "function", "function": {"name": c, "arguments": "{}"}}
                        for c in calls
                    ]
                    or None,
                },
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    }


@pytest.fixture
def memory() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def decisions(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "agentfsm.decision"]


class TestDecisionSpans:
    def test_each_decision_is_one_span_with_its_attributes(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """A model output's decision carries action, priority, guard, reason and gen_ai fields."""
        provider, exporter = memory
        ctl = af.Controller(
            af.Policy(permissions={"rm": "deny"}), observers=[DecisionSpans(provider)]
        )
        d = ctl.on_model_output(body("ls", "rm"))
        (span,) = decisions(exporter)
        attrs = dict(span.attributes or {})
        assert attrs["agentfsm.action"] == d.action.value == "execute_tools"
        assert attrs["agentfsm.priority"] == "P1"
        assert attrs["agentfsm.guard"] == d.guard
        assert attrs["agentfsm.reason"] == d.reason
        assert attrs["agentfsm.input"] == "model_output"
        assert attrs["agentfsm.run_id"] == ctl.run_id
        assert attrs["gen_ai.response.model"] == "gpt-4o"
        assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
        assert attrs["gen_ai.usage.input_tokens"] == 11
        assert attrs["gen_ai.usage.output_tokens"] == 7
        assert "agentfsm.exit_reason" not in attrs
        tool_events = [e for e in span.events if e.name == "gen_ai.tool.call"]
        assert [dict(e.attributes or {})["gen_ai.tool.name"] for e in tool_events] == ["ls"]

    def test_an_end_carries_its_exit_reason(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """The final decision's span names the exit reason; a stop() is a decision without input."""
        provider, exporter = memory
        ctl = af.Controller(observers=[DecisionSpans(provider)])
        ctl.on_model_output(body(finish="stop", text="done"))
        final = dict(decisions(exporter)[-1].attributes or {})
        assert final["agentfsm.action"] == "final"
        assert final["agentfsm.exit_reason"] == "completed"
        other = af.Controller(observers=[DecisionSpans(provider)])
        other.stop()
        stopped = dict(decisions(exporter)[-1].attributes or {})
        assert stopped["agentfsm.input"] == "stop"
        assert stopped["agentfsm.exit_reason"] == "interrupted"

    def test_decisions_nest_under_the_current_span(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """A decision made inside the host's span is that span's child."""
        provider, exporter = memory
        ctl = af.Controller(observers=[DecisionSpans(provider)])
        with provider.get_tracer("host").start_as_current_span("agent turn") as outer:
            ctl.on_model_output(body("ls"))
        (span,) = decisions(exporter)
        assert span.parent is not None
        assert span.parent.span_id == outer.get_span_context().span_id
        assert span.context.trace_id == outer.get_span_context().trace_id

    def test_nothing_is_recorded_without_a_provider(self) -> None:
        """With the API's default (no SDK configured) the observer runs and records nothing."""
        observer = DecisionSpans(trace.NoOpTracerProvider())
        ctl = af.Controller(observers=[observer])
        assert ctl.on_model_output(body("ls")).action is af.Action.EXECUTE_TOOLS

    def test_a_retracted_input_is_followed_by_a_retraction_span(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """When a later observer fails, a span says the decision was taken back."""
        provider, exporter = memory

        def broken(event: Any) -> None:
            if event["event"] == "decision":
                raise OSError("disk full")

        ctl = af.Controller(observers=[DecisionSpans(provider), broken])
        with pytest.raises(OSError, match="disk full"):
            ctl.on_model_output(body("ls"))
        names = [s.name for s in exporter.get_finished_spans()]
        assert names == ["agentfsm.decision", "agentfsm.step_retracted"]

    def test_a_bad_provider_raises_agentfsm_s_error(self) -> None:
        """A tracer provider that is not one is refused where it is given."""
        with pytest.raises(DefinitionError, match="tracer_provider"):
            DecisionSpans("jaeger")

    @pytest.mark.litellm
    @pytest.mark.filterwarnings(
        "ignore:Items? .+ on TypedDict class .+ using the `ReadOnly` qualifier"
        ":UserWarning:pydantic._internal._generate_schema"
    )
    def test_spans_of_a_whole_run_through_af_run(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """af.run over real HTTP gives one span per decision, all under the caller's span."""
        provider, exporter = memory

        def get_weather(city: str) -> str:
            """The forecast."""
            return f"rain in {city}"

        script = [tool_calls(scripted_call("get_weather", {"city": "Oslo"})), say("Rain.")]
        with (
            ScriptedServer(script) as server,
            provider.get_tracer("host").start_as_current_span("request") as outer,
        ):
            result = af.run(
                "openai/scripted",
                "weather?",
                tools=[get_weather],
                api_base=server.openai_base,
                api_key="sk-test",
                retry=ProviderRetry(attempts=1),
                observers=[DecisionSpans(provider)],
            )
        assert result.exit_reason is af.ExitReason.COMPLETED
        spans = decisions(exporter)
        actions = [dict(s.attributes or {})["agentfsm.action"] for s in spans]
        assert actions == [d.action.value for d in result.decisions]
        outer_id = outer.get_span_context().span_id
        assert all(s.parent is not None and s.parent.span_id == outer_id for s in spans)


class _Receiver(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(size))
        self.server.received.append((self.path, request))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


class TestOtlpHttp:
    def test_decisions_reach_an_otlp_receiver(self) -> None:
        """Through the OTLP/HTTP exporter, the decision spans arrive at a receiver on 127.0.0.1."""
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
        httpd.received = []  # type: ignore[attr-defined]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        provider = TracerProvider()
        endpoint = f"http://127.0.0.1:{httpd.server_address[1]}/v1/traces"
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        try:
            ctl = af.Controller(observers=[DecisionSpans(provider)])
            ctl.on_model_output(body("ls"))
            ctl.on_tool_results([af.ToolResult(call_id="ls", content="a b")])
            provider.force_flush()
        finally:
            provider.shutdown()
            httpd.shutdown()
            httpd.server_close()
        received = httpd.received  # type: ignore[attr-defined]
        assert {path for path, _ in received} == {"/v1/traces"}
        spans = [
            span
            for _, request in received
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        assert [s.name for s in spans] == ["agentfsm.decision", "agentfsm.decision"]
        actions = [
            next(a.value.string_value for a in s.attributes if a.key == "agentfsm.action")
            for s in spans
        ]
        assert actions == ["execute_tools", "continue"]


_odd = hostile_values()
_FIELDS = (
    "run_id",
    "turn",
    "action",
    "priority",
    "layer",
    "guard",
    "reason",
    "state",
    "exit_reason",
    "tool_calls",
    "output",
    "events",
    "error",
)


@st.composite
def _events(draw: st.DrawFn) -> Any:
    """Anything, or an event of a kind DecisionSpans reads whose fields hold anything."""
    if draw(st.booleans()):
        return draw(_odd)
    kind = draw(st.sampled_from(["model_output", "tool_results", "decision", "step_retracted"]))
    fields = draw(st.dictionaries(st.sampled_from(_FIELDS), _odd, max_size=6))
    return {"event": kind, **fields}


def _memory() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


class TestDecisionSpansArguments:
    @settings(deadline=None)
    @given(value=_odd)
    @example(value=Raising())
    def test_any_tracer_provider(self, value: Any) -> None:
        """DecisionSpans(anything): built, or a DefinitionError naming tracer_provider."""
        error: str | None = None  # accepted
        try:
            DecisionSpans(value)
        except DefinitionError as exc:  # any other error, agentfsm's or not, fails the test
            error = exc.message
        assert error is None or "tracer_provider" in error

    @settings(deadline=None)
    @given(first=_events(), second=_events())
    @example(first={"event": "decision", "turn": "x"}, second=None)
    @example(first={"event": "decision", "turn": float("nan")}, second=3)
    @example(first={"event": "decision", "tool_calls": [3]}, second={"event": "model_output"})
    @example(first={"event": "decision", "reason": Raising()}, second=RaisingMapping())
    @example(first={"event": "model_output", "output": [1]}, second={"event": "decision"})
    @example(first={"event": "step_retracted", "events": 10**400}, second=[])
    def test_any_event(self, first: Any, second: Any) -> None:
        """Called by hand with anything, the observer raises InvalidInputError or records it,
        and goes on recording a real Controller's decisions as before."""
        provider, exporter = _memory()
        observer = DecisionSpans(provider)
        for event in (first, second):
            error: str | None = None  # recorded
            try:
                observer(event)
            except InvalidInputError as exc:  # any other error, agentfsm's or not, fails
                error = exc.message
            assert error is None or "DecisionSpans" in error
        exporter.clear()
        ctl = af.Controller(observers=[observer])
        ctl.on_model_output(body("ls"))
        (span,) = decisions(exporter)
        assert dict(span.attributes or {})["agentfsm.input"] == "model_output"
        provider.shutdown()
