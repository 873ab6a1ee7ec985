"""A deny is final and once means once, across the seam into a real MCP server.

Random policies (text rules and table entries with deny, ask and allow, naming tools by the
server's name or the name offered to the model, `"*": "deny"` sometimes), random annotations
on the server's tools, and one random turn of model calls (repeated and missing ids, unknown
tools, the server's own name where the model must use the offered one, arguments that break
the schema) run through `af.run`, the model a `ScriptedServer`, the tools those of the real
stdio server process (`mcp_tools_server.py`, started once for the module; its log of received
calls is emptied for each example), a human approving or declining.

Oracle, written apart from the code under test: a call to an unknown tool or with arguments
that break the schema is denied; otherwise its verdict is the policy's (the strongest of its
rules and table entries for the tool under either name, else `"*"`, else allow; a deny or ask
rule on an argument the call lacks cannot be evaluated and asks), where an
allow becomes `ask` for a tool whose annotations say it may change things, unless the tool's
own table entry is allow or an allow rule written for exactly the tool (either name) matches
the call (the ask floor: a deny or ask rule naming the tool keeps it). A turn with an
`ask` waits for the human: approved, its allowed and asked calls run; declined, none
does. Sometimes the run's policy is built under earlier annotations, which then change
and are approved: the Controller decides with the earlier floor, and a call it allowed
unasked is sent only when the current annotations' floor allows it too. Checked: the
server received exactly the calls cleared, each once (nothing denied or declined reaches
it); the human was asked exactly when a call needed it; every call the model made got
exactly one result.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.integrations.mcp import MCPServerTools
from agentfsm.testing.scripted import call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.integrations.test_mcp_client import Notes, params
from tests.runner.conftest import close_litellm_event_loop, scripted_run

pytestmark = LITELLM_CLIENT
_ = close_litellm_event_loop

EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TASK = [{"role": "user", "content": "Tidy my notes."}]

SERVER_NAME = {  # the name offered to the model -> the server's name
    "read_note": "read_note",
    "delete_note": "delete_note",
    "notes_search": "notes.search",
    "files_remove": "files/remove",
}
ARGUMENT = {
    "read_note": "key",
    "delete_note": "key",
    "notes_search": "query",
    "files_remove": "path",
}
VALUES = ("public", "secret-1", "admin", "/tmp/x", "/etc/passwd")
RULES = (  # (action, tool, argument, glob): the text form is built from these
    ("deny", "delete_note", "key", "secret*"),
    ("ask", "read_note", "key", "secret*"),
    ("allow", "delete_note", None, None),
    ("deny", "files/remove", "path", "/etc/*"),  # the server's name
    ("allow", "files_remove", "path", "/tmp/*"),  # the offered name
    ("ask", "notes.search", None, None),  # the server's name
    ("deny", "notes_search", "query", "admin"),
    ("deny", "*", "key", "admin"),
    ("allow", "*", None, None),
    ("ask", "*", None, None),
)
TABLE_NAMES = ("read_note", "delete_note", "notes.search", "files_remove", "*")
VERDICTS = ("allow", "ask", "deny")
HINTS = (  # annotations the server gives a tool: None for none
    None,
    {"readOnlyHint": True},
    {"destructiveHint": True},
    {"readOnlyHint": False, "destructiveHint": False},
    {"readOnlyHint": False},
    {"idempotentHint": True},
)
STRENGTH = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class Scenario:
    """The policy's parts, the tools' annotations, one turn of calls and the human's answer."""

    rules: tuple[tuple[str, str, str | None, str | None], ...]
    table: dict[str, str]
    hints: dict[str, dict[str, Any] | None]
    calls: tuple[tuple[str | None, str, Any], ...]
    """(id, name the model calls, arguments)."""
    approve: bool
    before: dict[str, dict[str, Any] | None] | None = None
    """The annotations the run's policy was built under, when not the current ones."""

    def policy(self) -> af.Policy:
        texts = [
            f'{action} "{tool}"' + (f"({arg}={glob})" if arg is not None else "")
            for action, tool, arg, glob in self.rules
        ]
        return af.Policy(
            permission_rules=texts,
            permissions=self.table,
            repeat_threshold=50,
            no_progress_threshold=None,
        )

    def verdict(
        self, name: str, arguments: Any, hints: dict[str, dict[str, Any] | None] | None = None
    ) -> str:
        """The oracle's verdict on one call (see the module's docstring), under `hints`
        (default: the current annotations)."""
        hints = self.hints if hints is None else hints
        if name not in SERVER_NAME:
            return "deny"
        wanted = ARGUMENT[name]
        if not isinstance(arguments, dict) or set(arguments) != {wanted}:
            return "deny"
        if not isinstance(arguments[wanted], str):
            return "deny"
        names = {name, SERVER_NAME[name]}
        spoken = [
            action
            for action, tool, arg, glob in self.rules
            if (tool in names or tool == "*") and _matches(arg, glob, arguments)
        ]
        # A deny or ask rule on an argument the call lacks cannot be evaluated on it: it asks.
        spoken += [
            "ask"
            for action, tool, arg, _ in self.rules
            if (tool in names or tool == "*") and action != "allow"
            if arg is not None and arg not in arguments
        ]
        spoken += [self.table[n] for n in names if n in self.table]
        policy = max(spoken, key=STRENGTH.__getitem__) if spoken else self.table.get("*", "allow")
        if policy != "allow" or not changes_things(hints.get(SERVER_NAME[name])):
            return policy
        # The floor: only the tool's own entry or an allow rule for exactly it lifts it.
        entry = [self.table[n] for n in names if n in self.table]
        if entry and max(entry, key=STRENGTH.__getitem__) == "allow":
            return policy
        own = any(
            action == "allow" and tool in names and _matches(arg, glob, arguments)
            for action, tool, arg, glob in self.rules
        )
        return policy if own else "ask"

    def expected(self) -> tuple[Counter[tuple[str, str]], bool]:
        """The calls the server must receive, (server name, arguments as JSON), and whether
        a human is asked."""
        built = self.hints if self.before is None else self.before
        verdicts = [self.verdict(name, arguments, built) for _, name, arguments in self.calls]
        asked = "ask" in verdicts
        runs = {"allow", "ask"} if (asked and self.approve) else set() if asked else {"allow"}
        return Counter(
            (SERVER_NAME[name], json.dumps(arguments, sort_keys=True))
            for (_, name, arguments), v in zip(self.calls, verdicts, strict=True)
            if v in runs and (v == "ask" or self.verdict(name, arguments) == "allow")
        ), asked


