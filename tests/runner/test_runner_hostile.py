"""`af.run` with hostile tools and text, against the local scripted server: a run always ends
with its result, and its trace is written and replays."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from agentfsm._model.types import ExitReason
from agentfsm._replay.engine import replay_run
from agentfsm._replay.trace import read_trace
from agentfsm._replay.trajectories import read_runs
from agentfsm._runner.loop import RunResult
from agentfsm._runner.retry import ProviderRetry
from agentfsm.testing.scripted import call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_arun, scripted_run

pytestmark = LITELLM_CLIENT

HALF_EMOJI = "\ud83d"
"""The first half of a surrogate pair: what a stream leaves when an emoji's escape is split."""


class UnprintableError(Exception):
    """An exception whose `__str__` raises."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")


def broken() -> str:
    """A tool raising an exception that cannot describe itself."""
    raise UnprintableError


def huge() -> int:
    """A tool returning an int with more digits than Python writes as text."""
    return int(10 ** (sys.get_int_max_str_digits() + 10))


def go(server: ScriptedServer, tools: list[Any], **kwargs: Any) -> RunResult:
    return scripted_run(server, "go", tools=tools, retry=ProviderRetry(attempts=1), **kwargs)


def in_thread(work: Any, seconds: float = 30.0) -> Any:
    """`work()`'s value; fails (instead of hanging the suite) when it does not end in time."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "af.run is still running: it hangs"
    return out[0]


def tool_text(result: RunResult) -> str:
    (message,) = [m for m in result.messages if m["role"] == "tool"]
    return str(message["content"])


class TestHostileTools:
    """What a tool raises or returns never ends the run early nor loses its result."""

    def test_an_exception_that_cannot_describe_itself_is_the_calls_result(self) -> None:
        """`af.run` used to hang forever; the model now reads the error and the run completes."""
        script = [tool_calls(call("broken", {}, id="c1")), say("sorry")]
        with ScriptedServer(script) as server:
            result = in_thread(lambda: go(server, [broken]))
        assert result.exit_reason is ExitReason.COMPLETED
        assert tool_text(result).startswith("UnprintableError (its message cannot be shown")

    def test_arun_answers_the_same(self) -> None:
        """`arun` used to raise the exception's RuntimeError."""
        script = [tool_calls(call("broken", {}, id="c1")), say("sorry")]

        async def main(server: ScriptedServer) -> RunResult:
            return await scripted_arun(
                server, "go", tools=[broken], retry=ProviderRetry(attempts=1)
            )

        with ScriptedServer(script) as server:
            result = asyncio.run(main(server))
        assert result.exit_reason is ExitReason.COMPLETED
        assert tool_text(result).startswith("UnprintableError")

    def test_an_int_too_long_for_text_is_an_error_result(self) -> None:
        """`af.run` used to raise ValueError (int-to-text limit) and lose the run's result."""
        script = [tool_calls(call("huge", {}, id="c1")), say("noted")]
        with ScriptedServer(script) as server:
            result = go(server, [huge])
        assert result.exit_reason is ExitReason.COMPLETED
        assert tool_text(result).startswith("ToolOutputError: tool 'huge' returned a")


class TestLoneSurrogates:
    """Text with a lone surrogate is traced, read back and replayed."""

    def test_the_trace_is_written_and_replays(self, tmp_path: Path) -> None:
        """A final answer holding half an emoji used to crash the trace writer
        (UnicodeEncodeError) and with it `af.run(trace=...)`."""
        path = tmp_path / "run.jsonl"
        script = [say(f"done {HALF_EMOJI}")]
        with ScriptedServer(script) as server:
            result = go(server, [], trace=path)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text == f"done {HALF_EMOJI}"
        path.read_bytes().decode("utf-8")  # the file is UTF-8, strictly
        (output,) = [e["output"] for e in read_trace(path) if e["event"] == "model_output"]
        assert output["text"] == f"done {HALF_EMOJI}"
        (recorded,) = read_runs(path)
        assert replay_run(recorded).exit_reason == "completed"
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", "replay", "--json", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert '"exit_reason": "completed"' in done.stdout
        page = path.with_suffix(".html")
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", "report", str(path), "-o", str(page)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr  # it used to exit 2: "not UTF-8 text"
        assert "done \\ud83d" in page.read_text(encoding="utf-8")
