"""A rule that cannot be evaluated is unsure, and unsure never allows: missing arguments and
path patterns (`name^=glob`, matched on the normalized path)."""

from __future__ import annotations

import fnmatch
import json
import posixpath
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._permissions import Rule, decide, normal_path, rule_arguments
from agentfsm.exceptions import PolicyError
from agentfsm.testing import call, turn

TYPO = "deny bash(comand~rm -rf *)"
INSIDE = "allow write_file(path^=/srv/out/*)"


def verdict(rules: list[str], tool_call: af.ToolCall, **fields: Any) -> tuple[str, str]:
    """The permission and source the policy of `rules` gives `tool_call`."""
    return af.Policy(permission_rules=rules, **fields).permission_verdict(tool_call)


class TestAbsentArguments:
    """A deny or ask rule naming an argument the call lacks asks; an allow rule does not match."""

    def test_a_misspelled_shell_argument_asks_instead_of_allowing(self) -> None:
        """Regression: `deny bash(comand~rm -rf *)` let `rm -rf /` run; now the call is asked."""
        permission, source = verdict([TYPO], call("bash", {"command": "rm -rf /"}))
        assert permission == "ask"
        assert "names argument 'comand', which this call does not have" in source

    def test_the_controller_asks_a_human(self) -> None:
        """The Controller does not execute the call: it asks a human, and may_run says no."""
        ctl = af.Controller(af.Policy(permission_rules=[TYPO]))
        d = ctl.on_model_output(turn(calls=[call("bash", {"command": "rm -rf /"}, id="b")]))
        assert d.action is af.Action.ASK_HUMAN
        assert not ctl.may_run("b")

    def test_the_decision_says_why_the_call_is_asked(self) -> None:
        """The ASK_HUMAN reason names the rule and the argument the call does not have."""
        ctl = af.Controller(af.Policy(permission_rules=[TYPO]))
        d = ctl.on_model_output(turn(calls=[call("bash", {"command": "rm -rf /"}, id="b")]))
        assert "bash need(s) a human's approval" in d.reason
        assert "names argument 'comand', which this call does not have" in d.reason

    def test_an_absent_glob_argument_of_an_ask_rule_asks(self) -> None:
        """`ask sql(query=*DROP*)` on a call without `query`: ask, not the default allow."""
        assert verdict(["ask sql(query=*DROP*)"], call("sql", {"q": "DROP x"}))[0] == "ask"

    def test_a_present_argument_that_surely_differs_decides_nothing(self) -> None:
        """`deny sql(db=prod, query=*)` on db=dev without query: the rule surely does not apply."""
        rules = ["deny sql(db=prod, query=*)"]
        assert verdict(rules, call("sql", {"db": "dev"})) == ("allow", "the default")
        assert verdict(rules, call("sql", {"db": "prod"}))[0] == "ask"

    def test_an_allow_rule_with_an_absent_argument_does_not_match(self) -> None:
        """`allow bash(cmd~ls)` says nothing of a call with `command`: the default deny holds."""
        rules = ["allow bash(cmd~ls)", "allow bash(cmd=ls)"]
        tool_call = call("bash", {"command": "ls"})
        assert verdict(rules, tool_call, permissions={"*": "deny"})[0] == "deny"

    def test_a_rule_for_another_tool_is_not_consulted(self) -> None:
        """The missing argument matters only for calls of the rule's own tool."""
        assert verdict([TYPO], call("read_file", {"path": "/x"})) == ("allow", "the default")

    def test_declared_tools_still_refuse_the_rule(self) -> None:
        """With the bash tool declared, the misspelled rule is refused outright, as before."""
        tools = [{"name": "bash", "parameters": {"properties": {"command": {}}}}]
        with pytest.raises(PolicyError, match="did you mean 'command'"):
            af.Controller(af.Policy(permission_rules=[TYPO]), tools=tools)


# -- generated rules and calls, some arguments absent ---------------------------------------

_NAMES = ["x", "y", "z"]
_VALUES = ["1", "12", "/srv/out/a", "/srv/out/../b", "rm -rf /", "ls", "rel/p", 3]


