"""Record real traces of two agents that delete and read a file, for the span readers' tests.

Run as a script (`python -m tests.replay.record_spans OUT_DIR`): the OpenAI Agents SDK keeps
its trace processors in process-wide state, so the recordings run in a process of their own.

- pydantic-ai: an `Agent` on pydantic-ai's own `FunctionModel`, instrumented
  (`InstrumentationSettings`, content on and off, formats 5 and 2), its spans sent by the real
  OTLP/HTTP exporter to a receiver on 127.0.0.1, each request written as one line of OTLP JSON
  (`MessageToDict`, ids turned into hex as the OTLP JSON encoding writes them).
- the Agents SDK: a `Runner` run against real HTTP servers on 127.0.0.1 (chat completions from
  `agentfsm.testing.ScriptedServer`; a Responses endpoint here), its trace export posted by the
  SDK's `BackendSpanExporter` to a receiver on 127.0.0.1, each post written as one line.

Every tool runs for real: `delete_file` removes a file in a scratch folder, `read_file` reads one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

DELETED = "/etc/x"
"""The path the model asks to delete (the tools work in a scratch folder that mirrors it)."""
READ = "/tmp/a"


class _Receiver(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        self.server.received.append(self.rfile.read(size))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextmanager
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A real HTTP receiver on 127.0.0.1: its base URL and the bodies posted to it."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    httpd.received = []  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.received  # type: ignore[attr-defined]
    finally:
        httpd.shutdown()
        httpd.server_close()


class Files:
    """A scratch folder standing for `/`: the tools really delete and read in it."""

    def __init__(self) -> None:
        # Removed when the recording process ends (or the object goes): a scratch folder per
        # recording must not pile up in /tmp over test sessions.
        self._scratch = tempfile.TemporaryDirectory(prefix="agentfsm-spans-")
        self.root = Path(self._scratch.name)
        for path in (DELETED, READ):
            target = self.root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"text of {path}")

    def delete_file(self, path: str) -> str:
        (self.root / path.lstrip("/")).unlink()
        return f"deleted {path}"

    def read_file(self, path: str) -> str:
        return (self.root / path.lstrip("/")).read_text()


def _hex_ids(value: Any) -> Any:
    """Turn protobuf JSON's base64 ids into the hex the OTLP JSON encoding requires."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
            else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def record_pydantic_ai(
    out: Path,
    *,
    content: bool,
    version: Literal[2, 5],
    hex_ids: bool = True,
    deleted: str = DELETED,
    model_fails: bool = False,
) -> None:
    """One pydantic-ai run, its spans written as OTLP JSON lines to `out`; deleting a path
    that does not exist (`deleted`) fails the tool, and the run with it; `model_fails` makes
    the second model call raise."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("delete_file", {"path": deleted}, tool_call_id="call_del"),
                    ToolCallPart("read_file", {"path": READ}, tool_call_id="call_read"),
                ]
            )
        if model_fails:
            raise ConnectionError("the model is down")
        return ModelResponse(parts=[TextPart("Cleaned up.")])

    files = Files()
    with receiver() as (url, received):
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        settings = InstrumentationSettings(
            tracer_provider=provider, include_content=content, version=version
        )
        agent = Agent(
            FunctionModel(model),
            tools=[files.delete_file, files.read_file],
            capabilities=[Instrumentation(settings)],
        )
        try:
            agent.run_sync("Clean up /etc/x and show me /tmp/a.")
        except FileNotFoundError:
            assert deleted != DELETED  # only the run told to delete a missing file fails
        except ConnectionError:
            assert model_fails
        provider.force_flush()
        provider.shutdown()
    _write_otlp(out, received, hex_ids=hex_ids)


def _write_otlp(out: Path, received: list[bytes], *, hex_ids: bool) -> None:
    """Write each OTLP/HTTP request received as one line of OTLP JSON."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    lines = []
    for body in received:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        doc = MessageToDict(request)
        lines.append(json.dumps(_hex_ids(doc) if hex_ids else doc))
    out.write_text("\n".join(lines) + "\n")


class _Responses(BaseHTTPRequestHandler):
    """A Responses API endpoint: a function call to each tool first, then an answer."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(size))
        answered = any(
            isinstance(i, dict) and i.get("type") == "function_call_output"
            for i in request.get("input", [])
        )
        count = self.server.count = getattr(self.server, "count", 0) + 1  # type: ignore[attr-defined]
        output: list[dict[str, Any]]
        if answered:
            output = [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Cleaned up.", "annotations": []}],
                }
            ]
        else:
            output = [
                _function_call("fc_1", "call_del", "delete_file", DELETED),
                _function_call("fc_2", "call_read", "read_file", READ),
            ]
        body = {
            "id": f"resp_{count}",
            "object": "response",
            "created_at": 0,
            "model": request.get("model", "gpt-4o"),
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 20,
                "output_tokens": 10,
                "total_tokens": 30,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _function_call(item_id: str, call_id: str, name: str, path: str) -> dict[str, Any]:
    arguments = json.dumps({"path": path})
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


@contextmanager
def responses_server() -> Iterator[str]:
    """A real Responses endpoint on 127.0.0.1; its base URL (ending in /v1)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Responses)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def record_agents_sdk(out: Path, *, sensitive: bool, api: str, model_fails: bool = False) -> None:
    """One Agents SDK run (`api` "chat" or "responses"), its trace export written to `out`;
    `model_fails` answers the second model call with HTTP 400."""
    from agents import set_trace_processors
    from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor

    with receiver() as (url, received):
        exporter = BackendSpanExporter(api_key="sk-local", endpoint=f"{url}/v1/traces/ingest")
        processor = BatchTraceProcessor(exporter)
        set_trace_processors([processor])
        _run_agents_sdk(api, sensitive=sensitive, model_fails=model_fails)
        processor.force_flush()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
        processor.shutdown()
    out.write_text("".join(body.decode() + "\n" for body in received))


