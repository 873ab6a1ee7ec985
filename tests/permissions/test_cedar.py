"""Cedar as a permission source (`Policy.cedar`, docs/cedar.md): fail closed, composed with
the native sources (the strongest wins), loaded with file and line, dumped and read back."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._cedar import CallHistory, CedarSource, statements
from agentfsm._cli.explain import main as explain_main
from agentfsm._cli.lint import main as lint_main
from agentfsm._cli.replay import main as replay_main
from agentfsm.exceptions import PolicyError
from agentfsm.testing import call, turn

# The `cedar` extra: skipped where it is not installed, and a failure in CI, which installs
# every extra (`make install`), as the `needs` mark does for a single test.
cedarpy: Any = (
    importlib.import_module("cedarpy")
    if os.environ.get("CI")
    else pytest.importorskip("cedarpy", reason="needs cedarpy: pip install -e '.[cedar]'")
)
pytestmark = pytest.mark.needs("cedarpy")

STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
READS = """
@id("reads") permit(principal, action, resource == Tool::"ls");
@id("cat") permit(principal, action, resource == Tool::"cat");
@id("no-secrets") forbid(principal, action, resource == Tool::"cat")
  when { context.arguments has path && context.arguments.path like "/secret/*" };
"""


def lint_args(policy: Path, tools: Path | None = None) -> Any:
    import argparse

    return argparse.Namespace(policy=str(policy), tools=str(tools) if tools else None)


class TestVerdicts:
    def test_a_permit_allows_and_names_the_policy(self) -> None:
        """Cedar's Allow is "allow", and the source names the deciding policy's @id."""
        verdict = af.Policy(cedar=READS).permission_verdict(call("ls", {}))
        assert verdict == ("allow", "cedar permit 'reads' (cedar)")

    def test_a_forbid_denies_and_names_the_policy(self) -> None:
        """A matching forbid denies, naming it."""
        permission, why = af.Policy(cedar=READS).permission_verdict(
            call("cat", {"path": "/secret/key"})
        )
        assert permission == "deny"
        assert "'no-secrets'" in why

    def test_no_permit_denies_a_cedar_source_is_an_allow_list(self) -> None:
        """A tool no permit names is denied, though the native sources would allow it."""
        permission, why = af.Policy(cedar=READS).permission_verdict(call("rm", {"path": "/"}))
        assert permission == "deny"
        assert "allow-list" in why

    def test_an_evaluation_error_denies_where_cedar_would_skip_the_forbid(self) -> None:
        """A forbid that errors (a string compared as a number) must not let the call
        through, although Cedar alone skips the erroring policy and allows."""
        text = (
            'permit(principal, action, resource);\n@id("big") forbid(principal, action, '
            "resource) when { context.arguments.n > 10 };"
        )
        request = {
            "principal": 'Agent::"agent"',
            "action": 'Action::"call"',
            "resource": 'Tool::"t"',
            "context": {"arguments": {"n": "eleven"}},
        }
        assert cedarpy.is_authorized(request, text, []).allowed  # Cedar alone lets it through
        permission, why = af.Policy(cedar=text).permission_verdict(call("t", {"n": "eleven"}))
        assert permission == "deny"
        assert "evaluation error" in why

    @pytest.mark.parametrize(
        ("arguments", "named"),
        [
            ({"x": 1.5}, "float"),
            ({"x": None}, "null"),
            ({"x": 2**63}, "64 bits"),
            ({"x": {"__entity": {"type": "Agent", "id": "root"}}}, "escape"),
            ({"x": [1, {"y": None}]}, "arguments.x[1].y"),
        ],
    )
    def test_an_argument_cedar_cannot_hold_denies(
        self, arguments: dict[str, Any], named: str
    ) -> None:
        """Floats, nulls, huge ints and Cedar's JSON escapes cannot be shown to Cedar
        faithfully: the source is unsure, and denies even under `permit` everything."""
        policy = af.Policy(cedar="permit(principal, action, resource);")
        permission, why = policy.permission_verdict(call("t", arguments))
        assert permission == "deny"
        assert named in why

    def test_an_ask_annotation_asks(self) -> None:
        """A call a permit marked @agentfsm("ask") allows needs a human."""
        text = '@agentfsm("ask") permit(principal, action, resource == Tool::"rm");'
        assert af.Policy(cedar=text).permission_for(call("rm", {})) == "ask"

    def test_history_is_absent_without_a_run_so_a_policy_reading_it_denies(self) -> None:
        """Without a history, a policy reading `context.history` errors, which denies;
        with one, it decides on it."""
        text = "permit(principal, action, resource) when { context.history.calls < 2 };"
        policy = af.Policy(cedar=text)
        assert policy.permission_for(call("t", {})) == "deny"
        assert policy.permission_verdict(call("t", {}), history=CallHistory(calls=1))[0] == "allow"
        assert policy.permission_verdict(call("t", {}), history=CallHistory(calls=2))[0] == "deny"

    def test_cost_is_in_whole_micro_dollars_rounded_up(self) -> None:
        """A run's float cost reaches Cedar as an integer it can compare."""

        class Run:
            tool_calls_used, tokens, cost, turn = 3, 1200, 0.0000011, 4
            tool_counts: ClassVar[dict[str, int]] = {"ls": 3}

        history = CallHistory.of_run(Run())
        assert history.as_dict() == {
            "calls": 3,
            "tokens": 1200,
            "cost_micros": 2,
            "turn": 4,
            "tool_calls": {"ls": 3},
        }


