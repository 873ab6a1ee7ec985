"""Permission rules read against the declared tools' schemas, and against each other.

A rule that names an argument the tool does not take, or a tool that is not declared, can
never match: `deny bash(comand~rm -rf *)` would let `rm -rf /` run. With the tools known,
the Controller refuses such a policy when it is built; `shadowed` names the rules that can
never decide a call because another rule (or the table) always decides it first.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import ToolCall
from agentfsm._permissions import Permission, Rule, decide, declared_arguments, shadowed
from agentfsm.exceptions import PolicyError
from agentfsm.testing import call as tool_call
from agentfsm.testing import turn

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "run a command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def read_file(path: str, limit: int = 100) -> str:
    """Read a file."""
    return path[:limit]


def _controller(rules: list[str], tools: list[Any] | None = None, **fields: Any) -> af.Controller:
    policy = af.Policy(permission_rules=rules, **fields)
    return af.Controller(policy, tools=[BASH, read_file] if tools is None else tools)


class TestRulesAgainstDeclaredTools:
    """A Controller with declared tools refuses rules that can never match them."""

    def test_a_misspelled_argument_is_refused_with_the_right_name(self) -> None:
        """`comand` on a bash tool whose schema takes `command`: PolicyError saying so."""
        with pytest.raises(PolicyError, match=r"'comand'.*did you mean 'command'\?"):
            _controller(["deny bash(comand~rm -rf *)"])

    def test_a_callable_tools_parameters_are_its_arguments(self) -> None:
        """A callable's parameters are the names a rule may read; a typo is refused."""
        with pytest.raises(PolicyError, match=r"'pth'.*did you mean 'path'\?"):
            _controller(["ask read_file(pth=/etc/*)"])
        assert _controller(["ask read_file(path=/etc/*, limit=1*)"]).state == "await_model"

    def test_an_undeclared_tool_is_refused_unless_the_rule_is_a_glob(self) -> None:
        """`deny bsh` names no declared tool (did you mean 'bash'); `deny bsh*` is a glob."""
        with pytest.raises(PolicyError, match=r"tool 'bsh', which is not declared.*'bash'"):
            _controller(["deny bsh"])
        assert _controller(["deny bsh*", "deny *(command~rm -rf *)"]).tools is not None

    def test_a_glob_needs_one_matching_tool_that_takes_the_argument(self) -> None:
        """`*(command~...)` is fine (bash takes it); `*(cmd=...)` is taken by no tool."""
        with pytest.raises(PolicyError, match=r"'cmd', which no tool matching it takes"):
            _controller(["deny *(cmd=rm*)"])

    def test_a_schema_that_accepts_any_name_checks_nothing(self) -> None:
        """No schema, no properties, `**kwargs`, patternProperties: any argument may exist."""

        def loose(**kwargs: Any) -> str:
            return str(kwargs)

        open_schema = {"name": "q", "parameters": {"type": "object", "patternProperties": {}}}
        rules = ["deny loose(anything=*)", "deny plain(x=1)", "deny q(y~rm *)"]
        assert _controller(rules, tools=[loose, "plain", open_schema]).tools is not None

    def test_no_declared_tools_checks_nothing(self) -> None:
        """`tools=None` accepts any tool name: the rules are kept as written."""
        assert af.Controller(af.Policy(permission_rules=["deny bsh(comand=x)"])).tools is None

    def test_the_refusal_runs_nothing_and_the_right_rule_denies(self) -> None:
        """Spelled right, the rule denies `rm -rf /` on the same declared tools."""
        ctl = _controller(["deny bash(command~rm -rf *)"])
        call = ToolCall(id="c", name="bash", arguments={"command": "rm -rf /"})
        assert ctl.policy.permission_for(call) == "deny"

    @given(
        names=st.lists(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), min_size=1, unique=True),
        typo=st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
        action=st.sampled_from(["allow", "ask", "deny"]),
        shell=st.booleans(),
    )
    def test_an_argument_is_accepted_exactly_when_the_schema_declares_it(
        self, names: list[str], typo: str, action: str, shell: bool
    ) -> None:
        """For any declared argument names, a rule is refused iff it names another one."""
        schema = {"type": "object", "properties": {n: {"type": "string"} for n in names}}
        tool = {"name": "t", "parameters": schema}
        op = "~" if shell else "="
        policy = af.Policy(permission_rules=[f"{action} t({typo}{op}x *)"])
        if typo in names:
            assert af.Controller(policy, tools=[tool]).tools is not None
        else:
            with pytest.raises(PolicyError, match=repr(typo)):
                af.Controller(policy, tools=[tool])


