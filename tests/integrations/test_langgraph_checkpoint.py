"""A LangGraph run paused at ASK_HUMAN resumes from a SQLite checkpoint in a new process.

The Controller's state lives in the graph state (`ctl.dump()` in, `Controller.load()` out), so
the checkpoint carries it; the resumed run makes the same decisions as one never interrupted,
and every tool runs exactly once across the two processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.processes import python

ROOT = Path(__file__).resolve().parents[2]


def worker(phase: str, db: Path, log: Path) -> dict[str, Any]:
    """Run one phase in a fresh interpreter and read the JSON it prints last."""
    done = python(
        "-m",
        "tests.integrations.checkpoint_worker",
        phase,
        str(db),
        str(log),
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


class TestResumeInANewProcess:
    """Interrupt at ASK_HUMAN, exit, resume from the SQLite file in another process."""

    def test_same_decisions_and_each_tool_once(self, tmp_path: Path) -> None:
        """The resumed run's decisions equal an uninterrupted run's; no tool ran twice."""
        whole_log, split_log = tmp_path / "whole.log", tmp_path / "split.log"
        reference = worker("whole", tmp_path / "unused.db", whole_log)
        db = tmp_path / "checkpoints.sqlite"
        paused = worker("start", db, split_log)
        assert paused["interrupted"]
        assert paused["decisions"][-1]["action"] == "ask_human"
        assert split_log.read_text().splitlines() == ["get_weather Paris"]
        resumed = worker("resume", db, split_log)
        assert not resumed["interrupted"]
        assert resumed["decisions"] == reference["decisions"]
        assert resumed["decisions"][-1]["exit_reason"] == "completed"
        assert split_log.read_text().splitlines() == whole_log.read_text().splitlines()
        assert split_log.read_text().splitlines() == ["get_weather Paris", "delete_file /tmp/x"]

    def test_the_checkpoint_holds_the_controller(self, tmp_path: Path) -> None:
        """The paused checkpoint's state carries the Controller's dump, waiting for the human."""
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        from agentfsm._engine.controller import Controller

        db = tmp_path / "checkpoints.sqlite"
        worker("start", db, tmp_path / "log")
        with sqlite3.connect(db, check_same_thread=False) as conn:
            saved = SqliteSaver(conn).get({"configurable": {"thread_id": "run-1"}})
        assert saved is not None
        ctl = Controller.load(saved["channel_values"]["agentfsm"])
        assert ctl.state == "await_human"
        assert [c.name for c in ctl.pending_calls] == ["delete_file"]
