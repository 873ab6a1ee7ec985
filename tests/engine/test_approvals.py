"""Remembered approvals: a human's answer that holds for later calls of the same tool.

An answer's `remember={call_id: scope}` (or the host's `grant`) makes an Approval bound to
the tool's identity and to its arguments or a pattern. It turns a later "ask" into a run,
never a deny, never a call a guard stops; uses never exceed N, an expired one covers
nothing, a changed tool is never covered. Decisions, the trace and dump/load carry them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._diagrams import Overlay, dot, mermaid
from agentfsm._replay.engine import divergence, replay_run
from agentfsm._replay.trace import TraceWriter
from agentfsm._replay.trajectories import read_runs
from agentfsm._report import build
from agentfsm.exceptions import InvalidInputError
from agentfsm.testing import call, turn
from tests.processes import python
from tests.strategies import one_argument_tool

A = af.Action
WRITE = one_argument_tool("write_file", "write a file", "path")
READ = one_argument_tool("read_file", "read a file", "path")
POLICY = af.Policy(
    permissions={"write_file": "ask", "read_file": "ask"},
    permission_rules=["deny write_file(path=/etc/*)"],
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def controller(
    policy: af.Policy = POLICY, clock: Clock | None = None, **options: Any
) -> af.Controller:
    return af.Controller(policy, [WRITE, READ], clock=clock or Clock(), **options)


_IDS = iter(range(10**9))


def ask(ctl: af.Controller, name: str, path: str) -> af.Decision:
    """Give one call of `name` on `path` (a fresh id each time) and return the decision."""
    return ctl.on_model_output(turn(calls=[call(name, {"path": path}, id=f"c{next(_IDS)}")]))


def finish(ctl: af.Controller, decision: af.Decision) -> None:
    """Answer an EXECUTE_TOOLS decision's calls with ok results."""
    ctl.on_tool_results([af.ToolResult(call_id=c.id, content="ok") for c in decision.tool_calls])


def approve(ctl: af.Controller, scope: Any, name: str = "write_file", path: str = "/srv/a") -> None:
    decision = ask(ctl, name, path)
    assert decision.action is A.ASK_HUMAN
    (asked,) = decision.tool_calls
    finish(ctl, ctl.on_human_reply(True, remember={asked.id: scope}))


