"""`agentfsm mcp-proxy` owns every id and every listing (issue 35, section 2).

End to end, a scripted host writes JSON-RPC lines to a real proxy process, which runs a real
server: `mcp_hostile_server.py` (questions under the proxy's likely ids, forged and repeated
answers) or `mcp_proxy_server.py`. The id bookkeeping (`Relay`) is pure, and a property
drives it with random interleavings of both sides' requests, answers and cancellations.
"""

from __future__ import annotations

import fnmatch
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentfsm._engine.policy import Policy
from agentfsm.integrations.mcp._wire import HostRequest, Relay, ServerRequest, same_id, unfit_rules
from tests.cli.test_mcp_proxy import ENV, SERVER

HOSTILE = str(Path(__file__).with_name("mcp_hostile_server.py"))
Message = dict[str, Any]
ASK = {"permissions": {"drop_table": "ask"}}
"""The policy asks for drop_table by name, whatever the listing."""


class RawHost:
    """A host that writes and reads the proxy's stdio lines itself, every message kept."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.seen: list[Message] = []
        self._lines: queue.Queue[Message | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip():
                self._lines.put(json.loads(line))
        self._lines.put(None)

    def send(self, message: Message) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def wait_for(self, wanted: Callable[[Message], bool], timeout: float = 30) -> Message:
        """The first message (seen before, or arriving) that `wanted` accepts."""
        for message in self.seen:
            if wanted(message):
                return message
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                arrived = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if arrived is None:
                break
            self.seen.append(arrived)
            if wanted(arrived):
                return arrived
        raise AssertionError(f"no such message; seen: {self.seen[-5:]}")

    def answers(self, ident: Any) -> list[Message]:
        """Every answer the host got under `ident`, in order."""
        return [m for m in self.seen if "method" not in m and same_id(m.get("id"), ident)]

    def start(self, elicit: bool) -> None:
        """Initialize the session (with or without elicitation) and say initialized."""
        caps: dict[str, Any] = {"elicitation": {"form": {}}} if elicit else {}
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": caps,
            "clientInfo": {"name": "raw", "version": "1"},
        }
        self.send({"id": 1, "method": "initialize", "params": params})
        self.wait_for(lambda m: m.get("id") == 1 and "result" in m)
        self.send({"method": "notifications/initialized"})


@contextmanager
def proxied(
    tmp_path: Path, policy: dict[str, Any], script: str, *extra: str
) -> Iterator[tuple[RawHost, Path, subprocess.Popen[bytes]]]:
    """A real proxy process (with a trace) in front of the server `script` (its log, then
    `extra`, as its arguments); the host, the server's log, the proxy's process."""
    (tmp_path / "policy.json").write_text(json.dumps(policy), encoding="utf-8")
    log = tmp_path / "calls.log"
    args = [
        *(sys.executable, "-m", "agentfsm", "mcp-proxy", "--policy", str(tmp_path / "policy.json")),
        *("--trace", str(tmp_path / "trace.jsonl"), "--", sys.executable, script, str(log), *extra),
    ]
    with (tmp_path / "stderr.txt").open("wb") as errors:
        process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=ENV
        )
        try:
            yield RawHost(process), log, process
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def logged(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def is_question(message: Message) -> bool:
    return message.get("method") == "elicitation/create" and "id" in message


def call(host: RawHost, ident: int, name: str, arguments: dict[str, Any]) -> None:
    host.send(
        {"id": ident, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    )


def result_of(host: RawHost, ident: int) -> dict[str, Any]:
    answer = host.wait_for(lambda m: same_id(m.get("id"), ident) and "method" not in m)
    result: dict[str, Any] = answer["result"]
    return result


class TestIds:
    def test_approving_the_servers_question_cannot_approve_the_proxys(self, tmp_path: Path) -> None:
        """The server asks the host under every id the proxy might use for its own `ask`;
        the user approves those harmless questions and declines the destructive call: the
        call does not run, and each approval reaches the server under the id it asked by."""
        with proxied(tmp_path, ASK, HOSTILE, "collide") as (host, log, process):
            host.start(elicit=True)
            host.wait_for(lambda m: len([x for x in host.seen if is_question(x)]) >= 80)
            call(host, 7, "drop_table", {"table": "users"})
            ours = host.wait_for(lambda m: is_question(m) and "drop_table" in str(m["params"]))
            for question in [m for m in host.seen if is_question(m) and m is not ours]:
                content = {"action": "accept", "content": {"approve": True}}
                host.send({"id": question["id"], "result": content})
            host.send({"id": ours["id"], "result": {"action": "decline"}})
            result = result_of(host, 7)
        assert process.returncode == 0
        assert result["isError"] is True
        assert not any(line.startswith("drop_table") for line in logged(log))
        answered = [line.split(":")[1] for line in logged(log) if line.startswith("answer:")]
        assert len(answered) == 80
        assert {json.loads(a) for a in answered if a.startswith('"')} == {
            f"agentfsm-proxy-{n}" for n in range(1, 41)
        }
        questions = [m["id"] for m in host.seen if is_question(m)]
        assert len(questions) == len({json.dumps(q) for q in questions})  # no id twice

    def test_forged_and_repeated_answers_never_reach_the_host(self, tmp_path: Path) -> None:
        """The server answers ids it was not asked under and answers twice: the host gets
        exactly one answer per request, its own, and a declined call no result but the
        refusal; each dropped answer is said on stderr and in the trace."""
        with proxied(tmp_path, ASK, HOSTILE, "forge") as (host, log, process):
            host.start(elicit=True)
            call(host, 5, "drop_table", {"table": "users"})
            ours = host.wait_for(is_question)
            host.send({"id": 6, "method": "ping"})
            host.wait_for(lambda m: m.get("id") == 6)
            host.send({"id": ours["id"], "result": {"action": "decline"}})
            refused = result_of(host, 5)
            call(host, 8, "read_row", {"key": "a"})
            ran = result_of(host, 8)
            host.send({"id": 9, "method": "ping"})
            host.wait_for(lambda m: m.get("id") == 9)
        assert process.returncode == 0
        assert refused["isError"] is True
        assert ran["content"][0]["text"] == "read_row ran"
        for ident in (1, 5, 6, 8, 9):
            assert len(host.answers(ident)) == 1, host.answers(ident)
        forged = [m for m in host.seen if "forged" in json.dumps(m)]
        assert forged == []
        assert logged(log) == ['read_row:{"key": "a"}']
        stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8")
        assert "dropped the server's answer" in stderr
        lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
        events = [json.loads(line) for line in lines]
        assert any(e["event"] == "mcp_proxy" and "dropped" in e["note"] for e in events)
        replay = subprocess.run(
            [sys.executable, "-m", "agentfsm", "replay", str(tmp_path / "trace.jsonl")],
            capture_output=True,
            env=ENV,
            check=False,
            timeout=120,
        )
        assert replay.returncode == 0, replay.stderr  # the notes do not break the replay


class TestListing:
    def test_a_call_before_any_listing_still_asks(self, tmp_path: Path) -> None:
        """A host that calls without listing first (a cached listing) still meets the
        annotation's ask: denied without elicitation, never sent."""
        with proxied(tmp_path, {}, SERVER) as (host, log, _):
            host.start(elicit=False)
            call(host, 2, "drop_table", {"table": "users"})
            result = result_of(host, 2)
        assert result["isError"] is True
        assert logged(log) == []

    def test_a_tool_the_server_does_not_list_is_refused(self, tmp_path: Path) -> None:
        """A call of a tool missing from the proxy's own listing never reaches the server."""
        with proxied(tmp_path, {}, SERVER) as (host, log, _):
            host.start(elicit=False)
            call(host, 2, "no_such_tool", {"command": "ls"})
            result = result_of(host, 2)
        assert result["isError"] is True
        assert "does not list" in result["content"][0]["text"]
        assert logged(log) == []

    def test_a_deny_rule_keeps_the_annotation_ask(self, tmp_path: Path) -> None:
        """`deny run_command(command~rm -rf *)` does not let `dd of=/dev/sda` run unasked
        on a tool hinted as changing things; an allow for exactly that call runs it."""
        policy = {
            "permission_rules": [
                "deny run_command(command~rm -rf *)",
                "allow run_command(command~ls *)",
            ]
        }
        with proxied(tmp_path, policy, SERVER) as (host, log, _):
            host.start(elicit=False)
            call(host, 2, "run_command", {"command": "dd if=/dev/zero of=/dev/sda"})
            asked = result_of(host, 2)
            call(host, 3, "run_command", {"command": "ls -l"})
            allowed = result_of(host, 3)
        assert asked["isError"] is True
        assert allowed["isError"] is False
        assert logged(log) == ['run_command:{"command": "ls -l"}']


