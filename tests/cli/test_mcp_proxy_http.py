"""`agentfsm mcp-proxy` over streamable HTTP, end to end with real processes.

- `--http`: the proxy serves hosts by URL; a host is the `mcp` package's streamable HTTP
  client with its ClientSession, and the server is the stdio test server, one child each
  session.
- `--url`: a stdio host (ClientSession over the proxy's stdin/stdout) and a real
  streamable HTTP MCP server in a subprocess on 127.0.0.1.

Every server logs each call it gets, so what reached it is read from its own log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, cast

import mcp.types as mt
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentfsm.exceptions import AgentFSMError
from tests.cli.test_mcp_proxy import (
    ENV,
    INIT,
    SERVER,
    Elicit,
    Proxy,
    answering,
    last_decision,
    proxy_exits,
    replayed,
    run,
    text,
)
from tests.processes import free_port, wait_until_listening


class HttpProxy(Proxy):
    """A proxy process serving hosts over streamable HTTP, its server the stdio test server;
    the files, `calls` and `call` are the stdio `Proxy`'s."""

    def __init__(
        self, tmp_path: Path, policy: dict[str, Any], server: list[str] | None = None
    ) -> None:
        super().__init__(tmp_path, policy)
        self.tmp_path = tmp_path
        self.url = ""
        self.args = [
            *(sys.executable, "-m", "agentfsm", "mcp-proxy", "--policy", str(self.policy)),
            *("--http", "0", "--trace", str(self.trace)),
            *(server or ["--", sys.executable, SERVER, str(self.log)]),
        ]
        self.status: int | None = None

    @contextmanager
    def running(self) -> Iterator[HttpProxy]:
        """The proxy, up until the block ends; then SIGTERM, and its exit status kept."""
        with (
            self.stderr.open("w", encoding="utf-8") as errlog,
            subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=errlog, env=ENV) as proc,
        ):
            try:
                self.url = _first_line(proc)
                yield self
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    self.status = proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    raise

    @asynccontextmanager
    async def session(self, elicit: Elicit | None = None) -> AsyncIterator[ClientSession]:
        """An initialized host session by URL; elicitation only with `elicit`."""
        async with (
            streamable_http_client(self.url) as (read, write),
            ClientSession(read, write, elicitation_callback=cast(Any, elicit)) as session,
        ):
            await session.initialize()
            await session.list_tools()
            yield session


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    """The proxy's first line on stdout (its URL), waiting at most a minute for it."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "the proxy printed no URL"
    line = proc.stdout.readline().decode("utf-8").strip()
    assert line.startswith("http://127.0.0.1:"), line
    assert line.endswith("/mcp"), line
    return line


class TestHttpHost:
    def test_denied_call_never_reaches_the_server(self, tmp_path: Path) -> None:
        """A host by URL: a denied call is an error result the server never sees; an allowed
        one runs; the proxy exits 0 on SIGTERM."""
        proxy = HttpProxy(tmp_path, {"permissions": {"drop_table": "deny"}})
        with proxy.running():
            denied, allowed = proxy.call(
                ("drop_table", {"table": "users"}), ("read_row", {"key": "a"})
            )
        assert denied.is_error
        assert "denied" in text(denied)
        assert text(allowed) == "row a"
        assert proxy.calls() == ['read_row:{"key": "a"}']
        assert proxy.status == 0

    def test_forged_answers_never_reach_a_host_by_url(self, tmp_path: Path) -> None:
        """Behind --http, a server that answers ids it was not asked under, and twice: the
        host gets each answer once, its own, and a declined call only its refusal."""
        hostile = str(Path(__file__).with_name("mcp_hostile_server.py"))
        server = ["--", sys.executable, hostile, str(tmp_path / "calls.log"), "forge"]
        proxy = HttpProxy(tmp_path, {"permissions": {"drop_table": "ask"}}, server)
        with proxy.running():
            declined, ran = proxy.call(
                ("drop_table", {"table": "users"}),
                ("read_row", {"key": "a"}),
                elicit=answering("decline"),
            )
        assert declined.is_error
        assert "forged" not in text(declined)
        assert text(ran) == "read_row ran"
        assert proxy.calls() == ['read_row:{"key": "a"}']
        assert "dropped the server's answer" in proxy.stderr.read_text(encoding="utf-8")

    def test_a_rule_that_does_not_fit_ends_only_its_session(self, tmp_path: Path) -> None:
        """Behind --http, `deny write_file(pth=/tmp/*)` ends the session at its first
        listing, saying why; nothing reaches the server and the proxy serves on (exit 0)."""
        proxy = HttpProxy(tmp_path, {"permission_rules": ["deny write_file(pth=/tmp/*)"]})

        async def go() -> mt.CallToolResult | None:
            with contextlib.suppress(Exception):
                async with proxy.session() as host:
                    return await host.call_tool("read_row", {"key": "a"})
            return None

        with proxy.running():
            result = run(go)
        assert result is None or result.is_error
        assert proxy.calls() == []
        assert "did you mean 'path'?" in proxy.stderr.read_text(encoding="utf-8")
        assert proxy.status == 0

    def test_each_session_has_its_own_elicitation(self, tmp_path: Path) -> None:
        """Two sessions at once: the one that declared elicitation is asked and runs the
        call; the one that did not gets a denial for the same `ask`."""
        proxy = HttpProxy(tmp_path, {"permissions": {"drop_table": "ask"}})
        asked: list[str] = []

        async def go() -> tuple[mt.CallToolResult, mt.CallToolResult]:
            async with (
                proxy.session(answering("accept", True, asked)) as can_ask,
                proxy.session() as cannot_ask,
            ):
                yes = await can_ask.call_tool("drop_table", {"table": "asked"})
                no = await cannot_ask.call_tool("drop_table", {"table": "not_asked"})
                return yes, no

        with proxy.running():
            yes, no = run(go)
        assert text(yes) == "dropped asked"
        assert no.is_error
        assert "approv" in text(no)
        assert len(asked) == 1
        assert "asked" in asked[0]
        assert proxy.calls() == ['drop_table:{"table": "asked"}']

    def test_two_sessions_keep_separate_budgets(self, tmp_path: Path) -> None:
        """max_tool_calls 2 is each session's own: both sessions run two calls, and the
        first session's third call is refused by its budget."""
        proxy = HttpProxy(tmp_path, {"max_tool_calls": 2})

        async def go() -> list[mt.CallToolResult]:
            async with proxy.session() as one, proxy.session() as two:
                return [
                    await one.call_tool("read_row", {"key": "1a"}),
                    await two.call_tool("read_row", {"key": "2a"}),
                    await one.call_tool("read_row", {"key": "1b"}),
                    await two.call_tool("read_row", {"key": "2b"}),
                    await one.call_tool("read_row", {"key": "1c"}),
                ]

        with proxy.running():
            results = run(go)
        assert [r.is_error for r in results] == [False, False, False, False, True]
        assert "max_tool_calls" in text(results[4])
        assert sorted(proxy.calls()) == sorted(
            f'read_row:{{"key": "{k}"}}' for k in ("1a", "2a", "1b", "2b")
        )

    def test_server_crash_ends_only_its_session(self, tmp_path: Path) -> None:
        """A session's server child that exits mid-call: that call gets an error result and
        the session is gone (its next request fails); a new session gets a new server."""
        proxy = HttpProxy(tmp_path, {})

        async def crashed() -> tuple[mt.CallToolResult, BaseException | None]:
            failed: BaseException | None = None
            async with proxy.session() as host:
                result = await host.call_tool("crash", {})
                try:
                    await host.call_tool("read_row", {"key": "lost"})
                except Exception as exc:
                    failed = exc
            return result, failed

        with proxy.running():
            result, failed = run(crashed)
            (after,) = proxy.call(("read_row", {"key": "new"}))
        assert result.is_error
        assert "exited (status 3)" in text(result)
        assert failed is not None
        assert text(after) == "row new"
        assert proxy.calls() == ["crash:{}", 'read_row:{"key": "new"}']

    def test_request_from_elsewhere_starts_nothing(self, tmp_path: Path) -> None:
        """A request whose Host is not the proxy's (DNS rebinding) is refused before a
        session, its server or its trace exists."""
        import httpx2

        proxy = HttpProxy(tmp_path, {})
        with proxy.running():
            port = proxy.url.rsplit(":", 1)[1].removesuffix("/mcp")
            headers = {
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
                "host": f"attacker.example:{port}",
            }
            with httpx2.Client(timeout=30) as client:
                refused = client.post(proxy.url, json=INIT, headers=headers)
        assert 400 <= refused.status_code < 500
        assert list(tmp_path.glob("trace.*.jsonl")) == []

    def test_each_session_writes_its_own_trace_that_ends(self, tmp_path: Path) -> None:
        """A session's trace is a file of its own, named by the session id; a session the
        host ended replays with `agentfsm replay` to a completed end."""
        proxy = HttpProxy(tmp_path, {})
        with proxy.running():
            proxy.call(("read_row", {"key": "a"}), ("bash", {"command": "ls"}))
            deadline = time.monotonic() + 30
            while not _finished_traces(tmp_path) and time.monotonic() < deadline:
                time.sleep(0.1)
        (trace,) = tmp_path.glob("trace.*.jsonl")
        record = replayed(trace)
        assert record["steps"] == 3  # two calls, then the host ending the session
        assert record["recorded_end"] == "completed"
        assert record["exit_reason"] == "completed"
        assert proxy.status == 0

    def test_session_open_at_shutdown_ends_interrupted(self, tmp_path: Path) -> None:
        """A session the host never ended is ended by the proxy's exit: its trace's last
        decision says the proxy was stopped, and by what."""
        proxy = HttpProxy(tmp_path, {})
        with proxy.running():
            _open_session(proxy.url)
        assert proxy.status == 0
        (trace,) = tmp_path.glob("trace.*.jsonl")
        last = last_decision(trace)
        assert last["exit_reason"] == "interrupted"
        assert "the proxy received SIGTERM and stopped" in last["reason"]
        record = replayed(trace)  # the proxy's stop is replayed: no divergence
        assert record["differs"] is False, record
        assert record["exit_reason"] == record["recorded_end"] == "interrupted"


