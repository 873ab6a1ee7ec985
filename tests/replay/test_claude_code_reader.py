"""The Claude Code transcript reader, on sessions the real Claude Code CLI recorded.

`data/claude_code/*.jsonl` are transcripts Claude Code 2.1.197 wrote itself,
run against a scripted Messages server (`record_claude_code.py` re-records
them). Tests of bad or unusual input change one recorded line, or reorder or
merge recorded lines, in a copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm._model.types import ToolCall
from agentfsm._replay.trajectories import (
    FORMATS,
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
    read_runs,
)
from agentfsm.exceptions import TraceError

DATA = Path(__file__).parent / "data" / "claude_code"
TOOLS = DATA / "tools.jsonl"
SUBAGENT = DATA / "subagent.jsonl"
AGENT = DATA / "subagent-agent.jsonl"
REPO = Path(__file__).resolve().parents[2]


def _read(path: Path, errors: list[TraceError] | None = None) -> tuple[RecordedRun, list[Step]]:
    (run,) = read_runs(path, errors)
    return run, list(run.steps)


def _outputs(steps: list[Step]) -> list[ModelOutput]:
    return [s for s in steps if isinstance(s, ModelOutput)]


def _args(call: ToolCall) -> dict[str, Any]:
    """A call's arguments, which these recordings always hold as an object."""
    assert call.arguments is not None, call.error
    return call.arguments


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _number_of(lines: list[str], test: Any) -> int:
    """The 0-based index of the first recorded line `test` accepts."""
    return next(i for i, line in enumerate(lines) if test(json.loads(line)))


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


class TestRecordedSession:
    """The tools session: 5 model turns, 6 calls (two turns of two), two failures."""

    def test_format_id_and_facts(self) -> None:
        """The file is detected as a Claude Code transcript; the run is the session."""
        run, _ = _read(TOOLS)
        session = json.loads(_lines(TOOLS)[0])["sessionId"]
        assert "claude-code" in FORMATS
        assert (run.format, run.id) == ("claude-code", session)
        assert run.info["claude_code_version"] == "2.1.197"
        assert run.end == "last message: assistant"

    def test_steps_in_order(self) -> None:
        """The prompt, then each turn followed by its results; attachments and queue lines
        are not steps."""
        _, steps = _read(TOOLS)
        kinds = [type(s).__name__ for s in steps]
        assert kinds == ["UserMessage"] + ["ModelOutput", "ToolResults"] * 4 + ["ModelOutput"]
        first = steps[0]
        assert isinstance(first, UserMessage)
        assert first.text == "Clean up the build directory."

    def test_lines_of_one_message_make_one_turn(self) -> None:
        """Claude Code writes thinking, text and tool_use of one message on three lines
        sharing message.id: they are one model output with its text, call and usage."""
        lines = [json.loads(line) for line in _lines(TOOLS)]
        first_id = next(o["message"]["id"] for o in lines if o["type"] == "assistant")
        assert sum(1 for o in lines if o.get("message", {}).get("id") == first_id) == 3
        turn = _outputs(_read(TOOLS)[1])[0].turn
        assert turn.text == "Let me look at the project first."
        assert [(c.name, c.arguments) for c in turn.tool_calls] == [("Bash", {"command": "ls"})]
        assert turn.finish_reason.value == "tool_calls"
        assert turn.usage is not None
        assert turn.usage.output_tokens == 20

    def test_calls_and_arguments(self) -> None:
        """Every call, with its arguments, in the turn that made it."""
        outputs = _outputs(_read(TOOLS)[1])
        calls = [[(c.name, _args(c).get("command")) for c in o.turn.tool_calls] for o in outputs]
        assert calls == [
            [("Bash", "ls")],
            [("Read", None), ("Read", None)],
            [("Bash", "cat missing.txt"), ("Bash", "du -sh build")],
            [("Bash", "rm -rf build")],
            [],
        ]
        read = _args(outputs[1].turn.tool_calls[0])["file_path"]
        assert read.endswith("/project/notes.txt")

    def test_results_errors_and_final_answer(self) -> None:
        """Results follow their calls by id and position; is_error is kept."""
        _, steps = _read(TOOLS)
        results = [s for s in steps if isinstance(s, ToolResults)]
        outputs = _outputs(steps)
        for output, given in zip(outputs, results, strict=False):
            assert [r.call_id for r in given.results] == [c.id for c in output.turn.tool_calls]
        errors = [[r.is_error for r in s.results] for s in results]
        assert errors == [[False], [False, True], [True, False], [False]]
        assert "No such file or directory" in str(results[2].results[0].content)
        assert outputs[-1].turn.text == "Done: build/ is removed; missing.txt does not exist."
        assert outputs[-1].turn.tool_calls == []
        assert outputs[-1].turn.finish_reason.value == "stop"


