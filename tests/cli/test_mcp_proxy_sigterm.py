"""SIGTERM to the stdio proxy: the call in flight is answered, the trace ends, the exit is 0.

The host is this test, speaking JSON-RPC on the proxy's stdin and stdout; the server is the
tests' MCP server, whose `hang` tool never answers.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cli.test_mcp_proxy import ENV, Proxy, replayed


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], ident: int, seconds: float = 30) -> dict[str, Any]:
    """The proxy's answer to request `ident` (other messages skipped), within `seconds`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if not ready:
            continue
        line = proc.stdout.readline()
        assert line, "the proxy closed its stdout without answering"
        message = json.loads(line)
        if message.get("id") == ident:
            return dict(message)
    raise AssertionError(f"no answer to request {ident} within {seconds} s")


def test_sigterm_answers_the_call_in_flight_and_ends_the_trace(tmp_path: Path) -> None:
    proxy = Proxy(tmp_path, {})
    with (
        proxy.stderr.open("w", encoding="utf-8") as errlog,
        subprocess.Popen(
            [sys.executable, *proxy.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=ENV,
        ) as proc,
    ):
        try:
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            }
            _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            assert "result" in _answer(proc, 1)
            _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert "result" in _answer(proc, 2)
            call = {"name": "hang", "arguments": {}}
            _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            deadline = time.monotonic() + 30
            while proxy.calls() != ["hang:{}"]:  # the call reached the server, which hangs
                assert time.monotonic() < deadline, "the call never reached the server"
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            answer = _answer(proc, 3)
            status = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    result = answer["result"]
    assert result["isError"] is True
    assert "received SIGTERM" in result["content"][0]["text"]
    assert status == 0
    events = [json.loads(line) for line in proxy.trace.read_text(encoding="utf-8").splitlines()]
    last = [e for e in events if e["event"] == "decision"][-1]
    assert last["exit_reason"] == "interrupted"
    assert "received SIGTERM" in last["reason"]
    record = replayed(proxy.trace)
    assert record["exit_reason"] == record["recorded_end"] == "interrupted"
