"""The agentfsm trace file: one JSON object per line, written as the run goes.

The first line is a header naming the schema version; every later line is
one controller event (`run_started`, `model_output`, `transition`,
`decision`, `tool_results`, `human_reply`, `user_message`,
`episode_started`, `charged`, `step_retracted`). The writer flushes after
every event, so a crash loses nothing already decided, and redacts values
whose key is named like a secret before they reach the disk.

A `step_retracted` line takes back the events of an input that failed
because an observer raised (see `agentfsm._engine.events`): the readers here
drop them and the retraction, so a trace holding one reads exactly like a
trace where that input never happened.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import re
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack
from types import TracebackType
from typing import IO, Any, BinaryIO

from agentfsm._engine.events import RETRACTED
from agentfsm._model import limits
from agentfsm._model._errors import iterated_at_call
from agentfsm._model._files import open_regular
from agentfsm.exceptions import TraceError

__all__ = [
    "REDACTED",
    "TRACE_SCHEMA",
    "TraceWriter",
    "bounded_lines",
    "read_trace",
    "redact",
    "scrub",
]

TRACE_SCHEMA = 1
"""The version of the trace format this module writes and reads."""
HEADER_EVENT = "trace"
"""The `event` name of the header line."""
REDACTED = "[REDACTED]"
"""What a secret value is replaced with."""

_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_SECRET_WORDS = frozenset(
    {"apikey", "authorization", "token", "secret", "secrets", "password", "passwd", "cookie"}
)
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
_JSON_STRING_KEYS = frozenset({"raw_arguments", "arguments"})
Numbered = tuple[int, dict[str, Any]]
_ENDS_INPUT = frozenset(
    {"decision", "run_started", "user_message", "charged", "approval_granted", "approval_revoked"}
)
"""Events that end what one input delivers (`episode_started` comes with a `user_message`)."""
_MIN_SECRET = 4
_MAX_REMEMBERED = 1024


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Treat a key as secret when one of its words names a credential.

    Words are split on `_`, `-`, `.` and camelCase, so `api_key`, `X-Api-Key`,
    `accessToken` and `client_secret` are secret while `max_tokens` and
    `input_tokens` (counts, plural) are not.

    Cached: a trace asks this of the same few keys (`event`, `run_id`, `turn`, ...) about
    a hundred times a step, and the answer depends on the key alone. The cache is bounded,
    since the keys of tool arguments come from outside.
    """
    words = [w.lower() for w in _WORDS.findall(key)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def redact(value: Any, found: set[str] | None = None) -> Any:
    """Return a copy of `value` with every secret-named key's value replaced by `REDACTED`.

    Nested mappings and lists are walked. A string under `raw_arguments` or
    `arguments` that holds a JSON object is redacted inside and re-encoded,
    because it carries the same arguments as the parsed form. When `found` is
    a set, the secret strings removed are added to it.
    """
    if value is None or isinstance(value, str | int | float):
        return value  # most of an event's values: answered before the dearer Mapping check
    if isinstance(value, Mapping):
        return {str(k): _redact_item(str(k), v, found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, found) for v in value]
    return value


def _redact_item(key: str, value: Any, found: set[str] | None) -> Any:
    if is_secret_key(key):
        if found is not None and isinstance(value, str) and len(value) >= _MIN_SECRET:
            found.add(value)
        return REDACTED
    if key in _JSON_STRING_KEYS and isinstance(value, str):
        return _redact_json_string(value, found)
    return redact(value, found)


def _redact_json_string(text: str, found: set[str] | None) -> str:
    if "{" not in text:
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    cleaned = redact(parsed, found)
    return text if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)


def scrub(value: Any, secrets: Collection[str]) -> Any:
    """Replace every occurrence of a known secret inside the strings of `value`.

    Reasons and messages quote arguments (`weather({"api_key": "sk-..."})`),
    so a secret removed under its key must also go wherever it was quoted.
    """
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value


def _event_name(event: Any) -> str:
    name = event.get("event") if isinstance(event, Mapping) else None
    return repr(name) if isinstance(name, str) else "given"


