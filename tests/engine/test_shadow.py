"""Shadow mode: a candidate policy judged beside the enforced one, recorded and never enforced.

The property: for random enforced policies, random shadows and random model outputs, a
Controller with the shadow decides exactly what one without it decides (every decision,
every dump), and each recorded shadow verdict is the shadow's own verdict on the call.
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.run_state import Run
from agentfsm.exceptions import CheckpointError, PolicyError
from agentfsm.states.validate import verdict
from agentfsm.testing import call, turn
from tests.processes import python
from tests.seam_strategies import SideEffects, handoff_outputs, model_outputs, policies

A = af.Action
_WORK = (A.EXECUTE_TOOLS, A.HANDOFF, A.ASK_HUMAN)


def _enforced(decision: af.Decision) -> dict[str, Any]:
    """Everything a decision says but its shadow record."""
    fields = decision.as_dict()
    del fields["shadow"]
    return fields


def _call(ctl: af.Controller, call_id: str) -> af.ToolCall:
    """A copy of the call `call_id` of the controller's last model output."""
    last = ctl.last_output
    assert last is not None
    return next(c for c in last.tool_calls if c.id == call_id)


def _answers(decision: af.Decision) -> list[af.ToolResult]:
    return [af.ToolResult(call_id=c.id, content=f"{c.name} ok") for c in decision.tool_calls]


def _hostile(how: str) -> Any:
    """A shadow hook that misbehaves: raises, answers nonsense, or edits the call it is shown."""

    def hook(call: af.ToolCall) -> Any:
        if how == "raises":
            raise RuntimeError("shadow hook bug")
        if how == "edits" and call.arguments is not None:
            call.arguments.clear()
            call.arguments["n"] = -1
            return "allow"
        return {"nonsense": 1}

    return hook