def _finished_traces(tmp_path: Path) -> bool:
    """Whether every session trace so far has its end decision."""
    traces = list(tmp_path.glob("trace.*.jsonl"))
    return bool(traces) and all('"exit_reason": "completed"' in t.read_text() for t in traces)


RAW_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
"""The headers of a raw streamable HTTP request (no MCP client)."""


def _open_session(url: str) -> str:
    """Open a session with a raw `initialize` and one call, and leave it open; its id."""
    import httpx2

    headers = RAW_HEADERS
    with httpx2.Client(timeout=30) as client:
        opened = client.post(url, json=INIT, headers=headers)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "read_row", "arguments": {"key": "a"}},
        }
        ran = client.post(url, json=call, headers={**headers, "mcp-session-id": session})
        assert "row a" in ran.text
    return str(session)


class TestIdleSessions:
    def proxy(self, tmp_path: Path, idle: str) -> HttpProxy:
        proxy = HttpProxy(tmp_path, {})
        at = proxy.args.index("--")
        proxy.args[at:at] = ["--session-idle", idle]
        return proxy

    def test_a_session_whose_host_went_away_expires(self, tmp_path: Path) -> None:
        """A host that opened a session and vanished (no request open, none for the idle
        time): the proxy ends the session, its trace ends interrupted and replays so, and
        the session's id is unknown from then on (404: a host would open a new one)."""
        import httpx2

        proxy = self.proxy(tmp_path, "1")
        with proxy.running():
            session = _open_session(proxy.url)
            (trace,) = tmp_path.glob("trace.*.jsonl")
            deadline = time.monotonic() + 30
            while '"exit_reason": "interrupted"' not in trace.read_text(encoding="utf-8"):
                assert time.monotonic() < deadline, "the idle session did not end"
                time.sleep(0.2)
            headers = {
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
                "mcp-session-id": session,
            }
            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            gone = httpx2.post(proxy.url, json=ping, headers=headers, timeout=30)
        assert gone.status_code == 404
        last = last_decision(trace)
        assert "idle for 1 s" in last["reason"]
        record = replayed(trace)
        assert record["differs"] is False
        assert "was idle for 1 s: ended" in proxy.stderr.read_text(encoding="utf-8")

    @pytest.mark.parametrize("idle", ["-1", "soon", "inf"])
    def test_a_bad_idle_time_exits_2(self, tmp_path: Path, idle: str) -> None:
        done = proxy_exits(tmp_path, "--http", "0", "--session-idle", idle, "--", "true")
        assert done.returncode == 2
        assert "--session-idle" in done.stderr
        assert done.stdout == ""

    def test_a_connected_host_keeps_its_session(self, tmp_path: Path) -> None:
        """A host that is there keeps its event stream open: its session outlives the idle
        time, and its next call runs."""
        proxy = self.proxy(tmp_path, "1")

        async def go() -> list[mt.CallToolResult]:
            async with proxy.session() as host:
                first = await host.call_tool("read_row", {"key": "a"})
                await asyncio.sleep(3)
                return [first, await host.call_tool("read_row", {"key": "b"})]

        with proxy.running():
            first, second = run(go)
        assert text(first) == "row a"
        assert text(second) == "row b"
        assert proxy.calls() == ['read_row:{"key": "a"}', 'read_row:{"key": "b"}']


