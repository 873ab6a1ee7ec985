"""Reading helpers shared by the trajectory readers: JSON lines, located errors, text.

Every error a reader raises is a `TraceError` whose message starts with
`file:line:` (or `file: <where>:` when the source is one JSON document and a
line number would mean nothing), so a reviewer can jump straight to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

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
    with open(path, "rb") as raw:
        for number, line in enumerate(raw, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                report(errors, located(path, number, f"not valid JSON ({exc})"))
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
    with open(path, "rb") as raw:
        for line in iter(lambda: raw.readline(_HEAD_LIMIT), b""):
            if not line.strip():
                continue
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def load_json(path: str) -> Any:
    """Load a whole JSON document, with a located error when it is malformed."""
    with open(path, "rb") as raw:
        try:
            return json.load(raw)
        except ValueError as exc:
            line = getattr(exc, "lineno", 0)
            raise located(path, line, f"not valid JSON ({exc})") from exc


def text_of(content: Any) -> str:
    """Flatten message content (a string, or a list of text parts/blocks) into text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [text_of(p.get("text") if isinstance(p, Mapping) else p) for p in content]
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)
