"""`agentfsm mcp-proxy` decides every request it forwards; what it does not model is dropped.

End to end, a scripted host (`RawHost`) writes JSON-RPC lines to a real proxy process in
front of the real `mcp_proxy_server.py`, which logs every `tools/call` it receives, one sent
as a notification included. A property drives a Proxy in this process, between two in-memory
sides, with random host messages: a call the policy did not clear never reaches the server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as mt
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from agentfsm._engine.policy import Policy
from agentfsm._permissions import is_glob
from agentfsm.integrations.mcp._proxy import Proxy, ServerLink
from agentfsm.integrations.mcp._wire import (
    HOST_NOTIFICATIONS,
    HOST_REQUESTS,
    SERVER_NOTIFICATIONS,
    SERVER_REQUESTS,
    unlisted_names,
)
from tests.cli.test_mcp_proxy import SERVER, run, text
from tests.cli.test_mcp_proxy_http import HttpProxy
from tests.cli.test_mcp_proxy_ids import ASK, HOSTILE, RawHost, call, logged, proxied, result_of

DENY_DROP = {"permissions": {"drop_table": "deny"}}
DROP = {"name": "drop_table", "arguments": {"table": "users"}}


def stderr_of(tmp_path: Path) -> str:
    return (tmp_path / "stderr.txt").read_text(encoding="utf-8")


def relisted_after(host: RawHost, ident: int, tool: str) -> None:
    """Call `tool` (it changes the server's listing) under `ident`, then list under
    `ident + 1` and wait for that answer: the proxy has listed again by then."""
    call(host, ident, tool, {})
    result_of(host, ident)
    host.send({"id": ident + 1, "method": "tools/list"})
    host.wait_for(lambda m: m.get("id") == ident + 1)


def notes_of(tmp_path: Path) -> list[str]:
    lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [e["note"] for e in map(json.loads, lines) if e["event"] == "mcp_proxy"]


class TestHostMessages:
    def test_a_call_sent_as_a_notification_never_reaches_the_server(self, tmp_path: Path) -> None:
        """A `tools/call` without an id, or under a null, float, boolean or object id, is
        dropped, said on stderr and in the trace; the server receives none of them."""
        with proxied(tmp_path, DENY_DROP, SERVER) as (host, log, process):
            host.start(elicit=False)
            host.send({"method": "tools/call", "params": DROP})
            for ident in (None, 1.5, True, {"a": 1}, [2]):
                host.send({"id": ident, "method": "tools/call", "params": DROP})
            call(host, 7, "drop_table", {"table": "users"})
            refused = result_of(host, 7)
        assert process.returncode == 0
        assert refused["isError"] is True
        assert logged(log) == []
        assert stderr_of(tmp_path).count("dropped the host's message") == 6
        assert sum("dropped the host's message" in n for n in notes_of(tmp_path)) == 6

    def test_unknown_requests_and_notifications_are_not_forwarded(self, tmp_path: Path) -> None:
        """A request of a method the proxy does not model is answered with an error and not
        sent; an unknown notification carrying params is dropped; known ones pass."""
        with proxied(tmp_path, {}, SERVER) as (host, log, _):
            host.start(elicit=False)
            host.send({"method": "notifications/run", "params": DROP})
            host.send({"id": 5, "method": "tools/execute", "params": DROP})
            refused = host.wait_for(lambda m: m.get("id") == 5)
            host.send({"id": 6, "method": "ping"})
            pong = host.wait_for(lambda m: m.get("id") == 6)
        assert refused["error"]["code"] == -32601
        assert pong["result"] == {}
        assert logged(log) == []
        assert "'notifications/run' the proxy does not forward" in stderr_of(tmp_path)


class TestHttpHost:
    def test_a_call_sent_as_a_notification_by_url_never_reaches_the_server(
        self, tmp_path: Path
    ) -> None:
        """Behind --http, a `tools/call` notification is dropped and said; the session goes
        on and a call sent as a request is decided."""
        proxy = HttpProxy(tmp_path, DENY_DROP)

        async def go() -> mt.CallToolResult:
            async with (
                streamable_http_client(proxy.url) as (read, write),
                ClientSession(read, write) as host,
            ):
                await host.initialize()
                note = mt.JSONRPCNotification(jsonrpc="2.0", method="tools/call", params=DROP)
                await write.send(SessionMessage(note))
                await host.send_ping()
                return await host.call_tool("drop_table", {"table": "users"})

        with proxy.running():
            denied = run(go)
        assert denied.is_error
        assert "denied" in text(denied)
        assert proxy.calls() == []
        assert "a notification 'tools/call'" in proxy.stderr.read_text(encoding="utf-8")


class TestArguments:
    def test_arguments_that_are_not_an_object_are_refused(self, tmp_path: Path) -> None:
        """`arguments` of `[]`, `""`, `0`, `false`, `null` or a string is refused with an
        error result and traced; absent arguments are `{}`; the server gets exactly the
        arguments decided, never the host's other params."""
        bad: list[Any] = [[], "", 0, False, None, "key=secret"]
        with proxied(tmp_path, {"permissions": {"*": "allow"}}, SERVER) as (host, log, _):
            host.start(elicit=False)
            for n, arguments in enumerate(bad, start=10):
                params = {"name": "read_row", "arguments": arguments}
                host.send({"id": n, "method": "tools/call", "params": params})
            refused = [result_of(host, n) for n in range(10, 10 + len(bad))]
            host.send({"id": 20, "method": "tools/call", "params": {"name": "read_row"}})
            absent = result_of(host, 20)
        assert all(r["isError"] is True for r in refused)
        assert all("not an object" in r["content"][0]["text"] for r in refused)
        assert absent["isError"] is False
        assert logged(log) == ["read_row:{}"]
        assert sum("not an object" in n for n in notes_of(tmp_path)) == len(bad)


class TestAnnotations:
    def test_a_tool_turned_destructive_asks_from_then_on(self, tmp_path: Path) -> None:
        """`read_row` is read-only at the first listing; after the server says it is
        destructive (description and schema unchanged), its calls ask (denied without
        elicitation) even under `"*": "allow"`."""
        with proxied(tmp_path, {"permissions": {"*": "allow"}}, SERVER) as (host, log, _):
            host.start(elicit=False)
            call(host, 2, "read_row", {"key": "a"})
            before = result_of(host, 2)
            relisted_after(host, 3, "harden")
            call(host, 5, "read_row", {"key": "b"})
            after = result_of(host, 5)
        assert before["isError"] is False
        assert after["isError"] is True
        assert logged(log) == ['read_row:{"key": "a"}', "harden:{}"]


class TestToolNames:
    def test_a_rule_naming_a_listed_tool_in_another_case_exits_2(self, tmp_path: Path) -> None:
        """`deny Read_Row(key=secret*)` would never match a call of the listed `read_row`:
        the proxy ends the session at its first listing with status 2 and a "did you mean"."""
        policy = {"permission_rules": ["deny Read_Row(key=secret*)"]}
        with proxied(tmp_path, policy, SERVER) as (host, log, process):
            host.start(elicit=False)
            process.wait(30)
        assert process.returncode == 2
        assert "did you mean 'read_row'?" in stderr_of(tmp_path)
        assert logged(log) == []

    def test_a_tool_renamed_mid_session_to_another_case_is_refused(self, tmp_path: Path) -> None:
        """When the server lists `read_row` as `Read_Row` mid-session, `deny
        read_row(key=secret*)` would miss its calls: they are refused and traced."""
        policy = {"permissions": {"*": "allow"}, "permission_rules": ["deny read_row(key=secret*)"]}
        with proxied(tmp_path, policy, SERVER) as (host, log, _):
            host.start(elicit=False)
            relisted_after(host, 2, "recase")
            call(host, 4, "Read_Row", {"key": "secret-1"})
            refused = result_of(host, 4)
        assert refused["isError"] is True
        assert "did you mean 'Read_Row'?" in refused["content"][0]["text"]
        assert logged(log) == ["recase:{}"]
        assert any("Read_Row" in n for n in notes_of(tmp_path))

    def test_a_permissions_entry_misspelling_a_tool_exits_2(self, tmp_path: Path) -> None:
        """A `permissions` entry `drop_tabel: deny` names no listed tool but one is close:
        status 2, naming it."""
        with proxied(tmp_path, {"permissions": {"drop_tabel": "deny"}}, SERVER) as (host, log, p):
            host.start(elicit=False)
            p.wait(30)
        assert p.returncode == 2
        assert "permissions entry 'drop_tabel'" in stderr_of(tmp_path)
        assert "did you mean 'drop_table'?" in stderr_of(tmp_path)
        assert logged(log) == []

    def test_a_rule_naming_no_tool_at_all_is_said_once(self, tmp_path: Path) -> None:
        """A rule for a tool the server does not list, nothing close, leaves the session
        running and is said once on stderr."""
        policy = {"permission_rules": ["deny kubectl_apply"]}
        with proxied(tmp_path, policy, SERVER) as (host, _, process):
            host.start(elicit=False)
            call(host, 2, "read_row", {"key": "a"})
            ran = result_of(host, 2)
        assert process.returncode == 0
        assert ran["isError"] is False
        assert stderr_of(tmp_path).count("'kubectl_apply', which the MCP server does not") == 1

    def test_what_the_server_sends_unmodelled_never_reaches_the_host(self, tmp_path: Path) -> None:
        """The server sends requests and notifications of methods the proxy does not model,
        and a request under a `null` id, beside a log line and a ping: the host gets only
        the log line and the ping; each unmodelled request is answered "method not found"
        to the server (it does not wait on a host that never heard of it); the trace says
        what was dropped."""
        with proxied(tmp_path, ASK, HOSTILE, "unmodelled") as (host, log, process):
            host.start(elicit=True)
            ping = host.wait_for(lambda m: m.get("method") == "ping")
            host.send({"id": ping["id"], "result": {}})
            call(host, 2, "read_row", {"key": "a"})  # the session goes on
            assert result_of(host, 2)["isError"] is False
        assert process.returncode == 0
        from_server = [m.get("method") for m in host.seen if "method" in m]
        assert from_server == ["notifications/message", "ping"]
        answers = {
            int(line.split(":")[1]): json.loads(line.split(":", 2)[2])
            for line in logged(log)
            if line.startswith("answer:")
        }
        assert answers[900]["code"] == answers[901]["code"] == -32601
        assert answers[902] == {}  # the host's answer to the ping, under the server's id
        lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
        notes = [line for line in lines if "dropped the server's message" in line]
        for dropped in ("tasks/get", "x/exfiltrate", "notifications/x", "notifications/tasks"):
            assert any(dropped in note for note in notes), dropped


# -- the property: any message from the host, in this process ------------------------------

_TOOLS = [
    {"name": "read_row", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "drop_table", "inputSchema": {"type": "object"}},
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=4,
)
_CALL_PARAMS = st.fixed_dictionaries(
    {"name": st.sampled_from(["read_row", "drop_table", "Read_Row", "nope"])},
    optional={"arguments": st.dictionaries(st.sampled_from(["key", "table"]), _JSON) | _JSON},
)
_METHODS = st.sampled_from(
    [
        "tools/call",
        "tools/list",
        "ping",
        "resources/read",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/tools/call",
        "evil/run",
    ]
)


def _messages(methods: st.SearchStrategy[Any], params: st.SearchStrategy[Any]) -> Any:
    """JSON-RPC messages of `methods` (or any JSON as a method), with any fields missing."""
    return st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0")},
        optional={
            "method": methods | _JSON,
            "id": st.integers(0, 5) | st.text(max_size=2) | _JSON,
            "params": params,
            "result": _JSON,
        },
    ).filter(lambda m: "method" in m or "id" in m)  # what a line must hold to be read