class TestShadowNeverEnforces:
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        policies(hooks=True),
        policies(hooks=True),
        st.sampled_from(["as drawn", "raises", "edits", "nonsense"]),
        st.lists(model_outputs() | handoff_outputs(), min_size=1, max_size=5),
        st.lists(st.booleans(), min_size=6, max_size=6),
    )
    def test_decisions_are_those_without_a_shadow_and_the_record_is_the_shadows_verdict(
        self,
        policy: af.Policy,
        shadow: af.Policy,
        hook: str,
        outputs: list[dict[str, Any]],
        answers: list[bool],
    ) -> None:
        """Same decisions and dumps as without a shadow, whatever its hook does; each record
        is the shadow's own verdict on the call."""
        if hook != "as drawn":
            shadow = shadow.model_copy(update={"permission": _hostile(hook)})
        tools = SideEffects().tools()
        plain = af.Controller(policy, tools=tools, run_id="r")
        shadowed = af.Controller(policy, tools=tools, run_id="r", shadow=shadow)
        judge = Run("judge", shadow, shadowed.tools)  # the shadow as an enforced policy
        asked = iter(answers * 10)
        for output in outputs:
            if plain.done:
                break
            d, s = plain.on_model_output(output), shadowed.on_model_output(output)
            assert _enforced(d) == _enforced(s)
            assert d.shadow == ()
            event(f"calls judged by the shadow: {min(len(s.shadow), 2)}")
            event(f"a shadow verdict differs: {any(v.differs for v in s.shadow)}")
            for record in s.shadow:
                # Each oracle gets its own copy of the call (`last_output` is one): a hook that
                # edits what it is shown must not change what the other oracle reads.
                assert record.shadow == verdict(judge, _call(shadowed, record.call_id))[0]
                assert record.enforced == verdict(plain._run, _call(plain, record.call_id))[0]
            while d.action in _WORK:
                if d.action is A.ASK_HUMAN:
                    yes = next(asked)
                    d, s = plain.on_human_reply(yes), shadowed.on_human_reply(yes)
                else:
                    d, s = plain.on_tool_results(_answers(d)), shadowed.on_tool_results(_answers(s))
                assert _enforced(d) == _enforced(s)
            plain_dump, shadow_dump = plain.dump(), shadowed.dump()
            assert "shadow" not in plain_dump
            del shadow_dump["shadow"]
            plain_dump["run"].pop("started"), shadow_dump["run"].pop("started")
            assert plain_dump == shadow_dump

    def test_a_shadow_that_raises_records_error_and_changes_nothing(self) -> None:
        """A shadow whose verdict raises is recorded as "error", with why; the call still runs."""

        class Broken(af.Policy):
            def permission_verdict(self, call: af.ToolCall, *, history: Any = None) -> Any:
                raise RuntimeError("shadow bug")

        ctl = af.Controller(shadow=Broken())
        d = ctl.on_model_output(turn(calls=[call("read", {"path": "a"}, id="c1")]))
        assert d.action is A.EXECUTE_TOOLS
        assert [c.id for c in d.tool_calls] == ["c1"]
        (record,) = d.shadow
        assert (record.enforced, record.shadow) == ("allow", "error")
        assert "RuntimeError: shadow bug" in record.source
        assert ctl.may_run("c1")

    def test_a_shadow_hook_that_raises_denies_in_the_record_only(self) -> None:
        """A shadow's hook that raises denies in the record, as it would if enforced."""

        def hook(call: af.ToolCall) -> str:
            raise ValueError("no")

        ctl = af.Controller(shadow=af.Policy(permission=hook))
        d = ctl.on_model_output(turn(calls=[call("read", {}, id="c1")]))
        assert d.action is A.EXECUTE_TOOLS
        assert ctl.may_run("c1")
        assert d.shadow[0].shadow == "deny"
        assert "ValueError" in d.shadow[0].source

    def test_a_shadow_hook_that_edits_the_call_edits_nothing_that_runs(self) -> None:
        """The shadow is shown a copy: editing its arguments changes no cleared call."""

        def hook(call: af.ToolCall) -> str:
            assert call.arguments is not None
            call.arguments["path"] = "/etc/shadow"
            return "allow"

        ctl = af.Controller(shadow=af.Policy(permission=hook))
        d = ctl.on_model_output(turn(calls=[call("read", {"path": "a"}, id="c1")]))
        assert d.tool_calls[0].arguments == {"path": "a"}
        assert ctl.pending_calls[0].arguments == {"path": "a"}
        assert ctl.may_run("c1", "read", {"path": "a"})

    def test_a_denying_shadow_never_stops_an_allowed_call(self) -> None:
        """A shadow that denies everything records deny; the enforced allow still runs."""
        ctl = af.Controller(af.Policy(), shadow={"permissions": {"*": "deny"}})
        d = ctl.on_model_output(turn(calls=[call("rm", {}, id="c1")]))
        assert d.action is A.EXECUTE_TOOLS
        assert (d.shadow[0].enforced, d.shadow[0].shadow) == ("allow", "deny")
        assert d.shadow[0].differs

    def test_an_allowing_shadow_never_runs_a_denied_call(self) -> None:
        """A shadow that allows what the policy denies records allow; the call does not run."""
        ctl = af.Controller({"permission_rules": ["deny rm"]}, shadow=af.Policy())
        d = ctl.on_model_output(turn(calls=[call("rm", {}, id="c1")]))
        assert d.action is A.CONTINUE
        assert not ctl.may_run("c1")
        assert (d.shadow[0].enforced, d.shadow[0].shadow) == ("deny", "allow")
        assert d.shadow[0].source == "the default"

    def test_an_undeclared_tool_is_denied_under_both(self) -> None:
        """A call no declared tool fits is refused, and the shadow record says deny too."""
        ctl = af.Controller(tools=["read"], shadow=af.Policy())
        d = ctl.on_model_output(turn(calls=[call("rm", {}, id="c1")]))
        assert (d.shadow[0].enforced, d.shadow[0].shadow) == ("deny", "deny")
        assert "unknown tool" in d.shadow[0].source


class TestShadowArguments:
    def test_no_shadow_records_nothing(self) -> None:
        """Without a shadow the decision's record is empty and the trace has no shadow key."""
        events: list[Mapping[str, Any]] = []
        ctl = af.Controller(observers=[events.append])
        d = ctl.on_model_output(turn(calls=[call("read", {}, id="c1")]))
        assert d.shadow == ()
        assert all("shadow" not in e for e in events)

    @pytest.mark.parametrize("bad", ["deny rm", 3, ["deny rm"]])
    def test_a_shadow_of_the_wrong_kind_is_a_policy_error_naming_shadow(self, bad: Any) -> None:
        """A shadow that is no Policy, mapping or None fails at construction, naming `shadow`."""
        with pytest.raises(PolicyError, match="shadow"):
            af.Controller(shadow=bad)

    def test_a_bad_shadow_field_names_shadow(self) -> None:
        """A shadow mapping with a bad field fails at construction, naming `shadow`."""
        with pytest.raises(PolicyError, match="shadow"):
            af.Controller(shadow={"permission_rules": ["maybe rm"]})

    def test_a_shadow_rule_that_never_applies_to_the_tools_names_shadow(self) -> None:
        """A shadow rule naming an undeclared tool fails as the policy's would, naming `shadow`."""
        with pytest.raises(PolicyError, match=r"^shadow: .*'raed'"):
            af.Controller(tools=["read"], shadow={"permission_rules": ["deny raed"]})


