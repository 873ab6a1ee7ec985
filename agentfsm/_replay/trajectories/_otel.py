"""OpenTelemetry GenAI spans in OTLP JSON: one `ExportTraceServiceRequest`, or one per line.

The JSON encoding of OTLP (`{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`) is what
the OpenTelemetry Collector's file exporter writes, one request per line. Spans are grouped
by trace id, one run per trace, and read in start-time order:
- a model span (`gen_ai.operation.name` `chat`, `generate_content` or `text_completion`) is a
  model output, read from `gen_ai.output.messages` (the GenAI semantic conventions' parts:
  `text`, `tool_call`), with `gen_ai.usage.*`, `gen_ai.response.model` (else
  `gen_ai.request.model`) and the finish reason;
- a tool span (`execute_tool`) is one tool result: `gen_ai.tool.call.result` (pydantic-ai's
  older `tool_response`), failed when the span's status is an error.

When content capture was off, a call's arguments were not recorded: the call is read with no
arguments (`{}`), never with invented ones, and counted in the run's
`info["calls_without_arguments"]`; an allow rule naming an argument never matches it, a deny or
ask rule naming one asks (`agentfsm._permissions`). An answer's text and a tool's result not
recorded read as `NOT_RECORDED`. A model span with no output
messages at all, or whose messages name no call though tool spans follow it, takes its calls
from those tool spans (with their `gen_ai.tool.call.arguments`); without messages its text is
`NOT_RECORDED`. Agents nested in one trace (an agent run as a tool) read as one sequence.
The whole file is read before the first run is yielded: a trace's spans may be spread over
many requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfsm._model.types import ModelTurn, ToolResult
from agentfsm._replay.trajectories._find import LineFinder
from agentfsm._replay.trajectories._io import Errors, iter_jsonl, located, report
from agentfsm._replay.trajectories._model import ModelOutput, RecordedRun, Step, ToolResults
from agentfsm._replay.trajectories._openai import normalized, result_of
from agentfsm._replay.trajectories._otlp_json import BadSpanError, attributes, read_int, span_id
from agentfsm.exceptions import DataError, RunError, TraceError

__all__ = ["NAME", "Call", "chat_turn", "detect", "read_doc", "read_jsonl"]

NAME = "otel-genai"
MODEL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})
TOOL_OPERATION = "execute_tool"
NOT_RECORDED = "[not recorded: content capture was off]"
"""The text of an answer, or the content of a tool result, that the recording does not hold."""
_FINISH = {"tool_call": "tool_calls"}
"""Semantic-convention finish reasons whose chat-completions spelling differs."""
_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_READ = (
    "gen_ai.output.messages",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.model",
    "gen_ai.request.model",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "tool_arguments",
    "tool_response",
)
"""The attributes the steps are read from (pydantic-ai's format 2 names its last four)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as a recording holds it; `arguments` None when not recorded."""

    id: str
    name: str
    arguments: dict[str, Any] | str | None


def chat_turn(
    text: str,
    calls: list[Call],
    finish: str | None,
    usage: tuple[int | None, int | None],
    model: str | None,
) -> tuple[ModelTurn, int]:
    """Normalize one model output through the chat-completions path; return it and how many
    of its calls have no recorded arguments (read as `{}`)."""
    unknown = sum(call.arguments is None for call in calls)
    tool_calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": _arguments_text(call.arguments)},
        }
        for call in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "choices": [{"message": message, "finish_reason": _FINISH.get(finish or "", finish)}]
    }
    if model:
        body["model"] = model
    if usage != (None, None):
        body["usage"] = {"prompt_tokens": usage[0] or 0, "completion_tokens": usage[1] or 0}
    return normalized(body, "openai"), unknown


def _arguments_text(arguments: dict[str, Any] | str | None) -> str:
    if arguments is None:
        return "{}"  # not recorded: counted by the caller, never filled in
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


@dataclass(slots=True)
class _Span:
    trace: str
    start: int
    where: int | str
    """Its line (JSON lines), or its place in the document."""
    label: str
    """Its place in its request and its id, for an error."""
    raw_id: str
    """Its `spanId` as written, by which a document's error finds its line."""
    attrs: dict[str, Any]
    failed: str | None
    """The status message when the span's status is an error ("" when it gives none)."""
    operation: str | None