class TestRemember:
    """An answer's scope makes an approval that covers later calls, said in the decision."""

    def test_a_remembered_exact_call_runs_without_asking_and_says_so(self) -> None:
        """The same call again executes; the decision names the approval and why."""
        ctl = controller()
        approve(ctl, "conversation")
        (approval,) = ctl.approvals
        decision = ask(ctl, "write_file", "/srv/a")
        assert decision.action is A.EXECUTE_TOOLS
        assert decision.covered == {decision.tool_calls[0].id: approval.id}
        assert f"remembered approval {approval.id}" in decision.reason
        assert ctl.may_run(decision.tool_calls[0].id)

    def test_exact_arguments_do_not_cover_other_arguments(self) -> None:
        """Without a pattern only the approved arguments are covered."""
        ctl = controller()
        approve(ctl, "conversation")
        assert ask(ctl, "write_file", "/srv/b").action is A.ASK_HUMAN

    def test_a_pattern_covers_matching_arguments_only(self) -> None:
        """`path^=/srv/*` covers /srv/b, not /home/x nor /srv/../etc/x."""
        ctl = controller()
        approve(ctl, {"scope": "conversation", "pattern": "path^=/srv/*"})
        finish(ctl, d := ask(ctl, "write_file", "/srv/b"))
        assert d.action is A.EXECUTE_TOOLS
        assert ask(ctl, "write_file", "/home/x").action is A.ASK_HUMAN
        ctl.on_human_reply(False, "no")
        assert ask(ctl, "write_file", "/srv/../home/x").action is A.ASK_HUMAN

    def test_another_tool_is_never_covered(self) -> None:
        """An approval of write_file does not cover read_file with the same arguments."""
        ctl = controller()
        approve(ctl, {"scope": "conversation", "pattern": "*"})
        assert ask(ctl, "read_file", "/srv/a").action is A.ASK_HUMAN

    def test_a_deny_rule_is_never_covered(self) -> None:
        """A pattern that takes in /etc/* does not run what a deny rule stops."""
        ctl = controller()
        approve(ctl, {"scope": "conversation", "pattern": "*"})
        decision = ask(ctl, "write_file", "/etc/passwd")
        assert decision.action is not A.EXECUTE_TOOLS
        assert decision.covered == {}
        assert "permission denied" in decision.results[0].content

    def test_a_repeat_guard_still_stops_a_covered_call(self) -> None:
        """The third identical call in a row is fed back, covered or not."""
        ctl = controller()
        approve(ctl, "conversation")
        finish(ctl, ask(ctl, "write_file", "/srv/a"))
        decision = ask(ctl, "write_file", "/srv/a")
        assert decision.action is not A.EXECUTE_TOOLS
        assert decision.covered == {}

    def test_uses_never_exceed_n(self) -> None:
        """`uses=2` covers two later calls, then the tool asks again and the approval is gone."""
        ctl = controller()
        approve(ctl, {"scope": "uses", "uses": 2, "pattern": "path^=/srv/*"})
        for path in ("/srv/1", "/srv/2"):
            finish(ctl, decision := ask(ctl, "write_file", path))
            assert decision.action is A.EXECUTE_TOOLS
        assert ctl.approvals == ()
        assert ask(ctl, "write_file", "/srv/3").action is A.ASK_HUMAN

    def test_an_expired_approval_covers_nothing(self) -> None:
        """`seconds=60` covers at 59 s of the run's time, not at 60 s."""
        clock = Clock()
        ctl = controller(clock=clock)
        approve(ctl, {"scope": "seconds", "seconds": 60, "pattern": "path^=/srv/*"})
        clock.now = 59.0
        finish(ctl, decision := ask(ctl, "write_file", "/srv/1"))
        assert decision.action is A.EXECUTE_TOOLS
        clock.now = 60.0
        assert ask(ctl, "write_file", "/srv/2").action is A.ASK_HUMAN
        assert ctl.approvals == ()

    def test_once_remembers_nothing(self) -> None:
        """`once` is this call only: the same call asks again."""
        ctl = controller()
        approve(ctl, "once")
        assert ctl.approvals == ()
        assert ask(ctl, "write_file", "/srv/a").action is A.ASK_HUMAN

    def test_a_run_scope_ends_with_the_episode(self) -> None:
        """`run` holds in this episode; the next one (after FINAL) asks again."""
        ctl = controller()
        approve(ctl, {"scope": "run", "pattern": "*"})
        assert ctl.on_model_output(turn("done")).action is A.FINAL
        ctl.on_user_message("again")
        assert ctl.approvals == ()
        assert ask(ctl, "write_file", "/srv/a").action is A.ASK_HUMAN

    def test_a_declined_call_remembers_nothing(self) -> None:
        """A scope on a call the human declined makes no approval."""
        ctl = controller()
        decision = ask(ctl, "write_file", "/srv/a")
        ctl.on_human_reply(False, "no", remember={decision.tool_calls[0].id: "conversation"})
        assert ctl.approvals == ()

    def test_an_edited_call_is_remembered_with_its_edited_arguments(self) -> None:
        """The approval covers what ran: the human's edit, not the model's arguments."""
        ctl = controller()
        decision = ask(ctl, "write_file", "/srv/a")
        cid = decision.tool_calls[0].id
        ctl.on_human_reply(
            True, arguments={cid: {"path": "/srv/b"}}, remember={cid: "conversation"}
        )
        assert [a.arguments for a in ctl.approvals] == [{"path": "/srv/b"}]


class TestIdentity:
    """An approval is bound to the tool's identity: a changed tool is never covered."""

    def test_a_changed_tool_is_not_covered(self) -> None:
        """The host's identity of the tool changes: the approval no longer covers it."""
        pins = {"write_file": "v1", "read_file": "r1"}
        ctl = controller(identify=pins.get)
        approve(ctl, {"scope": "conversation", "pattern": "*"})
        assert ctl.approvals[0].identity == "v1"
        pins["write_file"] = "v2"
        assert ask(ctl, "write_file", "/srv/a").action is A.ASK_HUMAN

    def test_an_identify_that_fails_covers_nothing(self) -> None:
        """An identify function that raises gives no identity an approval has (fail closed)."""
        broken = {"on": False}

        def identify(name: str) -> str:
            if broken["on"]:
                raise RuntimeError("down")
            return "v1"

        ctl = controller(identify=identify)
        approve(ctl, {"scope": "conversation", "pattern": "*"})
        broken["on"] = True
        assert ask(ctl, "write_file", "/srv/a").action is A.ASK_HUMAN

    def test_a_declared_tool_is_bound_to_its_definition(self) -> None:
        """Without identify, the identity is the digest of the declared definition."""
        ctl = controller()
        approve(ctl, "conversation")
        other = af.Controller(POLICY, [{**WRITE, "description": "now deletes"}, READ])
        assert ctl.approvals[0].identity is not None
        other.grant("write_file", arguments={"path": "/x"})
        assert other.approvals[0].identity != ctl.approvals[0].identity