@st.composite
def _rules(draw: st.DrawFn) -> Rule:
    """Rules over tools a and b naming up to three arguments with globs, paths and a shell."""
    names = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=3))
    kinds = [draw(st.sampled_from(["=", "^=", "~"])) for _ in names]
    chosen = dict(zip(names, kinds, strict=True))
    args = [(n, draw(st.sampled_from(["*", "1*", "ls"]))) for n in names if chosen[n] == "="]
    paths = [(n, draw(st.sampled_from(["/srv/out/*", "/b"]))) for n in names if chosen[n] == "^="]
    shells = [(n, draw(st.sampled_from(["rm *", "ls"]))) for n in names if chosen[n] == "~"]
    return Rule(
        action=draw(st.sampled_from(["allow", "ask", "deny"])),
        tool=draw(st.sampled_from(["a", "b", "*"])),
        args=tuple(args),
        paths=tuple(paths),
        shell=shells[0] if shells else None,
    )


_CALLS = st.builds(
    lambda name, arguments: af.ToolCall(id="c", name=name, arguments=arguments),
    st.sampled_from(["a", "b"]),
    st.dictionaries(st.sampled_from(_NAMES), st.sampled_from(_VALUES)),
)


def _surely_not(rule: Rule, arguments: dict[str, Any]) -> bool:
    """An oracle: whether a pattern of `rule` surely fails on a present argument (the shell
    pattern judged alone, by the shell reader that tests/shell covers)."""
    if rule.shell is not None and rule.shell[0] in arguments:
        alone = Rule(action="deny", tool="*", shell=rule.shell)
        if not alone.matches(af.ToolCall(id="c", name="t", arguments=arguments)):
            return True
    for name, pattern in rule.args:
        if name in arguments:
            value = arguments[name]
            text = value if isinstance(value, str) else json.dumps(value)
            if not fnmatch.fnmatchcase(text, pattern):
                return True
    for name, pattern in rule.paths:
        value = arguments.get(name)
        if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
            continue  # unsure: a deny may apply
        if not fnmatch.fnmatchcase(posixpath.normpath("/" + value.lstrip("/")), pattern):
            return True
    return False


@given(rules=st.lists(_rules(), max_size=4), tool_call=_CALLS)
def test_a_call_is_allowed_only_when_every_deny_that_could_apply_was_evaluated(
    rules: list[Rule], tool_call: af.ToolCall
) -> None:
    """For any rules and calls: an allowed call has every argument of each deny or ask rule of
    its tool that may apply, and none of those rules matches it."""
    permission, _ = decide(tool_call, tuple(rules), {}, None)
    if permission != "allow":
        return
    arguments = tool_call.arguments or {}
    for rule in rules:
        if rule.action == "allow" or not fnmatch.fnmatchcase(tool_call.name, rule.tool):
            continue
        if _surely_not(rule, arguments):
            continue
        assert set(rule_arguments(rule)) <= set(arguments), rule
        assert not rule.matches(tool_call), rule


# -- path patterns ------------------------------------------------------------------------