@dataclass(slots=True)
class _Trace:
    spans: list[_Span] = field(default_factory=list)
    agent: str | None = None
    failed: str | None = None


def detect(doc: Any) -> bool:
    """Whether a JSON value is one OTLP `ExportTraceServiceRequest`."""
    return isinstance(doc, Mapping) and isinstance(doc.get("resourceSpans"), list)


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read one OTLP JSON document: one run per trace."""
    traces: dict[str, _Trace] = {}
    finder = LineFinder(path)
    _collect(path, doc, None, traces, errors, finder)
    yield from _runs(path, traces, errors, finder)


def read_jsonl(path: str, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read one OTLP JSON request per line (the Collector's file exporter): one run per trace."""
    traces: dict[str, _Trace] = {}
    for number, obj in iter_jsonl(path, errors):
        if not detect(obj):
            what = "expected an OTLP ExportTraceServiceRequest ({'resourceSpans': [...]})"
            report(errors, located(path, number, what))
            continue
        _collect(path, obj, number, traces, errors)
    yield from _runs(path, traces, errors)


def _collect(
    path: str,
    doc: Mapping[str, Any],
    line: int | None,
    traces: dict[str, _Trace],
    errors: Errors,
    finder: LineFinder | None = None,
) -> None:
    """Add the GenAI spans of one request; `line` is its line, or None for a whole document
    (then `finder` finds a bad span's line by its id)."""
    for i, resource in enumerate(doc["resourceSpans"]):
        for j, scope in enumerate(_list(resource, "scopeSpans")):
            for k, span in enumerate(_list(scope, "spans")):
                label = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                try:
                    _add(span, line, label, traces)
                except BadSpanError as exc:
                    report(errors, _bad_span(path, span, label, line, finder, exc))


def _bad_span(
    path: str,
    span: Any,
    label: str,
    line: int | None,
    finder: LineFinder | None,
    exc: BadSpanError,
) -> TraceError:
    """The error for a span: at its line (its request's, or found by its id), else its place."""
    raw_id = span.get("spanId") if isinstance(span, Mapping) else None
    if isinstance(raw_id, str):
        label += f" (span {raw_id})"
        if line is None and finder is not None:
            line = finder.line_of("spanId", raw_id)
    if line is None:
        return located(path, label, str(exc))
    return located(path, line, f"{label}: {exc}")


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def _add(span: Any, line: int | None, label: str, traces: dict[str, _Trace]) -> None:
    if not isinstance(span, Mapping):
        raise BadSpanError(f"a span must be a JSON object, not {type(span).__name__}")
    try:
        attrs = attributes(span.get("attributes"))
    except RecursionError as exc:  # an attribute value nested deeper than Python recurses
        raise BadSpanError("an attribute value nests too deeply to be read") from exc
    operation = attrs.get("gen_ai.operation.name")
    if not isinstance(operation, str):
        operation = None
    trace_id = span_id(span.get("traceId"), 16, "traceId")
    trace = traces.setdefault(trace_id, _Trace())
    failed = _failure(span.get("status"), span.get("events"))
    if operation == "invoke_agent":  # the agent run (under the app's own span, if it has one)
        trace.agent = trace.agent or _text(attrs.get("gen_ai.agent.name"))
        trace.failed = failed if trace.failed is None else trace.failed
    if operation not in MODEL_OPERATIONS and operation != TOOL_OPERATION:
        return
    start = _nanos(span.get("startTimeUnixNano"))
    # Keep only what the steps are read from: each model span's input messages repeat the
    # whole conversation so far, and a week of spans is held until its traces are complete.
    kept = {key: attrs[key] for key in _READ if key in attrs}
    given = span.get("spanId")
    raw_id = given if isinstance(given, str) else ""
    label = f"{label} (span {raw_id})" if raw_id else label
    where: int | str = label if line is None else line
    trace.spans.append(_Span(trace_id, start, where, label, raw_id, kept, failed, operation))


def _nanos(raw: Any) -> int:
    try:
        return read_int(raw, "startTimeUnixNano")
    except (TypeError, ValueError) as exc:
        raise BadSpanError(f"'startTimeUnixNano' {raw!r:.60} is not a whole number") from exc


