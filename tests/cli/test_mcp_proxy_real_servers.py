"""`agentfsm mcp-proxy` in front of real MCP servers that no one here wrote.

- the filesystem server from npm (`@modelcontextprotocol/server-filesystem`, Node.js), serving
  a project folder made in tmp;
- the git server from PyPI (`mcp-server-git`, Python, in its own venv), serving a git
  repository made in tmp.

`make mcp-servers` installs both, at the versions pinned in .ci/mcp-servers, into
.cache/mcp-servers (`make test`, and so CI, runs it first). Without them these tests fail,
saying so: they are the proxy's check against servers as people run them.

The host is the `mcp` package's ClientSession over the proxy's stdin and stdout (one case over
`--http`); what happened is read from the disk, the git repository and the proxy's trace, never
from the proxy's own say. A call "in flight" is one the server is blocked in: reading a FIFO
(the filesystem server's read_text_file of a named pipe; the git server's git_commit, whose
pre-commit hook reads one), opened by the test's writer, so the test knows the call reached
the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest

from tests.cli.test_mcp_proxy import (
    ROOT,
    Proxy,
    answering,
    last_decision,
    replayed,
    run,
    text,
)
from tests.cli.test_mcp_proxy_http import HttpProxy

SERVERS = Path(ROOT) / ".cache" / "mcp-servers"
FILESYSTEM = SERVERS / "node_modules" / ".bin" / "mcp-server-filesystem"
GIT = SERVERS / "git" / "bin" / "mcp-server-git"


def installed(server: Path) -> str:
    """The server's executable; the test fails, naming the make target, when it is missing."""
    if not os.access(server, os.X_OK):
        pytest.fail(
            f"{server} is not installed: `make mcp-servers` installs the real MCP servers "
            "these tests start (npm and Python needed; `make test` runs it)",
            pytrace=False,
        )
    return str(server)


class Fifo:
    """A named pipe a server call blocks on, and the test's end of it.

    A thread opens it for writing; that open returns only once the server (or its hook) has
    opened it for reading, so `wait` proves the call is in flight at the server. `release`
    writes a line and closes: the server's read ends and the call completes.
    """

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.fd: int | None = None
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._open, daemon=True)
        self.thread.start()

    def _open(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY)
        self.opened.set()

    def wait(self, seconds: float = 30) -> None:
        assert self.opened.wait(seconds), "the call never reached the server (FIFO not opened)"

    def release(self, line: str = "released\n") -> None:
        self.wait()
        assert self.fd is not None
        with contextlib.suppress(BrokenPipeError):
            os.write(self.fd, line.encode())
        self.close()

    def close(self) -> None:
        """Close the test's end; a writer still waiting for a reader is let go."""
        if not self.opened.is_set():
            reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(5)
            os.close(reader)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


@dataclass
class Server:
    """One real server set up in tmp: its command, and the calls the tests make of it."""

    name: str
    command: list[str]
    read: tuple[str, dict[str, Any]]
    """A call the server marks read-only, and text its result holds."""
    read_says: str
    change: tuple[str, dict[str, Any]]
    """A call the server marks destructive (so the proxy asks by default)."""
    changed: Callable[[], bool]
    """Whether `change` ran, read from the disk."""
    blocking: tuple[str, dict[str, Any]]
    """A call the server blocks in, reading `fifo`; released, it ends well."""
    fifo: Fifo
    root: Path


def filesystem(tmp_path: Path) -> Server:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("build/ can go\n", encoding="utf-8")
    written = project / "new.txt"
    fifo = Fifo(project / "pipe")
    return Server(
        name="filesystem",
        command=[installed(FILESYSTEM), str(project)],
        read=("read_text_file", {"path": str(project / "notes.txt")}),
        read_says="build/ can go",
        change=("write_file", {"path": str(written), "content": "written\n"}),
        changed=written.exists,
        blocking=("read_text_file", {"path": str(fifo.path)}),
        fifo=fifo,
        root=project,
    )