class TestShadowSaved:
    def test_dump_and_load_keep_the_shadow(self) -> None:
        """A loaded Controller keeps shadowing with the saved shadow policy."""
        ctl = af.Controller(shadow={"permission_rules": ["deny rm"]})
        ctl.on_model_output(turn(calls=[call("read", {}, id="c1")]))
        data = json.loads(json.dumps(ctl.dump()))
        loaded = af.Controller.load(data)
        assert loaded.shadow == ctl.shadow
        loaded.on_tool_results([af.ToolResult(call_id="c1", content="ok")])
        d = loaded.on_model_output(turn(calls=[call("rm", {}, id="c2")]))
        assert d.action is A.EXECUTE_TOOLS
        assert (d.shadow[0].enforced, d.shadow[0].shadow) == ("allow", "deny")

    def test_a_pickled_controller_keeps_its_shadow(self) -> None:
        """Pickling goes through dump and load, and the shadow comes along."""
        ctl = af.Controller(shadow={"permission_rules": ["deny rm"]})
        again = pickle.loads(pickle.dumps(ctl))
        assert again.shadow == ctl.shadow
        d = again.on_model_output(turn(calls=[call("rm", {}, id="c1")]))
        assert d.shadow[0].shadow == "deny"

    def test_a_shadow_with_code_must_be_given_again(self) -> None:
        """A saved shadow holding a hook loads only with the live shadow, as a policy does."""
        shadow = af.Policy(permission=lambda call: "deny")
        ctl = af.Controller(shadow=shadow)
        data = ctl.dump()
        with pytest.raises(CheckpointError, match=r"shadow policy.*Controller.load\(data, shadow="):
            af.Controller.load(data)
        assert af.Controller.load(data, shadow=shadow).shadow is shadow

    def test_a_different_shadow_is_refused(self) -> None:
        """A shadow given on load must equal the saved one."""
        data = af.Controller(shadow={"permission_rules": ["deny rm"]}).dump()
        with pytest.raises(CheckpointError, match="shadow policy given differs"):
            af.Controller.load(data, shadow=af.Policy())

    def test_a_run_saved_without_a_shadow_may_be_given_one(self) -> None:
        """A shadow changes no decision, so a run saved without one can start shadowing."""
        data = af.Controller().dump()
        loaded = af.Controller.load(data, shadow=af.Policy(permission_rules=["deny rm"]))
        d = loaded.on_model_output(turn(calls=[call("rm", {}, id="c1")]))
        assert d.action is A.EXECUTE_TOOLS
        assert d.shadow[0].shadow == "deny"


class TestShadowTraced:
    def test_the_trace_records_the_shadow_policy_and_each_verdict(self, tmp_path: Path) -> None:
        """run_started holds the shadow policy; each decision event its verdicts."""
        path = tmp_path / "t.jsonl"
        with af.TraceWriter(path) as writer:
            ctl = af.Controller(
                shadow={"permission_rules": ["deny rm"]}, observers=[writer], run_id="r"
            )
            ctl.on_model_output(turn(calls=[call("rm", {"x": 1}, id="c1")]))
        events = list(af.read_trace(path))
        started = next(e for e in events if e["event"] == "run_started")
        assert started["shadow"]["permission_rules"][0]["tool"] == "rm"
        decision = next(e for e in events if e["event"] == "decision")
        assert decision["shadow"] == [
            {
                "call_id": "c1",
                "tool": "rm",
                "enforced": "allow",
                "shadow": "deny",
                "source": "rule 'deny rm'",
                "enforced_source": "the default",
            }
        ]


class TestShadowPage:
    def test_the_pages_example_runs_and_prints_what_it_says(self, tmp_path: Path) -> None:
        """docs/shadow.md's example runs as written and prints the lines its comments show."""
        page = Path(__file__).resolve().parents[2] / "docs" / "shadow.md"
        found = re.search(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
        assert found is not None
        code = found.group(1)
        script = tmp_path / "example.py"
        script.write_text(code, encoding="utf-8")
        done = python(str(script), timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        shown = [line[2:] for line in code.splitlines() if line.startswith("# bash")]
        assert done.stdout.splitlines() == shown
