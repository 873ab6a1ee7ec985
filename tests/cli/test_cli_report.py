"""`agentfsm report`: --only-diff with --against, progress on stderr, and bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentfsm._cli.command import main
from agentfsm._report import build
from agentfsm.exceptions import PolicyError

CHAT = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]


def _gui_trace(corpus: Path) -> str:
    """An OpenHands trajectory of five model turns: `max_turns=3` stops it at turn 3."""
    return str(corpus / "openhands" / "tests" / "runtime" / "trajs" / "basic_gui_mode.json")


def _files(tmp_path: Path) -> tuple[str, str]:
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    tight = tmp_path / "tight.json"
    tight.write_text(json.dumps({"max_turns": 3}), encoding="utf-8")
    return str(chat), str(tight)


class TestOnlyDiff:
    """--only-diff puts on the page only the runs a second policy decides otherwise."""

    def test_the_page_lists_only_the_differing_run(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Of two runs, the one --against stops early is on the page; the other is not."""
        chat, tight = _files(tmp_path)
        out = tmp_path / "report.html"
        args = ["report", chat, _gui_trace(corpus), "--against", tight, "--only-diff"]
        assert main([*args, "-o", str(out)]) == 1
        html = out.read_text(encoding="utf-8")
        assert "Only the runs whose decisions differ: 1 of 2." in html
        assert "basic_gui_mode" in html
        assert "chat.jsonl" not in html
        assert f"{out}: 2 run(s), 1 differ" in capsys.readouterr().err

    def test_without_only_diff_both_runs_are_shown(self, corpus: Path, tmp_path: Path) -> None:
        """The same command without --only-diff shows both runs."""
        chat, tight = _files(tmp_path)
        out = tmp_path / "report.html"
        args = ["report", chat, _gui_trace(corpus), "--against", tight, "-o", str(out)]
        assert main(args) == 1
        html = out.read_text(encoding="utf-8")
        assert "chat.jsonl" in html
        assert "Only the runs whose decisions differ" not in html

    def test_nothing_differs_says_so(self, tmp_path: Path) -> None:
        """When no run differs the page says so instead of listing runs; exit 0."""
        chat, _ = _files(tmp_path)
        same = tmp_path / "same.json"
        same.write_text("{}", encoding="utf-8")
        out = tmp_path / "report.html"
        args = ["report", chat, "--against", str(same), "--only-diff", "-o", str(out)]
        assert main(args) == 0
        html = out.read_text(encoding="utf-8")
        assert "No run differs." in html
        assert "Only the runs whose decisions differ: 0 of 1." in html

    def test_only_diff_needs_against(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--only-diff without --against is bad usage: exit 2 with one line saying why."""
        chat, _ = _files(tmp_path)
        assert main(["report", chat, "--only-diff"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            "agentfsm report: --only-diff needs --against FILE: a second policy to differ from\n"
        )

    def test_build_refuses_only_diff_without_against(self, tmp_path: Path) -> None:
        """The library call names the missing second policy too."""
        chat, _ = _files(tmp_path)
        with pytest.raises(PolicyError, match="only_diff needs a second policy"):
            build([chat], only_diff=True)


class TestReportProgress:
    """Progress of a report goes to stderr, never into the page on stdout."""

    def test_progress_counts_runs_on_stderr(self, corpus: Path) -> None:
        """`--progress` off a terminal: the last stderr line counts every run; stdout is HTML."""
        trace = str(corpus / "tau-bench" / "gpt-4o-airline.json")
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", "report", trace, "--progress"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1] == "replayed 200 run(s), 1/1 files"
        assert done.stdout.startswith("<!DOCTYPE html>")
        assert "replayed" not in done.stdout[:200]

    def test_build_calls_on_run_for_each_run(self, corpus: Path) -> None:
        """`on_run` sees every run replayed, in order."""
        seen: list[str] = []
        report = build([str(corpus / "openhands")], on_run=lambda view: seen.append(view.run))
        assert seen == [view.run for view in report.runs]
        assert len(seen) > 1