class TestGrantRevoke:
    """The host lists, grants and revokes approvals; each change is traced."""

    def test_grant_then_revoke(self) -> None:
        """A granted approval covers; revoked, it covers nothing."""
        events: list[dict[str, Any]] = []
        ctl = controller(observers=[events.append])
        granted = ctl.grant("write_file", pattern="path^=/srv/*", scope="uses=5", source="file")
        assert granted.source == "file"
        assert granted.uses_left == 5
        finish(ctl, d := ask(ctl, "write_file", "/srv/x"))
        assert d.covered
        assert ctl.revoke(granted.id).id == granted.id
        assert ask(ctl, "write_file", "/srv/y").action is A.ASK_HUMAN
        names = [e["event"] for e in events]
        assert "approval_granted" in names
        assert "approval_revoked" in names
        decided = [e for e in events if e["event"] == "decision" and e.get("covered")]
        assert decided[0]["covered"] == d.covered

    @pytest.mark.parametrize(
        ("kwargs", "said"),
        [
            ({"tool": "nope", "pattern": "*"}, "not a declared tool"),
            ({"tool": "write_file"}, "give a pattern"),
            ({"tool": "write_file", "pattern": "*", "scope": "once"}, "remembers nothing"),
            ({"tool": "write_file", "pattern": "*", "scope": "uses=0"}, "at least 1"),
            ({"tool": "write_file", "pattern": "*", "scope": "seconds=-1"}, "above 0"),
            ({"tool": "write_file", "pattern": "*", "scope": "forever"}, "a scope is"),
            ({"tool": "write_file", "pattern": "not a pattern"}, "does not read"),
            ({"tool": "write_file", "arguments": {"p": float("nan")}}, "JSON"),
        ],
    )
    def test_a_bad_grant_raises_and_changes_nothing(
        self, kwargs: dict[str, Any], said: str
    ) -> None:
        """Each bad argument is an InvalidInputError naming it; the dump is unchanged."""
        ctl = controller()
        before = ctl.dump()
        tool = kwargs.pop("tool")
        with pytest.raises(InvalidInputError, match=said):
            ctl.grant(tool, **kwargs)
        assert ctl.dump() == before

    def test_a_bad_remember_raises_and_changes_nothing(self) -> None:
        """An unknown call id or a bad scope in remember leaves the run awaiting the human."""
        ctl = controller()
        decision = ask(ctl, "write_file", "/srv/a")
        before = ctl.dump()
        cid = decision.tool_calls[0].id
        for remember in ({"zz": "run"}, {cid: "uses=x"}, {cid: {"scope": "run", "x": 1}}, [1]):
            with pytest.raises(InvalidInputError, match="on_human_reply"):
                ctl.on_human_reply(True, remember=remember)  # type: ignore[arg-type]
            assert ctl.dump() == before

    def test_revoking_an_unknown_id_raises(self) -> None:
        """revoke names the approvals it holds."""
        ctl = controller()
        with pytest.raises(InvalidInputError, match="no remembered approval 'a9'"):
            ctl.revoke("a9")