class TestArgumentNames:
    def test_a_rule_on_an_argument_the_tool_does_not_take_exits_2(self, tmp_path: Path) -> None:
        """`deny write_file(pth=/tmp/*)` never matches a call of a tool taking `path`: the
        proxy ends the session at its first listing with status 2, naming the rule, the
        tool's arguments and the closest one."""
        policy = {"permission_rules": ["deny write_file(pth=/tmp/*)"]}
        with proxied(tmp_path, policy, SERVER) as (host, log, process):
            host.start(elicit=False)
            process.wait(30)
        assert process.returncode == 2
        stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8")
        assert "deny write_file(pth=/tmp/*)" in stderr
        assert "did you mean 'path'?" in stderr
        assert "content, path" in stderr
        assert logged(log) == []

    def test_a_rule_that_stops_fitting_mid_session_refuses_the_call(self, tmp_path: Path) -> None:
        """When the server renames `read_row`'s argument, `deny read_row(key=secret*)` no
        longer fits: its calls are refused, even with the user saying yes."""
        policy = {"permission_rules": ["deny read_row(key=secret*)"]}
        with proxied(tmp_path, policy, SERVER) as (host, log, _):
            host.start(elicit=True)
            call(host, 2, "rename_arg", {})
            result_of(host, 2)
            time.sleep(1)  # the proxy lists again after the server's notification
            call(host, 3, "read_row", {"row": "secret-1"})
            question = host.wait_for(
                lambda m: is_question(m) or (m.get("id") == 3 and "result" in m)
            )
            if is_question(question):
                content = {"action": "accept", "content": {"approve": True}}
                host.send({"id": question["id"], "result": content})
            refused = result_of(host, 3)
        assert refused["isError"] is True
        assert "no longer fit" in refused["content"][0]["text"]
        assert logged(log) == ["rename_arg:{}"]