class TestEditSession:
    """Write, then an Edit Claude Code refused (the file was not read first)."""

    def test_write_and_refused_edit(self) -> None:
        """The refusal is an error result of the Edit call; report counts 2 calls."""
        _, steps = _read(DATA / "edit.jsonl")
        outputs = _outputs(steps)
        assert [[c.name for c in o.turn.tool_calls] for o in outputs] == [["Write"], ["Edit"], []]
        assert _args(outputs[1].turn.tool_calls[0])["new_string"] == "was deleted"
        results = [r for s in steps if isinstance(s, ToolResults) for r in s.results]
        assert [r.is_error for r in results] == [False, True]
        assert "File has not been read yet" in str(results[1].content)


class TestSubAgents:
    """A sub-agent (Agent tool) is its own file and its own run."""

    def test_parent_sees_the_agent_call_and_its_result(self) -> None:
        """The parent run holds the Agent call and the result Claude Code gave it."""
        run, steps = _read(SUBAGENT)
        outputs = _outputs(steps)
        (call,) = outputs[0].turn.tool_calls
        assert call.name == "Agent"
        assert _args(call)["prompt"] == "SUBTASK: count the files in this directory"
        (result,) = next(s for s in steps if isinstance(s, ToolResults)).results
        assert "There are 3 entries." in str(result.content)
        assert "skipped_sidechain" not in run.info

    def test_agent_file_is_a_run_of_the_agent(self) -> None:
        """The sidechain file reads as the sub-agent's run, named by its agent id."""
        run, steps = _read(AGENT)
        parent, _ = _read(SUBAGENT)
        assert run.id == run.info["agent"] == json.loads(_lines(AGENT)[0])["agentId"]
        assert run.info["session"] == parent.id
        assert isinstance(steps[0], UserMessage)
        assert steps[0].text == "SUBTASK: count the files in this directory"
        calls = [_args(c)["command"] for o in _outputs(steps) for c in o.turn.tool_calls]
        assert calls == ["ls | wc -l"]

    def test_sidechain_lines_in_the_session_file_are_skipped(self, tmp_path: Path) -> None:
        """Older Claude Code wrote sidechain lines into the session file: the parent run
        reads as before, and the skipped lines are counted."""
        parent = _lines(SUBAGENT)
        at = _number_of(parent, lambda o: o.get("type") == "assistant")
        agent = _lines(AGENT)
        merged = _write(tmp_path / "merged.jsonl", parent[:at] + agent + parent[at:])
        run, steps = _read(merged)
        _, alone = _read(SUBAGENT)
        assert steps == alone
        conversation = [json.loads(x)["type"] in ("user", "assistant") for x in agent]
        assert run.info["skipped_sidechain"] == sum(conversation)


class TestLineOrder:
    """Grouping does not depend on results coming after every block of their turn."""

    def test_results_between_blocks_and_out_of_order(self, tmp_path: Path) -> None:
        """Results written between a turn's block lines, and in reverse, still follow the
        whole turn in call order."""
        lines = _lines(TOOLS)
        second = _number_of(lines, lambda o: o.get("message", {}).get("id") == "msg_rec0002")
        # Recorded: block, block, result, result. Reordered: block, result 2, result 1, block.
        moved = [lines[second], lines[second + 3], lines[second + 2], lines[second + 1]]
        changed = lines[:second] + moved + lines[second + 4 :]
        _, steps = _read(_write(tmp_path / "moved.jsonl", changed))
        assert steps == _read(TOOLS)[1]

    def test_synthetic_and_meta_lines_are_not_steps(self, tmp_path: Path) -> None:
        """An assistant line Claude Code made up (model <synthetic>) is no model output,
        and user text it injected (isMeta) is no user message."""
        lines = _lines(TOOLS)
        last = (
            len(lines)
            - 1
            - _number_of(list(reversed(lines)), lambda o: o.get("type") == "assistant")
        )
        entry = json.loads(lines[last])
        entry["message"]["model"] = "<synthetic>"
        lines[last] = json.dumps(entry)
        prompt = _number_of(lines, lambda o: o.get("type") == "user")
        entry = json.loads(lines[prompt])
        entry["isMeta"] = True
        lines[prompt] = json.dumps(entry)
        run, steps = _read(_write(tmp_path / "synthetic.jsonl", lines))
        _, recorded = _read(TOOLS)
        assert steps == recorded[1:-1]
        assert run.info["skipped_synthetic"] == 1


