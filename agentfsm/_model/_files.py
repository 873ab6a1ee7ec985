"""Open a file a user named (a trace, a trajectory, a policy) for reading, with a bound.

Every reader of a user-given file opens it here, so one rule holds for all of
them: only a regular file is read, and never past the size it had when it was
opened. `/dev/zero`, a FIFO, a socket or a terminal (or a link to one) is
refused before a byte is read; the open itself never blocks (`O_NONBLOCK`: a
FIFO with no writer would otherwise wait forever), and the check is made on
the opened descriptor, so the file cannot be swapped between check and read.
A `/proc` file passes as regular but reports a size of 0, so it reads as empty
instead of endlessly (`/proc/self/pagemap` would yield gigabytes).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable
from typing import Any

from agentfsm.exceptions import AgentFSMError

__all__ = ["open_regular"]

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