class TestDump:
    """Approvals are stored where the run is: dump and load keep them, uses included."""

    def test_dump_load_keeps_approvals_and_their_uses(self) -> None:
        """A loaded run covers as the original, with the uses it had left."""
        clock = Clock()
        ctl = controller(clock=clock)
        approve(ctl, {"scope": "uses", "uses": 2, "pattern": "*"})
        finish(ctl, ask(ctl, "write_file", "/srv/1"))
        loaded = af.Controller.load(json.loads(json.dumps(ctl.dump())), clock=clock)
        assert loaded.approvals == ctl.approvals
        finish(loaded, d := ask(loaded, "write_file", "/srv/2"))
        assert d.action is A.EXECUTE_TOOLS
        assert ask(loaded, "write_file", "/srv/3").action is A.ASK_HUMAN

    def test_a_covered_call_loaded_before_its_result_stays_cleared(self) -> None:
        """Saved between the decision and the result, the covered call is not asked again."""
        ctl = controller()
        approve(ctl, {"scope": "conversation", "pattern": "*"})
        decision = ask(ctl, "write_file", "/srv/2")
        loaded = af.Controller.load(ctl.dump())
        assert loaded.state == "execute"
        assert loaded.may_run(decision.tool_calls[0].id)

    def test_a_changed_tool_on_load_is_not_covered(self) -> None:
        """identify given again on load: a tool whose pin moved asks again."""
        ctl = controller(identify={"write_file": "v1", "read_file": "r"}.get)
        approve(ctl, {"scope": "conversation", "pattern": "*"})
        loaded = af.Controller.load(ctl.dump(), identify={"write_file": "v2"}.get)
        assert ask(loaded, "write_file", "/srv/a").action is A.ASK_HUMAN


# -- property: across random policies, approvals and calls ----------------------------