class TestBadLines:
    """What the reader cannot use names the file and the line."""

    def test_broken_json_line(self, tmp_path: Path) -> None:
        """A line that is not JSON is named by number; --keep-going collects it."""
        lines = _lines(TOOLS)
        lines.insert(9, '{"type": "user", "message": ')
        path = _write(tmp_path / "broken.jsonl", lines)
        (run,) = read_runs(path)
        with pytest.raises(TraceError, match=r"broken\.jsonl:10: not valid JSON") as caught:
            list(run.steps)
        assert caught.value.details["path"] == str(path)
        assert caught.value.details["line"] == 10
        errors: list[TraceError] = []
        _, steps = _read(path, errors)
        assert [e.details["line"] for e in errors] == [10]
        assert steps == _read(TOOLS)[1]

    @pytest.mark.parametrize(
        ("kind", "message", "what"),
        [
            ("assistant", "not an object", "an entry of type assistant without a message object"),
            (
                "assistant",
                {"content": 7},
                "an entry of type assistant whose message content is int",
            ),
            ("user", None, "an entry of type user without a message object"),
            ("user", {"content": None}, "an entry of type user whose message content is NoneType"),
            ("user", {"content": ["hi"]}, "a user message block that is str, not an object"),
        ],
    )
    def test_unusable_message(self, tmp_path: Path, kind: str, message: Any, what: str) -> None:
        """A conversation line whose message cannot be read is named by its line."""
        lines = _lines(TOOLS)
        at = _number_of(lines, lambda o: o.get("type") == kind)
        entry = json.loads(lines[at])
        entry["message"] = message
        lines[at] = json.dumps(entry)
        (run,) = read_runs(_write(tmp_path / "bad.jsonl", lines))
        with pytest.raises(TraceError, match=rf"bad\.jsonl:{at + 1}: {what}"):
            list(run.steps)

    def test_arguments_not_an_object_are_an_invalid_call(self, tmp_path: Path) -> None:
        """A tool_use whose input is not an object is read as a call that fails validation
        (replay decides on it), not dropped."""
        lines = _lines(TOOLS)
        at = _number_of(lines, lambda o: '"type": "tool_use"' in json.dumps(o.get("message")))
        entry = json.loads(lines[at])
        entry["message"]["content"][0]["input"] = "not an object"
        lines[at] = json.dumps(entry)
        _, steps = _read(_write(tmp_path / "call.jsonl", lines))
        (call,) = _outputs(steps)[0].turn.tool_calls
        assert (call.name, call.arguments) == ("Bash", None)
        assert call.error is not None


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env_path = {"PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, **env_path},
    )


class TestCommandLine:
    """`agentfsm replay` and `agentfsm report` read the recordings in a fresh interpreter."""

    def test_replay_denies_rm_rf_at_its_turn(self, tmp_path: Path) -> None:
        """A policy denying `Bash(command~rm -rf *)` denies turn 4 and nothing else."""
        policy = tmp_path / "policy.json"
        policy.write_text(json.dumps({"permission_rules": ["deny Bash(command~rm -rf *)"]}))
        done = _cli("replay", str(TOOLS), "--policy", str(policy), "--json")
        assert done.returncode == 0, done.stderr
        (line,) = done.stdout.splitlines()
        result = json.loads(line)
        assert result["format"] == "claude-code"
        denied = [d for d in result["decisions"] if "PermissionDenied" in d["guard"]]
        assert [(d["turn"], d["reason"]) for d in denied] == [
            (4, "permission denied for Bash; the model is told why")
        ]
        assert result["exit_reason"] == "completed"
        assert result["tool_calls"] == 5

    def test_replay_without_the_rule_runs_every_call(self) -> None:
        """Under the default policy all six recorded calls run."""
        done = _cli("replay", str(TOOLS), "--json")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["tool_calls"] == 6
        assert not any("PermissionDenied" in d["guard"] for d in result["decisions"])

    def test_report_reads_every_recording(self, tmp_path: Path) -> None:
        """`agentfsm report DIR` lists the four runs with their format."""
        out = tmp_path / "report.html"
        done = _cli("report", str(DATA), "-o", str(out))
        assert done.returncode == 0, done.stderr
        page = out.read_text(encoding="utf-8")
        assert page.count("<td>claude-code</td>") == 4
        assert "rm -rf build" in page

    def test_bad_line_names_file_and_line(self, tmp_path: Path) -> None:
        """The command fails on a broken line, naming the file and the line."""
        lines = _lines(TOOLS)
        lines.insert(4, "{oops")
        path = _write(tmp_path / "broken.jsonl", lines)
        done = _cli("replay", str(path))
        assert done.returncode != 0
        assert f"{path}:5: not valid JSON" in done.stderr
