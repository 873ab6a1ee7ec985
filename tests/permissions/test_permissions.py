"""Permissions: rules by name and argument, deny > ask > allow, and hooks that fail closed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._permissions import Rule
from agentfsm.exceptions import AgentFSMError, PolicyError

RULES = [
    "deny bash(command=rm -rf *)",
    "ask bash(command=git push*)",
    "allow read_file",
    "allow bash",
]


def call(name: str, cid: str = "c1", **arguments: Any) -> af.ToolCall:
    return af.ToolCall(id=cid, name=name, arguments=arguments)


class TestRules:
    """Rules by tool name and argument pattern."""

    @pytest.mark.parametrize(
        ("tool_call", "expected"),
        [
            (call("bash", command="rm -rf /"), "deny"),
            (call("bash", command="git push origin main"), "ask"),
            (call("bash", command="ls"), "allow"),
            (call("read_file", path="/etc/hosts"), "allow"),
            (call("write_file", path="x"), "allow"),
        ],
    )
    def test_the_issue_example(self, tool_call: af.ToolCall, expected: str) -> None:
        """deny `rm -rf *`, ask `git push*`, allow the rest of bash and read_file."""
        assert af.Policy(permission_rules=RULES).permission_for(tool_call) == expected

    def test_a_deny_is_never_overridden(self) -> None:
        """An allow rule, table entry or hook cannot lift a matching deny."""
        policy = af.Policy(
            permission_rules=["allow *", "deny bash(command=rm *)"],
            permissions={"bash": "allow"},
            permission=lambda c: "allow",
        )
        assert policy.permission_for(call("bash", command="rm x")) == "deny"
        assert policy.permission_for(call("bash", command="ls")) == "allow"

    def test_the_table_default_applies_when_nothing_speaks(self) -> None:
        """`permissions["*"]` decides only for calls no rule, entry or hook speaks about."""
        policy = af.Policy(permission_rules=["allow read_*"], permissions={"*": "deny"})
        assert policy.permission_for(call("read_file")) == "allow"
        assert policy.permission_for(call("write_file")) == "deny"

    def test_a_non_string_argument_is_matched_as_json(self) -> None:
        """A list argument is matched as compact JSON."""
        rule = Rule.parse('deny run(argv=["rm"*)')
        assert rule.matches(call("run", argv=["rm", "-rf"]))
        assert not rule.matches(call("run", argv=["ls"]))

    def test_a_call_without_the_argument_does_not_match(self) -> None:
        """A rule on `command` says nothing about a call without `command`."""
        assert not Rule.parse("deny bash(command=*)").matches(call("bash"))

    def test_rules_read_back(self) -> None:
        """A rule's text form parses back to the same rule, and the policy's JSON keeps it."""
        rules = [Rule.parse(text) for text in RULES]
        assert [Rule.parse(str(r)) for r in rules] == rules
        saved = af.Policy(permission_rules=RULES).to_json()["permission_rules"]
        assert af.Policy(permission_rules=saved).permission_rules == tuple(rules)

    def test_a_mapping_builds_the_same_rule(self) -> None:
        """`{"action", "tool", "args"}` is the same as the text form."""
        mapping = {"action": "deny", "tool": "bash", "args": {"command": "rm -rf *"}}
        assert Rule.of(mapping) == Rule.parse("deny bash(command=rm -rf *)")

    @pytest.mark.parametrize(
        "bad",
        ["forbid bash", "deny", "deny bash(command)", "", {"action": "maybe", "tool": "x"}, 3],
    )
    def test_a_rule_that_does_not_parse_is_a_policy_error(self, bad: object) -> None:
        """A bad rule raises PolicyError quoting it."""
        with pytest.raises(PolicyError, match="permission rule"):
            af.Policy(permission_rules=[bad])


class TestHooks:
    """A hook's verdict is understood only when it is exactly allow, ask or deny."""

    @pytest.mark.parametrize("value", ["DENY", "no", False, None, 0, "Allow", "allow ", True, 1])
    def test_an_unrecognised_value_denies(self, value: object) -> None:
        """Values such as "DENY", "no", False, None or 0 deny; the reason names the value."""
        ctl = af.Controller(af.Policy(permission=lambda c: value))
        d = ctl.on_model_output(af.ModelTurn(tool_calls=[call("rm")]))
        assert d.action is af.Action.CONTINUE
        assert d.tool_calls == []
        assert d.results[0].is_error
        assert repr(value) in d.results[0].content
        assert "permission denied" in d.results[0].content

    def test_a_hook_that_raises_denies(self) -> None:
        """A hook that fails denies the call, naming the exception."""

        def hook(c: af.ToolCall) -> str:
            raise KeyError("user")

        policy = af.Policy(permission=hook)
        assert policy.permission_verdict(call("rm"))[0] == "deny"
        assert "KeyError" in policy.permission_verdict(call("rm"))[1]


