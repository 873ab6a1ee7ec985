"""`agentfsm mcp-proxy`, end to end: a real host session (the `mcp` package's ClientSession)
talks to the proxy process, which starts a real server process that logs every call it gets."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import mcp.types as mt
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests import processes

SERVER = str(Path(__file__).with_name("mcp_proxy_server.py"))
ROOT = str(Path(__file__).resolve().parents[2])
ENV = {**os.environ, "PYTHONPATH": ROOT, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
T = TypeVar("T")
Elicit = Callable[[Any, Any], Awaitable[mt.ElicitResult]]
"""An elicitation callback, as ClientSession takes it (its protocol types the context)."""


class Proxy:
    """One proxy's files: its policy, its trace, the server's call log, the proxy's stderr."""

    def __init__(self, tmp_path: Path, policy: dict[str, Any], *extra: str) -> None:
        self.policy = tmp_path / "policy.json"
        self.policy.write_text(json.dumps(policy), encoding="utf-8")
        self.trace = tmp_path / "trace.jsonl"
        self.log = tmp_path / "calls.log"
        self.stderr = tmp_path / "stderr.txt"
        self.args = [
            *("-m", "agentfsm", "mcp-proxy", "--policy", str(self.policy)),
            *("--trace", str(self.trace), *extra, "--", sys.executable, SERVER, str(self.log)),
        ]

    def calls(self) -> list[str]:
        """The calls that reached the server, in order."""
        if not self.log.exists():
            return []
        return self.log.read_text(encoding="utf-8").splitlines()

    @asynccontextmanager
    async def session(self, elicit: Elicit | None = None) -> AsyncIterator[ClientSession]:
        """An initialized host session through the proxy; elicitation only with `elicit`."""
        params = StdioServerParameters(command=sys.executable, args=self.args, env=ENV)
        with self.stderr.open("w", encoding="utf-8") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, elicitation_callback=cast(Any, elicit)) as session,
            ):
                await session.initialize()
                await session.list_tools()
                yield session

    def call(
        self, *calls: tuple[str, dict[str, Any]], elicit: Elicit | None = None
    ) -> list[mt.CallToolResult]:
        """One session through the proxy making these calls in order: their results."""

        async def go() -> list[mt.CallToolResult]:
            async with self.session(elicit) as host:
                return [await host.call_tool(name, arguments) for name, arguments in calls]

        return run(go)