_MESSAGES = _messages(_METHODS, _CALL_PARAMS | _JSON)


class _Server:
    """The server's end in memory: answers requests, records every message it receives."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._out: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def receive(self) -> dict[str, Any] | str | None:
        return await self._out.get()

    async def send(self, message: Any) -> None:
        self.received.append(json.loads(json.dumps(message)))
        if "id" not in message or "method" not in message:
            return
        result: Any = {}
        if message["method"] == "tools/list":
            result = {"tools": _TOOLS}
        elif message["method"] == "tools/call":
            result = {"content": [{"type": "text", "text": "ran"}], "isError": False}
        await self._out.put({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def close_input(self) -> None:
        await self._out.put(None)

    def gone(self) -> str:
        return "the server closed"


class _Host:
    """The host's end in memory: the given messages, then the session closes."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self._messages = list(messages)
        self.got: list[Any] = []

    async def receive(self) -> dict[str, Any] | None:
        await asyncio.sleep(0)  # let the proxy's tasks run between messages
        return self._messages.pop(0) if self._messages else None

    async def send(self, message: Any, related: Any = None) -> None:
        self.got.append(message)

    def closed(self) -> tuple[str, bool]:
        return "the host closed the session", True

    def on_stop(self, stop: Any) -> None:
        """Nothing stops this session from outside."""


