"""This interpreter run in a child process, for the tests that need a fresh one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

__all__ = ["free_port", "python", "wait_until_listening"]


def python(
    *args: str | os.PathLike[str], timeout: float = 300, **given: Any
) -> subprocess.CompletedProcess[str]:
    """`python args...` run to its end (or `timeout` seconds), its output captured as text and
    its exit status left to the caller; `given` are further `subprocess.run` arguments (cwd,
    env, input, stdin)."""
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        **given,
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free when asked: the test binds it
    soon after, and a clash fails loudly)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_listening(
    port: int, process: subprocess.Popen[Any], what: str, timeout: float = 60
) -> None:
    """Return once something accepts connections on 127.0.0.1:`port`; fail if `process`
    (the server, `what`) exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert process.poll() is None, f"the {what} exited"
            assert time.monotonic() < deadline, f"the {what} did not start"
            time.sleep(0.1)
