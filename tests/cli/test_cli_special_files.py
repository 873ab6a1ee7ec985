"""The command line given a FIFO, a device or a link to one: exit 2 at once, naming the file
(a FIFO used to block replay, report and diagram; /dev/zero to be read without end)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli_errors import assert_bad_input, trace
from tests.processes import python

COMMANDS = {
    "replay": ("replay", "{file}"),
    "report": ("report", "{file}"),
    "diagram": ("diagram", "--trace", "{file}"),
    "replay --policy": ("replay", "{good}", "--policy", "{file}"),
}


def agentfsm(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command; a run still going after 60 s fails the test instead of hanging it."""
    return python(
        "-m",
        "agentfsm",
        *args,
        timeout=60,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )


class TestSpecialFilesExitTwo:
    """What is not a regular file is refused before it is read."""

    @pytest.mark.parametrize("command", sorted(COMMANDS))
    def test_a_fifo(self, tmp_path: Path, command: str) -> None:
        """A FIFO no one writes to: exit 2 naming it, not a wait without end."""
        fifo = tmp_path / "run.jsonl"
        os.mkfifo(fifo)
        good = trace(tmp_path / "good.jsonl")
        args = [a.format(file=fifo, good=good) for a in COMMANDS[command]]
        done = agentfsm(*args)
        assert_bad_input(done, f"{fifo}")
        assert "a FIFO (named pipe), not a regular file" in done.stderr

    @pytest.mark.parametrize("command", sorted(COMMANDS))
    def test_a_link_to_dev_zero(self, tmp_path: Path, command: str) -> None:
        """A link to /dev/zero: exit 2 naming it, not gigabytes read."""
        link = tmp_path / "zero.jsonl"
        link.symlink_to("/dev/zero")
        good = trace(tmp_path / "good.jsonl")
        args = [a.format(file=link, good=good) for a in COMMANDS[command]]
        done = agentfsm(*args)
        assert_bad_input(done, f"{link}")
        assert "a character device, not a regular file" in done.stderr