class TestTableAgainstDeclaredTools:
    """A `permissions` entry naming no declared tool is refused as a rule naming none is."""

    def test_a_misspelled_table_entry_is_refused_with_did_you_mean(self) -> None:
        """Regression: `permissions={"bsh": "deny"}` was accepted and never denied bash."""
        with pytest.raises(PolicyError, match=r"permissions\['bsh'\].*did you mean 'bash'\?"):
            _controller([], permissions={"bsh": "deny"})

    def test_a_glob_key_is_a_name_and_is_refused_with_the_rule_to_write(self) -> None:
        """The table is read by exact name: `"read_*"` never speaks for read_file; refused,
        pointing at the rule `deny read_*`."""
        with pytest.raises(PolicyError, match=r"not globs.*'deny read_\*'"):
            _controller([], permissions={"read_*": "deny"})

    def test_the_default_key_and_declared_names_are_accepted(self) -> None:
        """`"*"` is the default, and declared names speak for their tools."""
        ctl = _controller([], permissions={"*": "ask", "bash": "deny", "read_file": "allow"})
        assert ctl.policy.permission_for(ToolCall(id="c", name="bash")) == "deny"

    def test_no_declared_tools_checks_no_entry(self) -> None:
        """`tools=None` accepts any name, as for rules."""
        assert af.Controller(af.Policy(permissions={"bsh": "deny"})).tools is None

    @given(
        declared=st.lists(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), min_size=1, unique=True),
        keys=st.lists(st.from_regex(r"[a-z_*]{1,6}", fullmatch=True), max_size=3),
    )
    def test_an_entry_is_accepted_exactly_when_it_is_declared_or_the_default(
        self, declared: list[str], keys: list[str]
    ) -> None:
        """For any declared names and table keys: refused iff a key other than `*` is not a
        declared name."""
        policy = af.Policy(permissions=dict.fromkeys(keys, "deny"))
        if all(key == "*" or key in declared for key in keys):
            assert af.Controller(policy, tools=declared).tools is not None
        else:
            with pytest.raises(PolicyError, match="permissions"):
                af.Controller(policy, tools=declared)


class TestNamedToolsAgainstDeclaredTools:
    """`ask_floor`, `final_tools` and `handoffs` naming no declared tool are refused."""

    @pytest.mark.parametrize("field", ["ask_floor", "final_tools", "handoffs"])
    def test_a_misspelled_name_is_refused_with_did_you_mean(self, field: str) -> None:
        """Regression: `ask_floor=["bsh"]` was accepted, and bash ran unasked."""
        with pytest.raises(PolicyError, match=rf"{field} names 'bsh'.*did you mean 'bash'\?"):
            af.Controller(af.Policy(**{field: ["bsh"]}), tools=[BASH, read_file])

    def test_a_misspelled_floor_no_longer_lets_the_call_run_unasked(self) -> None:
        """The declared name in the floor asks; the Controller is never built with the typo."""
        ctl = af.Controller(af.Policy(ask_floor=["bash"]), tools=[BASH, read_file])
        decision = ctl.on_model_output(turn(calls=[tool_call("bash", {"command": "ls"}, id="c")]))
        assert decision.action is af.Action.ASK_HUMAN

    def test_no_declared_tools_checks_no_name(self) -> None:
        """`tools=None` accepts any name, as for rules and the table."""
        assert af.Controller(af.Policy(ask_floor=["bsh"], final_tools=["x"])).tools is None

    @given(
        declared=st.lists(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), min_size=1, unique=True),
        field=st.sampled_from(["ask_floor", "final_tools", "handoffs"]),
        names=st.lists(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), max_size=3),
    )
    def test_a_name_is_accepted_exactly_when_it_is_declared(
        self, declared: list[str], field: str, names: list[str]
    ) -> None:
        """For any declared names: refused iff a name in the field is not declared."""
        policy = af.Policy(**{field: names})
        if set(names) <= set(declared):
            assert af.Controller(policy, tools=declared).tools is not None
        else:
            with pytest.raises(PolicyError, match=field):
                af.Controller(policy, tools=declared)


class TestDeclaredArguments:
    """Which argument names a JSON schema declares."""

    def test_local_refs_and_combinators_are_followed(self) -> None:
        """`$ref` to `$defs`, `allOf` branches: their properties count."""
        schema = {
            "$defs": {"Base": {"type": "object", "properties": {"a": {}}}},
            "allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"b": {}}}],
            "properties": {"c": {}},
        }
        assert declared_arguments(schema) == frozenset({"a", "b", "c"})

    def test_what_is_not_understood_accepts_any_name(self) -> None:
        """A remote $ref, explicit additionalProperties, or nothing at all: None (unchecked)."""
        assert declared_arguments({"$ref": "https://example.com/s.json"}) is None
        assert declared_arguments({"properties": {"a": {}}, "additionalProperties": True}) is None
        assert declared_arguments({"type": "object"}) is None
        assert declared_arguments(None) is None


_TOOLS = st.sampled_from(["a", "b", "*", "a*"])
_ARGS = st.lists(
    st.tuples(st.sampled_from(["x", "y"]), st.sampled_from(["*", "1", "1*", "2"])),
    max_size=2,
    unique_by=lambda pair: pair[0],
)
_SHELL = st.none() | st.tuples(
    st.sampled_from(["x", "y"]),
    st.sampled_from(["rm *", "ls *", "rm -r *", "rm -rf /x", "rm /x", "rm", "ls -l:*", "ls", "r*"]),
)
_PATHS = st.lists(
    st.tuples(st.sampled_from(["x", "z"]), st.sampled_from(["/a/*", "/a/b"])),
    max_size=1,
)