def git(tmp_path: Path) -> Server:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "test@example.com")
    _git(repo, "config", "user.name", "Test")
    (repo / "README").write_text("first\n", encoding="utf-8")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "first")
    (repo / "staged.txt").write_text("staged\n", encoding="utf-8")
    _git(repo, "add", "staged.txt")
    fifo = Fifo(tmp_path / "pipe")
    # GitPython runs the pre-commit hook on index.commit: git_commit blocks until released.
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nread line < '{fifo.path}'\n", encoding="utf-8")
    hook.chmod(0o755)
    return Server(
        name="git",
        command=[installed(GIT), "--repository", str(repo)],
        read=("git_status", {"repo_path": str(repo)}),
        read_says="staged.txt",
        # git_reset unstages everything: the server marks it destructive
        change=("git_reset", {"repo_path": str(repo)}),
        changed=lambda: _git(repo, "diff", "--cached", "--name-only").strip() == "",
        blocking=("git_commit", {"repo_path": str(repo), "message": "second"}),
        fifo=fifo,
        root=repo,
    )


@pytest.fixture(params=[filesystem, git], ids=["filesystem", "git"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    made: Server = request.param(tmp_path)
    yield made
    made.fifo.close()


class RealProxy(Proxy):
    """The proxy (stdio) in front of a real server; `calls()` is not kept (no call log)."""

    def __init__(self, tmp_path: Path, policy: dict[str, Any], server: Server) -> None:
        super().__init__(tmp_path, policy)
        at = self.args.index("--")
        self.args = [*self.args[: at + 1], *server.command]


def pids(*args: str, besides: str | None = None) -> list[int]:
    """The processes whose command line holds each of `args` as one argument (and not
    `besides`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if all(arg in argv for arg in args) and besides not in argv:
            found.append(int(entry.name))
    return found


def server_pids(server: Server) -> list[int]:
    """The server's processes (the proxy's command line names the server's too)."""
    return pids(*server.command, besides="mcp-proxy")


class TestRealServers:
    def test_read_only_tool_runs(self, tmp_path: Path, server: Server) -> None:
        """A tool the server marks read-only runs under an empty policy; the trace replays."""
        proxy = RealProxy(tmp_path, {}, server)
        (result,) = proxy.call(server.read)
        assert not result.is_error, text(result)
        assert server.read_says in text(result)
        record = replayed(proxy.trace)
        assert record["exit_reason"] == record["recorded_end"] == "completed"
        assert [d["action"] for d in record["decisions"]] == ["execute_tools", "continue", "final"]

    def test_denied_change_never_runs(self, tmp_path: Path, server: Server) -> None:
        """A change the policy denies is an error result, and nothing changed on disk."""
        tool, _ = server.change
        proxy = RealProxy(tmp_path, {"permissions": {tool: "deny"}}, server)
        denied, read = proxy.call(server.change, server.read)
        assert denied.is_error
        assert "denied" in text(denied)
        assert not server.changed()
        assert not read.is_error  # the session goes on

    def test_destructive_tool_asks_and_a_yes_runs_it(self, tmp_path: Path, server: Server) -> None:
        """Under an empty policy the server's destructive annotation makes the proxy ask the
        host; the user's yes runs the call."""
        proxy = RealProxy(tmp_path, {}, server)
        asked: list[str] = []
        (result,) = proxy.call(server.change, elicit=answering("accept", True, asked))
        assert not result.is_error, text(result)
        assert server.changed()
        (question,) = asked
        assert server.change[0] in question

    @pytest.mark.parametrize("action", ["decline", "cancel"])
    def test_destructive_tool_declined_never_runs(
        self, tmp_path: Path, server: Server, action: str
    ) -> None:
        """The user's decline (or cancel) leaves the change unrun; the session goes on."""
        proxy = RealProxy(tmp_path, {}, server)
        declined, read = proxy.call(server.change, server.read, elicit=answering(action))
        assert declined.is_error
        assert not server.changed()
        assert server.read_says in text(read)

    def test_server_killed_mid_call(self, tmp_path: Path, server: Server) -> None:
        """The server killed while a call is in flight: the host gets an error result at
        once, and the trace ends interrupted with the server's exit."""
        proxy = RealProxy(tmp_path, {}, server)

        async def go() -> tuple[mt.CallToolResult, float]:
            async with proxy.session() as host:
                call = asyncio.create_task(host.call_tool(*server.blocking))
                await asyncio.to_thread(server.fifo.wait)
                (child,) = server_pids(server)
                os.kill(child, signal.SIGKILL)
                killed = time.monotonic()
                result = await call
                return result, time.monotonic() - killed

        result, seconds = run(go)
        assert result.is_error
        assert "exited" in text(result)
        assert seconds < 5
        last = last_decision(proxy.trace)
        assert last["exit_reason"] == "interrupted"
        assert "the MCP server exited" in last["reason"]
        record = replayed(proxy.trace)
        assert record["exit_reason"] == record["recorded_end"] == "interrupted"

    @pytest.mark.parametrize("released", [False, True], ids=["blocked", "released"])
    def test_sigterm_with_a_call_in_flight(
        self, tmp_path: Path, server: Server, released: bool
    ) -> None:
        """SIGTERM to the proxy while the server is in a call: a call that then ends within
        the grace gets its real result, one still blocked an error result saying the proxy
        stopped; either way the trace ends interrupted and no server process is left."""
        proxy = RealProxy(tmp_path, {}, server)

        async def go() -> mt.CallToolResult:
            async with proxy.session() as host:
                call = asyncio.create_task(host.call_tool(*server.blocking))
                await asyncio.to_thread(server.fifo.wait)
                (me,) = pids("mcp-proxy", str(proxy.policy))
                os.kill(me, signal.SIGTERM)
                if released:
                    server.fifo.release()
                return await call

        result = run(go)
        if released:
            assert not result.is_error, text(result)
            assert "stopped" not in text(result)
        else:
            assert result.is_error
            assert "received SIGTERM" in text(result)
        last = last_decision(proxy.trace)
        assert last["exit_reason"] == "interrupted"
        assert "received SIGTERM" in last["reason"]
        server.fifo.close()  # a blocked hook or read may end now
        deadline = time.monotonic() + 10
        while server_pids(server):
            assert time.monotonic() < deadline, "the server outlived the proxy"
            time.sleep(0.1)


class TestRealServerOverHttp:
    def test_filesystem_by_url(self, tmp_path: Path) -> None:
        """A host by URL, the filesystem server behind: a read runs, a write asks and the
        decline leaves the disk alone, the yes writes; the proxy exits 0 on SIGTERM."""
        fs = filesystem(tmp_path)
        proxy = HttpProxy(tmp_path, {}, ["--", *fs.command])
        try:
            with proxy.running():
                read, declined = proxy.call(fs.read, fs.change, elicit=answering("decline"))
                assert not fs.changed()
                (approved,) = proxy.call(fs.change, elicit=answering("accept", True))
        finally:
            fs.fifo.close()
        assert fs.read_says in text(read)
        assert declined.is_error
        assert not approved.is_error, text(approved)
        assert fs.changed()
        assert proxy.status == 0


class TestHostStopsTheProxy:
    def test_sigint_like_claude_codes_shutdown_ends_the_trace(self, tmp_path: Path) -> None:
        """Claude Code stops a stdio server with SIGINT (then SIGTERM), without closing its
        input: the proxy ends the session as for SIGTERM, so the trace ends interrupted,
        saying so, and replays; it used to die with the trace left open."""
        fs = filesystem(tmp_path)
        proxy = RealProxy(tmp_path, {}, fs)

        async def go() -> None:
            async with proxy.session() as host:
                await host.call_tool(*fs.read)
                (me,) = pids("mcp-proxy", str(proxy.policy))
                os.kill(me, signal.SIGINT)
                deadline = time.monotonic() + 30
                while pids("mcp-proxy", str(proxy.policy)):
                    assert time.monotonic() < deadline, "the proxy outlived SIGINT"
                    await asyncio.sleep(0.1)

        try:
            run(go)
        finally:
            fs.fifo.close()
        last = last_decision(proxy.trace)
        assert last["exit_reason"] == "interrupted"
        assert "received SIGINT" in last["reason"]
        record = replayed(proxy.trace)
        assert record["exit_reason"] == record["recorded_end"] == "interrupted"