def _failure(status: Any, events: Any) -> str | None:
    """Why a span failed: its status message, else its `exception` event; None if it did not."""
    code = status.get("code") if isinstance(status, Mapping) else None
    if not isinstance(code, int | str) or code not in _STATUS_ERROR:
        return None
    message = status.get("message")
    if isinstance(message, str) and message:
        return message
    for event in events if isinstance(events, list) else ():
        if isinstance(event, Mapping) and event.get("name") == "exception":
            raised = attributes(event.get("attributes"))
            kind, said = raised.get("exception.type"), raised.get("exception.message")
            return ": ".join(str(p) for p in (kind, said) if isinstance(p, str) and p)
    return ""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _runs(
    path: str, traces: dict[str, _Trace], errors: Errors, finder: LineFinder | None = None
) -> Iterator[RecordedRun]:
    if traces and not any(trace.spans for trace in traces.values()):
        # Spans of another kind (HTTP, a database, another convention): nothing to replay,
        # which must not read as a file of runs that all passed.
        what = (
            f"{len(traces)} trace(s) and not one GenAI model or tool span "
            "(gen_ai.operation.name chat, generate_content, text_completion or execute_tool)"
        )
        report(errors, located(path, "the file", what))
    for trace_id, trace in traces.items():
        if not trace.spans:
            continue
        trace.spans.sort(key=lambda s: s.start)  # stable: spans that start together keep file order
        info: dict[str, Any] = {"trace_id": trace_id, "calls_without_arguments": 0}
        if trace.agent:
            info["agent"] = trace.agent
        end = None if trace.failed is None else f"error: {trace.failed or 'the agent run failed'}"
        run = RecordedRun(id=trace_id, source=path, format=NAME, steps=(), end=end, info=info)
        run.steps = list(_steps(path, trace.spans, info, errors, finder))
        yield run


def _steps(
    path: str,
    spans: list[_Span],
    info: dict[str, Any],
    errors: Errors,
    finder: LineFinder | None,
) -> Iterator[Step]:
    pending: list[ToolResult] = []
    by_call = {
        s.attrs["gen_ai.tool.call.id"]: s
        for s in spans
        if s.operation == TOOL_OPERATION and isinstance(s.attrs.get("gen_ai.tool.call.id"), str)
    }
    for n, span in enumerate(spans):
        try:
            if span.operation == TOOL_OPERATION:
                pending.append(_result(span))
                continue
            if pending:
                yield ToolResults(tuple(pending))
                pending = []
            if span.failed is not None and "gen_ai.output.messages" not in span.attrs:
                continue  # a model call that failed gave no output: the agent retried or ended
            following = _tools_after(spans, n)
            turn, unknown = _model_turn(span, by_call, following)
        except BadSpanError as exc:
            report(errors, _located(path, span, str(exc), finder))
            continue
        except RecursionError:  # output messages nested deeper than Python recurses
            what = "the output messages nest too deeply to be read"
            report(errors, _located(path, span, what, finder))
            continue
        except (RunError, DataError) as exc:  # DataError: a value a ToolResult cannot hold
            report(errors, _located(path, span, f"{type(exc).__name__}: {exc}", finder))
            continue
        info["calls_without_arguments"] += unknown
        _note(info, turn)
        yield ModelOutput(turn)
    if pending:
        yield ToolResults(tuple(pending))


def _located(path: str, span: _Span, what: str, finder: LineFinder | None) -> TraceError:
    """The error for a span: at its line (its request's, or found by its id), else its place."""
    line = span.where if isinstance(span.where, int) else None
    if line is None and finder is not None and span.raw_id:
        line = finder.line_of("spanId", span.raw_id)
    if line is None:
        return located(path, span.label, what)
    return located(path, line, f"{span.label}: {what}")


def _note(info: dict[str, Any], turn: ModelTurn) -> None:
    if turn.model and "model" not in info:
        info["model"] = turn.model


def _tools_after(spans: list[_Span], n: int) -> list[_Span]:
    out = []
    for span in spans[n + 1 :]:
        if span.operation != TOOL_OPERATION:
            break
        out.append(span)
    return out


