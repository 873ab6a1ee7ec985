"""Reading helpers shared by the trajectory readers: JSON lines, located errors, text.

Every error a reader raises is a `TraceError` whose message starts with
`file:line:` (or `file: <where>:` when the source is one JSON document and a
line number would mean nothing), so a reviewer can jump straight to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from agentfsm._model import limits
from agentfsm._replay._json import loads
from agentfsm._replay.trace import bounded_lines, open_trace
from agentfsm.exceptions import RunError, TraceError

__all__ = ["Errors", "head_line", "iter_jsonl", "load_json", "located", "text_of"]

Errors = list[TraceError] | None
"""Where to collect bad lines instead of raising (`--keep-going`), or None to raise."""

_HEAD_LIMIT = 1 << 20


def located(path: str, where: int | str, what: str) -> TraceError:
    """Build the error for a problem at a line number (int) or a described place (str)."""
    if isinstance(where, int):
        return TraceError(f"{path}:{where}: {what}", path=path, line=where)
    return TraceError(f"{path}: {where}: {what}", path=path, line=None, where=where)


def report(errors: Errors, error: TraceError) -> None:
    """Raise `error`, or record it when the caller collects errors."""
    if errors is None:
        raise error
    errors.append(error)


def wrap_run_error(path: str, where: int | str, exc: RunError) -> TraceError:
    """Turn a failure to read one recorded item (an unknown payload, ...) into a located error."""
    if isinstance(exc, TraceError):
        return exc
    return located(path, where, f"{type(exc).__name__}: {exc}")


def iter_jsonl(path: str, errors: Errors = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(line number, object)` for every non-blank line, one line in memory at a time."""
    with open_trace(path) as raw:
        for number, line in bounded_lines(raw):
            if line is None:
                too_long = f"the line is longer than {limits.MAX_LINE_BYTES} bytes"
                report(errors, located(path, number, too_long))
                continue
            if not line.strip():
                continue
            try:
                obj = loads(line)
            except ValueError as exc:
                report(errors, located(path, number, f"not valid JSON ({exc})"))
                continue
            except RecursionError:
                report(errors, located(path, number, "the JSON nests too deeply to be read"))
                continue
            if not isinstance(obj, dict):
                kind = type(obj).__name__
                report(errors, located(path, number, f"expected a JSON object, got {kind}"))
                continue
            yield number, obj


def head_line(path: str) -> Any:
    """Parse the first non-blank line as JSON, or return None when it is not a JSON value.

    At most 1 MiB is read, so sniffing a large file costs nothing.
    """
    with open_trace(path) as raw:
        for line in iter(lambda: raw.readline(_HEAD_LIMIT), b""):
            if not line.strip():
                continue
            try:
                return loads(line)
            except (ValueError, RecursionError):
                return None
    return None


def load_json(path: str) -> Any:
    """Load a whole JSON document, with a located error when it is malformed or too large."""
    with open_trace(path) as raw:
        size = os.fstat(raw.fileno()).st_size
        if size > limits.MAX_DOCUMENT_BYTES:
            limit = limits.MAX_DOCUMENT_BYTES
            raise located(path, 0, f"a {size}-byte document; the limit is {limit} bytes")
        try:
            return loads(raw.read())
        except ValueError as exc:
            line = getattr(exc, "lineno", 0)
            raise located(path, line, f"not valid JSON ({exc})") from exc
        except RecursionError as exc:
            raise located(path, 0, "the JSON nests too deeply to be read") from exc


def text_of(content: Any) -> str:
    """Flatten message content (a string, or a list of text parts/blocks) into text.

    Nested lists are walked without recursion, so a recorded message nested a
    million levels deep reads as text instead of hitting the recursion limit.
    """
    out: list[str] = []
    todo: list[Any] = [content]
    while todo:
        item = todo.pop()
        if item is None:
            continue
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, list):
            todo.extend(reversed([p.get("text") if isinstance(p, Mapping) else p for p in item]))
        else:
            out.append(_json_text(item))
    return "".join(out)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):
        return f"[a {type(value).__name__} nested too deeply to show]"