class TestPathPatterns:
    """`allow write_file(path^=/srv/out/*)` allows only paths surely inside /srv/out."""

    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            ("/srv/out/a.txt", "allow"),
            ("/srv/out/./sub//b.txt", "allow"),
            ("/srv/out/sub/../c", "allow"),
            ("/srv/out/../x", "deny"),  # the regression: a plain glob allowed it
            ("/srv/out/../../etc/passwd", "deny"),
            ("//srv/out/a", "allow"),
            ("/srv/out", "deny"),
            ("srv/out/a", "deny"),  # relative: no base is known
            ("~/srv/out/a", "deny"),
            ("/srv/out/a\0/../../x", "deny"),
            (["/srv/out/a"], "deny"),
        ],
    )
    def test_writes_only_inside_a_folder(self, path: object, expected: str) -> None:
        """With `"*": "deny"`, only paths surely inside /srv/out are allowed."""
        tool_call = call("write_file", {"path": path})
        assert verdict([INSIDE], tool_call, permissions={"*": "deny"})[0] == expected

    def test_a_plain_glob_lets_dot_dot_escape(self) -> None:
        """The reason for the path pattern: `path=/srv/out/*` matches `/srv/out/../x`."""
        tool_call = call("write_file", {"path": "/srv/out/../x"})
        plain = verdict(["allow write_file(path=/srv/out/*)"], tool_call, permissions={"*": "deny"})
        assert plain[0] == "allow"

    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            ("/etc/passwd", "deny"),
            ("/srv/../etc/passwd", "deny"),
            ("//etc/passwd", "deny"),
            ("etc/passwd", "deny"),  # unsure: may be under /etc
            ("~root/../../etc/x", "deny"),
            (7, "deny"),
            ("/srv/etc/x", "allow"),
            ("/etc/", "deny"),  # the folder itself: the plain glob /etc/* denies it too
            ("/etc/.", "deny"),
            ("/etc//", "deny"),
            ("/etc/ssl/..", "deny"),
            ("/etc", "deny"),
            ("/etcetera", "allow"),
        ],
    )
    def test_a_deny_applies_to_what_is_or_may_be_inside(self, path: object, expected: str) -> None:
        """`deny write_file(path^=/etc/*)`: sure matches and unsure paths are denied."""
        permission, source = verdict(
            ["deny write_file(path^=/etc/*)"], call("write_file", {"path": path})
        )
        assert permission == expected
        if expected == "deny" and not (isinstance(path, str) and path.startswith("/")):
            assert "may be under /etc/*" in source

    @pytest.mark.parametrize(
        ("pattern", "path", "denied"),
        [
            ("/etc/*", "/etc/", True),
            ("/etc/**", "/etc/.", True),
            ("/*", "/", True),
            ("/etc/passwd*", "/etc/passwd/", True),
            ("/etc/passwd*", "/etc/passwd.bak", True),
            ("/etc/*.conf", "/etc/a/b.conf", True),
            ("/etc/*.conf", "/etc/", False),  # the folder is not a .conf file
            ("/etc/ssl/*", "/etc/ssl/..", False),  # /etc is above the folder
        ],
    )
    def test_a_deny_covers_the_folder_its_pattern_empties(
        self, pattern: str, path: str, denied: bool
    ) -> None:
        """A deny path pattern matches a path, or the path written as a folder (`/` after it)."""
        tool_call = call("delete_tree", {"path": path})
        deny = verdict([f"deny delete_tree(path^={pattern})"], tool_call)[0]
        assert deny == ("deny" if denied else "allow")

    def test_an_allow_does_not_cover_the_folder_itself(self) -> None:
        """`allow ...(path^=/srv/out/*)` never allows `/srv/out/` (fail closed)."""
        for path in ("/srv/out/", "/srv/out/.", "/srv/out", "/srv/out/a/.."):
            tool_call = call("write_file", {"path": path})
            assert verdict([INSIDE], tool_call, permissions={"*": "deny"})[0] == "deny"

    @pytest.mark.parametrize("pattern", ["/srv/out/", "srv/*", "/srv/../x/*", "/srv//x", "./x", ""])
    def test_a_pattern_that_is_not_a_normalized_absolute_glob_is_refused(
        self, pattern: str
    ) -> None:
        """A path pattern reads one way only: absolute, normalized, no trailing slash."""
        with pytest.raises(PolicyError, match="path pattern"):
            Rule.parse(f"allow write_file(path^={json.dumps(pattern)})")

    def test_the_rule_survives_every_form(self) -> None:
        """Text, mapping, model_dump and the policy's JSON all give back the same rule."""
        rule = Rule.parse('deny w(path^=/srv/a, b/*, mode=7, cmd~rm -rf *, to^="/x, y=")')
        assert rule.paths == (("path", "/srv/a, b/*"), ("to", "/x, y="))
        assert Rule.parse(str(rule)) == rule
        assert (
            Rule.of(
                {
                    "action": "deny",
                    "tool": "w",
                    "args": {"mode": "7"},
                    "paths": dict(rule.paths),
                    "shell": {"cmd": "rm -rf *"},
                }
            )
            == rule
        )
        assert Rule.model_validate(rule.model_dump(mode="json")) == rule
        policy = af.Policy(permission_rules=[rule])
        assert af.Policy.from_mapping(json.loads(json.dumps(policy.to_json()))) == policy

    def test_a_controller_dump_loads_the_same_path_rule(self) -> None:
        """dump -> JSON -> load keeps the path rule, and the loaded Controller still denies."""
        ctl = af.Controller(af.Policy(permission_rules=[INSIDE], permissions={"*": "deny"}))
        loaded = af.Controller.load(json.loads(json.dumps(ctl.dump())))
        assert loaded.policy == ctl.policy
        escape = turn(calls=[call("write_file", {"path": "/srv/out/../x"}, id="w")])
        assert loaded.on_model_output(escape).action is not af.Action.EXECUTE_TOOLS
        assert not loaded.may_run("w")

    def test_declared_tools_refuse_a_path_rule_on_an_argument_not_taken(self) -> None:
        """`deny write_file(pth^=/etc/*)` on a tool taking `path`: PolicyError, "did you mean"."""
        tools = [{"name": "write_file", "parameters": {"properties": {"path": {}}}}]
        with pytest.raises(PolicyError, match="did you mean 'path'"):
            af.Controller(af.Policy(permission_rules=["deny write_file(pth^=/etc/*)"]), tools=tools)