class TestMaxSessions:
    def test_past_the_bound_a_new_session_is_refused_and_starts_nothing(
        self, tmp_path: Path
    ) -> None:
        """Two hosts open sessions and vanish; under --max-sessions 2 a third is refused with
        503 naming the bound (no third server child, no third trace); once one ends (DELETE),
        a new one opens."""
        import httpx2

        proxy = HttpProxy(tmp_path, {})
        at = proxy.args.index("--")
        proxy.args[at:at] = ["--max-sessions", "2"]
        headers = RAW_HEADERS
        with proxy.running():
            first, _ = _open_session(proxy.url), _open_session(proxy.url)
            refused = httpx2.post(proxy.url, json=INIT, headers=headers, timeout=30)
            assert len(list(tmp_path.glob("trace.*.jsonl"))) == 2
            ended = httpx2.delete(
                proxy.url, headers={**headers, "mcp-session-id": first}, timeout=30
            )
            deadline = time.monotonic() + 30
            while True:
                again = httpx2.post(proxy.url, json=INIT, headers=headers, timeout=30)
                if again.status_code != 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        assert refused.status_code == 503
        assert "at most 2 sessions at once (--max-sessions)" in refused.json()["error"]["message"]
        assert ended.status_code < 300
        assert again.status_code == 200
        assert "a new session was refused: 2 are open" in proxy.stderr.read_text(encoding="utf-8")

    @pytest.mark.parametrize("bad", ["0", "-3", "many"])
    def test_a_bad_bound_exits_2(self, tmp_path: Path, bad: str) -> None:
        done = proxy_exits(tmp_path, "--http", "0", "--max-sessions", bad, "--", "true")
        assert done.returncode == 2
        assert "--max-sessions" in done.stderr

    def test_without_http_it_exits_2(self, tmp_path: Path) -> None:
        done = proxy_exits(tmp_path, "--max-sessions", "3", "--", "true")
        assert done.returncode == 2
        assert "--max-sessions is for the sessions of --http" in done.stderr