class TestComposition:
    def test_a_native_deny_beats_a_cedar_permit(self) -> None:
        """The strongest verdict wins: a native deny stands over Cedar's allow."""
        policy = af.Policy(cedar=READS, permission_rules=["deny ls"])
        assert policy.permission_verdict(call("ls", {})) == ("deny", "rule 'deny ls'")

    def test_a_native_ask_beats_a_cedar_permit(self) -> None:
        """A native ask asks although Cedar allows."""
        policy = af.Policy(cedar=READS, permissions={"ls": "ask"})
        assert policy.permission_for(call("ls", {})) == "ask"

    def test_a_cedar_deny_beats_a_native_allow(self) -> None:
        """A native allow cannot lift Cedar's deny."""
        policy = af.Policy(cedar=READS, permission_rules=["allow *"])
        assert policy.permission_for(call("rm", {})) == "deny"


class TestLoading:
    def test_broken_text_is_refused_with_file_and_line(self, tmp_path: Path) -> None:
        """A Cedar file that does not parse is refused when the policy loads, naming the
        Cedar file and the line of the policy that fails."""
        (tmp_path / "rules.cedar").write_text(
            'permit(principal, action, resource == Tool::"ls");\n// a ; in a comment\n\n'
            'forbid(principal, action, resource) when { context.arguments.p == "a;" && };\n',
            encoding="utf-8",
        )
        (tmp_path / "p.toml").write_text('cedar = "rules.cedar"\n', encoding="utf-8")
        with pytest.raises(PolicyError, match=r"rules\.cedar:4: Cedar policy does not parse"):
            af.Policy.from_file(tmp_path / "p.toml")

    def test_a_missing_cedar_file_is_refused(self, tmp_path: Path) -> None:
        """A `cedar` file name that names no file: PolicyError naming it."""
        (tmp_path / "p.toml").write_text('cedar = "gone.cedar"\n', encoding="utf-8")
        with pytest.raises(PolicyError, match=r"gone\.cedar"):
            af.Policy.from_file(tmp_path / "p.toml")

    @pytest.mark.parametrize(
        "text",
        [
            'cedar = "r.cedar"\ncedar_policies = "permit(principal, action, resource);"\n',
            'cedar_schema = "r.cedar"\n',
        ],
    )
    def test_cedar_keys_that_do_not_go_together_are_refused(
        self, tmp_path: Path, text: str
    ) -> None:
        """Both `cedar` and `cedar_policies`, or a schema with no policies: PolicyError."""
        (tmp_path / "r.cedar").write_text("permit(principal, action, resource);")
        (tmp_path / "p.toml").write_text(text, encoding="utf-8")
        with pytest.raises(PolicyError, match="cedar"):
            af.Policy.from_file(tmp_path / "p.toml")

    def test_an_unknown_ask_annotation_is_refused(self) -> None:
        """@agentfsm("allow") is not understood: refused, not ignored."""
        with pytest.raises(PolicyError, match="agentfsm"):
            af.Policy(cedar='@agentfsm("allow") permit(principal, action, resource);')

    def test_inline_text_in_a_policy_file(self, tmp_path: Path) -> None:
        """`cedar_policies` holds the text in the policy file itself."""
        (tmp_path / "p.json").write_text(json.dumps({"cedar_policies": READS}), encoding="utf-8")
        policy = af.Policy.from_file(tmp_path / "p.json")
        assert policy.permission_for(call("ls", {})) == "allow"

    def test_statements_split_outside_strings_and_comments(self) -> None:
        """Only a `;` outside strings and comments ends a policy; each keeps its line."""
        text = 'permit(a) when { "x;\\"y" };\n// c; d\nforbid(b);\n'
        assert [line for line, _ in statements(text)] == [1, 3]

    def test_the_cedar_text_round_trips_through_a_dump(self, tmp_path: Path) -> None:
        """A Controller's dump holds the Cedar source; the loaded run decides as before."""
        policy = af.Policy(cedar=CedarSource(policies=READS, origin="rules.cedar"))
        assert af.Policy.from_mapping(policy.to_json()) == policy
        ctl = af.Controller(policy)
        loaded = af.Controller.load(ctl.dump())
        assert loaded.policy.cedar == policy.cedar
        decision = loaded.on_model_output(turn(calls=[call("rm", {}, id="c1")]))
        assert decision.action is not af.Action.EXECUTE_TOOLS


