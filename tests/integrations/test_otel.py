"""Decisions as OpenTelemetry spans: in memory, under the caller's span, and over OTLP/HTTP."""

from __future__ import annotations

import json
import threading
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
from agentfsm._runner.retry import ProviderRetry
from agentfsm.exceptions import DefinitionError, InvalidInputError
from agentfsm.integrations.otel import (
    CAPTURE_CONTENT_ENV,
    MAX_ATTRIBUTE_CHARS,
    MAX_LIST_ITEMS,
    MAX_TOOL_CALL_EVENTS,
    DecisionSpans,
)
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


def decisions(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "agentfsm.decision"]


class TestDecisionSpans:
    def test_each_decision_is_one_span_with_its_attributes(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """A model output's decision carries action, priority, guard, reason (content, opted
        in) and gen_ai fields."""
        provider, exporter = memory
        ctl = af.Controller(
            af.Policy(permissions={"rm": "deny"}),
            observers=[DecisionSpans(provider, capture_content=True)],
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


def _spans_text(exporter: InMemorySpanExporter) -> list[tuple[str, Any]]:
    """Every attribute of every finished span and span event, as (key, value)."""
    found: list[tuple[str, Any]] = []
    for span in exporter.get_finished_spans():
        found.extend((span.attributes or {}).items())
        for event in span.events:
            found.extend((event.attributes or {}).items())
    return found


def _bounded(attributes: list[tuple[str, Any]], max_chars: int = MAX_ATTRIBUTE_CHARS) -> None:
    """Assert every string is at most `max_chars` characters and every list `MAX_LIST_ITEMS`."""
    for key, value in attributes:
        items = list(value) if isinstance(value, list | tuple) else [value]
        assert len(items) <= MAX_LIST_ITEMS, key
        for item in items:
            assert not isinstance(item, str) or len(item) <= max_chars, (key, len(item))


_LS = {
    "type": "function",
    "function": {
        "name": "ls",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "enum": ["a", "b"]}},
            "required": ["path"],
        },
    },
}


def body_with(calls: list[tuple[str, str, str]], text: str | None = None) -> dict[str, Any]:
    """A chat body with these (id, name, raw JSON arguments) calls."""
    out = body(text=text)
    out["choices"][0]["message"]["tool_calls"] = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ] or None
    out["choices"][0]["finish_reason"] = "tool_calls" if calls else "stop"
    return out


