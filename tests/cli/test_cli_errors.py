"""The command line on bad input: one line, exit 2, never a traceback.

Exit 0 means success (or the same decisions), 1 that the policies' decisions
differ or a self-replay diverged, 2 bad input or usage. Every test runs the
real `agentfsm` command in a subprocess on real files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentfsm as af
from agentfsm._cli import command
from agentfsm._cli._options import Once
from agentfsm._replay.trace import TraceWriter
from agentfsm.testing import call, turn


def agentfsm(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )


def trace(path: Path, error: str | None = None) -> Path:
    """Write a small agentfsm trace: one tool round and an answer (or a provider error)."""
    with TraceWriter(path) as writer:
        ctl = af.Controller(observers=[writer])
        ctl.on_model_output(turn(calls=[call("get_weather", {"city": "x"}, id="a")]))
        ctl.on_tool_results([af.ToolResult(call_id="a", content="sunny")])
        ctl.on_model_output(af.ModelTurn(error=error) if error else turn("done", finish="stop"))
    return path


def assert_bad_input(done: subprocess.CompletedProcess[str], says: str) -> None:
    """Exit 2, no traceback, and the message says what was wrong."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert says in done.stderr


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return trace(tmp_path / "good.jsonl")


class TestBadFilesExitTwo:
    """Files that cannot be read or understood end in one line and exit 2."""

    def test_a_binary_policy_file(self, tmp_path: Path, good: Path) -> None:
        """A policy file that is not UTF-8 text is named."""
        policy = tmp_path / "p.json"
        policy.write_bytes(b"\x00\x01\xff\xfe")
        assert_bad_input(agentfsm("replay", good, "--policy", policy), "not UTF-8")

    def test_a_malformed_policy_file(self, tmp_path: Path, good: Path) -> None:
        """A policy field with a bad value is named, once (not once per trace file)."""
        policy = tmp_path / "p.json"
        policy.write_text(json.dumps({"max_turns": "many"}))
        done = agentfsm("replay", good, good, "--policy", policy)
        assert_bad_input(done, "max_turns")
        assert done.stderr.count("max_turns") == 1

    def test_a_directory_as_the_policy_file(self, tmp_path: Path, good: Path) -> None:
        """A directory where a file is expected says so."""
        assert_bad_input(agentfsm("replay", good, "--policy", tmp_path), "Is a directory")

    def test_a_symlink_loop_as_the_policy_file(self, tmp_path: Path, good: Path) -> None:
        """A symlink loop is reported in the OS's words."""
        loop = tmp_path / "loop.json"
        loop.symlink_to(loop)
        assert_bad_input(agentfsm("replay", good, "--policy", loop), "symbolic links")

    def test_a_missing_output_folder(self, tmp_path: Path) -> None:
        """`diagram -o` into a folder that does not exist names the path."""
        target = tmp_path / "nowhere" / "machine.mmd"
        assert_bad_input(agentfsm("diagram", "-o", target), "No such file or directory")

    def test_an_unimportable_tool(self) -> None:
        """`run --tool` naming a module that cannot be imported is bad input."""
        done = agentfsm("run", "hi", "--model", "openai/x", "--tool", "no_such_module_xyz:f")
        assert_bad_input(done, "cannot import 'no_such_module_xyz'")

    @pytest.mark.parametrize("workers", ["-1", "0", "two"])
    def test_workers_below_one_is_a_usage_error(self, good: Path, workers: str) -> None:
        """--workers must be a whole number >= 1; argparse reports it and exits 2."""
        assert_bad_input(agentfsm("replay", good, "--workers", workers), "--workers")


