"""Only regular files are read: a FIFO, a device, a link to one, or a /proc file never blocks a
reader nor feeds it without end; each is a TraceError or PolicyError naming the file."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model._files import open_regular
from agentfsm._replay.trace import read_trace
from agentfsm._replay.trajectories import read_runs
from agentfsm.exceptions import AgentFSMError, PolicyError, TraceError


def within(work: Callable[[], Any], seconds: float = 10.0) -> BaseException | None:
    """What `work()` raised, or None; fails when it still runs after `seconds` (a FIFO with no
    writer used to block the reader forever, a device to feed it forever)."""
    caught: list[BaseException | None] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:
            caught.append(exc)
        else:
            caught.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds}s"
    return caught[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    os.mkfifo(path)
    return path


@pytest.fixture
def zero_link(tmp_path: Path) -> Path:
    path = tmp_path / "zero.jsonl"
    path.symlink_to("/dev/zero")
    return path


READERS: dict[str, Callable[[Path], Any]] = {
    "read_trace": lambda p: list(read_trace(p)),
    "read_runs": lambda p: [list(run.steps) for run in read_runs(p)],
    "Policy.from_file": af.Policy.from_file,
}


class TestSpecialFilesAreRefused:
    """Every reader of a user-given file refuses what is not a regular file, at once."""

    @pytest.mark.parametrize("reader", sorted(READERS))
    def test_a_fifo_without_a_writer_does_not_block(self, fifo: Path, reader: str) -> None:
        """Opening a FIFO no one writes to used to block forever; it is refused."""
        error = within(lambda: READERS[reader](fifo))
        assert isinstance(error, TraceError | PolicyError)
        assert str(fifo) in str(error)
        assert "a FIFO (named pipe), not a regular file" in str(error)

    @pytest.mark.parametrize("reader", sorted(READERS))
    def test_a_link_to_dev_zero_is_not_read(self, zero_link: Path, reader: str) -> None:
        """A trace linking to /dev/zero used to be read without end; it is refused."""
        error = within(lambda: READERS[reader](zero_link))
        assert isinstance(error, AgentFSMError)
        assert str(zero_link) in str(error)
        assert "a character device, not a regular file" in str(error)

    def test_a_proc_file_reads_as_the_empty_file_it_claims_to_be(self) -> None:
        """/proc/self/pagemap says it holds 0 bytes (and would yield gigabytes): 0 are read."""
        error = within(lambda: list(read_trace("/proc/self/pagemap")))
        assert isinstance(error, TraceError)
        assert "empty trace" in str(error)

    def test_a_directory_is_named_as_one(self, tmp_path: Path) -> None:
        """A directory given as a policy file says so in the OS's words."""
        with pytest.raises(PolicyError, match="Is a directory"):
            af.Policy.from_file(tmp_path)

    def test_a_policy_file_over_the_limit_is_refused_unread(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A policy file larger than MAX_POLICY_BYTES is refused, naming the limit."""
        monkeypatch.setattr("agentfsm._model.limits.MAX_POLICY_BYTES", 100)
        path = tmp_path / "p.json"
        path.write_text('{"max_turns": 3, "pad": "' + "x" * 200 + '"}')
        with pytest.raises(PolicyError, match="the limit is 100"):
            af.Policy.from_file(path)


class TestOpenRegular:
    """The one reader every user-given file goes through."""

    def test_a_file_is_read_only_up_to_its_size_when_opened(self, tmp_path: Path) -> None:
        """A file that grows while it is read ends where it ended when opened."""
        path = tmp_path / "growing.jsonl"
        path.write_bytes(b"first\n")
        with open_regular(str(path), TraceError) as raw, path.open("ab") as more:
            more.write(b"second\n" * 1000)
            more.flush()
            assert raw.read() == b"first\n"