def _model_turn(
    span: _Span, by_call: Mapping[str, _Span], following: list[_Span]
) -> tuple[ModelTurn, int]:
    attrs = span.attrs
    raw = attrs.get("gen_ai.output.messages")
    if raw is None:
        # No output recorded: the calls are the tools that ran after it; the text is unknown.
        calls = [_call_of_tool(tool) for tool in following]
        text, finish = ("" if calls else NOT_RECORDED), ("tool_call" if calls else None)
    else:
        text, calls, finish = _output(_json_list(raw, "gen_ai.output.messages"), by_call)
        if not calls and following:
            # Tools ran after an output that names no call: the messages do not hold the calls
            # (OpenTelemetry's Agents SDK instrumentation writes them as text); the tool spans
            # that follow are the calls, as for an output not recorded.
            calls = [_call_of_tool(tool) for tool in following]
            finish = "tool_call"
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if finish is None and isinstance(reasons, list) and reasons and isinstance(reasons[0], str):
        finish = reasons[0]
    usage = (
        _count(attrs, "gen_ai.usage.input_tokens"),
        _count(attrs, "gen_ai.usage.output_tokens"),
    )
    model = _text(attrs.get("gen_ai.response.model")) or _text(attrs.get("gen_ai.request.model"))
    return chat_turn(text, calls, finish, usage, model)


def _count(attrs: Mapping[str, Any], key: str) -> int | None:
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadSpanError(f"attribute {key!r} is {value!r:.60}, not a token count")
    return value


def _json_list(raw: Any, key: str) -> list[Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise BadSpanError(f"attribute {key!r} is not valid JSON ({exc})") from exc
    if not isinstance(raw, list):
        raise BadSpanError(f"attribute {key!r} must be a JSON list of messages")
    return raw


def _output(
    messages: list[Any], by_call: Mapping[str, _Span]
) -> tuple[str, list[Call], str | None]:
    texts: list[str] = []
    calls: list[Call] = []
    finish = None
    for message in messages:
        if not isinstance(message, Mapping):
            raise BadSpanError("an output message is not a JSON object")
        if isinstance(message.get("finish_reason"), str):
            finish = message["finish_reason"]
        parts = message.get("parts") or []
        if not isinstance(parts, list):
            raise BadSpanError("an output message's 'parts' is not a list")
        for part in parts:
            if not isinstance(part, Mapping):
                raise BadSpanError("a message part is not a JSON object")
            if part.get("type") == "text":
                # a text part without content: there was an answer, capture was off
                content = part.get("content")
                texts.append(content if isinstance(content, str) else NOT_RECORDED)
            elif part.get("type") == "tool_call":
                calls.append(_call_of_part(part, by_call))
    return "".join(texts), calls, finish


def _call_of_part(part: Mapping[str, Any], by_call: Mapping[str, _Span]) -> Call:
    name = part.get("name")
    if not isinstance(name, str) or not name:
        raise BadSpanError("a tool_call part has no name")
    raw_id = part.get("id")
    call_id = raw_id if isinstance(raw_id, str) else ""
    arguments = part.get("arguments")
    if arguments is None and call_id in by_call:
        arguments = _tool_arguments(by_call[call_id].attrs)
    if arguments is not None and not isinstance(arguments, dict | str):
        raise BadSpanError(f"tool call {name!r}: arguments must be a JSON object or string")
    return Call(call_id, name, arguments)


def _tool_arguments(attrs: Mapping[str, Any]) -> dict[str, Any] | str | None:
    for key in ("gen_ai.tool.call.arguments", "tool_arguments"):
        value = attrs.get(key)
        if isinstance(value, dict | str):
            return value
    return None


def _call_of_tool(span: _Span) -> Call:
    name = span.attrs.get("gen_ai.tool.name")
    if not isinstance(name, str) or not name:
        raise BadSpanError("an execute_tool span has no 'gen_ai.tool.name'")
    call_id = span.attrs.get("gen_ai.tool.call.id")
    return Call(call_id if isinstance(call_id, str) else "", name, _tool_arguments(span.attrs))


def _result(span: _Span) -> ToolResult:
    call = _call_of_tool(span)
    content: Any = None
    for key in ("gen_ai.tool.call.result", "tool_response"):
        if key in span.attrs:
            content = span.attrs[key]
            break
    if content is None:
        content = NOT_RECORDED if span.failed is None else span.failed or "the tool failed"
    return result_of(call.id, content, span.failed is not None, call.name)
