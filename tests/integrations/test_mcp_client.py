"""MCP servers' tools as governed agentfsm tools (issue 31, item 1, the client side).

The server is a real process (`mcp_tools_server.py`, spoken to over stdio) that logs every call
it receives; the model is `ScriptedServer`, a real OpenAI-compatible HTTP server that litellm
calls, so `af.run` drives the whole loop. What reached the server is read from its log.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

import agentfsm as af
from agentfsm.exceptions import (
    DefinitionError,
    InvalidInputError,
    PolicyError,
    RunError,
    ToolDefinitionError,
)
from agentfsm.integrations.mcp import MCPServerTools
from agentfsm.testing import call as tool_call
from agentfsm.testing import turn
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.processes import free_port, python, wait_until_listening
from tests.runner.conftest import close_litellm_event_loop, scripted_arun, scripted_run

pytestmark = LITELLM_CLIENT
_ = close_litellm_event_loop  # the runner's fixture, used here too

SERVER = Path(__file__).with_name("mcp_tools_server.py")
TASK = [{"role": "user", "content": "Tidy my notes."}]
LONG = "archive_every_note_older_than_the_given_number_of_days_into_cold_storage"
LONG_OFFERED = f"{LONG[:55]}_{hashlib.sha256(LONG.encode()).hexdigest()[:8]}"
OFFERED = {  # the server's names providers refuse, and the names the model is offered
    "notes.search": "notes_search",
    "files/remove": "files_remove",
    "say hello": "say_hello",
    "café": "caf_",
    LONG: LONG_OFFERED,
}
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class Notes:
    """The MCP server's log and the governed tools connected to it."""

    def __init__(self, log: Path, tools: MCPServerTools) -> None:
        self.log = log
        self.tools = tools

    def received(self) -> list[tuple[str, dict[str, Any]]]:
        """Every call the server process received, in order: (tool, arguments)."""
        if not self.log.exists():
            return []
        received = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            tool, _, arguments = line.partition(" {")  # a tool's name may hold spaces
            received.append((tool, json.loads("{" + arguments)))
        return received


def params(log: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER), str(log), *flags])


@pytest.fixture
def notes(tmp_path: Path) -> Iterator[Notes]:
    """A fresh server process for each test (some tests change or crash it)."""
    log = tmp_path / "calls.log"
    with MCPServerTools(params(log), timeout=30) as tools:
        yield Notes(log, tools)


def drive(
    notes: Notes, script: Sequence[Reply], policy: af.Policy | None = None, **kwargs: Any
) -> tuple[af.RunResult, ScriptedServer]:
    """`af.run` with the server's tools and the hints over `policy`, on a scripted model."""
    with ScriptedServer(script) as model:
        result = scripted_run(
            model,
            TASK,
            tools=notes.tools.tools,
            policy=notes.tools.policy(policy),
            **kwargs,
        )
    return result, model


def tool_messages(result: af.RunResult) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}


def executed(notes: Notes, *calls: af.ToolCall, policy: af.Policy | None = None) -> Any:
    """The Executor's results for one model turn of `calls`, cleared by a Controller."""
    tools = notes.tools.tools
    ctl = af.Controller(notes.tools.policy(policy), tools=tools)
    decision = ctl.on_model_output(turn(calls=calls))
    assert decision.action is af.Action.EXECUTE_TOOLS, decision.reason
    return {r.call_id: r for r in af.Executor(tools).run(decision, controller=ctl)}


class TestDeclarations:
    def test_the_listing_becomes_the_tools_offered_to_the_model(self, notes: Notes) -> None:
        """Each listed tool is declared with its description and input schema, and offered."""
        result, model = drive(notes, [say("nothing to do")])
        assert result.exit_reason is af.ExitReason.COMPLETED
        offered = {t["function"]["name"]: t["function"] for t in model.requests[0].body["tools"]}
        assert set(offered) >= {"read_note", "delete_note", "explode", "shifty", "crash"}
        assert offered["read_note"]["description"] == "Read the note stored under a key."
        assert offered["read_note"]["parameters"]["required"] == ["key"]
        assert offered["read_note"]["parameters"]["properties"]["key"]["type"] == "string"

    def test_arguments_that_break_the_schema_never_reach_the_server(self, notes: Notes) -> None:
        """A call whose arguments do not fit the listed schema is refused before sending."""
        script = [tool_calls(call("read_note", {"key": 7}, id="c1")), say("ok")]
        result, _ = drive(notes, script)
        assert notes.received() == []
        assert "key" in tool_messages(result)["c1"]


