"""`agentfsm replay --against`: the impact summary, `--only-diff` steps, JUnit rules, and
`explain --exit-code`, run as a user runs them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentfsm._cli._divergence import Impact
from agentfsm._cli.replay import main
from agentfsm._replay.engine import JudgedCall
from tests.cli.test_cli_errors import agentfsm as run_agentfsm


def _call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _two_calls(path: Path, target: str = "/etc/passwd") -> str:
    """A chat run whose one turn reads a file and deletes another, then answers."""
    chat = [
        {"role": "user", "content": "tidy up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("r1", "read_file", {"path": "/etc/hosts"}),
                _call("d1", "delete_file", {"path": target}),
            ],
        },
        {"role": "tool", "tool_call_id": "r1", "content": "127.0.0.1 localhost"},
        {"role": "tool", "tool_call_id": "d1", "content": "deleted"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text("".join(json.dumps(m) + "\n" for m in chat), encoding="utf-8")
    return str(path)


def _policy(path: Path, **fields: object) -> str:
    path.write_text(json.dumps(fields), encoding="utf-8")
    return str(path)


DENY_ETC = "deny delete_file(path^=/etc/*)"


class TestImpactSummary:
    """The calls judged otherwise, by transition, tool and rule, one example each."""

    def test_a_new_deny_beside_an_allowed_call_differs_and_names_both_rules(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The turn executes tools under both policies (the read still runs), so no action
        differs; the deleted file does, and CI must see it: exit 1, the flip and its rules."""
        trace = _two_calls(tmp_path / "t.jsonl")
        new = _policy(tmp_path / "new.json", permission_rules=[DENY_ETC])
        assert main([trace, "--against", new, "--engine", "serial"]) == 1
        out = capsys.readouterr().out
        summary = out[out.index("== divergence") :].splitlines()
        assert summary[0] == "== divergence: 1 run(s) compared, 1 differ"
        assert "a call judged otherwise: delete_file" in summary[1]
        impact = out[out.index("== impact") :].splitlines()
        assert impact[0] == "== impact: 2 call(s) judged, 1 judged otherwise under --against"
        assert impact[1].startswith(
            '  ALLOW -> DENY  1   e.g. delete_file({"path": "/etc/passwd"})'
        )
        assert impact[1].endswith("run 0 turn 1")
        assert impact[2:4] == ["  by tool:", "    delete_file  allow -> deny  1"]
        assert impact[5] == f"    allow -> deny  1  the default -> rule '{DENY_ETC}'"

    def test_json_totals_list_every_group(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        trace = _two_calls(tmp_path / "t.jsonl")
        new = _policy(tmp_path / "new.json", permission_rules=[DENY_ETC, "ask read_file"])
        assert main([trace, "--against", new, "--json"]) == 1
        totals = json.loads(capsys.readouterr().out.splitlines()[-1])["totals"]
        impact = totals["impact"]
        assert (impact["calls"], impact["flipped"]) == (2, 2)
        assert sorted((f["from"], f["to"], f["calls"]) for f in impact["flips"]) == [
            ("allow", "ask", 1),
            ("allow", "deny", 1),
        ]
        rules = {(r["rule"], r["against_rule"]) for r in impact["by_rule"]}
        assert rules == {
            ("the default", f"rule '{DENY_ETC}'"),
            ("the default", "rule 'ask read_file'"),
        }
        assert all(f"{trace} run 0 turn 1" in g["example"] for g in impact["by_tool"])

    def test_a_loosened_policy_counts_deny_to_allow(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The other way round: what a looser policy would let run."""
        trace = _two_calls(tmp_path / "t.jsonl")
        old = _policy(tmp_path / "old.json", permission_rules=[DENY_ETC])
        new = _policy(tmp_path / "new.json")
        assert main([trace, "--policy", old, "--against", new]) == 1
        assert "  DENY -> ALLOW  1   e.g. delete_file" in capsys.readouterr().out

    def test_a_call_one_policy_never_reaches_is_not_reached(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """max_turns=1 under --against: the run stops at the second turn, whose call the
        policy ran; counted `allow -> not reached`, with the rule only the policy used."""
        chat = [
            {"role": "user", "content": "read twice"},
            *[
                message
                for n in (1, 2)
                for message in (
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [_call(f"r{n}", "read_file", {"path": f"/tmp/{n}"})],
                    },
                    {"role": "tool", "tool_call_id": f"r{n}", "content": "text"},
                )
            ],
            {"role": "assistant", "content": "done"},
        ]
        trace = tmp_path / "t.jsonl"
        trace.write_text("".join(json.dumps(m) + "\n" for m in chat), encoding="utf-8")
        new = _policy(tmp_path / "new.json", max_turns=1)
        assert main([str(trace), "--against", new, "--json"]) == 1
        impact = json.loads(capsys.readouterr().out.splitlines()[-1])["totals"]["impact"]
        assert impact["calls"] == 2
        assert [(f["from"], f["to"], f["calls"]) for f in impact["flips"]] == [
            ("allow", "not reached", 1)
        ]
        (rule,) = impact["by_rule"]
        assert (rule["rule"], rule["against_rule"]) == ("the default", "-")
        assert rule["example"].startswith('read_file({"path": "/tmp/2"})')

    def test_the_pool_counts_what_one_process_counts(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Impacts computed in worker processes add up to the serial replay's."""
        traces = [
            _two_calls(tmp_path / f"t{i}.jsonl", f"/etc/{i}" if i % 2 else f"/srv/{i}")
            for i in range(6)
        ]
        new = _policy(tmp_path / "new.json", permission_rules=[DENY_ETC])
        found = []
        for engine in (["--engine", "serial"], ["--workers", "2"]):
            assert main([*traces, "--against", new, "--json", *engine]) == 1
            found.append(json.loads(capsys.readouterr().out.splitlines()[-1])["totals"]["impact"])
        assert found[0] == found[1]
        assert found[0]["flipped"] == 3

    def test_junit_failure_names_the_rule_on_each_side(self, tmp_path: Path) -> None:
        trace = _two_calls(tmp_path / "t.jsonl")
        new = _policy(tmp_path / "new.json", permission_rules=[DENY_ETC])
        report = tmp_path / "junit.xml"
        assert main([trace, "--against", new, "--junit", str(report)]) == 1
        failure = ET.parse(report).getroot().find("testsuite/testcase/failure")
        assert failure is not None
        message = failure.get("message", "")
        assert "allow (the default) under the policy" in message
        assert f"deny (rule '{DENY_ETC}') under --against" in message

    def test_shadow_and_against_together_are_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        trace = _two_calls(tmp_path / "t.jsonl")
        new = _policy(tmp_path / "new.json")
        assert main([trace, "--against", new, "--shadow", new]) == 2
        assert "--shadow and --against" in capsys.readouterr().err


class TestImpactMerge:
    """Per-file impacts merge into the totals as if counted in one place."""

    def test_merge_equals_one_count(self) -> None:
        def judged(turn: int, verdict: str, rule: str) -> JudgedCall:
            return JudgedCall(turn, f"c{turn}", "bash", "bash({})", verdict, rule)

        mine = [judged(1, "allow", "the default"), judged(2, "ask", "rule 'ask bash'")]
        theirs = [judged(1, "deny", "rule 'deny bash'"), judged(3, "allow", "the default")]
        one = Impact()
        one.add_run("a", mine, theirs)
        one.add_run("b", mine, theirs)
        first, second = Impact(), Impact()
        first.add_run("a", mine, theirs)
        second.add_run("b", mine, theirs)
        first.merge(second)
        assert first == one
        assert dict(one.flips) == {
            ("allow", "deny"): 2,
            ("ask", "not reached"): 2,
            ("not reached", "allow"): 2,
        }
        assert one.examples[("allow", "deny")] == ("bash({})", "a", 1)


class TestOnlyDiff:
    """--only-diff prints the steps that differ, not every step of a differing run."""

    def test_only_the_differing_steps_and_one_line_for_the_unreached(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        trace = str(corpus / "openhands" / "tests" / "runtime" / "trajs" / "basic_gui_mode.json")
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        assert main([trace, "--against", tight, "--only-diff", "--engine", "serial"]) == 1
        lines = capsys.readouterr().out.splitlines()
        run = lines[: lines.index(next(x for x in lines if x.startswith("== divergence")))]
        assert run[0].startswith(f"== {trace} run basic_gui_mode (openhands): ")
        assert run[1].startswith("  turn   3  ")
        assert run[1].endswith("[against: stop]")
        assert run[2].startswith("  turns   3-")
        assert run[2].endswith("none under --against")
        assert run[3] == "  exit: completed under the policy, max_turns under --against"
        assert run[4].startswith("  first call judged otherwise: ")
        assert run[4].endswith(
            "allow (the default) under the policy, not reached (-) under --against"
        )
        assert len(run) == 5  # the full replay prints a line per decision, and three more

    def test_json_keeps_only_the_differing_decisions(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        trace = str(corpus / "openhands" / "tests" / "runtime" / "trajs" / "basic_gui_mode.json")
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        assert main([trace, "--against", tight, "--only-diff", "--json"]) == 1
        run = json.loads(capsys.readouterr().out.splitlines()[0])
        assert run["decisions"]
        assert all("against_action" in d for d in run["decisions"])


class TestExplainExitCode:
    """`explain --exit-code`: the verdict as the exit status, for scripts."""

    @pytest.mark.parametrize(
        ("command", "status", "verdict"),
        [("ls", 0, "allow"), ("rm -rf /", 1, "deny"), ("git push", 3, "ask")],
    )
    def test_each_verdict_has_its_status(
        self, tmp_path: Path, command: str, status: int, verdict: str
    ) -> None:
        policy = _policy(
            tmp_path / "p.json",
            permission_rules=["deny bash(command~rm -rf *)", "ask bash(command~git push*)"],
        )
        call = json.dumps({"name": "bash", "arguments": {"command": command}})
        done = run_agentfsm("explain", "--exit-code", policy, call)
        assert (done.returncode, done.stdout.split(":")[0]) == (status, verdict)
        plain = run_agentfsm("explain", policy, call)
        assert (plain.returncode, plain.stdout) == (0, done.stdout)

    def test_bad_input_stays_two(self, tmp_path: Path) -> None:
        done = run_agentfsm("explain", "--exit-code", _policy(tmp_path / "p.json"), "[1]")
        assert done.returncode == 2
