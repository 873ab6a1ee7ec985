"""structlog is the logging layer: the application's configuration decides where events go."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import agentfsm as af
from agentfsm._engine.events import logging_enabled


def _done() -> af.ModelTurn:
    return af.ModelTurn(text="done", finish_reason=af.FinishReason.STOP)


class TestStandardLibraryLogging:
    def test_events_are_silent_until_the_application_enables_the_logger(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """With logging left at its defaults, agentfsm logs nothing and builds no event."""
        assert not logging_enabled()
        af.Controller().on_model_output(_done())
        assert [r for r in caplog.records if r.name == "agentfsm"] == []

    def test_an_enabled_logger_gets_one_readable_line_per_event(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """At INFO, each transition and decision is one structlog-rendered line on 'agentfsm'."""
        with caplog.at_level(logging.INFO, logger="agentfsm"):
            af.Controller(run_id="r1").on_model_output(_done())
        lines = [r.getMessage() for r in caplog.records if r.name == "agentfsm"]
        assert lines[0].startswith("run_started ")
        transitions = [line for line in lines if line.startswith("transition ")]
        assert "src=verify" in transitions[-1]
        assert "dst=end" in transitions[-1]
        assert "guard=AnswerComplete()" in transitions[-1]
        assert "run_id=r1" in transitions[-1]
        assert lines[-1].startswith("decision ")
        assert "exit_reason=completed" in lines[-1]

    def test_import_does_not_load_structlog(self) -> None:
        """structlog is imported when events are logged, not by `import agentfsm`."""
        code = "import sys, agentfsm; print('structlog' in sys.modules)"
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        assert done.stdout.strip() == "False"