@st.composite
def _rules(draw: st.DrawFn) -> Rule:
    args = draw(_ARGS)
    shell = draw(_SHELL)
    if shell is not None and any(name == shell[0] for name, _ in args):
        shell = None
    taken = {name for name, _ in args} | ({shell[0]} if shell else set())
    paths = [pair for pair in draw(_PATHS) if pair[0] not in taken]
    action = draw(st.sampled_from(["allow", "ask", "deny"]))
    return Rule(action=action, tool=draw(_TOOLS), args=tuple(args), shell=shell, paths=tuple(paths))


_SHELL_PATTERNS = ["rm *", "rm -r *", "rm -rf *", "rm -rf /x", "rm /x", "rm", "r*", "rm -r /x *"]
_SHELL_PATTERNS += ["git push:*", "git push -f *", "git push", "git *", "git status --short"]
_SHELL_PATTERNS += ["git status:*", "git status", "ls -l:*", "ls"]
_COMMANDS = ["rm -rf /x", "rm -r /x", "rm /x", "rm -fr /y /x", "rm $X", "rm --recursive /x"]
_COMMANDS += ["git push -f origin", "git push", "git push --force", "git status --short"]
_COMMANDS += ["git status", "ls -l", "ls", "ls; rm -r /x", "$(x) -rf", "rmdir /x", "git log"]
_VALUES: list[object] = ["1", "12", "2", "rm -rf /", "ls -l", "ls; rm x", 1, "/a/b", "/a/../b"]
_VALUES += ["rm -r /x", "rm /x", "rm $X /x", "ls -l -a", "ls", "rmdir /x", "$(ls)"]
_CALLS = st.builds(
    lambda name, args: ToolCall(id="c", name=name, arguments=args),
    st.sampled_from(["a", "b", "ab"]),
    st.dictionaries(
        st.sampled_from(["x", "y", "z"]),
        st.sampled_from(_VALUES),
    ),
)


class TestShadowed:
    """A rule named as never deciding truly never decides."""

    def test_a_stronger_wider_rule_and_a_twin_shadow(self) -> None:
        """`deny *` shadows `ask bash`; a repeated rule is shadowed by its first copy."""
        rules = [Rule.parse(t) for t in ("deny *", "ask bash", "deny x", "deny x")]
        found = dict(shadowed(rules, {}))
        assert sorted(found) == [1, 2, 3]
        assert "stronger action" in found[1]
        assert "written first" in found[3]

    def test_a_narrower_or_weaker_rule_shadows_nothing(self) -> None:
        """`ask bash` is wider than `deny bash(command=ls*)`: none of these is shadowed."""
        rules = [Rule.parse(t) for t in ("deny bash(command=ls*)", "ask bash", "allow *(c~ls *)")]
        assert [i for i, _ in shadowed(rules, {})] == []

    def test_a_stronger_table_entry_shadows_a_rule_for_its_tool(self) -> None:
        """`permissions['bash'] = 'deny'` makes `allow bash(command=ls)` never decide."""
        (found,) = shadowed([Rule.parse("allow bash(command=ls)")], {"bash": "deny"})
        assert "permissions['bash']" in found[1]

    @given(rules=st.lists(_rules(), max_size=5), calls=st.lists(_CALLS, min_size=1, max_size=6))
    def test_removing_a_shadowed_rule_changes_no_verdict(
        self, rules: list[Rule], calls: list[ToolCall]
    ) -> None:
        """For any rules and calls, a rule `shadowed` names is never the deciding source."""
        table: dict[str, Permission] = {"a": "ask"}
        whole = tuple(rules)
        for index, _ in shadowed(whole, table):
            without = whole[:index] + whole[index + 1 :]
            for call in calls:
                verdict = decide(call, whole, table, None)
                assert verdict[0] == decide(call, without, table, None)[0]
                if str(whole[index]) not in map(str, without):  # a twin is named the same
                    assert not verdict[1].startswith(f"rule {str(whole[index])!r}")

    @given(
        rules=st.lists(
            st.builds(
                lambda action, pattern: Rule(action=action, tool="a", shell=("x", pattern)),
                st.sampled_from(["allow", "ask", "deny"]),
                st.sampled_from(_SHELL_PATTERNS),
            ),
            min_size=2,
            max_size=5,
        ),
        commands=st.lists(st.sampled_from(_COMMANDS), min_size=1, max_size=6),
    )
    def test_shell_rules_named_as_covered_change_no_verdict(
        self, rules: list[Rule], commands: list[str]
    ) -> None:
        """For shell rules alike but for their patterns: a rule `shadowed` names (one covered
        by a wider pattern) never changes a verdict, nor decides one, when removed."""
        whole = tuple(rules)
        for index, _ in shadowed(whole, {}):
            without = whole[:index] + whole[index + 1 :]
            for command in commands:
                call = ToolCall(id="c", name="a", arguments={"x": command})
                verdict = decide(call, whole, {}, None)
                assert verdict[0] == decide(call, without, {}, None)[0], (index, command)
                if str(whole[index]) not in map(str, without):
                    assert not verdict[1].startswith(f"rule {str(whole[index])!r}")