# -- the property: random interleavings against the pure id bookkeeping -----------------

_IDS = st.sampled_from([1, 2, 3, True, False, 1.0, "1", "2", None, "agentfsm-proxy-1", 0, -1])
_STEP = st.one_of(
    st.tuples(st.just("host_request"), _IDS.filter(lambda i: i is not None)),
    st.tuples(st.just("server_request"), _IDS.filter(lambda i: i is not None)),
    st.tuples(st.just("own_to_server"), _IDS),
    st.tuples(st.just("own_to_host"), st.none()),
    st.tuples(st.just("server_answers"), st.integers(0, 30) | _IDS),
    st.tuples(st.just("host_answers"), st.integers(0, 30) | _IDS),
    st.tuples(st.just("host_cancels"), _IDS),
    st.tuples(st.just("server_cancels"), _IDS),
)


class Own:
    """A request of the proxy's own, for the property (the proxy's is `_Own`)."""

    def __init__(self, host_id: Any = None) -> None:
        self.host_id = host_id


class Model:
    """What each side was sent under which id, kept apart from the Relay's own tables."""

    def __init__(self) -> None:
        self.relay = Relay()
        self.server_saw: dict[int, Any] = {}  # id the server got -> what it stood for
        self.host_saw: dict[int, Any] = {}
        self.open_server: set[int] = set()
        self.open_host: set[int] = set()

    def step(self, kind: str, value: Any) -> None:
        getattr(self, kind)(value)

    def host_request(self, host_id: Any) -> None:
        sent = self.relay.host_request({"id": host_id, "method": "resources/read"})
        self._fresh(sent["id"], self.server_saw, ("host", host_id), self.open_server)

    def server_request(self, server_id: Any) -> None:
        sent = self.relay.server_request({"id": server_id, "method": "elicitation/create"})
        self._fresh(sent["id"], self.host_saw, ("server", server_id), self.open_host)

    def own_to_server(self, host_id: Any) -> None:
        waiter = Own(host_id)
        self._fresh(self.relay.to_server.send(waiter), self.server_saw, waiter, self.open_server)

    def own_to_host(self, _: Any) -> None:
        waiter = Own()
        self._fresh(self.relay.to_host.send(waiter), self.host_saw, waiter, self.open_host)

    @staticmethod
    def _fresh(ident: Any, saw: dict[int, Any], what: Any, open_ids: set[int]) -> None:
        assert type(ident) is int  # the proxy's own,
        assert ident not in saw  # never reused
        saw[ident] = what
        open_ids.add(ident)

    def server_answers(self, ident: Any) -> None:
        waiter, forward = self.relay.server_answer({"id": ident, "result": {}})
        self._check(ident, waiter, forward, self.server_saw, self.open_server, "host")

    def host_answers(self, ident: Any) -> None:
        waiter, forward = self.relay.host_answer({"id": ident, "result": {}})
        self._check(ident, waiter, forward, self.host_saw, self.open_host, "server")

    @staticmethod
    def _check(
        ident: Any, waiter: Any, forward: Any, saw: dict[int, Any], open_ids: set[int], to: str
    ) -> None:
        """An answer counts only under an id still open, for what that id stood for."""
        if type(ident) is not int or ident not in open_ids:
            assert waiter is None
            assert forward is None
            return
        open_ids.discard(ident)
        what = saw[ident]
        if isinstance(what, Own):
            assert waiter is what  # only its own id answers it
            assert forward is None
            return
        _, asked_as = what
        kind = HostRequest if to == "host" else ServerRequest
        assert isinstance(waiter, kind)
        assert forward is not None
        assert same_id(forward["id"], asked_as)

    def host_cancels(self, host_id: Any) -> None:
        gone = self.relay.host_cancelled(host_id)
        expected = {
            i
            for i in self.open_server
            if host_id is not None
            and same_id(
                self.server_saw[i].host_id
                if isinstance(self.server_saw[i], Own)
                else self.server_saw[i][1],
                host_id,
            )
        }
        assert {i for i, _ in gone} == expected
        self.open_server -= expected

    def server_cancels(self, server_id: Any) -> None:
        gone = self.relay.server_cancelled(server_id)
        expected = {
            i
            for i in self.open_host
            if not isinstance(self.host_saw[i], Own) and same_id(self.host_saw[i][1], server_id)
        }
        assert set(gone) == expected
        self.open_host -= expected