SCHEMA = """
entity Agent; entity Tool;
action call appliesTo {
  principal: Agent, resource: Tool,
  context: { arguments: { path?: String }, history?: { calls: Long } }
};
"""


class TestSchema:
    def test_policies_that_do_not_fit_the_schema_are_refused(self) -> None:
        """With a schema, a policy comparing a String as a Long is refused at load."""
        text = "permit(principal, action, resource) when { context.arguments.path > 3 };"
        with pytest.raises(PolicyError, match="do not fit the schema"):
            af.Policy(cedar={"policies": text, "cedar_schema": SCHEMA})

    def test_a_request_that_does_not_fit_denies(self, tmp_path: Path) -> None:
        """From a policy file's `cedar_schema`: a call whose arguments break the schema
        denies; one that fits is decided by the policies."""
        (tmp_path / "r.cedar").write_text(
            'permit(principal, action, resource == Tool::"cat");', encoding="utf-8"
        )
        (tmp_path / "r.cedarschema").write_text(SCHEMA, encoding="utf-8")
        (tmp_path / "p.toml").write_text(
            'cedar = "r.cedar"\ncedar_schema = "r.cedarschema"\n', encoding="utf-8"
        )
        policy = af.Policy.from_file(tmp_path / "p.toml")
        assert policy.permission_for(call("cat", {"path": "/a"})) == "allow"
        permission, why = policy.permission_verdict(call("cat", {"path": 3}))
        assert permission == "deny"
        assert "not valid" in why
        assert af.Policy.from_mapping(policy.to_json()) == policy


class TestController:
    def test_a_call_cedar_forbids_is_never_cleared(self) -> None:
        """Of two calls, the one Cedar forbids gets an error result and `may_run` says no."""
        ctl = af.Controller(af.Policy(cedar=READS))
        calls = [call("ls", {}, id="ok"), call("cat", {"path": "/secret/k"}, id="no")]
        decision = ctl.on_model_output(turn(calls=calls))
        assert [c.id for c in decision.tool_calls] == ["ok"]
        assert ctl.may_run("ok")
        assert not ctl.may_run("no")
        assert "no-secrets" in next(r.content for r in decision.results if r.call_id == "no")

    def test_the_run_history_reaches_cedar(self) -> None:
        """A Cedar limit on the run's calls so far: the second round is denied."""
        text = "permit(principal, action, resource) when { context.history.calls < 1 };"
        ctl = af.Controller(af.Policy(cedar=text))
        first = ctl.on_model_output(turn(calls=[call("ls", {}, id="a")]))
        assert first.action is af.Action.EXECUTE_TOOLS
        ctl.on_tool_results([af.ToolResult(call_id="a", name="ls", content="x")])
        second = ctl.on_model_output(turn(calls=[call("ls", {"d": "/"}, id="b")]))
        assert second.action is not af.Action.EXECUTE_TOOLS
        assert not ctl.may_run("b")