_SEGMENTS = st.sampled_from(["srv/out", "srv", "out", "a", "..", ".", "", "etc"])


def _resolved(path: str) -> str:
    """An oracle independent of posixpath: segments applied to a stack, `..` popping one."""
    stack: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            stack = stack[:-1]
        elif segment not in ("", "."):
            stack.append(segment)
    return "/" + "/".join(stack)


@given(
    head=st.sampled_from(["/", "//", "///", "", "~/", "./", "\0/"]),
    segments=st.lists(_SEGMENTS, max_size=8),
)
@example(head="/", segments=["srv/out", ""])  # the folder itself, which the plain glob denies
@example(head="//", segments=["srv/out", "a", ".."])
def test_a_path_pattern_never_lets_a_path_out_of_its_folder(head: str, segments: list[str]) -> None:
    """Generated paths with `..`, `.`, `//`: allowed iff absolute, without NUL, and inside
    /srv/out once resolved; denied by the deny twin whenever unsure or inside."""
    path = head + "/".join(segments)
    sure = path.startswith("/") and "\0" not in path
    inside = sure and _resolved(path).startswith("/srv/out/")
    tool_call = call("write_file", {"path": path})
    if sure:
        assert normal_path(path)[0] == _resolved(path) == "/" + posixpath.normpath(path).lstrip("/")
    else:
        assert normal_path(path)[0] is None
    folder = sure and _resolved(path) == "/srv/out"
    allowed = verdict([INSIDE], tool_call, permissions={"*": "deny"})[0]
    denied = verdict(["deny write_file(path^=/srv/out/*)"], tool_call)[0]
    assert allowed == ("allow" if inside else "deny")
    assert denied == ("deny" if inside or folder or not sure else "allow")
    # The rewrite lint recommends never loosens a deny on the folder or what it holds.
    plain = verdict(["deny write_file(path=/srv/out/*)"], tool_call)[0]
    if plain == "deny" and (inside or folder):
        assert denied == "deny"


