"""The OpenAI Agents SDK's own trace export: what its `BackendSpanExporter` posts.

Each post is `{"data": [item, ...]}`, an item being a trace (`"object": "trace"`) or a span
(`"object": "trace.span"`, its `span_data` typed `agent`, `generation`, `response`,
`function`, `handoff`, `guardrail`, `custom`, ...). A file is one such post, a list of items,
one post per line (what a receiver writes) or one item per line. Spans are grouped by
`trace_id`, one run per trace, and read in `started_at` order:
- a `generation` span (models on the Chat Completions API) is a model output, read from its
  `output` messages through the chat-completions normalizer, with its `model` and `usage`;
- a `response` span (the Responses API) records only the response id and usage: its calls
  are the `function` spans that follow it, their arguments from each span's `input`, and the
  text of an answer is not recorded;
- a `function` span is one tool result (`output`; failed when the span has an `error`).
Function spans carry no call id: a result answers the next call of its tool's name.
With `trace_include_sensitive_data=False`, inputs and outputs are not recorded: calls are read
with no arguments and counted in `info["calls_without_arguments"]`, as the OTel reader does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentfsm._model.types import ModelTurn, ToolCall, ToolResult
from agentfsm._replay.trajectories._find import LineFinder
from agentfsm._replay.trajectories._io import Errors, iter_jsonl, located, report
from agentfsm._replay.trajectories._model import ModelOutput, RecordedRun, Step, ToolResults
from agentfsm._replay.trajectories._openai import normalized, result_of
from agentfsm._replay.trajectories._otel import NOT_RECORDED, Call, chat_turn
from agentfsm.exceptions import DataError, RunError, TraceError

__all__ = ["NAME", "detect", "detect_head", "read_doc", "read_jsonl"]

NAME = "openai-agents-trace"
_OBJECTS = frozenset({"trace", "trace.span"})
_MODEL_SPANS = frozenset({"generation", "response"})
_READ = ("type", "name", "input", "output", "model", "usage")
"""The `span_data` fields the steps are read from (`input`: a function's arguments)."""


class _BadItemError(Exception):
    """An item this reader cannot use; the caller locates it."""


@dataclass(slots=True)
class _Span:
    start: datetime
    where: int | str
    id: str
    data: Mapping[str, Any]
    error: Any


@dataclass(slots=True)
class _Trace:
    spans: list[_Span] = field(default_factory=list)
    workflow: str | None = None
    failed: str | None = None
    """Why the first agent run that failed did, as its span's error says."""


def _is_item(obj: Any) -> bool:
    kind = obj.get("object") if isinstance(obj, Mapping) else None
    return isinstance(kind, str) and kind in _OBJECTS


def _items_of(doc: Any) -> list[Any] | None:
    if isinstance(doc, Mapping):
        doc = doc.get("data")
    if isinstance(doc, list) and doc and _is_item(doc[0]):
        return doc
    return None


def detect(doc: Any) -> bool:
    """Whether a whole JSON document is one export post or a list of trace items."""
    return _items_of(doc) is not None


def detect_head(head: Any) -> bool:
    """Whether the first line of a JSON-lines file is an export post or a trace item."""
    return _is_item(head) or (isinstance(head, Mapping) and _items_of(head) is not None)


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read one export post (or list of items): one run per trace."""
    traces: dict[str, _Trace] = {}
    finder = LineFinder(path)
    for index, item in enumerate(_items_of(doc) or ()):
        _collect(path, item, f"data[{index}]", traces, errors, finder)
    yield from _runs(path, traces, errors, finder)


def read_jsonl(path: str, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read one export post, or one item, per line: one run per trace."""
    traces: dict[str, _Trace] = {}
    for number, obj in iter_jsonl(path, errors):
        items = [obj] if _is_item(obj) else _items_of(obj)
        if items is None:
            what = "expected an Agents SDK trace item or {'data': [<trace items>]}"
            report(errors, located(path, number, what))
            continue
        for item in items:
            _collect(path, item, number, traces, errors)
    yield from _runs(path, traces, errors)


def _collect(
    path: str,
    item: Any,
    where: int | str,
    traces: dict[str, _Trace],
    errors: Errors,
    finder: LineFinder | None = None,
) -> None:
    try:
        _add(item, where, traces)
    except _BadItemError as exc:
        item_id = item.get("id") if isinstance(item, Mapping) else None
        if not isinstance(item_id, str):
            report(errors, located(path, where, str(exc)))
            return
        report(errors, _at(path, where, item_id, str(exc), finder))


def _at(
    path: str, where: int | str, item_id: str, what: str, finder: LineFinder | None
) -> TraceError:
    """The error for an item: at its line (its own, or found by its id in a document), naming
    its place in the document when no line is found, and its id."""
    line = where if isinstance(where, int) else None
    if line is None and finder is not None:
        line = finder.line_of("id", item_id)
    if line is None:
        return located(path, where, f"{item_id}: {what}")
    prefix = "" if isinstance(where, int) else f"{where}: "
    return located(path, line, f"{prefix}{item_id}: {what}")


def _add(item: Any, where: int | str, traces: dict[str, _Trace]) -> None:
    if not _is_item(item):
        raise _BadItemError("expected a trace item ('object': 'trace' or 'trace.span')")
    key = "id" if item["object"] == "trace" else "trace_id"
    trace_id = item.get(key)
    if not isinstance(trace_id, str) or not trace_id:
        raise _BadItemError(f"'{key}' is missing")
    trace = traces.setdefault(trace_id, _Trace())
    if item["object"] == "trace":
        workflow = item.get("workflow_name")
        trace.workflow = workflow if isinstance(workflow, str) else None
        return
    data = item.get("span_data")
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise _BadItemError("'span_data' must be an object with a 'type'")
    if data["type"] == "agent" and item.get("error") is not None and trace.failed is None:
        trace.failed = _error_text(item.get("error"))
    if data["type"] not in _MODEL_SPANS and data["type"] != "function":
        return
    span_id = item.get("id") if isinstance(item.get("id"), str) else "a span without id"
    start = _started(item.get("started_at"))
    # Keep only what the steps are read from: a generation's input repeats the conversation.
    kept = {key: data[key] for key in _READ if key in data and not _is_prompt(data, key)}
    trace.spans.append(_Span(start, where, span_id, kept, item.get("error")))


def _is_prompt(data: Mapping[str, Any], key: str) -> bool:
    """Whether `key` is a model span's input: the messages sent, which no step is read from."""
    return key == "input" and data["type"] != "function"


def _started(raw: Any) -> datetime:
    try:
        when = datetime.fromisoformat(raw)
    except (TypeError, ValueError) as exc:
        raise _BadItemError(f"'started_at' {raw!r:.60} is not an ISO 8601 time") from exc
    # The SDK writes UTC with its offset; a time without one is taken as UTC, so that the
    # two kinds compare instead of failing the sort.
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _runs(
    path: str, traces: dict[str, _Trace], errors: Errors, finder: LineFinder | None = None
) -> Iterator[RecordedRun]:
    for trace_id, trace in traces.items():
        if not trace.spans:
            continue
        trace.spans.sort(key=lambda s: s.start)  # stable: spans that start together keep order
        info: dict[str, Any] = {"calls_without_arguments": 0}
        if trace.workflow:
            info["workflow"] = trace.workflow
        end = None if trace.failed is None else f"error: {trace.failed}"
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
    calls: list[ToolCall] = []
    for n, span in enumerate(spans):
        try:
            if span.data["type"] == "function":
                pending.append(_result(span, calls, pending))
                continue
            if pending:
                yield ToolResults(tuple(pending))
                pending = []
            if span.error is not None and span.data.get("output") is None:
                continue  # a model call that failed gave no output: the agent retried or ended
            turn, unknown = _model_turn(span, spans[n + 1 :])
        except _BadItemError as exc:
            report(errors, _at(path, span.where, span.id, str(exc), finder))
            continue
        except (RunError, DataError) as exc:  # DataError: a value a ToolResult cannot hold
            what = f"{type(exc).__name__}: {exc}"
            report(errors, _at(path, span.where, span.id, what, finder))
            continue
        info["calls_without_arguments"] += unknown
        if turn.model and "model" not in info:
            info["model"] = turn.model
        calls = turn.tool_calls
        yield ModelOutput(turn)
    if pending:
        yield ToolResults(tuple(pending))


def _model_turn(span: _Span, after: list[_Span]) -> tuple[ModelTurn, int]:
    data = span.data
    raw_usage = data.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    counts = (_count(usage, "input_tokens"), _count(usage, "output_tokens"))
    model = data.get("model") if isinstance(data.get("model"), str) else None
    output = data.get("output")
    if data["type"] == "generation" and output is not None:
        return _generation(output, counts, model), 0
    # A response span, or a generation without its output: the calls are the functions that
    # ran next; the answer's text was not recorded.
    calls = []
    for later in after:
        if later.data["type"] != "function":
            break
        calls.append(_call_of(later))
    text = "" if calls else NOT_RECORDED
    return chat_turn(text, calls, "tool_call" if calls else None, counts, model)


def _generation(output: Any, usage: tuple[int | None, int | None], model: str | None) -> ModelTurn:
    if not isinstance(output, list) or not all(isinstance(m, Mapping) for m in output):
        raise _BadItemError("a generation span's 'output' must be a list of messages")
    message = next((m for m in output if m.get("role") == "assistant"), None)
    if message is None:
        raise _BadItemError("a generation span's 'output' holds no assistant message")
    body: dict[str, Any] = {"choices": [{"message": dict(message), "finish_reason": None}]}
    if model:
        body["model"] = model
    if usage != (None, None):
        body["usage"] = {"prompt_tokens": usage[0] or 0, "completion_tokens": usage[1] or 0}
    return normalized(body, "openai")


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _BadItemError(f"usage {key!r} is {value!r:.60}, not a token count")
    return value


def _name(span: _Span) -> str:
    name = span.data.get("name")
    if not isinstance(name, str) or not name:
        raise _BadItemError("a function span has no 'name'")
    return name


def _call_of(span: _Span) -> Call:
    arguments = span.data.get("input")
    if arguments is not None and not isinstance(arguments, str):
        raise _BadItemError("a function span's 'input' must be the arguments as a JSON string")
    return Call("", _name(span), arguments)


def _result(span: _Span, calls: list[ToolCall], pending: list[ToolResult]) -> ToolResult:
    name = _name(span)
    taken = {r.call_id for r in pending}
    call_id = next((c.id for c in calls if c.name == name and c.id not in taken), "")
    output = span.data.get("output")
    failed = span.error is not None
    if output is None:
        output = _error_text(span.error) if failed else NOT_RECORDED
    return result_of(call_id, output, failed, name)


def _error_text(error: Any) -> str:
    """What a span's `error` (`{"message", "data"}`) says, the detail the SDK gives included."""
    if not isinstance(error, Mapping) or not isinstance(error.get("message"), str):
        return "it failed"
    data = error.get("data")
    detail = data.get("error") if isinstance(data, Mapping) else None
    return f"{error['message']}: {detail}" if isinstance(detail, str) else str(error["message"])