def _session(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the server received over one in-memory session of the host's `messages`."""
    server = _Server()

    @asynccontextmanager
    async def connect() -> AsyncIterator[ServerLink]:
        yield server

    policy = Policy(permissions={"*": "deny", "read_row": "allow"})
    proxy = Proxy(policy, connect)
    asyncio.run(asyncio.wait_for(proxy.run(_Host(messages)), 60))
    return server.received


def test_a_cancellation_naming_a_list_or_object_leaves_the_session_running() -> None:
    """`notifications/cancelled` whose `requestId` is a list or an object names no call:
    the host's later requests still reach the server (it used to end the read loop)."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for named in ([1], {"a": 1}):
        params = {"requestId": named}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        received = _session([cancel, ping])
        assert [m.get("method") for m in received if "id" in m] == ["ping"]


@given(st.lists(_MESSAGES, max_size=8))
def test_no_host_message_makes_the_server_run_an_uncleared_call(
    messages: list[dict[str, Any]],
) -> None:
    """For any messages from the host (requests, notifications and answers of any method,
    ids of any JSON type, any params, fields missing): every `tools/call` the server
    receives is a request under the proxy's own id of the one cleared tool, with an object
    as its arguments and nothing else; and a message the proxy does not model is never
    forwarded: the server gets only requests and notifications of the methods it models."""
    received = _session(messages)
    for message in received:
        assert type(message.get("id", 0)) is int
        assert message["method"] in HOST_REQUESTS | HOST_NOTIFICATIONS
        assert ("id" in message) is (message["method"] in HOST_REQUESTS)
        if message.get("method") == "tools/call":
            assert "id" in message
            assert set(message["params"]) == {"name", "arguments"}
            assert message["params"]["name"] == "read_row"
            assert isinstance(message["params"]["arguments"], dict)


class _ChattyServer(_Server):
    """A server that, once the host says initialized, sends `said` (any JSON objects)."""

    def __init__(self, said: list[dict[str, Any]]) -> None:
        super().__init__()
        self._said = said

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message.get("method") == "notifications/initialized":
            for each in self._said:
                await self._out.put(each)


_SERVER_METHODS = st.sampled_from(
    [
        *sorted(SERVER_REQUESTS | SERVER_NOTIFICATIONS),
        "tools/call",
        "tasks/get",
        "notifications/tasks/status",
        "notifications/initialized",
        "x/run",
    ]
)
_SERVER_MESSAGES = _messages(_SERVER_METHODS, _JSON)


@given(st.lists(_SERVER_MESSAGES, max_size=8))
def test_no_server_message_reaches_the_host_unless_the_proxy_models_it(
    said: list[dict[str, Any]],
) -> None:
    """For any messages from the server once the session is up: the host gets answers to
    its own requests (under its own ids) and requests and notifications of the methods the
    proxy models from a server (a request under the proxy's whole-number id), nothing else."""
    server = _ChattyServer(said)

    @asynccontextmanager
    async def connect() -> AsyncIterator[ServerLink]:
        yield server

    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
    host = _Host(
        [
            {"jsonrpc": "2.0", "id": "h1", "method": "initialize", "params": initialize},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            *({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"} for n in range(4)),
        ]
    )
    proxy = Proxy(Policy(permissions={"*": "deny"}), connect)
    asyncio.run(asyncio.wait_for(proxy.run(host), 60))
    asked = {"h1", "p0", "p1", "p2", "p3"}
    for message in host.got:
        if "method" not in message:
            assert message["id"] in asked
        elif "id" in message:
            assert message["method"] in SERVER_REQUESTS
            assert type(message["id"]) in (int, str)
        else:
            assert message["method"] in SERVER_NOTIFICATIONS


# -- the property: rule and entry names against any listing ---------------------------------

_NAMES = st.sampled_from(["read_file", "write_file", "bash", "drop_table"])
_SPELLED = st.one_of(
    _NAMES,
    _NAMES.map(str.upper),
    _NAMES.map(str.title),
    _NAMES.map(lambda n: n.replace("_", "")),
    st.sampled_from(["kubectl", "x", "read_*", "*", "ba?h"]),
)


@given(
    listed=st.frozensets(_NAMES),
    rule_tools=st.lists(_SPELLED, max_size=4),
    entries=st.lists(_SPELLED, max_size=3),
)
def test_every_unlisted_plain_name_is_reported_once_and_another_case_always_stops(
    listed: frozenset[str], rule_tools: list[str], entries: list[str]
) -> None:
    """For any listing and any rule and `permissions` names (listed ones, other cases, near
    and far spellings, globs): each plain name the listing lacks is reported exactly once,
    as close or not; one equal to a listed name but for case is always close, naming that
    tool; a listed name and a glob never are. Asked for one listed tool (new mid-session),
    each name differing from it only in case is reported, and every report names it."""
    rules = Policy(permission_rules=[f"deny {t}" for t in rule_tools]).permission_rules
    table = {name: "deny" for name in entries}
    tools = {name: {"name": name} for name in listed}
    close, far = unlisted_names(rules, table, tools)
    spelled = [*rule_tools, *table]
    for name in spelled:
        said = [r for r in close + far if f"names tool {name!r}," in r]
        if name in listed or is_glob(name):
            assert said == []
            continue
        assert len(said) == spelled.count(name)
        same = [t for t in listed if t.lower() == name.lower()]
        if same:
            assert all(r in close and f"did you mean {same[0]!r}" in r for r in said)
    for tool in listed:  # mid-session: the names close to one new or changed tool
        reports = unlisted_names(rules, table, tools, only=tool)[0]
        for report in reports:
            assert report.endswith(f"did you mean {tool!r}?")
            assert any(r.startswith(report.split("; did you mean")[0]) for r in close)
        for name in spelled:
            if name != tool and name.lower() == tool.lower():
                assert any(f"names tool {name!r}," in r for r in reports)