def _run_agents_sdk(api: str, *, sensitive: bool, model_fails: bool = False) -> None:
    """Run the cleaner agent once against a real server on 127.0.0.1 (`api`: chat or responses)."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        function_tool,
    )
    from openai import AsyncOpenAI, BadRequestError

    from agentfsm.testing import ScriptedServer, fault, say, scripted_call, tool_calls

    files = Files()
    script = [
        tool_calls(
            scripted_call("delete_file", {"path": DELETED}, id="call_del"),
            scripted_call("read_file", {"path": READ}, id="call_read"),
        ),
        fault(400, message="the model is down") if model_fails else say("Cleaned up."),
    ]
    with ScriptedServer(script) as chat, responses_server() as rsp:
        base = f"{chat.url}/v1" if api == "chat" else rsp
        client = AsyncOpenAI(base_url=base, api_key="sk-local")
        model: Any = (
            OpenAIChatCompletionsModel("gpt-4o", client)
            if api == "chat"
            else OpenAIResponsesModel("gpt-4o", client)
        )
        agent = Agent(
            name="cleaner",
            tools=[function_tool(files.delete_file), function_tool(files.read_file)],
            model=model,
        )
        config = RunConfig(trace_include_sensitive_data=sensitive)
        try:
            asyncio.run(Runner.run(agent, "Clean up /etc/x and show me /tmp/a.", run_config=config))
        except BadRequestError:
            assert model_fails


def record_agents_otel(out: Path, *, content: bool, api: str) -> None:
    """One Agents SDK run, its spans turned into GenAI spans by OpenTelemetry's own
    instrumentation (`opentelemetry-instrumentation-openai-agents-v2`), sent over OTLP/HTTP."""
    from agents import set_trace_processors
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    with receiver() as (url, received):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1")))
        set_trace_processors([])  # only the instrumentation's processor: nothing posted to OpenAI
        instrumentor = OpenAIAgentsInstrumentor()
        instrumentor.instrument(tracer_provider=provider, capture_message_content=content)
        try:
            _run_agents_sdk(api, sensitive=content)
        finally:
            instrumentor.uninstrument()
        provider.force_flush()
        provider.shutdown()
    _write_otlp(out, received, hex_ids=True)


RECORDINGS: dict[str, Callable[[Path], None]] = {
    "pydantic_ai_v5.jsonl": lambda p: record_pydantic_ai(p, content=True, version=5),
    "pydantic_ai_v5_no_content.jsonl": lambda p: record_pydantic_ai(p, content=False, version=5),
    "pydantic_ai_v2.jsonl": lambda p: record_pydantic_ai(p, content=True, version=2),
    "pydantic_ai_base64_ids.jsonl": lambda p: record_pydantic_ai(
        p, content=True, version=5, hex_ids=False
    ),
    "pydantic_ai_tool_fails.jsonl": lambda p: record_pydantic_ai(
        p, content=True, version=5, deleted="/etc/missing"
    ),
    "pydantic_ai_model_fails.jsonl": lambda p: record_pydantic_ai(
        p, content=True, version=5, model_fails=True
    ),
    "agents_chat_model_fails.jsonl": lambda p: record_agents_sdk(
        p, sensitive=True, api="chat", model_fails=True
    ),
    "agents_chat.jsonl": lambda p: record_agents_sdk(p, sensitive=True, api="chat"),
    "agents_chat_no_content.jsonl": lambda p: record_agents_sdk(p, sensitive=False, api="chat"),
    "agents_responses.jsonl": lambda p: record_agents_sdk(p, sensitive=True, api="responses"),
    "agents_otel_chat.jsonl": lambda p: record_agents_otel(p, content=True, api="chat"),
    "agents_otel_responses.jsonl": lambda p: record_agents_otel(p, content=True, api="responses"),
    "agents_otel_no_content.jsonl": lambda p: record_agents_otel(p, content=False, api="chat"),
}
"""Every recording, by file name."""


def main(folder: str) -> None:
    """Record every recording into `folder`."""
    import warnings

    warnings.simplefilter(
        "ignore"
    )  # pydantic-ai warns that format 2 is deprecated: recorded all the same
    for name, record in RECORDINGS.items():
        record(Path(folder) / name)


if __name__ == "__main__":
    main(sys.argv[1])