def _http_server(
    tmp_path: Path, token: str | None = None
) -> Generator[tuple[str, Path, subprocess.Popen[bytes]], None, None]:
    """A streamable HTTP MCP server on 127.0.0.1 (asking for `token`, when given): its URL,
    its call log, its process."""
    log = tmp_path / "http-calls.log"
    port = free_port()
    with subprocess.Popen(
        [sys.executable, SERVER, str(log), str(port), *([token] if token else [])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    ) as process:
        try:
            wait_until_listening(port, process, "HTTP MCP server")
            yield f"http://127.0.0.1:{port}/mcp", log, process
        finally:
            process.kill()


class TestHttpServer:
    @pytest.fixture
    def server(self, tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
        """A streamable HTTP MCP server on 127.0.0.1: its URL, its call log, its process."""
        yield from _http_server(tmp_path)

    @pytest.fixture
    def server_with_token(
        self, tmp_path: Path
    ) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
        """The same server, refusing requests without `Authorization: Bearer s3cret`."""
        yield from _http_server(tmp_path, "s3cret")

    def _proxy(self, tmp_path: Path, url: str, policy: dict[str, Any], *extra: str) -> Proxy:
        proxy = Proxy(tmp_path, policy)
        proxy.args = [
            *("-m", "agentfsm", "mcp-proxy", "--policy", str(proxy.policy)),
            *("--trace", str(proxy.trace), "--url", url, *extra),
        ]
        return proxy

    def test_headers_reach_a_server_that_asks_for_a_token(
        self, tmp_path: Path, server_with_token: tuple[str, Path, subprocess.Popen[bytes]]
    ) -> None:
        """--header is sent with every request to the --url server: a server that refuses
        requests without its bearer token runs the allowed call."""
        url, log, _ = server_with_token
        proxy = self._proxy(tmp_path, url, {}, "--header", "Authorization: Bearer s3cret")
        (allowed,) = proxy.call(("read_row", {"key": "a"}))
        assert not allowed.is_error, text(allowed)
        assert text(allowed) == "row a"
        assert log.read_text(encoding="utf-8").splitlines() == ['read_row:{"key": "a"}']

    def test_stdio_host_to_http_server(
        self, tmp_path: Path, server: tuple[str, Path, subprocess.Popen[bytes]]
    ) -> None:
        """Through --url: a denied call and an unapproved `ask` never reach the server; an
        allowed call does, and its answer comes back."""
        url, log, _ = server
        proxy = self._proxy(tmp_path, url, {"permissions": {"bash": "deny"}})
        denied, unasked, allowed = proxy.call(
            ("bash", {"command": "ls"}),
            ("drop_table", {"table": "users"}),
            ("read_row", {"key": "a"}),
        )
        assert denied.is_error
        assert "denied" in text(denied)
        assert unasked.is_error
        assert "approv" in text(unasked)
        assert not allowed.is_error
        assert text(allowed) == "row a"
        assert log.read_text(encoding="utf-8").splitlines() == ['read_row:{"key": "a"}']
        record = replayed(proxy.trace)
        assert record["recorded_end"] == "completed"

    def test_elicitation_through_to_http_server(
        self, tmp_path: Path, server: tuple[str, Path, subprocess.Popen[bytes]]
    ) -> None:
        """An `ask` the host's user approves runs at the HTTP server."""
        url, log, _ = server
        proxy = self._proxy(tmp_path, url, {})
        (dropped,) = proxy.call(
            ("drop_table", {"table": "users"}), elicit=answering("accept", True)
        )
        assert text(dropped) == "dropped users"
        assert log.read_text(encoding="utf-8").splitlines() == ['drop_table:{"table": "users"}']

    def test_http_host_to_http_server(
        self, tmp_path: Path, server: tuple[str, Path, subprocess.Popen[bytes]]
    ) -> None:
        """Streamable HTTP on both sides: a host by URL, a server by URL; the policy holds."""
        url, log, _ = server
        proxy = HttpProxy(tmp_path, {"permissions": {"bash": "deny"}}, ["--url", url])
        with proxy.running():
            denied, allowed = proxy.call(("bash", {"command": "ls"}), ("read_row", {"key": "a"}))
        assert denied.is_error
        assert text(allowed) == "row a"
        assert log.read_text(encoding="utf-8").splitlines() == ['read_row:{"key": "a"}']
        assert proxy.status == 0

    def test_http_server_gone_mid_session(
        self, tmp_path: Path, server: tuple[str, Path, subprocess.Popen[bytes]]
    ) -> None:
        """A server that goes away: the next call is an error result saying the connection
        failed, and the session's trace ends interrupted with that reason."""
        url, log, process = server
        proxy = self._proxy(tmp_path, url, {})

        async def go() -> tuple[mt.CallToolResult, mt.CallToolResult]:
            async with proxy.session() as host:
                before = await host.call_tool("read_row", {"key": "a"})
                process.kill()
                process.wait()
                return before, await host.call_tool("read_row", {"key": "b"})

        before, after = run(go)
        assert text(before) == "row a"
        assert after.is_error
        assert "the connection to the MCP server failed" in text(after)
        assert log.read_text(encoding="utf-8").splitlines() == ['read_row:{"key": "a"}']
        last = last_decision(proxy.trace)
        assert last["exit_reason"] == "interrupted"


class TestArguments:
    @pytest.mark.parametrize(
        ("args", "said"),
        [
            (["--url", "http://127.0.0.1:9/mcp", "--", "true"], "not both"),
            (["--url", "ftp://example.com/mcp"], "http:// or https://"),
            (["--header", "X-Key: 1", "--", "true"], "give --url too"),
            (["--session-idle", "5", "--", "true"], "give --http too"),
            (["--url", "http://127.0.0.1:9/mcp", "--header", "no colon"], "'NAME: VALUE'"),
            (
                ["--url", "http://127.0.0.1:9/mcp", "--header", "X-Key: a${NOT_SET_HERE}"],
                "NOT_SET_HERE is not set",
            ),
            (["--url", "http://127.0.0.1:{free}/mcp"], "cannot reach"),
            (["--http", "no-port", "--", "true"], "--http"),
            (["--http", "127.0.0.1:99999", "--", "true"], "--http"),
            (["--http", "[::1]:x", "--", "true"], "--http"),
            (["--http", "0", "--", "no-such-program-here"], "cannot start the server"),
        ],
    )
    def test_bad_http_arguments_exit_2(self, tmp_path: Path, args: list[str], said: str) -> None:
        """Both a URL and a command, a URL that is not http(s) or not listening, a --http
        that is not [HOST:]PORT: exit 2, a message naming it, nothing on stdout."""
        free = free_port()
        done = proxy_exits(tmp_path, *(a.replace("{free}", str(free)) for a in args))
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("agentfsm mcp-proxy: ")
        assert said in done.stderr
        assert done.stdout == ""

    def test_port_in_use_exits_2(self, tmp_path: Path) -> None:
        """--http on a port something else holds: exit 2 saying it cannot listen."""
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            done = proxy_exits(tmp_path, "--http", f"127.0.0.1:{port}", "--", "true")
        assert done.returncode == 2
        assert "cannot listen" in done.stderr
        assert done.stdout == ""


class TestTokenRefused:
    def test_a_server_that_refuses_the_proxy_is_named_on_stderr(self, tmp_path: Path) -> None:
        """Without the header the server asks for, the host's initialize gets an error and
        the proxy's stderr says which status the server answered, and what to give."""
        url, log, _ = next(servers := _http_server(tmp_path, "s3cret"))
        try:
            (tmp_path / "policy.json").write_text("{}", encoding="utf-8")
            command = [sys.executable, "-m", "agentfsm", "mcp-proxy", "--policy", "policy.json"]
            with subprocess.Popen(
                [*command, "--url", url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=ENV,
                cwd=tmp_path,
            ) as proxy:
                assert proxy.stdin is not None
                assert proxy.stdout is not None
                proxy.stdin.write(json.dumps(INIT) + "\n")
                proxy.stdin.flush()
                ready, _, _ = select.select([proxy.stdout], [], [], 60)
                assert ready, "no answer to initialize"
                answer = json.loads(proxy.stdout.readline())
                proxy.stdin.close()
                proxy.wait(timeout=60)
                assert proxy.stderr is not None
                stderr = proxy.stderr.read()
            assert "error" in answer
            assert "answered 401 Unauthorized: give what it asks for with --header" in stderr
            assert log.read_text(encoding="utf-8").startswith("refused: no token")
        finally:
            servers.close()


class TestHeaders:
    def test_a_variable_in_a_value_is_read_from_the_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from agentfsm._cli.mcp_proxy import _headers

        monkeypatch.setenv("MCP_TOKEN", "s3cret")
        given = ["Authorization: Bearer ${MCP_TOKEN}", "X-Team:  a b "]
        assert _headers(given) == {"Authorization": "Bearer s3cret", "X-Team": "a b"}

    @pytest.mark.parametrize("header", ["Bad Name: 1", ": 1", "X-Key: ${LINE_BREAK}", "X-Key 1"])
    def test_a_header_that_cannot_be_sent_is_refused(
        self, monkeypatch: pytest.MonkeyPatch, header: str
    ) -> None:
        from agentfsm._cli.mcp_proxy import _headers

        monkeypatch.setenv("LINE_BREAK", "a\r\nX-Injected: 1")
        with pytest.raises(AgentFSMError, match="--header"):
            _headers([header])
