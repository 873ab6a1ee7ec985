"""A saved run keeps its permission rules as they were: dump -> load decides as the original."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.exceptions import CheckpointError, PolicyError
from agentfsm.testing import call, turn
from tests.seam_strategies import handoff_outputs, model_outputs, policies

SQL_RULE = {"action": "deny", "tool": "sql", "args": {"query": "*DROP TABLE*, owner=*"}}
DROP = call("sql", {"query": "x DROP TABLE y, owner=z"}, id="q")


def roundtrip(ctl: af.Controller, **live: Any) -> af.Controller:
    """`ctl` saved, sent through JSON text, and loaded."""
    return af.Controller.load(json.loads(json.dumps(ctl.dump())), **live)


class TestRulesSurviveADump:
    def test_a_mapping_rule_with_a_comma_still_denies_after_a_load(self) -> None:
        """Regression: the glob `*DROP TABLE*, owner=*` came back as two patterns and let it run."""
        ctl = af.Controller(af.Policy(permission_rules=[SQL_RULE]))
        loaded = roundtrip(ctl)
        assert loaded.policy.permission_rules == ctl.policy.permission_rules
        d = loaded.on_model_output(turn(calls=[DROP]))
        assert d.action is not af.Action.EXECUTE_TOOLS
        assert not loaded.may_run("q")

    def test_edge_spaces_of_a_glob_are_kept(self) -> None:
        """Regression: a glob's leading and trailing spaces were lost by the text form."""
        rule = {"action": "deny", "tool": "bash", "args": {"command": " rm *"}}
        ctl = af.Controller(af.Policy(permission_rules=[rule, "allow bash"]))
        loaded = roundtrip(ctl)
        assert loaded.policy.permission_rules[0].args == (("command", " rm *"),)
        spaced = turn(calls=[call("bash", {"command": " rm -rf /"}, id="b")])
        assert loaded.on_model_output(spaced).action is not af.Action.EXECUTE_TOOLS
        plain = roundtrip(af.Controller(af.Policy(permission_rules=[rule])))
        ran = plain.on_model_output(turn(calls=[call("bash", {"command": "rm -rf /"}, id="p")]))
        assert ran.action is af.Action.EXECUTE_TOOLS  # " rm *" does not match "rm -rf /"

    def test_a_policy_file_reads_back_the_same_rules(self, tmp_path: Path) -> None:
        """`to_json` written to a file and read with `Policy.from_file` is the same policy."""
        policy = af.Policy(
            permission_rules=[SQL_RULE, "ask git_*", {"action": "allow", "tool": "x", "args": {}}]
        )
        path = tmp_path / "policy.json"
        path.write_text(json.dumps(policy.to_json()), encoding="utf-8")
        assert af.Policy.from_file(path) == policy
        assert af.Policy.from_file(path).permission_for(DROP) == "deny"

    def test_a_dumped_rule_that_is_not_a_rule_is_a_policy_error(self) -> None:
        """A rule in the dump form with a bad field raises PolicyError, never an allow."""
        with pytest.raises(PolicyError, match="permission rule"):
            af.Policy(permission_rules=[{"action": "deny", "tool": "x", "args": [["q"]]}])
        with pytest.raises(PolicyError, match="permission rule"):
            af.Policy(permission_rules=[{"action": "nope", "tool": "x", "args": []}])


class TestOlderDumps:
    def older(self) -> dict[str, Any]:
        """A dump as older versions wrote it: the rules as text."""
        data = af.Controller(af.Policy(permission_rules=[SQL_RULE])).dump()
        data["policy"]["data"]["permission_rules"] = ["deny sql(query=*DROP TABLE*, owner=*)"]
        return data

    def test_text_rules_alone_are_refused(self) -> None:
        """An older dump with text rules is not re-parsed: CheckpointError asks for the policy."""
        with pytest.raises(CheckpointError, match="as text"):
            af.Controller.load(self.older())

    def test_text_rules_load_with_the_live_policy(self) -> None:
        """Given the live policy that wrote it, an older dump loads and keeps its rules."""
        live = af.Policy(permission_rules=[SQL_RULE])
        loaded = af.Controller.load(self.older(), policy=live)
        assert loaded.policy is live
        assert loaded.on_model_output(turn(calls=[DROP])).action is not af.Action.EXECUTE_TOOLS

    def test_text_rules_of_another_policy_are_refused(self) -> None:
        """An older dump given a policy with other rules raises CheckpointError naming them."""
        other = af.Policy(permission_rules=["deny sql"])
        with pytest.raises(CheckpointError, match="permission_rules"):
            af.Controller.load(self.older(), policy=other)


def answer(ctl: af.Controller, output: dict[str, Any], flags: list[bool]) -> af.Decision:
    """Give the run the input its state takes: the output, a human's reply or some results."""
    if ctl.state == "await_model":
        return ctl.on_model_output(output)
    if ctl.state == "await_human":
        return ctl.on_human_reply(approved=flags[0])
    pending = ctl.pending_calls
    results = [
        af.ToolResult(call_id=c.id, content=f"r{c.id}", is_error=flags[1])
        for c, keep in zip(pending, [*flags, *flags], strict=False)
        if keep
    ]
    return ctl.on_tool_results(results)


def seen(decision: af.Decision) -> tuple[Any, ...]:
    """What two equal controllers must agree on."""
    return (
        decision.action,
        decision.priority,
        [c.model_dump() for c in decision.tool_calls],
        [r.model_dump() for r in decision.results],
        decision.exit_reason,
    )


def clearances(ctl: af.Controller) -> list[bool]:
    """`may_run` for every call of the last output, by id, name and arguments."""
    out = ctl.last_output
    calls = out.tool_calls if out is not None else []
    return [ctl.may_run(c.id, c.name, c.arguments or {}) for c in calls]


INPUTS = st.lists(
    st.tuples(model_outputs() | handoff_outputs(), st.lists(st.booleans(), min_size=4, max_size=4)),
    min_size=1,
    max_size=8,
)


class TestDumpLoadProperty:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(policies(), INPUTS, st.integers(0, 8))
    def test_a_loaded_controller_decides_as_the_original(
        self, policy: af.Policy, inputs: list[Any], cut: int
    ) -> None:
        """Controller(policy) and Controller.load(dump) agree on every decision and clearance."""
        original = af.Controller(policy, run_id="p")
        restored = roundtrip(af.Controller(policy, run_id="p"))
        assert restored.policy == policy
        for index, (output, flags) in enumerate(inputs):
            if original.done:
                break
            if index == cut:  # and again mid-run, in whatever state it is
                restored = roundtrip(restored)
            assert seen(answer(restored, output, flags)) == seen(answer(original, output, flags))
            assert clearances(restored) == clearances(original)
            assert restored.state == original.state
