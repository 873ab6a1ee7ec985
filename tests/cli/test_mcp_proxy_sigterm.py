"""SIGTERM to the proxy: the calls in flight are answered, the traces end, the exit is 0.

On stdio the host is this test, speaking JSON-RPC on the proxy's stdin and stdout; over
--http it is raw HTTP requests on several sessions. The server is the tests' MCP server,
whose `hang` tool never answers and `slow` answers late.
"""

from __future__ import annotations

import contextlib
import json
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.cli.test_mcp_proxy import ENV, Proxy, last_decision, python, replayed
from tests.cli.test_mcp_proxy_http import RAW_HEADERS, HttpProxy, _open_session


def _start(proc: subprocess.Popen[bytes]) -> None:
    """Initialize the session as a host that cannot elicit, and say initialized."""
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert "result" in _answer(proc, 1)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})


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
            _start(proc)
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


def _events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: its one JSON body, or its event stream's data."""
    if body.lstrip().startswith("{"):
        return [json.loads(body)]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


class _Call(threading.Thread):
    """One `tools/call` POSTed on a session, its whole response read (stream and all)."""

    def __init__(self, url: str, session: str, ident: int, name: str, args: dict[str, Any]):
        super().__init__(daemon=True)
        self.url, self.session, self.call_id = url, session, ident
        self.message = {
            "jsonrpc": "2.0",
            "id": ident,
            "method": "tools/call",
            "params": {"name": name, "arguments": args},
        }
        self.body: str | None = None
        self.start()

    def run(self) -> None:
        import httpx2

        headers = {**RAW_HEADERS, "mcp-session-id": self.session}
        with httpx2.Client(timeout=120) as client:
            self.body = client.post(self.url, json=self.message, headers=headers).text

    def result(self) -> dict[str, Any]:
        """The call's result: the one message answering it (an empty stream fails here)."""
        self.join(90)
        assert self.body is not None, "the call's request never finished"
        answers = [m for m in _events(self.body) if m.get("id") == self.call_id]
        assert answers, f"the call's response holds no answer: {self.body!r:.300}"
        assert "result" in answers[0], answers[0]
        return dict(answers[0]["result"])


SLOW = {"seconds": 3}
"""A slow call's arguments: it ends after the signal, well within the 5 s grace period."""


def _children(log: Path) -> list[int]:
    """The processes still running the test server that writes `log` (Linux's /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and str(log).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def _sigterm_run(tmp_path: Path) -> None:
    """Four HTTP sessions, each with a call at its server (two that hang, two slow ones with
    a call queued behind), then SIGTERM: every call answered, every trace ended, no child."""
    proxy = HttpProxy(tmp_path, {})
    calls: list[_Call] = []
    with proxy.running():
        sessions = [_open_session(proxy.url) for _ in range(4)]  # one read_row each
        # The slow calls go last, so they are still running when the signal comes.
        for n, (name, args) in enumerate([("hang", {}), ("hang", {}), *[("slow", SLOW)] * 2]):
            calls.append(_Call(proxy.url, sessions[n], 10, name, args))
            deadline = time.monotonic() + 30
            while len(proxy.calls()) < 5 + n:  # the call reached the server
                assert time.monotonic() < deadline, "the call never reached the server"
                time.sleep(0.05)
        queued = [
            _Call(proxy.url, session, 11, "read_row", {"key": "late"}) for session in sessions[2:]
        ]
        time.sleep(0.5)  # the queued calls reach the proxy, behind the slow ones
    hangs, slow = calls[:2], calls[2:]
    assert proxy.status == 0
    for call in hangs + queued:
        result = call.result()
        assert result["isError"] is True
        assert "received SIGTERM" in result["content"][0]["text"]
    for call in slow:  # finished within the grace period: its own result
        assert call.result()["content"][0]["text"] == f"slept {SLOW['seconds']}"
    assert 'read_row:{"key": "late"}' not in proxy.calls()  # nothing new ran once stopping
    traces = sorted(tmp_path.glob("trace.*.jsonl"))
    assert len(traces) == 4
    for trace in traces:
        last = last_decision(trace)
        assert last["exit_reason"] == "interrupted", trace
        assert "received SIGTERM" in last["reason"]
    record = replayed(traces[0])
    assert record["exit_reason"] == record["recorded_end"] == "interrupted"
    assert _children(proxy.log) == []


def test_sigterm_to_http_answers_every_call_and_ends_every_trace(tmp_path: Path) -> None:
    """Three times over, since the sessions end concurrently: no run may leave an empty
    stream, an unended trace or a server child behind."""
    for n in range(3):
        (tmp_path / str(n)).mkdir()
        _sigterm_run(tmp_path / str(n))


def test_the_trace_of_a_killed_proxy_does_not_replay_as_a_good_run(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to end the trace: `agentfsm replay` then exits 2 naming the
    file and the line of the last event, where it used to exit 0 with no exit reason."""
    proxy = Proxy(tmp_path, {})
    with subprocess.Popen(
        [sys.executable, *proxy.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    ) as proc:
        try:
            _start(proc)
            call = {"name": "read_row", "arguments": {"key": "a"}}
            _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            assert "result" in _answer(proc, 2)
        finally:
            proc.kill()
            proc.wait()
    last = len(proxy.trace.read_text(encoding="utf-8").splitlines())
    done = python("-m", "agentfsm", "replay", proxy.trace, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"trace.jsonl:{last}: run " in done.stderr
    assert "never ended" in done.stderr
