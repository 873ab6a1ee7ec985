"""`agentfsm replay` from the command line: output, --against, bad input and engines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentfsm.cli._replay_jobs import Progress
from agentfsm.cli.replay import main

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


class TestAgainst:
    """--against compares two policies and fails CI when they differ."""

    def test_differing_policies_exit_one(
        self, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A tighter turn limit changes decisions: exit 1 and `against_action` marks them."""
        tight = _policy(tmp_path / "tight.json", max_turns=3)
        trace = str(corpus / "openhands" / "tests" / "runtime" / "trajs" / "basic_gui_mode.json")
        assert main([trace, "--json", "--against", tight]) == 1
        run = json.loads(capsys.readouterr().out)
        assert any("against_action" in d for d in run["decisions"])

    def test_same_policy_exits_zero(self, tmp_path: Path) -> None:
        """Replaying against an identical policy finds no difference."""
        same = _policy(tmp_path / "same.json")
        assert main([str(_chat_file(tmp_path / "c.jsonl")), "--against", same, "--json"]) == 0


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
        assert "tried: agentfsm-trace, tau-bench" in capsys.readouterr().err

    def test_unknown_files_in_directories_are_skipped(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A file found by walking a directory is skipped with a note when its format is unknown."""
        _chat_file(tmp_path / "c.jsonl")
        (tmp_path / "preds.json").write_text('{"a": 1}', encoding="utf-8")
        assert main([str(tmp_path), "--json", "--engine", "serial"]) == 0
        assert "skipped 1 file(s) of unknown format" in capsys.readouterr().err


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
        code = "import sys; from agentfsm.cli.replay import cli; sys.exit(cli())"
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


class TestProgress:
    """The progress bar draws only on a terminal."""

    def test_draws_on_a_terminal(self) -> None:
        """On a terminal the bar shows files done out of the total, then is erased."""
        stream = _Terminal()
        progress = Progress(4, stream)
        progress.advance()
        assert "1/4 files" in stream.getvalue()
        progress.close()
        assert stream.getvalue().endswith("\r")

    def test_silent_when_not_a_terminal(self) -> None:
        """Redirected stderr gets no bar."""
        stream = io.StringIO()
        progress = Progress(4, stream)
        progress.advance()
        progress.close()
        assert stream.getvalue() == ""


class TestCollectorSetting:
    """`agentfsm replay` runs the cyclic collector rarely while it replays, then puts it back."""

    def test_the_threshold_is_raised_inside_and_restored_after(self) -> None:
        """Inside, the collector runs at `GC_THRESHOLDS`; after, the old thresholds return."""
        import gc

        from agentfsm.cli._replay_jobs import GC_THRESHOLDS, fewer_collections

        before = gc.get_threshold()
        with fewer_collections():
            assert gc.get_threshold() == tuple(map(max, before, GC_THRESHOLDS))
        assert gc.get_threshold() == before

    def test_a_threshold_of_zero_keeps_collection_off(self) -> None:
        """A host that switched automatic collection off (threshold 0) keeps it off."""
        import gc

        from agentfsm.cli._replay_jobs import fewer_collections

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
