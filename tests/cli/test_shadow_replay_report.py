"""`agentfsm replay` and `agentfsm report` of a trace recorded with a shadow policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._cli.replay import main
from agentfsm._report import build
from agentfsm.testing import call, turn


def shadow_trace(path: Path, shadow: dict[str, Any] | None = None) -> Path:
    """A run denying `rm`, shadowed by a policy denying `read` instead (or `shadow`)."""
    given = {"permission_rules": ["deny read"]} if shadow is None else shadow
    with af.TraceWriter(path) as writer:
        ctl = af.Controller(
            {"permission_rules": ["deny rm"]}, shadow=given, observers=[writer], run_id="r1"
        )
        ctl.on_model_output(turn(calls=[call("read", {"p": 1}, id="a"), call("rm", {}, id="b")]))
        ctl.on_tool_results([af.ToolResult(call_id="a", content="x")])
        ctl.on_model_output(turn("done"))
    return path


def plain_trace(path: Path) -> Path:
    """A run of one allowed call, then its final answer (a run with no end is bad input)."""
    with af.TraceWriter(path) as writer:
        ctl = af.Controller({"permission_rules": ["deny rm"]}, observers=[writer], run_id="r1")
        ctl.on_model_output(turn(calls=[call("read", {"p": 1}, id="a")]))
        ctl.on_tool_results([af.ToolResult(call_id="a", content="x")])
        ctl.on_model_output(turn("done"))
    return path


class TestReplay:
    def test_the_recorded_shadow_differences_are_shown_and_exit_0(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each run's line says where the recorded shadow differed; the status is unchanged."""
        trace = shadow_trace(tmp_path / "t.jsonl")
        assert main([str(trace)]) == 0
        out = capsys.readouterr().out
        assert "shadow (recorded): 2 of 2 call(s) differ (allow->deny 1, deny->allow 1)" in out
        assert "turn 1 read a: enforced allow, shadow deny (rule 'deny read')" in out

    def test_json_carries_the_shadow_summary(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--json` gives each run a `shadow` object: counts and each differing call."""
        trace = shadow_trace(tmp_path / "t.jsonl")
        assert main([str(trace), "--json"]) == 0
        (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        shadow = record["shadow"]
        assert (shadow["source"], shadow["calls"], shadow["differ"]) == ("recorded", 2, 2)
        assert shadow["by_transition"] == {"allow->deny": 1, "deny->allow": 1}
        assert [d["tool"] for d in shadow["differences"]] == ["read", "rm"]

    def test_a_candidate_given_at_replay_time_is_judged_on_the_recorded_calls(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--shadow FILE` judges the calls by that candidate, even for an unshadowed trace."""
        trace = plain_trace(tmp_path / "t.jsonl")
        candidate = tmp_path / "candidate.json"
        candidate.write_text(json.dumps({"permission_rules": ["ask read"]}), encoding="utf-8")
        assert main([str(trace), "--json", "--shadow", str(candidate)]) == 0
        (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert record["shadow"]["source"] == str(candidate)
        assert record["shadow"]["by_transition"] == {"allow->ask": 1}
        assert record["differs"] is False

    def test_without_a_shadow_nothing_is_added(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A trace without a shadow replays exactly as before: no shadow line, no key."""
        trace = plain_trace(tmp_path / "t.jsonl")
        assert main([str(trace), "--json"]) == 0
        assert "shadow" not in json.loads(capsys.readouterr().out)

    def test_a_bad_shadow_file_is_bad_input(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A --shadow file that is not a policy exits 2."""
        trace = plain_trace(tmp_path / "t.jsonl")
        bad = tmp_path / "bad.json"
        bad.write_text("[1]", encoding="utf-8")
        assert main([str(trace), "--shadow", str(bad)]) == 2
        assert "bad.json" in capsys.readouterr().err


class TestReport:
    def test_the_shadow_section_lists_each_differing_call(self, tmp_path: Path) -> None:
        """The run's section shows the recorded shadow: counts by transition, each call."""
        report = build([str(shadow_trace(tmp_path / "t.jsonl"))])
        (view,) = report.runs
        assert [(v["tool"], v["enforced"], v["shadow"]) for v in view.shadow] == [
            ("read", "allow", "deny"),
            ("rm", "deny", "allow"),
        ]
        assert "<h3>Shadow policy</h3>" in report.html
        assert "2 of 2 call(s) judged differently" in report.html
        assert "<td>allow → deny</td><td>1</td>" in report.html
        assert "rule &#x27;deny read&#x27;" in report.html

    def test_a_shadow_that_agrees_is_said_so(self, tmp_path: Path) -> None:
        """A shadow that decided every call alike says so, with no table."""
        trace = shadow_trace(tmp_path / "t.jsonl", {"permission_rules": ["deny rm"]})
        report = build([str(trace)])
        assert "0 of 2 call(s) judged differently" in report.html
        assert "shadow-counts" not in report.html

    def test_no_shadow_no_section(self, tmp_path: Path) -> None:
        """A trace without a shadow has no shadow section."""
        report = build([str(plain_trace(tmp_path / "t.jsonl"))])
        assert "Shadow policy" not in report.html


class TestDiagram:
    def test_a_shadow_is_a_note_on_validate_and_adds_no_edge(self, tmp_path: Path) -> None:
        """`diagram --shadow FILE` notes where the shadow judges; the machine is unchanged."""
        from agentfsm._diagrams import dot, mermaid

        shadow = af.Policy(permission_rules=["deny rm", "ask git_*"])
        policy = af.Policy()
        plain, noted = mermaid(policy), mermaid(policy, shadow=shadow)
        added = [line for line in noted.splitlines() if line not in plain.splitlines()]
        assert added == [
            (
                "    note right of VALIDATE : shadow policy (2 rule(s)) judges every call here, "
                "recorded, never enforced"
            )
        ]
        graph = dot(policy, shadow=shadow)
        assert "shadow_note [shape=note" in graph
        assert "validate -> shadow_note [style=dashed" in graph
        assert dot(policy) == "".join(
            line + "\n" for line in graph.splitlines() if "shadow_note" not in line
        )

    def test_the_command_takes_a_shadow_file(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`agentfsm diagram --shadow FILE` prints the note; a bad file exits 2."""
        from agentfsm._cli.command import main as cli

        good = tmp_path / "shadow.json"
        good.write_text(json.dumps({"permissions": {"rm": "deny"}}), encoding="utf-8")
        assert cli(["diagram", "--shadow", str(good)]) == 0
        assert "note right of VALIDATE : shadow policy (1 rule(s))" in capsys.readouterr().out
        bad = tmp_path / "bad.json"
        bad.write_text("[", encoding="utf-8")
        assert cli(["diagram", "--shadow", str(bad)]) == 2