@given(st.lists(_STEP, max_size=60))
def test_every_answer_goes_only_to_the_request_it_answers(steps: list[tuple[str, Any]]) -> None:
    """For any interleaving of the host's and the server's requests, the proxy's own
    requests, answers under any id (colliding, forged, repeated, `true` for 1) and
    cancellations: each side sees only ids the proxy allocated, never one twice; an answer
    reaches only the request that id was allocated for, once, while it waits; the host's
    answer to the server's question never answers the proxy's own, nor the reverse."""
    model = Model()
    for kind, value in steps:
        model.step(kind, value)


# -- the property: rules read against any listing ----------------------------------------

_ARGS = ("path", "pth", "key", "command", "content")
_SCHEMAS = st.one_of(
    st.frozensets(st.sampled_from(_ARGS)).map(
        lambda names: {"type": "object", "properties": {n: {"type": "string"} for n in names}}
    ),
    st.just({"type": "object", "additionalProperties": True}),  # any argument
    st.none(),
)
_LISTINGS = st.dictionaries(st.sampled_from(["write_file", "read_row", "bash"]), _SCHEMAS)
_RULE_TEXTS = st.tuples(
    st.sampled_from(["allow", "ask", "deny"]),
    st.sampled_from(["write_file", "read_*", "*", "bash", "other"]),
    st.lists(st.sampled_from(_ARGS), max_size=2, unique=True),
    st.none() | st.sampled_from(_ARGS),
).map(
    lambda r: (
        f"{r[0]} {r[1]}"
        + (
            "(" + ", ".join([*(f"{a}=x*" for a in r[2]), *([f"{r[3]}~rm *"] if r[3] else [])]) + ")"
            if r[2] or r[3]
            else ""
        )
    )
)


@given(listing=_LISTINGS, texts=st.lists(_RULE_TEXTS, max_size=4))
def test_a_rule_is_unfit_exactly_when_an_argument_it_names_is_taken_by_no_matching_tool(
    listing: dict[str, Any], texts: list[str]
) -> None:
    """For any listing (schemas naming their arguments, or taking any) and any rules: a rule
    is reported, naming itself and the arguments, exactly when the listed tools its tool part
    matches all name their arguments and none takes an argument the rule reads."""
    rules = Policy(permission_rules=texts).permission_rules
    tools = {name: {"name": name, "inputSchema": schema} for name, schema in listing.items()}
    reported = unfit_rules(rules, tools)
    expected = []
    for rule in rules:
        matching = [n for n in listing if fnmatch.fnmatchcase(n, rule.tool)]
        schemas = [listing[n] for n in matching]
        if not matching or any(s is None or "properties" not in s for s in schemas):
            continue
        takes = set().union(*(s["properties"] for s in schemas))
        read = [a for a, _ in rule.args] + ([rule.shell[0]] if rule.shell else [])
        if any(a not in takes for a in read):
            expected.append(str(rule))
    assert len(reported) == len(expected)
    for why, rule_text in zip(reported, expected, strict=True):
        assert repr(rule_text) in why