class TestNames:
    def test_names_providers_refuse_are_offered_safely_and_sent_exactly(self, notes: Notes) -> None:
        """Dots, slashes, spaces, unicode and a name over 64 characters: the model is offered
        a name providers accept, and the server receives its own exact name. A policy naming
        a destructive tool by the server's name allows it (no question asked)."""
        assert {notes.tools.names[o]: o for o in OFFERED.values()} == OFFERED
        script = [
            tool_calls(
                call("notes_search", {"query": "milk"}, id="c1"),
                call("files_remove", {"path": "/tmp/x"}, id="c2"),
                call("say_hello", {"to": "Ann"}, id="c3"),
                call("caf_", {"size": "large"}, id="c4"),
                call(LONG_OFFERED, {"days": 30}, id="c5"),
            ),
            say("done"),
        ]
        asked: list[af.Decision] = []

        def on_ask(decision: af.Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return False, None

        policy = af.Policy(permissions={"files/remove": "allow", LONG: "allow"})
        result, model = drive(notes, script, policy, on_ask=on_ask)
        offered = [t["function"]["name"] for t in model.requests[0].body["tools"]]
        assert all(PROVIDER_NAME.match(name) for name in offered), offered
        assert set(OFFERED.values()) <= set(offered)
        assert asked == []
        assert notes.received() == [
            ("notes.search", {"query": "milk"}),
            ("files/remove", {"path": "/tmp/x"}),
            ("say hello", {"to": "Ann"}),
            ("café", {"size": "large"}),
            (LONG, {"days": 30}),
        ]
        assert tool_messages(result) == {
            "c1": "found milk",
            "c2": "removed /tmp/x",
            "c3": "hello Ann",
            "c4": "a large coffee",
            "c5": "archived notes older than 30 days",
        }

    def test_a_policy_names_a_tool_either_way(self, notes: Notes) -> None:
        """Rules by the server's name or the offered one both apply; a destructive tool named
        by neither still asks; a glob that matches only the server's name is refused."""
        script = [
            tool_calls(
                call("files_remove", {"path": "/etc/passwd"}, id="c1"),
                call("notes_search", {"query": "secret-1"}, id="c2"),
                call("notes_search", {"query": "public"}, id="c3"),
                call("say_hello", {"to": "Bob"}, id="c4"),
            ),
            say("ok"),
        ]
        policy = af.Policy(
            permission_rules=[
                "deny files/remove(path=/etc/*)",  # the server's name
                "deny notes_search(query=secret*)",  # the offered name
                'deny "say hello"',  # the server's name, quoted for its space
            ]
        )
        result, _ = drive(notes, script, policy)
        assert notes.received() == [("notes.search", {"query": "public"})]
        messages = tool_messages(result)
        assert all("deny" in messages[i].lower() for i in ("c1", "c2", "c4")), messages
        assert messages["c3"] == "found public"

        asked: list[af.Decision] = []

        def on_ask(decision: af.Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return False, None

        remove = [tool_calls(call("files_remove", {"path": "/tmp/y"}, id="r1")), say("ok")]
        drive(notes, remove, af.Policy(permissions={"read_note": "allow"}), on_ask=on_ask)
        assert [[c.name for c in d.tool_calls] for d in asked] == [["files_remove"]]
        assert len(notes.received()) == 1  # declined: not sent
        with pytest.raises(PolicyError, match="files_remove"):
            notes.tools.policy(af.Policy(permission_rules=["deny files/*"]))
        notes.tools.policy(af.Policy(permission_rules=["deny files_*"]))  # the model's names
        # A run declaring some of the tools floors only those (a Controller refuses a floor
        # naming a tool it is not given); a name the server does not offer is refused.
        floored = notes.tools.policy(only=["files_remove"]).ask_floor
        assert floored == frozenset({"files_remove"})
        declared = [s for s in notes.tools.tools if s.name == "files_remove"]
        af.Controller(notes.tools.policy(only=["files_remove"]), tools=declared)
        with pytest.raises(PolicyError, match="floor"):
            af.Controller(notes.tools.policy(), tools=declared)
        with pytest.raises(PolicyError, match="'files_remov'"):
            notes.tools.policy(only=["files_remov"])
        for bad in (3, 2.5, object()):  # not a list of names: PolicyError, not TypeError
            with pytest.raises(PolicyError, match="only"):
                notes.tools.policy(only=bad)  # type: ignore[arg-type]

    def test_two_tools_offered_under_one_name_are_refused(self, tmp_path: Path) -> None:
        """`notes.search` and `notes_search` would both be `notes_search`: `open()` raises
        DefinitionError naming both; `names=` gives one another name, and each call reaches
        its own tool."""
        log = tmp_path / "calls.log"
        with pytest.raises(DefinitionError, match=re.escape("'notes.search' and 'notes_search'")):
            MCPServerTools(params(log, "--collide")).open()
        with pytest.raises(DefinitionError, match="names"):
            MCPServerTools(params(log), names={"notes.search": "notes.search"})
        renamed = {"notes.search": "search_notes"}
        with MCPServerTools(params(log, "--collide"), names=renamed) as tools:
            both = Notes(log, tools)
            results = executed(
                both,
                tool_call("search_notes", {"query": "a"}, id="s1"),
                tool_call("notes_search", {"query": "b"}, id="s2"),
            )
            assert [results["s1"].content, results["s2"].content] == ["found a", "also found b"]
            assert both.received() == [
                ("notes.search", {"query": "a"}),
                ("notes_search", {"query": "b"}),
            ]

    def test_two_servers_with_one_tool_name_do_not_share_a_run(self, tmp_path: Path) -> None:
        """Two servers' tools under one name: the run refuses them (ToolDefinitionError naming
        the tool) before the model is called; `names=` on one server parts them."""
        first, second = tmp_path / "first.log", tmp_path / "second.log"
        with (
            MCPServerTools(params(first)) as one,
            MCPServerTools(params(second)) as two,
            ScriptedServer([say("unused")]) as model,
        ):
            with pytest.raises(ToolDefinitionError, match="read_note"):
                scripted_run(model, TASK, tools=[*one.tools, *two.tools])
            assert model.requests == []
        renamed = {name: f"b_{name}" for name in ("read_note", "delete_note")}
        with (
            MCPServerTools(params(first)) as one,
            MCPServerTools(params(second), names=renamed) as two,
        ):
            tools = [one.tools[0], *(s for s in two.tools if s.name in renamed.values())]
            ctl = af.Controller(af.Policy(), tools=tools)
            calls = [
                tool_call("read_note", {"key": "1"}, id="a"),
                tool_call("b_read_note", {"key": "2"}, id="b"),
            ]
            decision = ctl.on_model_output(turn(calls=calls))
            af.Executor(tools).run(decision, controller=ctl)
        assert Notes(first, None).received() == [("read_note", {"key": "1"})]  # type: ignore[arg-type]
        assert Notes(second, None).received() == [("read_note", {"key": "2"})]  # type: ignore[arg-type]


class TestPermissions:
    def test_a_read_only_tool_runs_and_its_result_reaches_the_model(self, notes: Notes) -> None:
        """A read-only tool the policy does not name runs under the default policy."""
        script = [tool_calls(call("read_note", {"key": "a"}, id="c1")), say("done")]
        result, model = drive(notes, script)
        assert notes.received() == [("read_note", {"key": "a"})]
        assert tool_messages(result)["c1"] == "note a: buy milk"
        assert "note a: buy milk" in json.dumps(model.requests[1].body["messages"])

    @pytest.mark.parametrize("policy", [None, af.Policy(permissions={"*": "allow"})])
    def test_a_destructive_tool_asks_and_a_decline_sends_nothing(
        self, notes: Notes, policy: af.Policy | None
    ) -> None:
        """A destructive tool asks by default (even under `"*": "allow"`); declined, the
        server never receives the call."""
        asked: list[af.Decision] = []

        def on_ask(decision: af.Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return False, None

        script = [tool_calls(call("delete_note", {"key": "b"}, id="c1")), say("ok")]
        result, _ = drive(notes, script, policy, on_ask=on_ask)
        assert [[c.name for c in d.tool_calls] for d in asked] == [["delete_note"]]
        assert notes.received() == []
        assert result.exit_reason is af.ExitReason.HUMAN_DECLINED

    def test_an_approved_ask_is_sent(self, notes: Notes) -> None:
        """Approved by a human, the destructive call reaches the server once."""
        script = [tool_calls(call("delete_note", {"key": "b"}, id="c1")), say("ok")]
        result, _ = drive(notes, script, on_ask=lambda d: (True, None))
        assert notes.received() == [("delete_note", {"key": "b"})]
        assert tool_messages(result)["c1"] == "deleted b"

    def test_a_policy_naming_the_destructive_tool_allows_it(self, notes: Notes) -> None:
        """The policy's own entry for the tool decides: no question, the call is sent."""
        asked: list[af.Decision] = []

        def on_ask(decision: af.Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return False, None

        script = [tool_calls(call("delete_note", {"key": "b"}, id="c1")), say("ok")]
        policy = af.Policy(permissions={"delete_note": "allow"})
        result, _ = drive(notes, script, policy, on_ask=on_ask)
        assert asked == []
        assert notes.received() == [("delete_note", {"key": "b"})]
        assert result.exit_reason is af.ExitReason.COMPLETED

    def test_a_deny_rule_keeps_the_destructive_tools_ask(self, notes: Notes) -> None:
        """`deny delete_note(key=secret*)` does not drop the annotation's ask: deleting
        `b` still asks and, declined, is never sent; an allow for exactly that call lifts it."""
        asked: list[af.Decision] = []

        def on_ask(decision: af.Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return False, None

        script = [tool_calls(call("delete_note", {"key": "b"}, id="c1")), say("ok")]
        policy = af.Policy(permission_rules=["deny delete_note(key=secret*)"])
        result, _ = drive(notes, script, policy, on_ask=on_ask)
        assert len(asked) == 1
        assert notes.received() == []
        assert result.exit_reason is af.ExitReason.HUMAN_DECLINED
        lifted = af.Policy(
            permission_rules=["deny delete_note(key=secret*)", "allow delete_note(key=b)"]
        )
        result, _ = drive(notes, script, lifted, on_ask=on_ask)
        assert len(asked) == 1  # no second question
        assert notes.received() == [("delete_note", {"key": "b"})]

    def test_a_denied_call_never_reaches_the_server(self, notes: Notes) -> None:
        """A rule's deny refuses the call; its allowed sibling is sent, the denied one not."""
        script = [
            tool_calls(
                call("read_note", {"key": "secret-1"}, id="c1"),
                call("read_note", {"key": "public"}, id="c2"),
            ),
            say("ok"),
        ]
        policy = af.Policy(permission_rules=["deny read_note(key=secret*)"])
        result, _ = drive(notes, script, policy)
        assert notes.received() == [("read_note", {"key": "public"})]
        assert "deny" in tool_messages(result)["c1"].lower()

    def test_without_the_runs_controller_nothing_is_sent(self, notes: Notes) -> None:
        """An executor given no controller, or the tool's function called directly, sends
        nothing: the call is an error result."""
        spec = next(s for s in notes.tools.tools if s.name == "read_note")
        [result] = af.Executor([spec]).run([af.ToolCall(id="c1", name="read_note", arguments={})])
        assert result.is_error
        assert "not sent" in result.content
        with pytest.raises(Exception, match="not sent"):
            asyncio.run(spec.fn(key="a"))  # type: ignore[misc]
        assert notes.received() == []

    def test_a_controller_that_did_not_clear_the_call_sends_nothing(self, notes: Notes) -> None:
        """Inside an executor, a call the controller does not clear is neither sent nor
        answered there (the controller answers it)."""
        tools = notes.tools.tools
        ctl = af.Controller(af.Policy(permissions={"read_note": "deny"}), tools=tools)
        read = tool_call("read_note", {"key": "a"}, id="c1")
        decision = ctl.on_model_output(turn(calls=[read]))
        assert af.Executor(tools).run([read], controller=ctl) == []
        assert decision.action is not af.Action.EXECUTE_TOOLS
        assert notes.received() == []

    def test_a_host_loop_sends_only_what_its_controller_clears(self, notes: Notes) -> None:
        """`call(ctl, call)` sends a cleared call once and returns None for a refused one."""
        tools = notes.tools.tools
        ctl = af.Controller(af.Policy(permissions={"delete_note": "deny"}), tools=tools)
        read = tool_call("read_note", {"key": "a"}, id="r1")
        delete = tool_call("delete_note", {"key": "a"}, id="d1")
        ctl.on_model_output(turn(calls=[read, delete]))
        assert notes.tools.call(ctl, delete) is None
        result = notes.tools.call(ctl, read)
        assert result is not None
        assert result.content == "note a: buy milk"
        assert notes.tools.call(ctl, read) is None  # claimed once: never sent twice
        assert asyncio.run(notes.tools.acall(ctl, read)) is None
        assert notes.received() == [("read_note", {"key": "a"})]


class TestResults:
    def test_an_error_reported_by_the_tool_is_an_error_result(self, notes: Notes) -> None:
        """`isError: true` becomes `is_error=True` with the server's message."""
        results = executed(notes, tool_call("explode", {"reason": "boom"}, id="e1"))
        assert results["e1"].is_error
        assert "exploded: boom" in results["e1"].content
        assert "'explode'" in results["e1"].content

    def test_a_huge_result_is_cut_with_a_note(self, notes: Notes) -> None:
        """A result over `max_result_chars` is cut and says how long it was."""
        results = executed(notes, tool_call("huge", {"size": 200_000}, id="h1"))
        content = results["h1"].content
        assert not results["h1"].is_error
        assert len(content) < 50_000 + 200
        assert "200,000 characters" in content
        assert "cut" in content

    def test_images_and_resources_are_described(self, notes: Notes) -> None:
        """Non-text blocks are described in a line; a text resource keeps its text."""
        results = executed(notes, tool_call("picture", {"name": "cat"}, id="p1"))
        content = results["p1"].content
        assert content.startswith("caption of cat")
        assert "[image: image/png" in content
        assert "file:///cat.txt" in content
        assert "taken in 2026" in content

    def test_structured_content_reaches_the_model(self, notes: Notes) -> None:
        """A tool with an output schema: its data reaches the model."""
        results = executed(notes, tool_call("measure", {"name": "cat"}, id="m1"))
        assert json.loads(results["m1"].content) == {"width": 640, "height": 480}


class TestPinning:
    def test_a_tool_whose_listing_changed_is_refused_until_approved(self, notes: Notes) -> None:
        """After `tools/list_changed`, a tool whose description or schema changed is not sent;
        approved, it is offered with its new schema and sent again."""
        script = [
            tool_calls(call("shifty", {"key": "k1"}, id="s1")),
            tool_calls(call("shifty", {"key": "k2"}, id="s2")),
            say("ok"),
        ]
        result, _ = drive(notes, script)
        assert notes.received() == [("shifty", {"key": "k1"})]
        assert "not sent" in tool_messages(result)["s2"]
        assert notes.tools.changed == ["shifty"]
        assert "shifty" not in [s.name for s in notes.tools.tools]
        assert "evil.example" in notes.tools.listed("shifty")["description"]

        notes.tools.approve("shifty")
        again = [tool_calls(call("shifty", {"key": "k3", "to": "me"}, id="s3")), say("ok")]
        result, model = drive(notes, again)
        offered = {t["function"]["name"]: t for t in model.requests[0].body["tools"]}
        assert "to" in offered["shifty"]["function"]["parameters"]["properties"]
        # The server's function takes only `key` (the new listing is the rug pull's story).
        assert notes.received() == [("shifty", {"key": "k1"}), ("shifty", {"key": "k3"})]
        assert tool_messages(result)["s3"] == "note k3"

    @pytest.mark.parametrize(
        "policy",
        [
            None,
            af.Policy(permissions={"*": "allow"}),
            af.Policy(permissions={"shifty": "allow"}),
            af.Policy(permission_rules=["ask shifty"]),
        ],
    )
    def test_a_changed_tool_never_runs_without_approve(
        self, notes: Notes, policy: af.Policy | None
    ) -> None:
        """Whatever the policy says and however the human in the run answers (yes to every
        question), a call of a tool whose listing changed is not sent until `approve(name)`:
        the human in the run is asked about a call, not shown the change, so only
        `approve` (after reading `listed(name)`) lets it through; a host's own loop too."""
        script = [
            tool_calls(call("shifty", {"key": "k1"}, id="s1")),
            tool_calls(call("shifty", {"key": "k2"}, id="s2")),
            tool_calls(call("shifty", {"key": "k3"}, id="s3")),
            say("ok"),
        ]
        pinned = next(s for s in notes.tools.tools if s.name == "shifty")
        result, _ = drive(notes, script, policy, on_ask=lambda d: (True, None))
        assert notes.received() == [("shifty", {"key": "k1"})]
        messages = tool_messages(result)
        assert "changed" in messages["s2"]
        assert "changed" in messages["s3"]
        assert "shifty" not in [s.name for s in notes.tools.tools]
        # A host holding the declaration from before the change, its controller allowing all.
        ctl = af.Controller(af.Policy(permissions={"*": "allow"}), tools=[pinned])
        host = tool_call("shifty", {"key": "k4"}, id="h1")
        decision = ctl.on_model_output(turn(calls=[host]))
        assert ctl.may_run("h1", "shifty", {"key": "k4"})
        [refused] = af.Executor([pinned]).run(decision, controller=ctl)
        assert refused.is_error
        assert "changed" in refused.content
        assert notes.received() == [("shifty", {"key": "k1"})]

    def test_an_approved_annotation_change_floors_the_old_policy_too(self, tmp_path: Path) -> None:
        """A tool whose annotations turn destructive is a changed tool; once approved, a
        run whose policy was built before the change (no floor for it, `"*": "allow"`)
        still does not send its call unasked: only a policy built again asks and sends."""
        log, hints = tmp_path / "calls.log", tmp_path / "hints.json"
        with MCPServerTools(params(log, f"--hints={hints}"), timeout=30) as tools:
            old = tools.policy(af.Policy(permissions={"*": "allow"}))
            assert "read_note" not in old.ask_floor
            hints.write_text(json.dumps({"read_note": {"destructiveHint": True}}), "utf-8")
            assert tools.refresh() == ["read_note"]
            tools.approve("read_note")
            ctl = af.Controller(old, tools=tools.tools)
            decision = ctl.on_model_output(turn(calls=[tool_call("read_note", {"key": "k"})]))
            assert decision.action is af.Action.EXECUTE_TOOLS
            [refused] = af.Executor(tools.tools).run(decision, controller=ctl)
            assert refused.is_error
            assert "annotations now say" in refused.content
            new = tools.policy(af.Policy(permissions={"*": "allow"}))
            ctl = af.Controller(new, tools=tools.tools)
            decision = ctl.on_model_output(turn(calls=[tool_call("read_note", {"key": "k"})]))
            assert decision.action is af.Action.ASK_HUMAN
            decision = ctl.on_human_reply(True)
            [ran] = af.Executor(tools.tools).run(decision, controller=ctl)
        assert not ran.is_error, ran.content
        assert log.read_text(encoding="utf-8").splitlines() == ['read_note {"key": "k"}']

    def test_refresh_lists_again_at_once(self, notes: Notes) -> None:
        """`refresh()` re-lists and names the tools refused until approved."""
        assert notes.tools.refresh() == []
        executed(notes, tool_call("shifty", {"key": "k"}, id="s1"))
        assert notes.tools.refresh() == ["shifty"]
        with pytest.raises(InvalidInputError):
            notes.tools.approve("no_such_tool")

    def test_a_change_without_notice_is_caught_when_listing_before_each_call(
        self, tmp_path: Path
    ) -> None:
        """A server that changes a tool without saying so: the default client sends the next
        call (it lists again only on notice); with `relist_each_call=True` it is refused."""
        for relist, sent in ((False, 2), (True, 1)):
            log = tmp_path / f"calls-{relist}.log"
            with MCPServerTools(params(log), relist_each_call=relist) as tools:
                quiet = Notes(log, tools)
                executed(quiet, tool_call("shifty", {"key": "a", "quiet": True}, id="s1"))
                second = executed(quiet, tool_call("shifty", {"key": "b"}, id="s2"))
                assert len(quiet.received()) == sent
                assert second["s2"].is_error is relist


class TestFailures:
    def test_a_crashed_server_is_an_error_result_and_no_hang(self, notes: Notes) -> None:
        """The call that kills the server and every later call are error results naming
        their tool; the run ends promptly."""
        script = [
            tool_calls(call("crash", {"code": 3}, id="x1")),
            tool_calls(call("read_note", {"key": "z"}, id="z1")),
            say("gave up"),
        ]
        started = time.monotonic()
        result, _ = drive(notes, script)
        assert time.monotonic() - started < 30
        messages = tool_messages(result)
        assert "'crash'" in messages["x1"]
        assert "MCPServerError" in messages["x1"]
        assert "'read_note'" in messages["z1"]
        assert "MCPServerError" in messages["z1"]
        assert notes.received() == [("crash", {"code": 3})]
        assert any(d.priority == "P5" for d in result.decisions)

    def test_a_call_past_its_timeout_is_an_error_result(self, tmp_path: Path) -> None:
        """A server that does not answer within `timeout` gives an error result naming the
        tool and the limit; the next call is served."""
        log = tmp_path / "calls.log"
        with MCPServerTools(params(log), timeout=1) as tools:
            late = Notes(log, tools)
            started = time.monotonic()
            results = executed(late, tool_call("slow", {"seconds": 20}, id="w1"))
            assert time.monotonic() - started < 10
            assert results["w1"].is_error
            assert "'slow'" in results["w1"].content
            assert "within 1s" in results["w1"].content
            after = executed(late, tool_call("read_note", {"key": "n"}, id="r1"))
            assert after["r1"].content == "note n: buy milk"

    def test_bad_arguments_raise_where_they_are_given(self, tmp_path: Path) -> None:
        """Every bad argument raises an AgentFSMError subclass naming it."""
        with pytest.raises(DefinitionError, match="StdioServerParameters"):
            MCPServerTools("notes-server")
        with pytest.raises(DefinitionError, match="timeout"):
            MCPServerTools(params(tmp_path / "log"), timeout=0)
        with pytest.raises(DefinitionError, match="max_result_chars"):
            MCPServerTools(params(tmp_path / "log"), max_result_chars=True)
        with pytest.raises(DefinitionError, match="relist_each_call"):
            MCPServerTools(params(tmp_path / "log"), relist_each_call="yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="not open"):
            MCPServerTools(params(tmp_path / "log")).refresh()
        with pytest.raises(InvalidInputError, match="open it first"):
            _ = MCPServerTools(params(tmp_path / "log")).tools
        missing = StdioServerParameters(command=str(tmp_path / "no-such-server"))
        with pytest.raises(RunError, match="could not be started"):
            MCPServerTools(missing, connect_timeout=20).open()

    def test_a_policy_must_be_a_policy(self, notes: Notes) -> None:
        """`policy()` takes an agentfsm Policy or None."""
        with pytest.raises(PolicyError):
            notes.tools.policy({"delete_note": "allow"})  # type: ignore[arg-type]


class TestAsync:
    def test_async_with_and_arun(self, tmp_path: Path) -> None:
        """`async with` opens the same tools, and `af.arun` sends cleared calls."""
        log = tmp_path / "calls.log"

        async def main() -> af.RunResult:
            async with MCPServerTools(params(log)) as tools:
                script = [tool_calls(call("read_note", {"key": "q"}, id="c1")), say("ok")]
                with ScriptedServer(script) as model:
                    return await scripted_arun(
                        model, TASK, tools=tools.tools, policy=tools.policy()
                    )

        result = asyncio.run(main())
        assert tool_messages(result)["c1"] == "note q: buy milk"
        assert Notes(log, None).received() == [("read_note", {"key": "q"})]  # type: ignore[arg-type]


class TestStreamableHTTP:
    def test_a_streamable_http_server_is_governed_the_same(self, tmp_path: Path) -> None:
        """Given the server's URL, the tools come over streamable HTTP; a denied call is not
        sent, an allowed one is."""
        log = tmp_path / "calls.log"
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, str(SERVER), str(log), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until_listening(port, process, "HTTP MCP server")
            with MCPServerTools(f"http://127.0.0.1:{port}/mcp") as tools:
                http = Notes(log, tools)
                assert "read_note" in [s.name for s in tools.tools]
                policy = af.Policy(permissions={"delete_note": "deny"})
                ctl = af.Controller(tools.policy(policy), tools=tools.tools)
                calls = [
                    tool_call("delete_note", {"key": "a"}, id="d1"),
                    tool_call("read_note", {"key": "h"}, id="r1"),
                ]
                decision = ctl.on_model_output(turn(calls=calls))
                results = af.Executor(tools.tools).run(decision, controller=ctl)
                assert [(r.call_id, r.content) for r in results] == [("r1", "note h: buy milk")]
                assert http.received() == [("read_note", {"key": "h"})]
        finally:
            process.terminate()
            process.wait(30)


class TestDocs:
    def test_the_pages_example_runs_as_printed(self, tmp_path: Path) -> None:
        """docs/integrations/mcp.md's example runs: the read is sent, the declined delete not."""
        root = Path(__file__).resolve().parents[2]
        page = (root / "docs" / "integrations" / "mcp.md").read_text(encoding="utf-8")
        found = re.search(r"```python\n(.*?)```", page, re.DOTALL)
        assert found, "docs/integrations/mcp.md has no python example"
        (tmp_path / "tests").symlink_to(root / "tests")  # the example runs from the root
        env = {**os.environ, "PYTHONPATH": str(root), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = python("-c", found.group(1), cwd=tmp_path, env=env, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines()[:2] == [
            "completed Read it; deleting was declined.",
            'read_note {"key": "a"}',
        ]


class TestSubAgentsWithServerTools:
    """A handoff child given the server's tools runs under its policy narrowed by the parent's:
    nothing the parent would stop reaches the server."""

    def test_a_call_the_parent_denies_is_never_sent(self, notes: Notes) -> None:
        """The parent denies `delete_note` (a rule for that name); the child's own policy
        allows it: the server receives the read, never the delete."""
        script = [
            tool_calls(call("research", {"task": "tidy"})),
            tool_calls(call("read_note", {"key": "a"}), call("delete_note", {"key": "a"})),
            say("child done"),
            say("parent done"),
        ]
        child_policy = notes.tools.policy(af.Policy(permissions={"delete_note": "allow"}))
        parent = af.Policy(handoffs=frozenset({"research"}), permission_rules=["deny delete_*"])
        agents = {"research": af.Agent(tools=notes.tools.tools, policy=child_policy)}
        with ScriptedServer(script) as model:
            result = scripted_run(model, TASK, tools=["research"], policy=parent, agents=agents)
        assert [tool for tool, _ in notes.received()] == ["read_note"]
        assert result.exit_reason is af.ExitReason.COMPLETED