def run(work: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(work(), 60)

    return asyncio.run(bounded())


python = functools.partial(processes.python, env=ENV, timeout=60)
"""`tests.processes.python` under ENV, a minute at most unless told."""


def replayed(trace: Path) -> dict[str, Any]:
    """The one run of a trace as `agentfsm replay --json` reads it, which must not differ."""
    done = python("-m", "agentfsm", "replay", trace, "--json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = [json.loads(line) for line in done.stdout.splitlines()]
    return cast(dict[str, Any], record)


def proxy_exits(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The proxy run with an empty policy and `args`, for arguments it must refuse at once."""
    (tmp_path / "policy.json").write_text("{}", encoding="utf-8")
    return python(
        "-m", "agentfsm", "mcp-proxy", "--policy", "policy.json", *args, input="", cwd=tmp_path
    )


def last_decision(trace: Path) -> dict[str, Any]:
    """The last decision event of a trace file."""
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return cast(dict[str, Any], [e for e in events if e.get("event") == "decision"][-1])


def text(result: mt.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mt.TextContent))


def answering(action: str, approve: object = True, asked: list[str] | None = None) -> Elicit:
    """An elicitation callback that answers every question the same way, noting each."""

    async def elicit(context: Any, params: Any) -> mt.ElicitResult:
        if asked is not None:
            asked.append(params.message)
        content = {"approve": approve} if action == "accept" else None
        return mt.ElicitResult(action=action, content=content)

    return elicit


class TestPermissions:
    def test_denied_call_never_reaches_the_server(self, tmp_path: Path) -> None:
        """A call the policy denies gets an error result saying so; the server never sees it."""
        proxy = Proxy(tmp_path, {"permissions": {"drop_table": "deny"}})
        denied, allowed = proxy.call(("drop_table", {"table": "users"}), ("read_row", {"key": "a"}))
        assert denied.is_error
        assert "denied" in text(denied)
        assert not allowed.is_error
        assert text(allowed) == "row a"
        assert proxy.calls() == ['read_row:{"key": "a"}']

    def test_shell_rule_denies_a_compound_command(self, tmp_path: Path) -> None:
        """A shell-aware rule matches every simple command of `ls && rm -rf /`."""
        proxy = Proxy(tmp_path, {"permission_rules": ["deny bash(command~rm *)"]})
        bad, good = proxy.call(
            ("bash", {"command": "ls && rm -rf /"}), ("bash", {"command": "ls -l"})
        )
        assert bad.is_error
        assert not good.is_error
        assert proxy.calls() == ['bash:{"command": "ls -l"}']

    def test_ask_without_elicitation_denies(self, tmp_path: Path) -> None:
        """A tool hinted as changing things asks; a host that cannot elicit gets a denial."""
        proxy = Proxy(tmp_path, {})
        (result,) = proxy.call(("drop_table", {"table": "users"}))
        assert result.is_error
        said = text(result)
        # nobody was asked: the host is told so, and how to let the call run
        assert "this host cannot ask one" in said
        assert "nobody was asked" in said
        assert "allow drop_table" in said
        assert "declined by the human" not in said
        assert proxy.calls() == []
        assert replayed(proxy.trace)["exit_reason"] == "completed"

    def test_policy_naming_the_tool_overrides_the_hint(self, tmp_path: Path) -> None:
        """A policy that allows drop_table by name runs it without asking."""
        proxy = Proxy(tmp_path, {"permissions": {"drop_table": "allow"}})
        (result,) = proxy.call(("drop_table", {"table": "users"}))
        assert not result.is_error
        assert proxy.calls() == ['drop_table:{"table": "users"}']

    def test_accepting_elicitation_runs_the_call(self, tmp_path: Path) -> None:
        """An explicit accept with a yes runs the asked call, and the question names it."""
        proxy = Proxy(tmp_path, {"permissions": {"drop_table": "ask"}})
        asked: list[str] = []
        (result,) = proxy.call(
            ("drop_table", {"table": "users"}), elicit=answering("accept", True, asked)
        )
        assert not result.is_error
        assert text(result) == "dropped users"
        assert len(asked) == 1
        assert "drop_table" in asked[0]
        assert proxy.calls() == ['drop_table:{"table": "users"}']

    @pytest.mark.parametrize(
        ("action", "approve"), [("decline", True), ("cancel", True), ("accept", False)]
    )
    def test_anything_but_a_yes_does_not_run(
        self, tmp_path: Path, action: str, approve: object
    ) -> None:
        """A decline, a cancel, or an accept without a yes leaves the call unrun."""
        proxy = Proxy(tmp_path, {"permissions": {"drop_table": "ask"}})
        asked, after = proxy.call(
            ("drop_table", {"table": "users"}),
            ("read_row", {"key": "b"}),
            elicit=answering(action, approve),
        )
        assert asked.is_error
        assert not after.is_error  # the session goes on
        assert proxy.calls() == ['read_row:{"key": "b"}']


class TestSessionGuards:
    def test_repeated_call_is_refused_then_the_session_stops(self, tmp_path: Path) -> None:
        """A policy that sets `repeat_threshold` keeps the exact rule: the third identical call
        is not run; repeating it on ends the session (doom loop)."""
        proxy = Proxy(tmp_path, {"repeat_threshold": 3})
        results = proxy.call(*[("read_row", {"key": "a"})] * 5, ("read_row", {"key": "other"}))
        assert [r.is_error for r in results] == [False, False, True, True, True, True]
        assert "doom_loop" in text(results[4])
        assert "stopped" in text(results[5])
        assert "To go on, start a new session" in text(results[5])
        assert proxy.calls() == ['read_row:{"key": "a"}'] * 2

    def test_repeated_reads_are_warned_then_asked_and_the_session_goes_on(
        self, tmp_path: Path
    ) -> None:
        """The proxy's loop ladder: the 3rd and 4th read of one result (its size said another
        way) run with a loop warning the model reads beside the result; the 5th asks, and a
        host that cannot ask gets a refusal; the session goes on, other calls run."""
        proxy = Proxy(tmp_path, {})
        said: list[dict[str, Any]] = [{"size": 4}, {"size": 4.0}, {"size": 4}, {"size": 4e0}]
        said.append({"size": 4})
        results = proxy.call(*[("big", args) for args in said], ("read_row", {"key": "b"}))
        assert [r.is_error for r in results] == [False, False, False, False, True, False]
        assert [text(r).count("agentfsm: loop warning") for r in results[:4]] == [0, 0, 1, 1]
        assert text(results[2]).startswith("xxxx\nagentfsm: loop warning: big(")
        assert "5th call of the same intent in a row" in text(results[4])
        assert "this host cannot ask one (no MCP elicitation). The session goes on" in text(
            results[4]
        )
        assert text(results[5]) == "row b"
        assert len(proxy.calls()) == 5

    def test_a_repeat_whose_result_changed_is_progress(self, tmp_path: Path) -> None:
        """Polling a job 12 times, each answer new: never warned, asked or stopped."""
        proxy = Proxy(tmp_path, {})
        results = proxy.call(*[("tick", {"job": "build"})] * 12)
        assert not any(r.is_error for r in results)
        assert not any("agentfsm" in text(r) for r in results)
        assert text(results[-1]) == "job build: step 12"

    def test_denials_are_not_tool_errors(self, tmp_path: Path) -> None:
        """Eight denied calls in a row do not end the session: a denial is the policy's
        answer, not a failing tool (under `max_consecutive_tool_errors` 5 they did)."""
        proxy = Proxy(tmp_path, {"permissions": {"drop_table": "deny"}})
        denied = [("drop_table", {"table": f"t{i}"}) for i in range(8)]
        results = proxy.call(*denied, ("read_row", {"key": "a"}))
        assert all(r.is_error and "denied" in text(r) for r in results[:8])
        assert text(results[8]) == "row a"

    def test_tool_call_budget_stops_the_session(self, tmp_path: Path) -> None:
        """With max_tool_calls 2 the third call is answered with the budget's stop."""
        proxy = Proxy(tmp_path, {"max_tool_calls": 2})
        results = proxy.call(*[("read_row", {"key": k}) for k in "abc"])
        assert [r.is_error for r in results] == [False, False, True]
        assert "max_tool_calls" in text(results[2])
        assert proxy.calls() == ['read_row:{"key": "a"}', 'read_row:{"key": "b"}']

    def test_long_session_outlives_the_default_max_turns(self, tmp_path: Path) -> None:
        """Every call is a turn: a policy that does not set max_turns does not stop an
        editor's session at the Policy's default of 50."""
        proxy = Proxy(tmp_path, {})
        results = proxy.call(*[("read_row", {"key": f"k{i}"}) for i in range(60)])
        assert not any(r.is_error for r in results)
        assert text(results[-1]) == "row k59"
        assert len(proxy.calls()) == 60

    def test_explicit_max_turns_stops_the_session(self, tmp_path: Path) -> None:
        """A policy that sets max_turns gets it, as an agent's run does: the last turn is
        kept for reading the last result, so with 3 the third call is refused."""
        proxy = Proxy(tmp_path, {"max_turns": 3})
        results = proxy.call(*[("read_row", {"key": k}) for k in "abcd"])
        assert [r.is_error for r in results] == [False, False, True, True]
        assert "max_turns" in text(results[2])
        assert "stopped" in text(results[3])
        assert proxy.calls() == ['read_row:{"key": "a"}', 'read_row:{"key": "b"}']

    def test_trace_ends_when_the_server_exits(self, tmp_path: Path) -> None:
        """A server that exits mid-session: the trace's run ends, stopped from outside with
        the server's exit, so replay reads how it ended."""
        proxy = Proxy(tmp_path, {})
        proxy.call(("read_row", {"key": "a"}), ("crash", {}))
        last = last_decision(proxy.trace)
        assert last["exit_reason"] == "interrupted"
        assert "exited (status 3)" in last["reason"]
        record = replayed(proxy.trace)  # no divergence
        assert record["exit_reason"] == record["recorded_end"] == "interrupted"

    def test_trace_replays_and_reports(self, tmp_path: Path) -> None:
        """The session's trace (an allowed, a denied and an approved call) replays with
        `agentfsm replay` to the same decisions, and `agentfsm report` reads it."""
        proxy = Proxy(tmp_path, {"permissions": {"drop_table": "deny", "bash": "ask"}})
        proxy.call(
            ("read_row", {"key": "a"}),
            ("drop_table", {"table": "users"}),
            ("bash", {"command": "ls"}),
            elicit=answering("accept", True),
        )
        record = replayed(proxy.trace)
        assert record["steps"] == 4  # three calls, then the host closing the session
        assert record["recorded_end"] == "completed"
        assert record["exit_reason"] == "completed"
        assert record["decisions"][-1]["action"] == "final"
        actions = [d["action"] for d in record["decisions"]]
        assert actions.count("execute_tools") == 2
        assert "ask_human" in actions
        assert any("denied" in d["reason"] for d in record["decisions"])
        report = python(
            "-m", "agentfsm", "report", proxy.trace, "-o", "r.html", cwd=tmp_path, timeout=120
        )
        assert report.returncode == 0, report.stderr
        assert "read_row" in (tmp_path / "r.html").read_text(encoding="utf-8")


class TestHostileServer:
    def test_changed_tool_is_flagged_and_asked_again(self, tmp_path: Path) -> None:
        """After list_changed with a new schema, the tool is flagged and its calls denied
        without elicitation; the server never gets them."""
        proxy = Proxy(tmp_path, {})

        async def go() -> tuple[mt.ListToolsResult, mt.CallToolResult, mt.CallToolResult]:
            async with proxy.session() as host:
                await host.call_tool("mutate", {})
                listing = await host.list_tools()
                changed = await host.call_tool("read_row", {"key": "a"})
                other = await host.call_tool("bash", {"command": "ls"})
                return listing, changed, other

        listing, changed, other = run(go)
        row = next(t for t in listing.tools if t.name == "read_row")
        assert row.description is not None
        assert row.description.startswith("[agentfsm: this tool changed")
        assert changed.is_error
        assert "changed" in text(changed)
        assert not other.is_error
        assert proxy.calls() == ["mutate:{}", 'bash:{"command": "ls"}']

    def test_changed_tool_runs_when_the_user_says_yes(self, tmp_path: Path) -> None:
        """A changed tool's call is put to the user, who is told it changed."""
        proxy = Proxy(tmp_path, {})
        asked: list[str] = []

        async def go() -> mt.CallToolResult:
            async with proxy.session(answering("accept", True, asked)) as host:
                await host.call_tool("mutate", {})
                await host.list_tools()
                return await host.call_tool("read_row", {"key": "a"})

        assert not run(go).is_error
        assert len(asked) == 1
        assert "changed" in asked[0]
        assert proxy.calls() == ["mutate:{}", 'read_row:{"key": "a"}']

    def test_huge_result_is_capped(self, tmp_path: Path) -> None:
        """A result over --max-result-bytes reaches the host cut, with a note."""
        proxy = Proxy(tmp_path, {}, "--max-result-bytes", "10000")
        said = text(proxy.call(("big", {"size": 1_000_000}))[0])
        assert len(said) < 10_000
        assert "result cut from" in said
        assert said.startswith("xxxx")

    @pytest.mark.parametrize(
        ("tool", "why"), [("garbage", "not a JSON-RPC message"), ("bad_shape", "malformed")]
    )
    def test_malformed_answer_is_an_error_result(self, tmp_path: Path, tool: str, why: str) -> None:
        """A line that is not MCP, or a result of the wrong shape, is an error result; the
        session goes on."""
        proxy = Proxy(tmp_path, {})
        broken, after = proxy.call((tool, {}), ("read_row", {"key": "a"}))
        assert broken.is_error
        assert why in text(broken)
        assert text(after) == "row a"

    def test_server_crash_mid_call(self, tmp_path: Path) -> None:
        """A server that exits mid-call: an error result, a message on stderr."""
        proxy = Proxy(tmp_path, {})
        (result,) = proxy.call(("crash", {}))
        assert result.is_error
        assert "exited (status 3)" in text(result)
        assert "exited (status 3)" in proxy.stderr.read_text(encoding="utf-8")


def _raw(proxy: Proxy, lines: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """Run the proxy with these messages on its stdin, then end of input."""
    given = "".join(json.dumps(m) + "\n" for m in lines)
    return python(*proxy.args, input=given)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


class TestProcess:
    def test_host_closing_the_session_exits_0(self, tmp_path: Path) -> None:
        """End of the host's input ends the proxy with 0; stdout holds only JSON-RPC."""
        proxy = Proxy(tmp_path, {})
        done = _raw(proxy, [INIT])
        assert done.returncode == 0, done.stderr
        (answer,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert answer["id"] == 1
        assert answer["result"]["serverInfo"]["name"] == "hostile"

    def test_server_crash_exits_1_after_answering(self, tmp_path: Path) -> None:
        """The call in flight is answered with an error, then the proxy exits 1 saying why."""
        proxy = Proxy(tmp_path, {})
        crash = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "crash"}}
        # stdin stays open until the proxy exits: the crash, not the end of input, ends it
        with subprocess.Popen(
            [sys.executable, *proxy.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        ) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            process.stdin.write(json.dumps(INIT) + "\n" + json.dumps(crash) + "\n")
            process.stdin.flush()
            out, err = process.stdout.read(), process.stderr.read()  # until the proxy exits
            assert process.wait(timeout=60) == 1
        answers = {m["id"]: m for m in map(json.loads, out.splitlines())}
        assert answers[2]["result"]["isError"] is True
        assert "exited" in err

    def test_cancelled_call_frees_the_session(self, tmp_path: Path) -> None:
        """A call the host cancels while the server never answers does not hold up the next
        call; stdin from a regular file (not a pipe) works too."""
        proxy = Proxy(tmp_path, {})
        messages = [
            INIT,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hang"}},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "read_row", "arguments": {"key": "a"}},
            },
        ]
        given = tmp_path / "host.jsonl"
        given.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
        with given.open("rb") as stdin:
            done = python(*proxy.args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
        assert answers[3]["result"]["content"][0]["text"] == "row a"
        # The cancel may come before the hanging call was sent (then it is never sent) or after.
        assert proxy.calls()[-1] == 'read_row:{"key": "a"}'
        assert set(proxy.calls()) <= {"hang:{}", 'read_row:{"key": "a"}'}

    def test_server_that_cannot_start_exits_2(self, tmp_path: Path) -> None:
        """A server command that does not exist: exit 2 with a message, nothing on stdout."""
        done = proxy_exits(tmp_path, "--", str(tmp_path / "no-such-server"))
        assert done.returncode == 2
        assert "cannot start the server" in done.stderr
        assert done.stdout == ""

    @pytest.mark.parametrize(
        "args",
        [
            ["mcp-proxy", "--policy", "missing.json", "--", "true"],
            ["mcp-proxy", "--policy", "policy.json"],
            ["mcp-proxy", "--policy", "bad.json", "--", "true"],
        ],
    )
    def test_bad_arguments_exit_2(self, tmp_path: Path, args: list[str]) -> None:
        """A missing or broken policy file, or no server command: exit 2 with a message."""
        (tmp_path / "policy.json").write_text("{}", encoding="utf-8")
        (tmp_path / "bad.json").write_text('{"max_turns": 0}', encoding="utf-8")
        done = python("-m", "agentfsm", *args, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr.startswith("agentfsm mcp-proxy: ")
        assert done.stdout == ""
