"""Readers that turn a recorded trajectory file into runs of steps, whatever its format.

`read_runs(path)` detects the format and yields `RecordedRun`s. JSON-lines
formats (agentfsm traces, one chat message per line) stream from disk; the
others are single JSON documents and are loaded whole. An unknown format
raises `TraceError` naming every format tried.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from agentfsm._replay.trace import bounded_lines, cannot_read, open_trace, path_name
from agentfsm._replay.trajectories import (
    _agentfsm,
    _agents_sdk,
    _anthropic,
    _claude_code,
    _miniswe,
    _openai,
    _openhands,
    _otel,
    _taubench,
    _toolbench,
)
from agentfsm._replay.trajectories._io import Errors, head_line, load_json
from agentfsm._replay.trajectories._model import (
    ApprovalChange,
    Charged,
    HumanReply,
    ModelOutput,
    RecordedRun,
    Step,
    Stopped,
    ToolResults,
    UserMessage,
)
from agentfsm.exceptions import TraceError

__all__ = [
    "FORMATS",
    "ApprovalChange",
    "Charged",
    "HumanReply",
    "ModelOutput",
    "RecordedRun",
    "Step",
    "Stopped",
    "ToolResults",
    "UserMessage",
    "expand_paths",
    "read_runs",
]

DocReader = Callable[[str, Any, Errors], Iterator[RecordedRun]]
_DOCUMENTS: tuple[tuple[str, Callable[[Any], bool], DocReader], ...] = (
    (_taubench.NAME, _taubench.detect, _taubench.read_doc),
    (_miniswe.NAME, _miniswe.detect, _miniswe.read_doc),
    (_toolbench.NAME, _toolbench.detect, _toolbench.read_doc),
    (_openhands.NAME, _openhands.detect, _openhands.read_doc),
    (_anthropic.NAME, _anthropic.detect, _anthropic.read_doc),
    (_openai.NAME, _openai.detect, _openai.read_doc),
    (_otel.NAME, _otel.detect, _otel.read_doc),
    (_agents_sdk.NAME, _agents_sdk.detect, _agents_sdk.read_doc),
)
FORMATS: tuple[str, ...] = (
    _agentfsm.NAME,
    _claude_code.NAME,
    *(name for name, _, _ in _DOCUMENTS),
)
"""Every format `read_runs` can detect, in the order it tries them."""
_EXTENSIONS = (".json", ".jsonl")


def read_runs(path: str | os.PathLike[str], errors: Errors = None) -> Iterator[RecordedRun]:
    """Yield the recorded runs of one file, detecting its format.

    With `errors` a list, malformed lines and items are collected there and
    skipped (`--keep-going`); otherwise the first raises `TraceError`.
    """
    name = path_name(path, "read_runs")
    try:
        head = head_line(name)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise cannot_read(name, exc) from exc
    if _agentfsm.detect_head(head) or (isinstance(head, dict) and "event" in head):
        return _agentfsm.read_file(name, errors)
    if _claude_code.sniff(name, head):
        return _claude_code.read_jsonl(name, errors)
    if isinstance(head, dict) and _openai.is_message(head):
        if _anthropic.sniff_jsonl(name):
            return _anthropic.read_jsonl(name, errors)
        return _openai.read_jsonl(name, errors)
    if _otel.detect(head):  # one OTLP request per line (a single-line document is one line)
        return _otel.read_jsonl(name, errors)
    if _agents_sdk.detect_head(head):  # one export post, or one trace item, per line
        return _agents_sdk.read_jsonl(name, errors)
    if isinstance(head, dict) and "messages" in head and _is_jsonl(name):
        return _openai.read_jsonl(name, errors)
    return _read_document(name, errors)


def _is_jsonl(name: str) -> bool:
    with open_trace(name) as raw:
        return any(line is None or line.strip() for n, line in bounded_lines(raw) if n > 1)


def _read_document(name: str, errors: Errors) -> Iterator[RecordedRun]:
    doc = load_json(name)
    for _, detect, read in _DOCUMENTS:
        if detect(doc):
            return read(name, doc, errors)
    tried = ", ".join(FORMATS)
    raise TraceError(f"{name}: unknown trajectory format (tried: {tried})", path=name, line=None)


def expand_paths(patterns: Iterable[str]) -> list[tuple[str, bool]]:
    """Expand files, directories (recursively: `*.json`, `*.jsonl`) and globs into files.

    Each file comes with whether it was named explicitly; a file found by
    walking a directory is skipped by callers when its format is unknown.
    A single path (a str or a path object) is one pattern, not a list of letters.
    """
    if isinstance(patterns, str | os.PathLike):
        patterns = [patterns]
    if not isinstance(patterns, Iterable) or isinstance(patterns, bytes | Mapping):
        raise TraceError(
            f"expand_paths takes a list of paths or globs, not {type(patterns).__name__}"
        )
    found: list[tuple[str, bool]] = []
    for pattern in patterns:
        pattern = path_name(pattern, "expand_paths")
        if "\0" in pattern:
            raise TraceError(f"{pattern!r:.60}: a path cannot hold a NUL character")
        matches = (
            sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        )
        for match in matches:
            if os.path.isdir(match):
                found.extend((f, False) for f in _walk(match))
            else:
                found.append((match, True))
    return found


def _walk(directory: str) -> list[str]:
    files: list[str] = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(_EXTENSIONS))
    return files
