"""agentfsm's decision spans inside the frameworks, with the OpenTelemetry SDK's memory exporter.

pydantic-ai emits its own spans (the `Instrumentation` capability): each decision is a child
of one of them. The Agents SDK and LangGraph emit none natively: each decision is a child of
the span current where the application runs the framework.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Runner
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from agentfsm.integrations import langgraph as lg
from agentfsm.integrations import openai_agents as oa
from agentfsm.integrations import pydantic_ai as pa
from agentfsm.integrations.otel import DecisionSpans
from tests.integrations import test_langgraph as lgt
from tests.integrations import test_openai_agents as oat
from tests.integrations import test_pydantic_ai as pat


def split(exporter: InMemorySpanExporter) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """The decision spans, and every other span."""
    spans = exporter.get_finished_spans()
    return (
        [s for s in spans if s.name == "agentfsm.decision"],
        [s for s in spans if s.name != "agentfsm.decision"],
    )


def parent_id(span: ReadableSpan) -> int | None:
    """The span id of `span`'s parent, if it has one."""
    return span.parent.span_id if span.parent is not None else None


class TestPydanticAI:
    """pydantic-ai with its `Instrumentation` capability: its spans are the decisions' parents."""

    def test_decisions_are_children_of_pydantic_ais_spans(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """Every decision span's parent is a span pydantic-ai emitted (its model request)."""
        provider, exporter = memory
        script = pat.Script(
            [ModelResponse(parts=[pat.weather("w1")]), ModelResponse(parts=[TextPart("Sunny.")])]
        )
        model = pa.GovernedModel(FunctionModel(script), observers=[DecisionSpans(provider)])
        agent = Agent(
            model,
            toolsets=[model.toolset(pat.Tools().functions())],
            capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=provider))],
        )
        assert asyncio.run(agent.run("weather?")).output == "Sunny."
        decided, theirs = split(exporter)
        assert len(decided) == 3
        own = {s.context.span_id: s.name for s in theirs if s.context is not None}
        assert all(parent_id(d) in own for d in decided), own
        assert all(own[parent_id(d) or 0].startswith("chat") for d in decided)


class TestAgentsSDK:
    """The Agents SDK emits no OpenTelemetry span: decisions nest under the application's."""

    def test_decisions_are_children_of_the_current_span(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """Each decision span's parent is the span current around `Runner.run`."""
        provider, exporter = memory
        script: list[list[Any]] = [[oat.weather("c1")], oat.ANSWER]
        agent = oa.governed(oat.native(script, oat.Tools()), observers=[DecisionSpans(provider)])
        with provider.get_tracer("app").start_as_current_span("request") as request:
            asyncio.run(Runner.run(agent, "weather?", run_config=oat.CONFIG))
        decided, _ = split(exporter)
        assert len(decided) == 3
        assert {parent_id(d) for d in decided} == {request.get_span_context().span_id}


class TestLangGraph:
    """LangGraph emits no OpenTelemetry span: decisions nest under the application's."""

    def test_decisions_are_children_of_the_current_span(
        self, memory: tuple[TracerProvider, InMemorySpanExporter]
    ) -> None:
        """Each decision span's parent is the span current around `graph.invoke`."""
        provider, exporter = memory
        script = [lgt.ai(lgt.call("get_weather", "c1", city="Paris")), AIMessage(content="Sunny.")]
        graph = lg.create_agent(
            lgt.model(script),
            lgt.Tools().all,
            checkpointer=InMemorySaver(),
            observers=[DecisionSpans(provider)],
        )
        with provider.get_tracer("app").start_as_current_span("request") as request:
            graph.invoke({"messages": [("user", "weather?")]}, lgt.CONFIG)
        decided, _ = split(exporter)
        assert len(decided) == 3
        assert {parent_id(d) for d in decided} == {request.get_span_context().span_id}