class TestContentOnlyOnOptIn:
    def test_a_schema_error_does_not_put_the_argument_into_the_span(
        self, memory: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A call whose argument breaks its schema: the reason quoting it stays off the span."""
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
        provider, exporter = memory
        ctl = af.Controller(tools=[_LS], observers=[DecisionSpans(provider)])
        d = ctl.on_model_output(body_with([("c1", "ls", '{"path": "ARGV-secret-path"}')]))
        assert "ARGV-secret-path" in d.reason  # the decision itself keeps it
        attributes = _spans_text(exporter)
        assert not [v for _, v in attributes if "ARGV-secret" in str(v)]
        assert "agentfsm.reason" not in dict(attributes)
        assert dict(attributes)["agentfsm.guard"] == d.guard

    @pytest.mark.parametrize(
        ("setting", "captured"),
        [
            ("true", True),
            ("SPAN_ONLY", True),
            ("span_and_event", True),
            ("NO_CONTENT", False),
            ("event_only", False),
            ("1", False),
            ("", False),
        ],
    )
    def test_the_genai_environment_variable_opts_in(
        self,
        memory: tuple[TracerProvider, InMemorySpanExporter],
        monkeypatch: pytest.MonkeyPatch,
        setting: str,
        captured: bool,
    ) -> None:
        """OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT turns content on for spans only
        with the values that put content on spans."""
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, setting)
        provider, exporter = memory
        ctl = af.Controller(observers=[DecisionSpans(provider)])
        ctl.on_model_output(body_with([("c1", "ls", '{"path": "ARGV-1"}')]))
        (span,) = decisions(exporter)
        (event,) = span.events
        assert ("agentfsm.reason" in (span.attributes or {})) is captured
        arguments = (event.attributes or {}).get("gen_ai.tool.call.arguments")
        assert arguments == ('{"path": "ARGV-1"}' if captured else None)

    def test_an_explicit_choice_wins_over_the_environment(
        self, memory: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """capture_content=False keeps content out even when the variable asks for it."""
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
        provider, exporter = memory
        ctl = af.Controller(observers=[DecisionSpans(provider, capture_content=False)])
        ctl.on_model_output(body_with([("c1", "ls", '{"path": "ARGV-1"}')]))
        assert not [v for _, v in _spans_text(exporter) if "ARGV-1" in str(v)]

    @pytest.mark.parametrize("bad", [("capture_content", "yes"), ("max_chars", 10)])
    def test_bad_options_are_refused(self, bad: tuple[str, Any]) -> None:
        """A capture flag that is not a bool, or a cap too small for its marker, is refused."""
        with pytest.raises(DefinitionError, match=bad[0]):
            DecisionSpans(**{bad[0]: bad[1]})


class TestBoundedAttributes:
    def test_a_two_megabyte_body_gives_bounded_attributes(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """A 2 MB model name, finish reason and 1,000 calls with 1 KB ids: every string cut to
        4096 characters with a marker, at most 32 tool-call events, the count kept."""
        provider, exporter = memory
        ctl = af.Controller(observers=[DecisionSpans(provider, capture_content=True)])
        big = body_with(
            [
                (f"{i:04d}" + "i" * 1000, "t" * 5000, '{"a": "' + "x" * 9000 + '"}')
                for i in range(1000)
            ]
        )
        big["model"] = "m" * 2_000_000
        big["choices"][0]["finish_reason"] = "f" * 1_000_000
        ctl.on_model_output(big)
        (span,) = decisions(exporter)
        attributes = _spans_text(exporter)
        _bounded(attributes)
        attrs = dict(span.attributes or {})
        model = str(attrs["gen_ai.response.model"])
        assert model.endswith("...[cut: 2000000 chars]")
        assert len(model) == MAX_ATTRIBUTE_CHARS
        assert attrs["agentfsm.tool_calls"] == 1000
        assert attrs["agentfsm.tool_calls.omitted"] == 1000 - MAX_TOOL_CALL_EVENTS
        assert len(span.events) == MAX_TOOL_CALL_EVENTS
        total = sum(len(str(v)) for _, v in attributes)
        assert total <= (16 + 3 * MAX_TOOL_CALL_EVENTS) * MAX_ATTRIBUTE_CHARS


_MARK = "ARGV-"
_values = st.recursive(
    st.text(min_size=1, max_size=3000).map(lambda t: _MARK + t) | st.integers() | st.booleans(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
_raw = st.one_of(
    st.dictionaries(st.sampled_from(["path", "command", "x"]), _values, max_size=3).map(json.dumps),
    st.text(max_size=200).map(lambda t: "{not json " + _MARK + t),
)


@st.composite
def _payloads(draw: st.DrawFn) -> dict[str, Any]:
    """A model output of calls to declared, undeclared, denied and asked tools, with any
    arguments (each value marked), broken JSON, and marked message text."""
    names = st.sampled_from(["ls", "rm", "write", "other"])
    calls = draw(st.lists(st.tuples(names, _raw), max_size=6))
    text = draw(st.none() | st.text(max_size=2000).map(lambda t: "TEXT-" + t))
    out = body_with([(f"c{i}", n, a) for i, (n, a) in enumerate(calls)], text=text)
    out["model"] = draw(st.text(max_size=20_000))
    return out


class TestSpanProperty:
    @settings(deadline=None)
    @given(
        payloads=st.lists(_payloads(), min_size=1, max_size=3),
        capture=st.booleans(),
        max_chars=st.integers(min_value=64, max_value=8192),
    )
    def test_no_attribute_exceeds_its_cap_and_no_content_leaks(
        self, payloads: list[dict[str, Any]], capture: bool, max_chars: int
    ) -> None:
        """Any model outputs, schema errors, denials and results: every attribute is within
        its cap, and without opt-in no argument value or message text is on any span."""
        provider, exporter = _memory()
        spans = DecisionSpans(provider, capture_content=capture, max_chars=max_chars)
        policy = af.Policy(permissions={"rm": "deny", "write": "ask"})
        ctl = af.Controller(policy, tools=[_LS, "rm", "write"], observers=[spans])
        for payload in payloads:
            if ctl.done:
                break
            d = ctl.on_model_output(payload)
            if d.action is af.Action.EXECUTE_TOOLS:
                ctl.on_tool_results(
                    [af.ToolResult(call_id=c.id, content=_MARK + "result") for c in d.tool_calls]
                )
            elif d.action is af.Action.ASK_HUMAN:
                ctl.on_human_reply(approved=False, message="TEXT-human says no")
        attributes = _spans_text(exporter)
        _bounded(attributes, max_chars)
        if not capture:
            leaked = [(k, v) for k, v in attributes if _MARK in str(v) or "TEXT-" in str(v)]
            assert not leaked
        provider.shutdown()