class TestAnOptionGivenTwice:
    """A single-valued option given twice is a usage error (exit 2), never last-wins."""

    def test_a_second_policy_never_replaces_the_first(self, tmp_path: Path) -> None:
        """Regression: `mcp-proxy --policy STRICT --policy LAX` ran under LAX, dropping STRICT's
        deny; now it exits 2 before starting the server, naming both files."""
        strict, lax = tmp_path / "strict.json", tmp_path / "lax.json"
        strict.write_text('{"permission_rules": ["deny read_file(path^=/etc/*)"]}')
        lax.write_text('{"max_tool_calls": 100}')
        started = tmp_path / "started"
        server = [sys.executable, "-c", f"open({str(started)!r}, 'w')"]
        done = agentfsm("mcp-proxy", "--policy", strict, "--policy", lax, "--", *server)
        assert_bad_input(done, f"--policy given twice ({str(strict)!r}, then {str(lax)!r})")
        assert not started.exists()

    @pytest.mark.parametrize("option", ["--policy", "--against"])
    def test_replay_and_report_refuse_a_repeated_policy(self, good: Path, option: str) -> None:
        """`replay` and `report` with `--policy` or `--against` twice: exit 2."""
        for subcommand in ("replay", "report"):
            done = agentfsm(subcommand, good, option, "a.json", option, "b.json")
            assert_bad_input(done, f"{option} given twice")

    def test_every_single_valued_option_refuses_a_repeat(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Every option of every subcommand is `Once`, a flag, or repeatable by design; each
        `Once` option given twice exits 2 saying so."""
        parser = command._parser()
        (subcommands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        seen = 0
        for name, sub in subcommands.choices.items():
            for action in sub._actions:
                if not action.option_strings or isinstance(action, argparse._HelpAction):
                    continue
                if not isinstance(action, Once):
                    assert action.nargs == 0 or isinstance(action, argparse._AppendAction), (
                        name,
                        action.option_strings,
                    )
                    continue
                value = str(action.choices[0]) if action.choices else "1"  # type: ignore[index]
                flag = action.option_strings[-1]
                with pytest.raises(SystemExit) as exited:
                    command.main([name, flag, value, flag, value])
                assert exited.value.code == 2
                assert f"{flag} given twice" in capsys.readouterr().err
                seen += 1
        assert seen >= 20  # the walk reached the options


class TestKeepGoing:
    """--keep-going skips the one file it cannot read, not the rest of the directory."""

    def test_an_unreadable_file_skips_only_itself(self, tmp_path: Path) -> None:
        """A symlink loop among traces is listed; the other traces still replay."""
        folder = tmp_path / "runs"
        folder.mkdir()
        trace(folder / "a.jsonl")
        (folder / "b.jsonl").symlink_to(folder / "b.jsonl")
        trace(folder / "c.jsonl")
        done = agentfsm("replay", folder, "--keep-going", "--json", "--engine", "serial")
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        sources = {json.loads(line)["source"] for line in done.stdout.splitlines()}
        assert sources == {str(folder / "a.jsonl"), str(folder / "c.jsonl")}
        assert "b.jsonl: cannot read" in done.stderr


class TestLongOutputStaysShort:
    """Long lists are summarised; reasons quoting outside text stay on one line."""

    def test_many_skipped_files_are_one_line(self, tmp_path: Path) -> None:
        """Thirty files of unknown format make one line that names twenty and counts the rest."""
        folder = tmp_path / "runs"
        folder.mkdir()
        trace(folder / "real.jsonl")
        for index in range(30):
            (folder / f"other{index:02d}.json").write_text(json.dumps({"not": "a trace"}))
        done = agentfsm("replay", folder, "--engine", "serial")
        assert done.returncode == 0, done.stderr
        (line,) = [x for x in done.stderr.splitlines() if x.startswith("skipped")]
        assert line.startswith("skipped 30 file(s) of unknown format")
        assert "and 10 more" in line

    def test_a_reason_quoting_a_multi_line_error_stays_on_one_line(self, tmp_path: Path) -> None:
        """A provider error with line breaks is printed escaped, on the decision's own line."""
        path = trace(tmp_path / "t.jsonl", error="upstream failed\nTraceback: second line")
        done = agentfsm("replay", path)
        assert done.returncode == 0, done.stderr
        (line,) = [x for x in done.stdout.splitlines() if x.startswith("  turn") and "error" in x]
        assert "upstream failed\\nTraceback: second line" in line
        assert all(x.startswith(("==", "  ")) for x in done.stdout.splitlines())
