"""Open a file a user named (a trace, a trajectory, a policy) for reading, with a bound.

Every reader of a user-given file opens it here, so one rule holds for all of
them: only a regular file is read, and never past the size it had when it was
opened. `/dev/zero`, a FIFO, a socket or a terminal (or a link to one) is
refused before a byte is read; the open itself never blocks (`O_NONBLOCK`: a
FIFO with no writer would otherwise wait forever), and the check is made on
the opened descriptor, so the file cannot be swapped between check and read.
A `/proc` file passes as regular but reports a size of 0, so it reads as empty
instead of endlessly (`/proc/self/pagemap` would yield gigabytes).

A document read from such a file (`read_document`: JSON, or TOML) is refused when a
key is written twice in one object or table: a duplicate would silently keep only
its last value (`"drop_db": "deny"` then `"drop_db": "allow"`). Errors name the
file and the line (`FILE:LINE: ...`).
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterator
from typing import Any

from agentfsm.exceptions import AgentFSMError

__all__ = ["line_of", "open_regular", "read_document", "top_level_line"]

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_BUFFER = 1 << 18
"""Bytes read from the disk at a time (the line readers ask for lines of it)."""

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular(
    path: str, refuse: Callable[[str], AgentFSMError], *, max_bytes: int | None = None
) -> io.BufferedReader:
    """Open `path` for reading in binary, or raise `refuse(why)` saying why it cannot be read.

    Args:
        path: The file, as the user named it.
        refuse: Builds the error to raise from a reason (the caller names the file in it).
        max_bytes: A file larger than this is refused before it is read.

    Returns:
        A binary reader that ends where the file ended when it was opened.
    """
    try:
        fd = os.open(path, _FLAGS)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise refuse(why) from exc
    try:
        size = _regular_size(fd, refuse, max_bytes)
        os.set_blocking(fd, True)
        raw = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_UpTo(raw, size), buffer_size=_BUFFER)


def _regular_size(fd: int, refuse: Callable[[str], AgentFSMError], limit: int | None) -> int:
    mode, size = (info := os.fstat(fd)).st_mode, info.st_size
    if stat.S_ISDIR(mode):
        raise refuse(os.strerror(errno.EISDIR))
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a file")
        raise refuse(f"it is {kind}, not a regular file; only regular files are read")
    if limit is not None and size > limit:
        raise refuse(f"it holds {size:,} bytes; the limit is {limit:,} (agentfsm._model.limits)")
    return size


class _UpTo(io.RawIOBase):
    """A raw file that ends after `size` bytes, however much the file grows meanwhile."""

    def __init__(self, raw: io.FileIO, size: int) -> None:
        super().__init__()
        self._raw = raw
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        got = self._raw.readinto(view[: self._left]) or 0
        self._left -= got
        return got

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()
        super().close()


# -- documents: JSON or TOML text, refused when a key repeats ------------------------------

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
"""One token of valid JSON text: a string, a punctuation mark, or a bare scalar."""
_TOML_AT = re.compile(r"\s*\(at line (\d+), column \d+\)$")


class _RepeatedKeyError(Exception):
    """A key written twice in one JSON object (the decoder's own view of the document)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKeyError(key)
        found[key] = value
    return found


def read_document(
    text: str, source: str, *, toml: bool, refuse: Callable[[str], AgentFSMError]
) -> Any:
    """Decode JSON (or TOML) `text`; raise `refuse("SOURCE:LINE: why")` when it is not valid.

    A key written twice in one object or table, at any depth, is not valid: JSON's
    decoder would keep the last value, TOML's refuses it (both are refused here).
    """
    if toml:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            why = str(exc)
            at = _TOML_AT.search(why)
            where = f"{source}:{at.group(1)}" if at else source
            raise refuse(f"{where}: not valid TOML: {_TOML_AT.sub('', why)}") from exc
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise refuse(f"{source}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    except _RepeatedKeyError as exc:
        found = next(_json_repeats(text), None)
        if found is None:  # the decoder saw a repeat the line finder did not place
            place, key, before = source, exc.key, ""
        else:
            key, second, first = found
            place, before = (
                f"{source}:{line_of(text, second)}",
                f" (first at line {line_of(text, first)})",
            )
        raise refuse(
            f"{place}: key {key!r} is written twice in one object{before}; "
            "a duplicate would silently keep only its last value"
        ) from None


def line_of(text: str, position: int) -> int:
    """The 1-based line of a character position in `text`."""
    return text.count("\n", 0, position) + 1


def _json_keys(text: str) -> Iterator[tuple[int, int, str, int]]:
    """Each key of valid JSON `text`: (its object's serial number, its depth, key, position)."""
    stack: list[int | None] = []  # per open container: an object's serial, None for an array
    serial = 0
    pending: tuple[int, str] | None = None
    for token in _TOKEN.finditer(text):
        word = token.group()
        if word == "{":
            serial += 1
            stack.append(serial)
        elif word == "[":
            stack.append(None)
        elif word in ("}", "]"):
            stack.pop()
        elif word == ":" and pending is not None and stack and stack[-1] is not None:
            yield stack[-1], len(stack), json.loads(pending[1]), pending[0]
        pending = (token.start(), word) if word.startswith('"') else None


def _json_repeats(text: str) -> Iterator[tuple[str, int, int]]:
    """Each key of valid JSON `text` written again in its object: (key, position, first)."""
    seen: dict[tuple[int, str], int] = {}
    for serial, _, key, at in _json_keys(text):
        first = seen.setdefault((serial, key), at)
        if first != at:
            yield key, at, first


def top_level_line(text: str, key: str, *, toml: bool) -> int | None:
    """The line where a top-level `key` of a valid JSON or TOML document is written, or None."""
    if not toml:
        tops = (at for _, depth, name, at in _json_keys(text) if depth == 1 and name == key)
        at = next(tops, None)
        return line_of(text, at) if at is not None else None
    name = rf"(?:{re.escape(key)}|{re.escape(json.dumps(key))}|'{re.escape(key)}')"
    header = re.search(r"(?m)^[ \t]*\[", text)
    top = re.search(rf"(?m)^[ \t]*{name}[ \t]*[.=]", text[: header.start() if header else None])
    found = top or re.search(rf"(?m)^[ \t]*\[\[?[ \t]*{name}[ \t]*[.\]]", text)
    return line_of(text, found.start()) if found is not None else None
