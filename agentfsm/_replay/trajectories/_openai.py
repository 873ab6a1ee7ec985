"""OpenAI chat message lists (JSON, JSON lines, `{"messages": [...]}`), and the shared step builder.

An assistant message becomes a model output through the providers'
normalizer (wrapped as a chat completion body), so replay parses tool calls
exactly as the live controller does. Consecutive `tool` (or legacy
`function`) messages become one tool-results step, paired with the calls by
position. tau-bench, mini-swe-agent and ToolBench reuse this builder with
their own error conventions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentfsm._model.types import ModelTurn, ToolCall, ToolResult
from agentfsm._replay.trajectories._io import (
    Errors,
    iter_jsonl,
    located,
    report,
    text_of,
    wrap_run_error,
)
from agentfsm._replay.trajectories._model import (
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
)
from agentfsm.exceptions import RunError

if TYPE_CHECKING:
    pass

__all__ = [
    "NAME",
    "Conventions",
    "detect",
    "message_steps",
    "normalized",
    "read_doc",
    "read_jsonl",
    "result_of",
]

NAME = "openai-messages"
Located = tuple[int, Mapping[str, Any]]
"""A message with where it was found: its line number, or its index in a list (see `place`)."""


def place(prefix: str | None, number: int) -> int | str:
    """Where a message is, for an error: line `number` (no `prefix`), else `<prefix>message <n>`.

    Built only when an error names it: replay reads millions of messages.
    """
    return number if prefix is None else f"{prefix}message {number}"


def _flagged_error(message: Mapping[str, Any]) -> bool:
    return bool(message.get("is_error"))


def chat_body(message: Mapping[str, Any]) -> dict[str, Any]:
    """Wrap an assistant message into a chat completion body for the normalizer."""
    choice = {"message": message, "finish_reason": message.get("finish_reason")}
    return {"choices": [choice]}


@dataclass(frozen=True, slots=True)
class Conventions:
    """How one source marks errors and which provider body an assistant message makes."""

    is_error: Callable[[Mapping[str, Any]], bool] = _flagged_error
    """Whether a tool message reports a failure (OpenAI itself has no flag)."""
    body: Callable[[Mapping[str, Any]], dict[str, Any]] = chat_body
    """The provider body to normalize for an assistant message."""
    provider: str = "openai"
    """The normalizer to use for that body."""


PLAIN = Conventions()


def normalized(body: dict[str, Any], provider: str | None) -> ModelTurn:
    """Normalize a provider body with the providers package (imported on first use)."""
    read = _NORMALIZE[0] if _NORMALIZE else _load_normalize()
    return read(body, provider=provider)


_NORMALIZE: list[Callable[..., ModelTurn]] = []
"""`normalize`, once the providers are loaded (a chat body takes its short path there)."""


def _load_normalize() -> Callable[..., ModelTurn]:
    from agentfsm.providers import normalize

    _NORMALIZE.append(normalize)
    return normalize


def message_steps(
    path: str,
    messages: Iterable[Located],
    conv: Conventions = PLAIN,
    errors: Errors = None,
    prefix: str | None = None,
) -> Iterator[Step]:
    """Yield the steps of one chat: model outputs, tool results by position, user messages.

    System messages and roles this format does not know are skipped. Messages
    come numbered by line, or (with a `prefix`) by index: see `place`.
    """
    calls: list[ToolCall] = []
    pending: list[ToolResult] = []
    for where, message in messages:
        role = message.get("role")
        if role in ("tool", "function"):
            pending.append(_result(message, calls, len(pending), conv))
            continue
        if pending:
            yield ToolResults(tuple(pending))
            pending = []
        if role == "assistant":
            turn = _turn(path, prefix, where, message, conv, errors)
            if turn is not None:
                calls = turn.tool_calls
                yield ModelOutput(turn)
        elif role == "user":
            yield UserMessage(text_of(message.get("content")))
    if pending:
        yield ToolResults(tuple(pending))


def _turn(
    path: str,
    prefix: str | None,
    where: int,
    message: Mapping[str, Any],
    conv: Conventions,
    errors: Errors,
) -> ModelTurn | None:
    try:
        return normalized(conv.body(message), conv.provider)
    except RunError as exc:
        report(errors, wrap_run_error(path, place(prefix, where), exc))
        return None


def _result(
    message: Mapping[str, Any], calls: list[ToolCall], position: int, conv: Conventions
) -> ToolResult:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        call_id = calls[position].id if position < len(calls) else ""
    name = message.get("name")
    if not isinstance(name, str):
        name = None
    return result_of(call_id, message.get("content") or "", conv.is_error(message), name)


def result_of(call_id: str, content: Any, is_error: bool, name: str | None = None) -> ToolResult:
    """A `ToolResult` of values a trace file holds, validated (`DataError` if one does not fit)."""
    return ToolResult(call_id=call_id, content=content, is_error=is_error, name=name)


def is_message(obj: Any) -> bool:
    """Whether a JSON value looks like one chat message."""
    return isinstance(obj, Mapping) and isinstance(obj.get("role"), str)


def message_list(doc: Any) -> list[Any] | None:
    """Return the message list of a document (a bare list or `{"messages": [...]}`), if any."""
    if isinstance(doc, Mapping):
        doc = doc.get("messages")
    if isinstance(doc, list) and doc and all(is_message(m) for m in doc):
        return doc
    return None


def detect(doc: Any) -> bool:
    """Whether a whole JSON document is a chat message list."""
    return message_list(doc) is not None


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read a chat message list held in one JSON document as one run."""
    messages = message_list(doc) or []
    run = RecordedRun(id="0", source=path, format=NAME, steps=())
    run.steps = message_steps(path, enumerate(messages), PLAIN, errors, prefix="")
    run.end = _end_of(messages[-1]) if messages else None
    yield run


def _end_of(message: Mapping[str, Any]) -> str:
    return f"last message: {message.get('role')}"


def read_jsonl(path: str, errors: Errors = None, *, fmt: str = NAME) -> Iterator[RecordedRun]:
    """Read JSON lines: one message per line (one run), or one `{"messages"}` chat per line."""
    lines = iter_jsonl(path, errors)
    first = next(lines, None)
    if first is None:
        return
    if "messages" in first[1] and not is_message(first[1]):
        yield from _chats_per_line(path, first, lines, errors)
        return
    run = RecordedRun(id="0", source=path, format=fmt, steps=())
    run.steps = message_steps(path, _tracking_end(run, first, lines), PLAIN, errors)
    yield run


def _tracking_end(
    run: RecordedRun, first: Located, rest: Iterator[tuple[int, dict[str, Any]]]
) -> Iterator[Located]:
    last = first
    for located_message in itertools.chain([first], rest):
        last = located_message
        yield located_message
    run.end = _end_of(last[1])


def _chats_per_line(
    path: str,
    first: tuple[int, dict[str, Any]],
    rest: Iterator[tuple[int, dict[str, Any]]],
    errors: Errors,
) -> Iterator[RecordedRun]:
    for index, (number, chat) in enumerate(itertools.chain([first], rest)):
        messages = message_list(chat)
        if messages is None:
            report(errors, located(path, number, "expected {'messages': [<chat messages>]}"))
            continue
        run = RecordedRun(id=str(chat.get("id", index)), source=path, format=NAME, steps=())
        numbered = enumerate(messages)
        run.steps = message_steps(path, numbered, PLAIN, errors, prefix=f"line {number} ")
        run.end = _end_of(messages[-1])
        yield run