class TestPerToolCounts:
    def test_a_per_tool_limit_holds_across_a_dump(self) -> None:
        """`context.history.tool_calls` counts each tool's executed calls; a dump keeps the
        counts, so the loaded run still denies the call over the limit."""
        text = (
            'permit(principal, action, resource) unless { resource == Tool::"ls" && '
            "context.history.tool_calls has ls && context.history.tool_calls.ls >= 1 };"
        )
        ctl = af.Controller(af.Policy(cedar=text))
        first = ctl.on_model_output(turn(calls=[call("ls", {}, id="a"), call("cat", {}, id="b")]))
        assert first.action is af.Action.EXECUTE_TOOLS
        ctl.on_tool_results(
            [
                af.ToolResult(call_id="a", name="ls", content="x"),
                af.ToolResult(call_id="b", name="cat", content="y"),
            ]
        )
        loaded = af.Controller.load(ctl.dump())
        second = loaded.on_model_output(
            turn(calls=[call("ls", {"d": "/"}, id="c"), call("cat", {"d": "/"}, id="d")])
        )
        assert [c.id for c in second.tool_calls] == ["d"]
        assert not loaded.may_run("c")


# -- the generated property: Policy's Cedar verdict is cedarpy's own, failing closed ----------

_VALUES = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["x", "xy", "", "/secret/a"]),
    st.booleans(),
    st.sampled_from([1.5, None, 2**64]),
)
_CONDITIONS = st.sampled_from(
    [
        "",
        " when { context.arguments has a }",
        " when { context.arguments.a == 1 }",
        " when { context.arguments.a > 0 }",
        ' when { context.arguments.a like "x*" }',
        ' unless { context.arguments has b && context.arguments.b == "x" }',
    ]
)
_SCOPES = st.sampled_from(["resource", 'resource == Tool::"ls"', 'resource == Tool::"rm"'])
_POLICIES = st.lists(
    st.tuples(st.sampled_from(["permit", "forbid"]), _SCOPES, _CONDITIONS).map(
        lambda p: f"{p[0]}(principal, action, {p[1]}){p[2]};"
    ),
    max_size=4,
).map("\n".join)
_CALLS = st.tuples(
    st.sampled_from(["ls", "rm"]),
    st.dictionaries(st.sampled_from(["a", "b"]), _VALUES, max_size=2),
)
_NATIVE = st.lists(st.sampled_from(["deny rm", "ask ls(a=x*)", "allow *", "ask *"]), max_size=2)


def _representable(value: Any) -> bool:
    return not (value is None or isinstance(value, float) or value == 2**64)


def _direct(text: str, name: str, arguments: dict[str, Any]) -> str:
    """What cedarpy itself answers, read fail-closed: Allow without errors allows."""
    if not all(_representable(v) for v in arguments.values()):
        return "deny"
    request = {
        "principal": {"type": "Agent", "id": "agent"},
        "action": {"type": "Action", "id": "call"},
        "resource": {"type": "Tool", "id": name},
        "context": {"arguments": arguments},
    }
    result = cedarpy.is_authorized(request, text, [])
    return "allow" if result.allowed and not result.diagnostics.errors else "deny"


class TestGenerated:
    @settings(deadline=None)
    @given(text=_POLICIES, made=_CALLS, rules=_NATIVE)
    def test_the_verdict_is_cedars_and_the_strongest_of_both(
        self, text: str, made: tuple[str, dict[str, Any]], rules: list[str]
    ) -> None:
        """Cedar's verdict equals a direct cedarpy evaluation (errors and unrepresentable
        arguments deny), and with native rules the policy gives the stronger of the two."""
        name, arguments = made
        tool_call = call(name, arguments)
        cedar = af.Policy(cedar=text).permission_for(tool_call)
        assert cedar == _direct(text, name, arguments)
        native = af.Policy(permission_rules=rules).permission_for(tool_call)
        both = af.Policy(cedar=text, permission_rules=rules).permission_for(tool_call)
        assert both == max(native, cedar, key=STRENGTH.__getitem__)