class TestArgumentVectors:
    """A list argument read as an argv is read as its joined string too when a tool joining
    it into a shell string could run something else: both readings count."""

    @pytest.mark.parametrize(
        "argv",
        [["rm -rf /"], ["rm\t-rf", "/"], ["{rm,-rf,/}"], ["r*", "-rf", "/"], ["X=1 rm", "-rf"]],
    )
    def test_a_program_word_that_splits_is_denied(self, argv: list[str]) -> None:
        """Regression: `["rm -rf /"]` was trusted as one program name and allowed."""
        permission, source = verdict(
            ["deny bash(command~rm -rf *)"], call("bash", {"command": argv})
        )
        assert permission == "deny", source

    @pytest.mark.parametrize(
        "argv",
        [
            ["ls", "x; rm -rf /"],
            ["ls", "$(rm -rf /)"],
            ["ls", "`rm -rf /`"],
            ["ls", "a|sh"],
            ["ls", "a&&rm -rf /"],
            ["ls", "a\nrm -rf /"],
            ["ls", ">/etc/passwd"],
            ["ls", "'"],
            ["ls", "x && rm -rf /"],
            ["ls", "{a,b}", ";", "rm"],
        ],
    )
    def test_an_allow_never_covers_a_word_the_shell_reads_specially(self, argv: list[str]) -> None:
        """Regression: `allow bash(command~ls *)` covered `["ls", "x; rm -rf /"]`."""
        tool_call = call("bash", {"command": argv})
        assert (
            verdict(["allow bash(command~ls *)"], tool_call, permissions={"*": "deny"})[0] == "deny"
        )
        joined = call("bash", {"command": " ".join(argv)})
        rules = ["allow bash(command~ls *)"]
        assert verdict(rules, tool_call)[0] == verdict(rules, joined)[0]

    def test_plain_words_stay_read_as_an_argv(self) -> None:
        """Words without shell syntax are still read exactly: allowed, and denied by name."""
        plain = call("bash", {"command": ["ls", "-l", "/srv/a-b.txt"]})
        assert verdict(["allow bash(command~ls *)"], plain, permissions={"*": "deny"})[0] == "allow"
        remove = call("bash", {"command": ["/bin/rm", "-r", "-f", "/"]})
        assert verdict(["deny bash(command~rm -rf *)"], remove)[0] == "deny"

    def test_both_readings_of_a_list_count(self) -> None:
        """A word with a space is read as the argv and as the joined string: `["rm", "rm -rf
        /"]` is denied (joined, it is `rm -rf /`), `["echo", "rm -rf /"]` is not (joined, it is
        still echo), and `allow ls *` covers `["ls", "a b"]` both ways."""
        deny = ["deny bash(command~rm -rf *)"]
        assert verdict(deny, call("bash", {"command": ["rm", "rm -rf /"]}))[0] == "deny"
        assert verdict(deny, call("bash", {"command": ["echo", "rm -rf /"]}))[0] == "allow"
        spaced = call("bash", {"command": ["ls", "a b"]})
        assert (
            verdict(["allow bash(command~ls *)"], spaced, permissions={"*": "deny"})[0] == "allow"
        )


_WORDS = st.sampled_from(
    ["ls", "rm", "-rf", "/", "a b", "x;", "rm -rf /", "$(rm -rf /)", "|", "&&", "\n", "'", "*"]
)


@given(words=st.lists(_WORDS, min_size=1, max_size=4))
def test_an_argv_is_allowed_only_when_its_joined_string_is(words: list[str]) -> None:
    """Generated argvs: allowed by `ls *` only if `" ".join(argv)` read as a shell string is;
    denied by `rm -rf *` whenever the joined string is."""
    as_list = call("bash", {"command": words})
    joined = call("bash", {"command": " ".join(words)})
    allow = ["allow bash(command~ls *)"]
    if verdict(allow, as_list, permissions={"*": "deny"})[0] == "allow":
        assert verdict(allow, joined, permissions={"*": "deny"})[0] == "allow"
    deny = ["deny bash(command~rm -rf *)"]
    if verdict(deny, joined)[0] == "deny":
        assert verdict(deny, as_list)[0] == "deny"


class TestTildeGlobOnACommand:
    """`command=~rm -rf *` is the shell pattern `command~rm -rf *` mistyped: refused."""

    @pytest.mark.parametrize(
        "text",
        ["deny bash(command=~rm -rf *)", "ask run(cmd= ~rm *)", "deny x(db=1, pre_command=~ls)"],
    )
    def test_the_typo_is_refused_with_the_rule_it_means(self, text: str) -> None:
        """Regression: the typo parsed as a glob on `~rm...`, a deny that never denies."""
        with pytest.raises(PolicyError, match=r"did you mean the shell pattern \w+~"):
            Rule.parse(text)
        with pytest.raises(PolicyError, match="did you mean"):
            af.Policy(permission_rules=[text])

    def test_a_json_string_or_another_argument_keeps_a_leading_tilde(self) -> None:
        """`command="~/bin/x"` is a glob on purpose; `path=~/x` is no command."""
        assert Rule.parse('allow bash(command="~/bin/x")').args == (("command", "~/bin/x"),)
        assert Rule.parse("deny cat(path=~/x)").args == (("path", "~/x"),)

    @given(
        name=st.sampled_from(["command", "cmd", "run_script", "path", "mode"]),
        glob=st.text(alphabet="~ ab*/,=", min_size=1, max_size=8).map(lambda t: "~" + t),
    )
    def test_a_tilde_glob_reads_back_from_its_text(self, name: str, glob: str) -> None:
        """Any glob starting with `~` survives str() and parse(), quoted where it must be."""
        rule = Rule(action="deny", tool="t", args=((name, glob),))
        assert Rule.parse(str(rule)) == rule
