"""Anthropic Messages lists: `tool_use` blocks from the assistant, `tool_result` from the user.

An assistant message is normalized as a Messages API body (its
`stop_reason`, when recorded, kept). A user message's `tool_result` blocks
become one tool-results step (with their `is_error` flag); its text blocks
become a user message after them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agentfsm._replay.trajectories._io import Errors, iter_jsonl, report, text_of, wrap_run_error
from agentfsm._replay.trajectories._model import (
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
)
from agentfsm._replay.trajectories._openai import (
    Located,
    message_list,
    normalized,
    place,
    result_of,
)
from agentfsm.exceptions import RunError

__all__ = ["NAME", "detect", "looks_anthropic", "read_doc", "read_jsonl"]

NAME = "anthropic-messages"
_MARKERS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_SNIFF_LINES = 200


def looks_anthropic(message: Any) -> bool:
    """Whether one message is unmistakably Anthropic-shaped (content blocks or a stop_reason)."""
    if not isinstance(message, Mapping):
        return False
    if "stop_reason" in message or message.get("type") == "message":
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") in _MARKERS for b in content
    )


def detect(doc: Any) -> bool:
    """Whether a document is a message list with at least one Anthropic-only message."""
    messages = message_list(doc)
    return messages is not None and any(looks_anthropic(m) for m in messages)


def sniff_jsonl(path: str) -> bool:
    """Whether the first lines of a JSON-lines message file are Anthropic-shaped."""
    lines = itertools.islice(iter_jsonl(path, errors=[]), _SNIFF_LINES)
    return any(looks_anthropic(message) for _, message in lines)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def message_steps(
    path: str, messages: Iterable[Located], errors: Errors = None, prefix: str | None = None
) -> Iterator[Step]:
    """Yield the steps of one Anthropic conversation (messages numbered as `place` reads)."""
    for where, message in messages:
        role = message.get("role")
        if role == "assistant":
            body = {
                "type": "message",
                "role": "assistant",
                "content": _blocks(message.get("content")),
                "stop_reason": message.get("stop_reason"),
            }
            try:
                yield ModelOutput(normalized(body, "anthropic"))
            except RunError as exc:
                report(errors, wrap_run_error(path, place(prefix, where), exc))
        elif role == "user":
            yield from _user_steps(message.get("content"))


def _user_steps(content: Any) -> Iterator[Step]:
    blocks = _blocks(content)
    results = [
        result_of(str(b.get("tool_use_id", "")), b.get("content", ""), bool(b.get("is_error")))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "tool_result"
    ]
    if results:
        yield ToolResults(tuple(results))
    texts = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"]
    if texts:
        yield UserMessage(text_of(texts))


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read a message list held in one JSON document as one run."""
    messages = message_list(doc) or []
    end = f"last message: {messages[-1].get('role')}" if messages else None
    steps = message_steps(path, enumerate(messages), errors, prefix="")
    yield RecordedRun(id="0", source=path, format=NAME, steps=steps, end=end)


def read_jsonl(path: str, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read one message per line as one run, streaming."""
    run = RecordedRun(id="0", source=path, format=NAME, steps=())
    run.steps = message_steps(path, _tracking(run, iter_jsonl(path, errors)), errors)
    yield run


def _tracking(run: RecordedRun, lines: Iterator[tuple[int, dict[str, Any]]]) -> Iterator[Located]:
    for number, message in lines:
        run.end = f"last message: {message.get('role')}"
        yield number, message
