"""`agentfsm replay` from the command line: output, --against, bad input and engines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import agentfsm as af
from agentfsm._cli._divergence import _short
from agentfsm._cli._replay_jobs import Progress
from agentfsm._cli.replay import main
from agentfsm._replay.trace import TraceWriter
from agentfsm.testing import call, turn

CHAT = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "ok"},
    {"role": "assistant", "content": "done"},
]


def _chat_file(path: Path) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    return path


def _policy(path: Path, **fields: object) -> str:
    path.write_text(json.dumps(fields), encoding="utf-8")
    return str(path)


class TestReplayOutput:
    """Text and JSON output."""

    def test_json_is_one_object_per_run(
        self, corpus: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--json prints one line per run with the documented keys."""
        status = main([str(corpus / "tau-bench" / "gpt-4o-airline.json"), "--json"])
        lines = capsys.readouterr().out.splitlines()
        assert status == 0
        assert len(lines) == 200
        first = json.loads(lines[0])
        assert {"source", "run", "format", "steps", "exit_reason", "decisions"} <= first.keys()
        assert set(first["decisions"][0]) == {"turn", "action", "priority", "guard", "reason"}

    def test_text_shows_states_decision_and_summary(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each step shows the turn, the path of states and the decision; then a summary."""
        assert main([str(_chat_file(tmp_path / "c.jsonl"))]) == 0
        out = capsys.readouterr().out
        assert "turn   1  await_model>" in out
        assert "execute_tools P" in out
        assert "summary: exit=completed" in out


class TestToolCallCount:
    """The summary's `tool_calls` counts what the live run counted."""

    @pytest.mark.parametrize("edit", [None, {"path": "/tmp/b"}])
    def test_an_approved_call_counts(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: dict[str, str] | None
    ) -> None:
        """A call a human approved (edited or not) ran live and counts in `--json` (it was
        reported as 0 calls)."""
        trace = tmp_path / "trace.jsonl"
        with TraceWriter(trace) as writer:
            ctl = af.Controller(af.Policy(permissions={"rm": "ask"}), observers=[writer])
            ctl.on_model_output(turn(calls=[call("rm", {"path": "/tmp/a"}, id="c1")]))
            ctl.on_human_reply({"c1": True}, arguments={"c1": edit} if edit else None)
            ctl.on_tool_results([af.ToolResult(call_id="c1", content="deleted")])
            ctl.on_model_output(turn("done"))
        assert ctl.dump()["run"]["tool_calls_used"] == 1
        assert main([str(trace), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out.splitlines()[0])
        assert summary["tool_calls"] == 1
        assert summary["recorded_calls"] == 1


class TestAgainst:
    """--against compares two policies and fails CI when they differ."""

    def test_differing_policies_exit_one(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A tighter turn limit changes decisions: exit 1 and `against_action` marks them."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        trace = str(corpus / "openhands" / "tests" / "runtime" / "trajs" / "basic_gui_mode.json")
        assert main([trace, "--json", "--against", tight]) == 1
        run, totals = map(json.loads, capsys.readouterr().out.splitlines())
        assert any("against_action" in d for d in run["decisions"])
        assert totals["totals"]["differ"] == 1

    def test_same_policy_exits_zero(self, tmp_path: Path) -> None:
        """Replaying against an identical policy finds no difference."""
        same = _policy(tmp_path / "same.json")
        assert main([str(_chat_file(tmp_path / "c.jsonl")), "--against", same, "--json"]) == 0


def _gui_trace(corpus: Path) -> str:
    """An OpenHands trajectory of five model turns: `max_turns=3` stops it at turn 3."""
    return str(corpus / "openhands" / "tests" / "runtime" / "trajs" / "basic_gui_mode.json")


class TestDivergenceSummary:
    """With --against the output ends with what differs, run by run, and the exits counted."""

    def test_text_summary_names_the_first_difference_and_counts_exits(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """One run of two differs: the summary names its file, run and turn, and both
        decisions there, and counts the exit reasons under each policy."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        chat = str(_chat_file(tmp_path / "c.jsonl"))
        args = [chat, _gui_trace(corpus), "--against", tight, "--engine", "serial"]
        assert main(args) == 1
        out = capsys.readouterr().out
        summary = out[out.index("== divergence") :].splitlines()
        assert summary[0] == "== divergence: 2 run(s) compared, 1 differ"
        assert summary[1] == (
            f"  {_short(_gui_trace(corpus))} run basic_gui_mode: turn 3: execute_tools P1 "
            "HasToolCalls() under the policy, stop (max_turns) P6 MaxTurns(3) under --against"
        )
        assert summary[2] == "  exit reasons under the policy: completed 2"
        assert summary[3] == "  exit reasons under --against: completed 1, max_turns 1"
        # the calls of turns 4 and 5 ran under the policy; --against stopped before them
        assert summary[4].startswith("== impact: ")
        assert summary[5].startswith("  ALLOW -> NOT REACHED  ")

    def test_same_decisions_summary_says_none_differ(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Against an identical policy the summary counts the run and no difference."""
        same = _policy(tmp_path / "same.json")
        assert main([str(_chat_file(tmp_path / "c.jsonl")), "--against", same]) == 0
        assert "== divergence: 1 run(s) compared, 0 differ" in capsys.readouterr().out

    def test_no_summary_without_against(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A plain replay that matches its recording prints no summary."""
        assert main([str(_chat_file(tmp_path / "c.jsonl"))]) == 0
        assert "== divergence" not in capsys.readouterr().out

    def test_only_diff_prints_only_the_differing_runs(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--only-diff leaves out the run that decides the same under both policies."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        chat = str(_chat_file(tmp_path / "c.jsonl"))
        args = [chat, _gui_trace(corpus), "--against", tight, "--engine", "serial", "--only-diff"]
        assert main(args) == 1
        out = capsys.readouterr().out
        assert f"== {_gui_trace(corpus)} run basic_gui_mode" in out
        assert f"== {chat} " not in out
        assert "2 run(s) compared, 1 differ" in out

    def test_only_diff_with_no_difference_prints_only_the_summary(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """When nothing differs, --only-diff prints no run at all."""
        same = _policy(tmp_path / "same.json")
        args = [str(_chat_file(tmp_path / "c.jsonl")), "--against", same, "--only-diff"]
        assert main(args) == 0
        assert capsys.readouterr().out.splitlines() == [
            "== divergence: 1 run(s) compared, 0 differ",
            "  exit reasons under the policy: completed 1",
            "  exit reasons under --against: completed 1",
            "== impact: 1 call(s) judged, 0 judged otherwise under --against",
        ]


class TestJsonTotals:
    """--json: `differs` on every run line, and a last `{"totals": ...}` line with --against."""

    def test_runs_carry_differs_and_the_last_line_is_totals(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each run line says whether it differs; the totals line counts runs and exits."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        chat = str(_chat_file(tmp_path / "c.jsonl"))
        args = [chat, _gui_trace(corpus), "--against", tight, "--json", "--workers", "2"]
        assert main(args) == 1
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [run["differs"] for run in lines[:-1]] == [False, True]
        assert "first_difference" not in lines[0]
        assert lines[1]["first_difference"] == {
            "turn": 3,
            "action": "execute_tools",
            "against_action": "stop",
            "detail": "turn 3: execute_tools P1 HasToolCalls() under the policy, "
            "stop (max_turns) P6 MaxTurns(3) under --against",
        }
        impact = lines[-1]["totals"].pop("impact")
        assert lines[-1] == {
            "totals": {
                "files": 2,
                "runs": 2,
                "differ": 1,
                "exit_reasons": {"completed": 2},
                "against_exit_reasons": {"completed": 1, "max_turns": 1},
            }
        }
        assert [(f["from"], f["to"]) for f in impact["flips"]] == [("allow", "not reached")]
        assert impact["flipped"] == impact["flips"][0]["calls"] > 0

    def test_only_diff_keeps_the_totals_of_every_run(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--only-diff --json prints the differing runs, and totals that count them all."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        trace = str(corpus / "tau-bench" / "gpt-4o-airline.json")
        assert main([trace, "--against", tight, "--json", "--only-diff"]) == 1
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        totals = lines[-1]["totals"]
        assert totals["runs"] == 200
        assert 0 < totals["differ"] < 200
        assert len(lines) - 1 == totals["differ"]
        assert all(run["differs"] for run in lines[:-1])
        assert sum(totals["against_exit_reasons"].values()) == 200

    def test_no_totals_line_without_against(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --against, --json stays one line per run, each with `differs` false."""
        assert main([str(_chat_file(tmp_path / "c.jsonl")), "--json"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == 1
        assert json.loads(lines[0])["differs"] is False


class TestJunit:
    """--junit FILE: a JUnit XML report a CI system reads, one testcase per run."""

    def test_report_counts_runs_and_failures(self, corpus: Path, tmp_path: Path) -> None:
        """Two runs, one differing: two testcases, one failure carrying the first difference."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        chat = str(_chat_file(tmp_path / "c.jsonl"))
        report = tmp_path / "junit.xml"
        args = [chat, _gui_trace(corpus), "--against", tight, "--junit", str(report)]
        assert main([*args, "--engine", "serial"]) == 1
        root = ET.parse(report).getroot()
        assert root.tag == "testsuites"
        suite = root.find("testsuite")
        assert suite is not None
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
        cases = suite.findall("testcase")
        assert [(c.get("classname"), c.get("name")) for c in cases] == [
            (chat, "run 0"),
            (_gui_trace(corpus), "run basic_gui_mode"),
        ]
        assert cases[0].find("failure") is None
        failure = cases[1].find("failure")
        assert failure is not None
        assert failure.get("message", "").startswith("turn 3: execute_tools")
        assert "exit under --against: max_turns" in (failure.text or "")

    def test_many_runs_same_decisions_have_no_failure(self, corpus: Path, tmp_path: Path) -> None:
        """200 runs replayed against the same policy: 200 testcases, none failed."""
        same = _policy(tmp_path / "same.json")
        report = tmp_path / "junit.xml"
        trace = str(corpus / "tau-bench" / "gpt-4o-airline.json")
        assert main([trace, "--against", same, "--json", "--junit", str(report)]) == 0
        suite = ET.parse(report).getroot().find("testsuite")
        assert suite is not None
        assert len(suite.findall("testcase")) == 200
        assert suite.get("failures") == "0"
        assert not suite.findall("testcase/failure")

    def test_bad_lines_are_errors(self, tmp_path: Path) -> None:
        """Under --keep-going each bad line is a testcase with an error element (exit 2)."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(CHAT[0]) + "\n{oops\n", encoding="utf-8")
        report = tmp_path / "junit.xml"
        assert main([str(bad), "--keep-going", "--junit", str(report)]) == 2
        suite = ET.parse(report).getroot().find("testsuite")
        assert suite is not None
        assert suite.get("errors") == "1"
        error = suite.find("testcase/error")
        assert error is not None
        assert "bad.jsonl:2" in error.get("message", "")

    def test_a_folder_that_does_not_exist_is_bad_input(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--junit into a missing folder exits 2 before replaying, naming the folder."""
        target = tmp_path / "nowhere" / "junit.xml"
        assert main([str(_chat_file(tmp_path / "c.jsonl")), "--junit", str(target)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert f"folder {tmp_path / 'nowhere'} does not exist" in captured.err


class TestBadInput:
    """Malformed lines, --keep-going and unknown formats."""

    def test_malformed_line_is_named(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --keep-going the first bad line stops the replay with exit 2."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"role": "user", "content": "x"}\n{oops\n', encoding="utf-8")
        assert main([str(bad)]) == 2
        assert "bad.jsonl:2: not valid JSON" in capsys.readouterr().err

    def test_keep_going_reports_every_bad_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """With --keep-going the rest is replayed and every bad line is listed at the end."""
        bad = tmp_path / "bad.jsonl"
        lines = [json.dumps(CHAT[0]), "{oops", json.dumps(CHAT[1]), "[1]", json.dumps(CHAT[2])]
        bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
        good = _chat_file(tmp_path / "good.jsonl")
        status = main([str(bad), str(good), "--keep-going", "--json", "--engine", "serial"])
        captured = capsys.readouterr()
        assert status == 2
        assert len(captured.out.splitlines()) == 2
        assert "bad.jsonl:2:" in captured.err
        assert "bad.jsonl:4: expected a JSON object" in captured.err

    def test_unknown_format_names_formats_tried(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A named file of unknown shape is an error listing the formats tried."""
        path = tmp_path / "x.json"
        path.write_text('{"a": 1}', encoding="utf-8")
        assert main([str(path)]) == 2
        err = capsys.readouterr().err
        assert "tried: agentfsm-trace, claude-code, tau-bench" in err

    def test_unknown_files_in_directories_are_skipped(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A file found by walking a directory is skipped with a note when its format is unknown."""
        _chat_file(tmp_path / "c.jsonl")
        (tmp_path / "preds.json").write_text('{"a": 1}', encoding="utf-8")
        assert main([str(tmp_path), "--json", "--engine", "serial"]) == 0
        assert "skipped 1 file(s) of unknown format" in capsys.readouterr().err


class TestUnendedRuns:
    """An agentfsm trace whose run has no end: the process writing it was killed."""

    @staticmethod
    def _trace(path: Path, end: bool) -> Path:
        """A run of one tool call, then (when `end`) a final answer that ends it."""
        with TraceWriter(path) as writer:
            ctl = af.Controller(observers=[writer])
            ctl.on_model_output(turn(calls=[call("f", id="a")]))
            ctl.on_tool_results([af.ToolResult(call_id="a", name="f", content="ok")])
            if end:
                ctl.on_model_output(turn("done"))
        return path

    def test_a_run_with_no_end_is_bad_input_naming_its_last_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Exit 2, naming the file and the line of the run's last event, never a silent 0."""
        cut = self._trace(tmp_path / "cut.jsonl", end=False)
        last = len(cut.read_text(encoding="utf-8").splitlines())
        assert main([str(cut), "--json"]) == 2
        captured = capsys.readouterr()
        assert f"cut.jsonl:{last}: run " in captured.err
        assert "never ended" in captured.err
        assert json.loads(captured.out)["exit_reason"] is None  # what replay saw, still shown

    def test_keep_going_replays_the_others_and_still_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        cut = self._trace(tmp_path / "cut.jsonl", end=False)
        ended = self._trace(tmp_path / "ended.jsonl", end=True)
        status = main([str(cut), str(ended), "--keep-going", "--json", "--engine", "serial"])
        captured = capsys.readouterr()
        assert status == 2
        assert [json.loads(line)["exit_reason"] for line in captured.out.splitlines()] == [
            None,
            "completed",
        ]
        assert "cut.jsonl:" in captured.err
        assert "ended.jsonl" not in captured.err

    def test_a_run_that_ended_replays_to_0(self, tmp_path: Path) -> None:
        assert main([str(self._trace(tmp_path / "ended.jsonl", end=True))]) == 0


class TestEngines:
    """The process pool and a subprocess give the serial engine's output (Ray: tests/replay)."""

    def test_process_pool_matches_serial(
        self, corpus: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Two workers print the same runs, in the same order, as one process."""
        trajs = str(corpus / "openhands")
        assert main([trajs, "--json", "--engine", "serial"]) == 0
        serial = capsys.readouterr().out
        assert main([trajs, "--json", "--engine", "process", "--workers", "2"]) == 0
        assert capsys.readouterr().out == serial

    def test_subprocess(self, tmp_path: Path) -> None:
        """The entry point runs in a fresh interpreter and exits with the status main returns."""
        code = "import sys; from agentfsm._cli.replay import cli; sys.exit(cli())"
        path = str(_chat_file(tmp_path / "c.jsonl"))
        done = subprocess.run(
            [sys.executable, "-c", code, path, "--json"],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONWARNINGS": "error"},
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["exit_reason"] == "completed"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TestProgress:
    """Progress goes to stderr: on a terminal, or anywhere when forced; at most a few a second."""

    def test_draws_on_a_terminal(self) -> None:
        """On a terminal the line shows runs and files done out of the total, then is erased."""
        stream = _Terminal()
        progress = Progress(4, stream)
        progress.advance(3)
        assert "replayed 3 run(s), 1/4 files" in stream.getvalue()
        progress.close()
        assert stream.getvalue().endswith("\r")

    def test_silent_when_not_a_terminal(self) -> None:
        """Redirected stderr gets no progress unless it is forced."""
        stream = io.StringIO()
        progress = Progress(4, stream)
        progress.advance()
        progress.close()
        assert stream.getvalue() == ""

    def test_quiet_on_a_terminal(self) -> None:
        """`quiet` (what --json sets) silences the terminal's progress."""
        stream = _Terminal()
        progress = Progress(4, stream, quiet=True)
        progress.advance(2)
        progress.close()
        assert stream.getvalue() == ""

    def test_forced_off_a_terminal_writes_plain_lines(self) -> None:
        """Forced onto a file, progress is whole lines, and a last one with the final count."""
        stream = io.StringIO()
        clock = _Clock()
        progress = Progress(2, stream, forced=True, clock=clock)
        progress.run_done()
        clock.now = 5.0
        progress.run_done()
        progress.advance()
        progress.close()
        assert stream.getvalue().splitlines() == [
            "replayed 1 run(s), 0/2 files",
            "replayed 2 run(s), 0/2 files",
            "replayed 2 run(s), 1/2 files",
        ]

    def test_redraws_are_rate_limited(self) -> None:
        """A thousand runs within one interval redraw once; the next interval redraws again."""
        stream = _Terminal()
        clock = _Clock()
        progress = Progress(1, stream, interval=0.25, clock=clock)
        for _ in range(1000):
            progress.run_done()
        assert stream.getvalue().count("\r") == 1
        clock.now = 0.3
        progress.run_done()
        assert stream.getvalue().count("\r") == 2
        assert "replayed 1001 run(s)" in stream.getvalue()

    def test_cli_progress_goes_to_stderr_only(self, corpus: Path) -> None:
        """`--progress --json` on a pipe: stderr counts the runs, stdout is only JSON lines."""
        trace = str(corpus / "tau-bench" / "gpt-4o-airline.json")
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", "replay", trace, "--json", "--progress"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1] == "replayed 200 run(s), 1/1 files"
        assert all(json.loads(line)["differs"] is False for line in done.stdout.splitlines())

    def test_cli_no_progress_on_a_pipe_by_default(self, tmp_path: Path) -> None:
        """Without --progress, a stderr that is not a terminal gets nothing."""
        chat = str(_chat_file(tmp_path / "c.jsonl"))
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", "replay", chat, chat],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""


class TestCollectorSetting:
    """`agentfsm replay` runs the cyclic collector rarely while it replays, then puts it back."""

    def test_the_threshold_is_raised_inside_and_restored_after(self) -> None:
        """Inside, the collector runs at `GC_THRESHOLDS`; after, the old thresholds return."""
        import gc

        from agentfsm._cli._replay_jobs import GC_THRESHOLDS, fewer_collections

        before = gc.get_threshold()
        with fewer_collections():
            assert gc.get_threshold() == tuple(map(max, before, GC_THRESHOLDS))
        assert gc.get_threshold() == before

    def test_a_threshold_of_zero_keeps_collection_off(self) -> None:
        """A host that switched automatic collection off (threshold 0) keeps it off."""
        import gc

        from agentfsm._cli._replay_jobs import fewer_collections

        before = gc.get_threshold()
        gc.set_threshold(0, *before[1:])
        try:
            with fewer_collections():
                assert gc.get_threshold()[0] == 0
        finally:
            gc.set_threshold(*before)

    def test_main_restores_the_threshold(self, tmp_path: Path) -> None:
        """A replay run in-process leaves the collector's thresholds as it found them."""
        import gc

        before = gc.get_threshold()
        assert main([str(_chat_file(tmp_path / "chat.jsonl")), "--json"]) == 0
        assert gc.get_threshold() == before