class TestCli:
    def test_explain_shows_cedars_answer(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """explain prints the verdict and Cedar's own answer with the deciding policy."""
        (tmp_path / "r.cedar").write_text(READS, encoding="utf-8")
        (tmp_path / "p.toml").write_text('cedar = "r.cedar"\n', encoding="utf-8")
        import argparse

        args = argparse.Namespace(
            policy=str(tmp_path / "p.toml"),
            call='{"name": "cat", "arguments": {"path": "/secret/x"}}',
            history='{"calls": 2}',
        )
        assert explain_main(args) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("deny: cedar forbid 'no-secrets'")
        assert out[1].startswith("cedar said deny")

    def test_lint_reports_broken_cedar_and_undeclared_tools(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """lint: Cedar that does not parse is an error with its line; a Tool::"x" that is
        not declared is a warning with the closest name."""
        (tmp_path / "bad.cedar").write_text("permit(principal, action,);\n", encoding="utf-8")
        (tmp_path / "bad.toml").write_text('cedar = "bad.cedar"\n', encoding="utf-8")
        assert lint_main(lint_args(tmp_path / "bad.toml")) == 1
        assert "bad.cedar:1: Cedar policy does not parse" in capsys.readouterr().out
        (tmp_path / "r.cedar").write_text(READS, encoding="utf-8")
        (tmp_path / "ok.toml").write_text('cedar = "r.cedar"\n', encoding="utf-8")
        (tmp_path / "tools.json").write_text('[{"name": "lss"}, {"name": "cat"}]')
        assert lint_main(lint_args(tmp_path / "ok.toml", tmp_path / "tools.json")) == 1
        out = capsys.readouterr().out
        assert "Tool::\"ls\", which is not a declared tool; did you mean 'lss'?" in out
        assert "cat" not in out.replace("r.cedar", "")

    def test_lint_reports_policies_that_do_not_fit_the_schema(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """lint reads `cedar` and `cedar_schema` together: a misfit is an error, and
        `cedar_schema` is not an unknown field."""
        (tmp_path / "r.cedar").write_text(
            "permit(principal, action, resource) when { context.arguments.path > 3 };",
            encoding="utf-8",
        )
        (tmp_path / "s.cedarschema").write_text(SCHEMA, encoding="utf-8")
        (tmp_path / "p.toml").write_text(
            'cedar = "r.cedar"\ncedar_schema = "s.cedarschema"\n', encoding="utf-8"
        )
        assert lint_main(lint_args(tmp_path / "p.toml")) == 1
        out = capsys.readouterr().out
        assert "p.toml:1: error:" in out
        assert "do not fit the schema" in out
        assert "unknown field" not in out

    def test_replay_against_a_cedar_policy_shows_the_difference(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`replay TRACE --policy native --against with_cedar`: a call Cedar does not permit
        changes the decision, exit 1; a Cedar policy permitting it changes nothing."""
        chat = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"n": 1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]
        trace = tmp_path / "c.jsonl"
        trace.write_text("".join(json.dumps(m) + "\n" for m in chat), encoding="utf-8")
        native = tmp_path / "native.json"
        native.write_text("{}", encoding="utf-8")
        forbids = tmp_path / "forbids.json"
        forbids.write_text(json.dumps({"cedar_policies": READS}), encoding="utf-8")
        permits = tmp_path / "permits.json"
        text = 'permit(principal, action, resource == Tool::"f") when { context.arguments.n == 1 };'
        permits.write_text(json.dumps({"cedar_policies": text}), encoding="utf-8")
        base = [str(trace), "--policy", str(native), "--json", "--against"]
        assert replay_main([*base, str(forbids)]) == 1
        run = json.loads(capsys.readouterr().out.splitlines()[0])
        assert any("against_action" in d for d in run["decisions"])
        assert replay_main([*base, str(permits)]) == 0