def _matches(arg: str | None, glob: str | None, arguments: dict[str, Any]) -> bool:
    """Whether a rule's one argument pattern matches (a call lacking the argument: no)."""
    if arg is None or glob is None:
        return True
    return arg in arguments and fnmatch.fnmatchcase(arguments[arg], glob)


def changes_things(hints: dict[str, Any] | None) -> bool:
    """The specification's defaults: read-only false, destructive true."""
    hints = hints or {}
    if hints.get("readOnlyHint") is True:
        return False
    return hints.get("destructiveHint") is not False


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    rules = tuple(draw(st.lists(st.sampled_from(RULES), max_size=3, unique=True)))
    table = draw(
        st.dictionaries(st.sampled_from(TABLE_NAMES), st.sampled_from(VERDICTS), max_size=2)
    )
    if draw(st.integers(0, 4)) == 0:
        table["*"] = "deny"
    hints = {server: draw(st.sampled_from(HINTS)) for server in SERVER_NAME.values()}
    good = st.sampled_from(list(SERVER_NAME)).flatmap(
        lambda name: st.tuples(
            st.just(name), st.sampled_from(VALUES).map(lambda v: {ARGUMENT[name]: v})
        )
    )
    odd = st.sampled_from(
        [
            ("no_such_tool", {"key": "public"}),
            ("notes.search", {"query": "public"}),  # the server's name: not offered
            ("read_note", {"key": 7}),
            ("delete_note", {}),
            ("files_remove", {"path": 5}),
        ]
    )
    one = st.tuples(st.sampled_from(["c1", "c2", "c3", None]), st.one_of(good, good, odd))
    calls = tuple(
        (i, name, args) for i, (name, args) in draw(st.lists(one, min_size=1, max_size=4))
    )
    before = None
    if draw(st.booleans()):
        before = {server: draw(st.sampled_from(HINTS)) for server in SERVER_NAME.values()}
    return Scenario(rules, table, hints, calls, draw(st.booleans()), before)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Notes, Path]]:
    """One server process for the whole module: its log, and the file its hints come from."""
    folder = tmp_path_factory.mktemp("mcp-property")
    log, hints = folder / "calls.log", folder / "hints.json"
    with MCPServerTools(params(log, f"--hints={hints}"), timeout=30) as tools:
        yield Notes(log, tools), hints


class TestMCPProperty:
    @EXAMPLES
    @given(scenarios())
    def test_no_denied_or_declined_call_reaches_the_server(
        self, server: tuple[Notes, Path], scenario: Scenario
    ) -> None:
        """See the module's docstring."""
        notes, hints_file = server
        # The hints floor every offered tool; a Controller refuses a floor naming a tool it is
        # not given (a misspelled floor would let the tool run unasked): floor the declared.
        declared = [s.name for s in notes.tools.tools if s.name in SERVER_NAME]
        policy = None
        for hints in (scenario.before, scenario.hints):
            if hints is None:
                continue
            hints_file.write_text(json.dumps(hints), encoding="utf-8")
            notes.tools.refresh()
            for name in notes.tools.changed:  # the annotations changed: a person approves them
                notes.tools.approve(name)
            # built the first time
            policy = policy or notes.tools.policy(scenario.policy(), only=declared)
        assert policy is not None
        notes.log.write_text("", encoding="utf-8")
        tools = [s for s in notes.tools.tools if s.name in SERVER_NAME]
        assert {s.name for s in tools} == set(SERVER_NAME)
        asked: list[af.Decision] = []

        def on_ask(decision: af.Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return scenario.approve, None

        script = [
            tool_calls(*(call(name, args, id=i) for i, name, args in scenario.calls)),
            say("done"),
        ]
        with ScriptedServer(script) as model:
            result = scripted_run(model, TASK, tools=tools, policy=policy, on_ask=on_ask)

        want, human = scenario.expected()
        received = Counter(
            (tool, json.dumps(args, sort_keys=True)) for tool, args in notes.received()
        )
        assert received == want, (result.exit_reason, [d.reason for d in result.decisions])
        assert len(asked) == (1 if human else 0)
        made = [
            c["id"]
            for m in result.messages
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
        ]
        answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
        assert len(made) == len(scenario.calls)
        assert Counter(answered) == Counter(made)
        assert all(n == 1 for n in Counter(made).values())
