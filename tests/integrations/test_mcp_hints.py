"""MCP tool annotations as defaults: they ask for more care, never less (issue 31, item 1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.types import ToolAnnotations

import agentfsm as af
from agentfsm.integrations._mcp_hints import changes_things, with_hints

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


def test_a_destructive_tool_asks_unless_the_policy_names_it() -> None:
    call = af.ToolCall(id="c", name="drop_table", arguments={})
    hints = {"drop_table": ToolAnnotations(destructiveHint=True)}
    assert with_hints(af.Policy(), hints).permission_for(call) == "ask"
    named = af.Policy(permissions={"drop_table": "allow"})
    assert with_hints(named, hints).permission_for(call) == "allow"
    ruled = af.Policy(permission_rules=["allow drop_table"])
    assert with_hints(ruled, hints).permission_for(call) == "allow"


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
)


@given(
    star=st.none() | _VERDICTS,
    own=st.none() | _VERDICTS,
    rule=st.none() | _VERDICTS,
    hints=_HINTS,
)
def test_hints_never_loosen_a_verdict(
    star: str | None, own: str | None, rule: str | None, hints: Any
) -> None:
    """For any table and rules, the verdict with the hints is at least the one without."""
    table = {k: v for k, v in (("*", star), ("t", own)) if v is not None}
    rules = [f"{rule} t*"] if rule is not None else []
    policy = af.Policy(permissions=table, permission_rules=rules)
    call = af.ToolCall(id="c", name="t", arguments={})
    before = policy.permission_for(call)
    after = with_hints(policy, {"t": hints}).permission_for(call)
    assert _STRENGTH[after] >= _STRENGTH[before]
    if own is not None:
        assert after == before  # the policy names the tool: it decides