class TraceWriter:
    """Write every event it is called with as one redacted JSON line, on disk at once.

    Use it as a Controller observer: `Controller(policy, observers=[TraceWriter(path)])`.
    The header line is written when the writer is created. A line is written
    whole or not at all: when the disk is full the file is cut back to the last
    whole line and the OSError reaches the Controller, which then leaves the run
    as it was before the input. A writer given a
    path owns the file and closes it on `close()`; one given an open text file
    leaves closing to the caller.

    Args:
        path_or_file: Where to write: a path (created or truncated) or an open text file.
        fsync: Also ask the OS to put each line on disk (slower; survives power loss).
    """

    def __init__(
        self, path_or_file: str | os.PathLike[str] | IO[str], *, fsync: bool = False
    ) -> None:
        self._closer = ExitStack()
        self._raw: BinaryIO | None = None
        if isinstance(path_or_file, str | os.PathLike):
            # Unbuffered: a line is on disk whole or not at all (a failed write is cut
            # back), and nothing half-written waits in a buffer for the next event.
            try:
                raw = open(path_or_file, "wb", buffering=0)  # noqa: SIM115
            except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise TraceError(
                    f"cannot open the trace {os.fsdecode(path_or_file)!r} for writing: {why}",
                    path=os.fsdecode(path_or_file),
                ) from exc
            self._raw = self._closer.enter_context(raw)
            self._file: IO[str] | None = None
            self.path: str | None = os.fspath(path_or_file)
        elif not callable(getattr(path_or_file, "write", None)):
            raise TraceError(
                "TraceWriter writes to a path or to a text file open for writing, "
                f"not {type(path_or_file).__name__}"
            )
        else:
            self._file = path_or_file
            self.path = getattr(path_or_file, "name", None)
        self._fsync = fsync
        self._secrets: set[str] = set()
        self._size = 0
        self._unwritten: dict[str, Any] | None = None
        self.events = 0
        self._write({"event": HEADER_EVENT, "schema": TRACE_SCHEMA, "producer": "agentfsm"})

    def __call__(self, event: Mapping[str, Any]) -> None:
        """Write one event as a JSON line, secrets removed, and flush it.

        Secret values met under their keys are remembered (up to 1,024), so a
        later event that only quotes one, in a reason, is scrubbed too. A
        `step_retracted` event that cannot be written (the disk that failed
        the step is still full) is written before the next event instead, so
        the input given again is not read twice.
        """
        if self._unwritten is not None:  # a retraction the disk refused goes first
            self._write(self._unwritten)
            self._unwritten = None
        found: set[str] = set()
        try:
            cleaned = redact(event, found)
        except RecursionError:
            # A value that holds itself (or nests past the interpreter's limit) has no JSON
            # form; say so instead of letting the interpreter's error out of an observer.
            raise TraceError(
                f"cannot write the {_event_name(event)} event to {self._where}: "
                "a value in it holds itself or nests too deep for JSON"
            ) from None
        if found and len(self._secrets) < _MAX_REMEMBERED:
            self._secrets.update(found)
        if self._secrets:
            cleaned = scrub(cleaned, self._secrets)
        try:
            self._write(cleaned)
        except BaseException:
            if cleaned.get("event") == RETRACTED:
                self._unwritten = cleaned
            raise
        self.events += 1

    def _write(self, obj: Any) -> None:
        try:
            # allow_nan=False: NaN and Infinity are not JSON, and a trace is read by other
            # tools too; the Controller's own events never hold them (dumped as null).
            line = json.dumps(obj, ensure_ascii=False, default=str, allow_nan=False) + "\n"
        except (ValueError, RecursionError) as exc:
            raise TraceError(
                f"cannot write the {_event_name(obj)} event to {self._where}: {exc} "
                "(JSON holds no NaN, Infinity or a value that holds itself)"
            ) from None
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (half an emoji split across two stream events, a non-UTF-8
            # file name) has no UTF-8 form. It can only sit inside a JSON string, where
            # `\\udXXX` is JSON's own escape for it: the reader gets the same text back.
            data = line.encode("utf-8", "backslashreplace")
            line = data.decode("utf-8")
        if self._raw is None:
            assert self._file is not None
            self._file.write(line)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
            return
        self._append(data)

    def _append(self, data: bytes) -> None:
        """Write one whole line; on failure (a full disk) cut the file back to the last line."""
        raw = self._raw
        assert raw is not None
        try:
            view = memoryview(data)
            while view:
                written = raw.write(view)
                if not written:
                    raise OSError(f"cannot write the trace {self.path}: nothing was written")
                view = view[written:]
            if self._fsync:
                os.fsync(raw.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                raw.truncate(self._size)
                raw.seek(self._size)
            raise
        self._size += len(data)

    @property
    def _where(self) -> str:
        return f"the trace {self.path}" if self.path else "the trace"

    def close(self) -> None:
        """Close the file when this writer opened it, after a retraction still owed (if it can)."""
        if self._unwritten is not None:
            with contextlib.suppress(OSError):
                self._write(self._unwritten)
                self._unwritten = None
        self._closer.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@iterated_at_call
def read_trace(
    path: str | os.PathLike[str], *, errors: list[TraceError] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the events of a trace file one line at a time, after checking its header.

    Events of an input that failed (taken back by a `step_retracted` line) are
    left out, with the retraction itself: what is yielded is the run as it
    happened. Memory stays flat in the file's size. A malformed line raises `TraceError`
    naming the file, the line number and what was wrong; when `errors` is a
    list, the error is appended there instead and the line skipped.
    """
    for _, event in read_numbered(path, errors=errors):
        yield event


def path_name(path: object, what: str) -> str:
    """`path` as a str, or TraceError when it is no path: `what` names the function given it."""
    if not isinstance(path, str | os.PathLike):
        raise TraceError(f"{what} takes a path (str or os.PathLike), not {type(path).__name__}")
    return os.fsdecode(path)


def cannot_read(name: str, exc: Exception) -> TraceError:
    """The TraceError for a file that cannot be opened, in the words of the OS."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return TraceError(f"{name}: cannot read: {why}", path=name)


def open_trace(name: str) -> IO[bytes]:
    """Open a user-given trace or trajectory file: a regular file only, read up to the size it
    had when opened; anything else is a TraceError naming the file (`agentfsm._model._files`)."""
    return open_regular(name, lambda why: TraceError(f"{name}: cannot read: {why}", path=name))


def read_numbered(
    path: str | os.PathLike[str], *, errors: list[TraceError] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(line number, event)` for every event line of a trace, header checked.

    Events a `step_retracted` takes back are left out, and so is the retraction.
    """
    name = path_name(path, "read_trace")
    with open_trace(name) as raw:
        lines = bounded_lines(raw)
        _check_header(name, lines)
        yield from _Retractions(name, errors).apply(_parsed(name, lines, errors))


def _parsed(
    name: str, lines: Iterator[tuple[int, bytes | None]], errors: list[TraceError] | None
) -> Iterator[Numbered]:
    for number, line in lines:
        if line is not None and not line.strip():
            continue
        try:
            yield number, parse_event(name, number, line)
        except TraceError as exc:
            if errors is None:
                raise
            errors.append(exc)


class _Retractions:
    """Drop the events of inputs that failed, and their `step_retracted` events, while streaming.

    The Controller delivers one input's events together; a retraction always
    follows the events it takes back. So only the input being read (`current`)
    and the last whole one (`last`, ended by a `decision` or a single event)
    are held back, never both at once: anything older is final. Holding back
    is bounded by `limits.MAX_INPUT_EVENTS`; a retraction that does not match
    the events before it (another count, run or turn) is a `TraceError`.
    """

    def __init__(self, name: str, errors: list[TraceError] | None) -> None:
        self.name = name
        self.errors = errors

    def apply(self, events: Iterator[Numbered]) -> Iterator[Numbered]:
        """Yield `events` without the retracted ones, keeping their order.

        A line that raises (malformed, or a retraction that does not fit) first
        releases what was read before it.
        """
        current: list[Numbered] = []
        last: list[Numbered] = []
        ends, limit = _ENDS_INPUT, limits.MAX_INPUT_EVENTS
        try:
            for item in events:
                kind = item[1]["event"]
                if kind == RETRACTED:
                    self._retract(*item, current or last)
                    continue
                if last:  # a new input begins: the last one is final
                    yield from last
                    last.clear()
                current.append(item)
                if kind in ends:
                    current, last = last, current
                elif len(current) > limit:
                    yield current.pop(0)
        except TraceError:
            yield from last
            yield from current
            raise
        yield from last
        yield from current

    def _retract(self, number: int, event: dict[str, Any], held: list[Numbered]) -> None:
        try:
            count = _retracted_count(self.name, number, event, held)
        except TraceError as exc:
            if self.errors is None:
                raise
            self.errors.append(exc)
            return
        if count:
            held.clear()


def _retracted_count(name: str, number: int, event: dict[str, Any], held: list[Numbered]) -> int:
    """How many held events a retraction takes back; a `TraceError` when it does not fit them."""
    count = event.get("events")
    if type(count) is not int or count < 0:
        what = f"a {RETRACTED} event needs a count 'events' >= 0, not {count!r}"
        raise _error(name, number, what)
    if count == 0:
        return 0
    if count != len(held):
        raise _error(
            name,
            number,
            f"{RETRACTED} takes back {count} events, but the input before it has {len(held)} "
            "(the trace was edited or two writers share it)",
        )
    for _, taken in held:
        for key in ("run_id", "turn"):
            if key in taken and taken[key] != event.get(key):
                raise _error(
                    name,
                    number,
                    f"{RETRACTED} is for {key} {event.get(key)!r}, but the events before it "
                    f"are of {key} {taken[key]!r}",
                )
    return count


def bounded_lines(raw: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """Yield `(line number, line)`, reading at most `MAX_LINE_BYTES` of a line into memory.

    A longer line is skipped to its end and yielded as None, so a file without
    a newline costs one bounded buffer to reject, not its whole size.
    """
    limit = limits.MAX_LINE_BYTES
    number = 0
    while line := raw.readline(limit + 1):
        number += 1
        if len(line) <= limit or line.endswith(b"\n"):
            yield number, line
            continue
        del line  # skip to the line's end a megabyte at a time, holding none of it
        while (rest := raw.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass
        yield number, None


def _check_header(name: str, lines: Iterator[tuple[int, bytes | None]]) -> None:
    for number, line in lines:
        if line is not None and not line.strip():
            continue
        header = parse_event(name, number, line)
        if header.get("event") != HEADER_EVENT:
            raise _error(name, number, f"expected the header {{'event': '{HEADER_EVENT}', ...}}")
        if header.get("schema") != TRACE_SCHEMA:
            got = header.get("schema")
            raise _error(name, number, f"schema {got!r} is not supported (expected {TRACE_SCHEMA})")
        return
    raise _error(name, 0, "empty trace: no header line")


def parse_event(name: str, number: int, line: bytes | str | None) -> dict[str, Any]:
    """Parse one trace line into an event dict, or raise `TraceError` saying why not.

    None stands for a line longer than `MAX_LINE_BYTES`, which is never read whole.
    """
    from agentfsm._replay._json import loads  # here: the trace writer never imports msgspec

    if line is None:
        raise _error(name, number, f"the line is longer than {limits.MAX_LINE_BYTES} bytes")
    try:
        event = loads(line)
    except ValueError as exc:
        raise _error(name, number, f"not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise _error(name, number, "the JSON nests too deeply to be read") from exc
    if not isinstance(event, dict):
        raise _error(name, number, f"expected a JSON object, got {type(event).__name__}")
    if not isinstance(event.get("event"), str):
        raise _error(name, number, "the object has no string 'event' key")
    return event


def _error(name: str, number: int, what: str) -> TraceError:
    return TraceError(f"{name}:{number}: {what}", path=name, line=number)