class TestMixedBatches:
    """Every other call of a batch is executed or answered exactly once."""

    def test_an_allowed_sibling_of_an_asked_call_is_not_dropped(self) -> None:
        """Approving runs both the asked call and its allowed sibling; a denied one has a result."""
        policy = af.Policy(permission_rules=RULES)
        ctl = af.Controller(policy)
        batch = [
            call("bash", "a", command="git push"),
            call("read_file", "b", path="x"),
            call("bash", "c", command="rm -rf /"),
        ]
        d = ctl.on_model_output(af.ModelTurn(tool_calls=batch))
        assert d.action is af.Action.ASK_HUMAN
        assert [r.call_id for r in d.results] == ["c"]
        d = ctl.on_human_reply(approved=True)
        assert d.action is af.Action.EXECUTE_TOOLS
        assert sorted(c.id for c in d.tool_calls) == ["a", "b"]

    def test_declining_still_answers_every_call(self) -> None:
        """Declining with a message answers the asked and the allowed calls."""
        ctl = af.Controller(af.Policy(permission_rules=RULES))
        batch = [call("bash", "a", command="git push"), call("read_file", "b", path="x")]
        ctl.on_model_output(af.ModelTurn(tool_calls=batch))
        d = ctl.on_human_reply(approved=False, message="not now")
        assert sorted(r.call_id for r in d.results) == ["a", "b"]


NAMES = st.sampled_from(["bash", "read_file", "rm", "push"])
VALUES = st.one_of(
    st.sampled_from(["allow", "ask", "deny"]),
    st.text(max_size=6),
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
)


class TestDeniedNeverRuns:
    """Properties: denied calls are never executed; an unrecognised hook value denies."""

    @settings(deadline=None)
    @given(
        names=st.lists(NAMES, min_size=1, max_size=5),
        verdicts=st.dictionaries(NAMES, VALUES),
        approve=st.booleans(),
    )
    def test_no_denied_call_reaches_the_host(
        self, names: list[str], verdicts: dict[str, object], approve: bool
    ) -> None:
        """Whatever the hook says, a call it did not allow exactly never comes back to run."""

        def hook(c: af.ToolCall) -> Any:
            return verdicts.get(c.name, "allow")

        ctl = af.Controller(af.Policy(permission=hook))
        batch = [call(n, f"c{i}") for i, n in enumerate(names)]
        d = ctl.on_model_output(af.ModelTurn(tool_calls=batch))
        executed: list[af.ToolCall] = (
            list(d.tool_calls) if d.action is af.Action.EXECUTE_TOOLS else []
        )
        answered = [r.call_id for r in d.results]
        if d.action is af.Action.ASK_HUMAN:
            d = ctl.on_human_reply(approved=approve, message=None if approve else "no")
            answered += [r.call_id for r in d.results]
            if d.action is af.Action.EXECUTE_TOOLS:
                executed = list(d.tool_calls)
        for c in executed:
            value = verdicts.get(c.name, "allow")
            assert type(value) is str
            assert value in ("allow", "ask")
        ran = {c.id for c in executed}
        # Every call is executed or answered, exactly once over the decisions.
        assert sorted([*ran, *answered]) == sorted(c.id for c in batch)
        for c in batch:
            value = verdicts.get(c.name, "allow")
            if not (type(value) is str and value in ("allow", "ask")):
                assert c.id not in ran
                assert c.id in answered

    @settings(deadline=None)
    @given(value=st.from_type(object).filter(lambda v: v not in ("allow", "ask", "deny")))
    def test_any_unrecognised_value_denies(self, value: object) -> None:
        """Any hook value other than the three strings denies the call."""
        policy = af.Policy(permission=lambda c: value)
        verdict, why = policy.permission_verdict(call("tool"))
        assert verdict == "deny"
        assert "not 'allow', 'ask' or 'deny'" in why


def test_permission_errors_are_agentfsm_errors() -> None:
    """PolicyError is an AgentFSMError."""
    assert issubclass(PolicyError, AgentFSMError)
