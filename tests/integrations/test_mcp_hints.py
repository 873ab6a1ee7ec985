"""MCP tool annotations as defaults: they ask for more care, never less (issue 31, item 1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.types import ToolAnnotations

import agentfsm as af
from agentfsm.integrations.mcp._hints import changes_things, with_hints

_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}


@pytest.mark.parametrize(
    ("annotations", "changes"),
    [
        (None, True),  # the specification's defaults: not read-only, destructive
        (ToolAnnotations(), True),
        (ToolAnnotations(readOnlyHint=True), False),
        (ToolAnnotations(readOnlyHint=True, destructiveHint=True), False),
        (ToolAnnotations(destructiveHint=False), False),
        (ToolAnnotations(readOnlyHint=False, destructiveHint=True), True),
        ({"readOnlyHint": "yes"}, True),  # not a bool: not understood, read as the default
        ({"destructiveHint": 0}, True),
    ],
)
def test_the_hints_read_with_the_specifications_defaults(annotations: Any, changes: bool) -> None:
    assert changes_things(annotations) is changes


def test_a_destructive_tool_asks_unless_an_allow_names_it() -> None:
    """A destructive tool asks; its own allow entry or an allow rule for it lifts that."""
    call = af.ToolCall(id="c", name="drop_table", arguments={})
    hints = {"drop_table": ToolAnnotations(destructiveHint=True)}
    assert with_hints(af.Policy(), hints).permission_for(call) == "ask"
    named = af.Policy(permissions={"drop_table": "allow"})
    assert with_hints(named, hints).permission_for(call) == "allow"
    ruled = af.Policy(permission_rules=["allow drop_table"])
    assert with_hints(ruled, hints).permission_for(call) == "allow"
    star = af.Policy(permissions={"*": "allow"}, permission_rules=["allow drop*"])
    assert with_hints(star, hints).permission_for(call) == "ask"  # no allow for exactly it


def test_a_deny_rule_keeps_the_annotation_floor() -> None:
    """Adding `deny bash(command~rm -rf *)` leaves `dd of=/dev/sda` asking (issue 35)."""
    policy = af.Policy(permission_rules=["deny bash(command~rm -rf *)"])
    hinted = with_hints(policy, {"bash": None})

    def verdict(command: str) -> str:
        return hinted.permission_for(
            af.ToolCall(id="c", name="bash", arguments={"command": command})
        )

    assert verdict("dd if=/dev/zero of=/dev/sda") == "ask"
    assert verdict("rm -rf /") == "deny"
    allowing = with_hints(
        af.Policy(permission_rules=["allow bash(command~git status*)"]), {"bash": None}
    )
    call = af.ToolCall(id="c", name="bash", arguments={"command": "git status"})
    assert allowing.permission_for(call) == "allow"  # an allow matching that call lifts it
    other = af.ToolCall(id="c", name="bash", arguments={"command": "dd of=/dev/sda"})
    assert allowing.permission_for(other) == "ask"


def test_the_floor_is_recorded_in_the_policy_dump() -> None:
    """A floored policy dumps and reads back with its floor, so a trace replays it."""
    hinted = with_hints(af.Policy(), {"drop_table": None, "read_row": {"readOnlyHint": True}})
    assert hinted.ask_floor == frozenset({"drop_table"})
    again = af.Policy.from_mapping(hinted.to_json())
    assert again.ask_floor == hinted.ask_floor
    assert "ask_floor" not in af.Policy().to_json()


def test_a_read_only_hint_loosens_nothing() -> None:
    call = af.ToolCall(id="c", name="list_rows", arguments={})
    policy = af.Policy(permissions={"*": "deny"})
    hints = {"list_rows": ToolAnnotations(readOnlyHint=True)}
    assert with_hints(policy, hints).permission_for(call) == "deny"


_VERDICTS = st.sampled_from(["allow", "ask", "deny"])
_HINTS = st.one_of(
    st.none(),
    st.builds(
        ToolAnnotations,
        readOnlyHint=st.none() | st.booleans(),
        destructiveHint=st.none() | st.booleans(),
    ),
    st.fixed_dictionaries({"readOnlyHint": st.sampled_from([True, False, "yes", 1, None])}),
)
_TOOLS = st.sampled_from(["t", "t*", "*", "u", "bash"])
_PATTERNS = st.sampled_from(
    ["", "(command=ls*)", "(command~rm -rf *)", "(command~git status*)", "(path=/tmp/*)"]
)
_RULES = st.lists(
    st.tuples(_VERDICTS, _TOOLS, _PATTERNS).map(lambda r: f"{r[0]} {r[1]}{r[2]}"), max_size=4
)
_COMMANDS = st.sampled_from(
    ["ls -l", "rm -rf /", "git status", "git status && dd of=/dev/sda", "eval $X", "dd of=/dev/sda"]
)
_ARGUMENTS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries({"command": _COMMANDS}),
    st.fixed_dictionaries({"path": st.sampled_from(["/tmp/x", "/etc/passwd"])}),
    st.just({}),
)


@given(
    star=st.none() | _VERDICTS,
    own=st.none() | _VERDICTS,
    rules=_RULES,
    hints=_HINTS,
    name=st.sampled_from(["t", "bash"]),
    arguments=_ARGUMENTS,
)
def test_an_asking_annotation_is_a_floor_only_an_allow_for_the_call_lifts(
    star: str | None,
    own: str | None,
    rules: list[str],
    hints: Any,
    name: str,
    arguments: dict[str, Any],
) -> None:
    """For any table, rules, annotations and call: the hints never loosen a verdict; a tool
    that may change things runs unasked only when its own entry is allow or an allow rule
    written for exactly that tool applies to the call; other tools keep the policy's verdict."""
    table = {k: v for k, v in (("*", star), (name, own)) if v is not None}
    policy = af.Policy(permissions=table, permission_rules=rules)
    call = af.ToolCall(id="c", name=name, arguments=arguments)
    before = policy.permission_for(call)
    after = with_hints(policy, {name: hints}).permission_for(call)
    assert _STRENGTH[after] >= _STRENGTH[before]
    if not changes_things(hints) or before != "allow":
        assert after == before
        return
    own_allows = [r for r in policy.permission_rules if r.action == "allow" and r.tool == name]
    if after == "allow":
        assert own == "allow" or any(r.applies_to(call) for r in own_allows)
    if own == "allow" or any(r.matches(call) for r in own_allows):
        assert after == "allow"  # an allow for exactly that call lifts the floor