_TOOLS = ("write_file", "read_file")
_PATHS = ("/srv/a", "/srv/b", "/etc/x", "/home/y")
_PATTERNS = ("*", "path^=/srv/*", "path=/etc/*", "path=/home/*")

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.sampled_from(_TOOLS), st.sampled_from(_PATHS)),
        st.tuples(
            st.just("grant"),
            st.sampled_from(_TOOLS),
            st.sampled_from(_PATTERNS),
            st.sampled_from(["uses=1", "uses=1", "uses=2", "seconds=5", "conversation", "run"]),
        ),
        st.tuples(st.just("tick"), st.sampled_from([1.0, 3.0, 10.0])),
        st.tuples(st.just("redefine"), st.sampled_from(_TOOLS)),
        st.tuples(st.just("reload")),
    ),
    min_size=3,
    max_size=25,
)
_policies = st.fixed_dictionaries(
    {
        # Mostly "ask": an approval only ever changes what the policy asks about.
        "write_file": st.sampled_from(["ask", "ask", "allow", "deny"]),
        "read_file": st.sampled_from(["ask", "ask", "allow", "deny"]),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=_policies, deny_etc=st.booleans(), steps=_steps, answers=st.data())
def test_an_approval_never_runs_what_it_must_not(
    table: dict[str, str], deny_etc: bool, steps: list[tuple[Any, ...]], answers: st.DataObject
) -> None:
    """Random policies, grants, calls, clock moves, redefinitions and reloads: a covered call
    was asked by the policy (never denied), is of the approval's tool and identity, within
    its uses and its time; a denied call never runs; an asked call runs only covered or
    approved; all of it holds across dump and load."""
    policy = af.Policy(
        permissions=table,
        permission_rules=["deny write_file(path=/etc/*)"] if deny_etc else [],
        repeat_threshold=3,
    )
    world = _World(policy)
    for step in steps:
        kind = step[0]
        if kind == "tick":
            world.clock.now += step[1]
        elif kind == "redefine":
            world.pins[step[1]] += 1
        elif kind == "reload":
            world.ctl = af.Controller.load(
                json.loads(json.dumps(world.ctl.dump())), clock=world.clock, identify=world.identify
            )
        elif kind == "grant":
            approval = world.ctl.grant(step[1], pattern=step[2], scope=step[3])
            world.made[approval.id] = approval
        else:
            world.call(step[1], step[2], answers)
        if world.ctl.done:
            return


class _World:
    """A run under test with the clock, pins and approvals the property checks against."""

    def __init__(self, policy: af.Policy) -> None:
        self.policy = policy
        self.clock = Clock()
        self.pins = {"write_file": 0, "read_file": 0}
        self.ctl = controller(policy, self.clock, identify=self.identify)
        self.uses: dict[str, int] = {}
        self.made: dict[str, af.Approval] = {}

    def identify(self, name: str) -> str:
        return f"{name}@{self.pins[name]}"

    def call(self, name: str, path: str, answers: st.DataObject) -> None:
        """One call: checked against the policy and the approvals, then answered."""
        ctl = self.ctl
        probe = af.ToolCall(id="p", name=name, arguments={"path": path})
        base = self.policy.permission_verdict(probe)[0]
        decision = ask(ctl, name, path)
        ran = decision.action is A.EXECUTE_TOOLS
        if base == "deny":
            assert not ran
            assert not decision.covered
        for call_id, approval_id in decision.covered.items():
            self.check_cover(self.made[approval_id], base, name)
            assert ran
            assert ctl.may_run(call_id)
        if base == "ask" and ran:
            assert decision.covered, "an asked call ran without a human or an approval"
        if decision.action is A.ASK_HUMAN:
            ctl.on_human_reply(answers.draw(st.booleans(), label="approve"))
        if ctl.state == "execute":
            ctl.on_tool_results(
                [af.ToolResult(call_id=c.id, content="ok") for c in ctl.pending_calls]
            )

    def check_cover(self, approval: af.Approval, base: str, name: str) -> None:
        """A cover: of an asked call, its tool and identity, within its uses and time."""
        assert base == "ask"
        assert approval.tool == name
        assert approval.identity == self.identify(name)
        self.uses[approval.id] = self.uses.get(approval.id, 0) + 1
        if approval.uses_left is not None:
            assert self.uses[approval.id] <= approval.uses_left
        if approval.expires_at is not None:
            assert self.clock.now < approval.expires_at


def test_the_docs_page_example_runs(tmp_path: Path) -> None:
    """docs/approvals.md's example runs as printed and ends asking once the approval is revoked."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "approvals.md").read_text("utf-8")
    found = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert found is not None
    script = tmp_path / "approvals_example.py"
    script.write_text(found.group(1), encoding="utf-8")
    done = python(str(script), timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "remembered approval a1" in lines[0]
    assert lines[-1] == "ask_human"


def traced_run(path: Path) -> None:
    """A traced run that remembers an answer, uses it, is granted an approval, uses and
    revokes it, then asks again."""
    clock = Clock()
    with TraceWriter(path) as writer:
        ctl = controller(clock=clock, observers=[writer])
        approve(ctl, {"scope": "uses", "uses": 1, "pattern": "path^=/srv/*"})
        finish(ctl, ask(ctl, "write_file", "/srv/b"))
        clock.now = 2.0
        granted = ctl.grant("read_file", pattern="*", scope="seconds=10")
        finish(ctl, ask(ctl, "read_file", "/x"))
        ctl.revoke(granted.id)
        assert ask(ctl, "read_file", "/y").action is A.ASK_HUMAN
        ctl.on_human_reply(False)


class TestReplay:
    """A trace of a run with remembered approvals replays to the same decisions."""

    def test_the_report_lists_the_approvals_and_the_calls_they_covered(
        self, tmp_path: Path
    ) -> None:
        """The page shows each grant, remembered answer and revocation, and each covered call."""
        path = tmp_path / "trace.jsonl"
        traced_run(path)
        report = build(str(path))
        (view,) = report.runs
        assert view.approvals is not None
        assert [c["what"] for c in view.approvals.changes] == ["remembered", "granted", "revoked"]
        assert sum(view.approvals.used.values()) == 2
        assert "Remembered approvals" in report.html
        assert "2 call(s) ran under a remembered approval" in report.html
        assert "by approval <code>a1</code>" in report.html

    def test_a_trace_with_remember_grant_and_revoke_replays_without_divergence(
        self, tmp_path: Path
    ) -> None:
        """Remembered answers, a grant and a revocation are given again: nothing differs."""
        path = tmp_path / "trace.jsonl"
        traced_run(path)
        (run,) = read_runs(str(path))
        result = replay_run(run)
        assert divergence(run, result) is None
        covered = [d for d in result.decisions if d.action == "execute_tools"]
        assert len(covered) >= 3

    def test_the_diagram_of_the_trace_notes_the_covered_calls_on_validate(
        self, tmp_path: Path
    ) -> None:
        """`diagram --trace` hangs a note on validate counting the calls approvals covered."""
        path = tmp_path / "trace.jsonl"
        traced_run(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        overlay = Overlay.from_events(json.loads(line) for line in lines)
        assert overlay.covered == 2
        assert "note left of VALIDATE : 2 call(s) ran under remembered approvals" in mermaid(
            POLICY, overlay
        )
        assert "approvals_note" in dot(POLICY, overlay)
        assert "approvals_note" not in dot(POLICY, Overlay())
