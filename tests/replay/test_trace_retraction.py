"""A trace holding a retraction reads as if the failed input never happened.

An observer that raises mid-step makes the Controller put the run back and
retract the step's events; the host gives the same input again. The trace
writer keeps the retracted lines and the `step_retracted` line, and every
reader (the trace reader, the trajectory reader, replay, the report,
`diagram --trace`) drops them: the file replays exactly like a trace of the
same run in which nothing failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._engine.events import RETRACTED, Observer
from agentfsm._model import limits
from agentfsm._replay.engine import divergence, replay_run
from agentfsm._replay.trace import TraceWriter, read_trace
from agentfsm._replay.trajectories import read_runs
from agentfsm._report import build
from agentfsm.exceptions import TraceError
from agentfsm.testing import call, turn
from tests.strategies import model_turns, tool_calls

Input = tuple[str, tuple[Any, ...]]
Key = tuple[str, str, str, str | None]
POLICY = af.Policy(max_turns=6, repeat_threshold=2, permissions={"search": "ask", "*": "allow"})


class BoomError(Exception):
    """The failure the flaky observer raises."""


class FlakyObserver:
    """Raises once, on the `fail_at`-th event it is given (counting from 0)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.count = 0
        self.failed = False

    def __call__(self, event: Mapping[str, Any]) -> None:
        if not self.failed and self.count == self.fail_at:
            self.failed = True
            raise BoomError(f"observer failed on event {self.count}")
        self.count += 1


SCRIPT: list[Input] = [
    ("on_model_output", (turn(calls=[call("get_weather", {"city": "Oslo"}, id="c1")]),)),
    ("on_tool_results", ([af.ToolResult(call_id="c1", content="sunny")],)),
    ("on_user_message", ("in Celsius please",)),
    ("on_model_output", (turn(calls=[call("search", {"q": "celsius"}, id="c2")]),)),
    ("on_human_reply", (True, None)),
    ("on_tool_results", ([af.ToolResult(call_id="c2", content="15 C")],)),
    ("on_model_output", (turn("It is 15 C and sunny in Oslo."),)),
]


def still() -> float:
    """A clock that never moves: the two traces compared record the same elapsed times."""
    return 0.0


def key(d: af.Decision) -> Key:
    return (d.action.value, d.priority.value, d.guard, d.exit_reason and d.exit_reason.value)


def give(ctl: af.Controller, inputs: list[Input]) -> list[Key]:
    """Give each input; one that raises BoomError is given again, as a host would."""
    decisions: list[Key] = []
    for method, args in inputs:
        try:
            d = getattr(ctl, method)(*args)
        except BoomError:
            d = getattr(ctl, method)(*args)
        if isinstance(d, af.Decision):
            decisions.append(key(d))
    return decisions


def write_trace(
    path: Path, inputs: list[Input], extra: list[Callable[..., None]], before: bool = False
) -> list[Key]:
    """Run `inputs` with a TraceWriter and the `extra` observers (before or after it)."""
    with TraceWriter(path) as writer:
        observers: list[Observer] = [*extra, writer] if before else [writer, *extra]
        ctl = af.Controller(POLICY, run_id="run-1", observers=observers, clock=still)
        return give(ctl, inputs)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class TestATraceWithARetraction:
    """A real TraceWriter and an observer after it that raises once, on one step."""

    @pytest.fixture(params=[3, 9, 13], ids=["first-output", "results", "second-output"])
    def traces(
        self, tmp_path: Path, request: pytest.FixtureRequest
    ) -> tuple[Path, Path, list[Key]]:
        """The same run written twice: once with a failure in one step, once without.

        The second observer fails on its event 3 (in the first model output's step),
        9 (the first results') or 13 (the second model output's).
        """
        clean, failed = tmp_path / "clean.jsonl", tmp_path / "failed.jsonl"
        live = write_trace(clean, SCRIPT, [])
        assert write_trace(failed, SCRIPT, [FlakyObserver(fail_at=request.param)]) == live
        return clean, failed, live

    def test_the_file_holds_the_retraction_after_the_retracted_events(
        self, traces: tuple[Path, Path, list[Key]]
    ) -> None:
        """The writer kept what it was given: the step, its retraction, the step again."""
        clean, failed, _ = traces
        raw = lines(failed)
        (at,) = [i for i, e in enumerate(raw) if e["event"] == RETRACTED]
        count = raw[at]["events"]
        assert count > 1
        assert raw[at - count : at] == raw[at + 1 : at + 1 + count]
        assert len(raw) == len(lines(clean)) + count + 1

    def test_read_trace_gives_the_run_as_it_happened(
        self, traces: tuple[Path, Path, list[Key]]
    ) -> None:
        """The trace reader drops the retracted events and the retraction: the clean run remains."""
        clean, failed, _ = traces
        assert list(read_trace(failed)) == list(read_trace(clean))

    def test_replay_gives_the_live_decisions_with_no_step_twice(
        self, traces: tuple[Path, Path, list[Key]]
    ) -> None:
        """The trajectory reader and replay see each input once and decide as live."""
        _, failed, live = traces
        (run,) = list(read_runs(str(failed)))
        result = replay_run(run)
        assert [(r.action, r.priority, r.guard, r.exit_reason) for r in result.decisions] == live
        assert divergence(run, result) is None
        assert run.recorded is not None
        assert len(run.recorded) == len(live)

    def test_the_report_shows_each_step_once(self, traces: tuple[Path, Path, list[Key]]) -> None:
        """The report's steps are those of the clean trace, one per input."""
        clean, failed, live = traces
        (mine,), (theirs,) = build([str(failed)]).runs, build([str(clean)]).runs
        assert len(mine.steps) == len(live)
        assert [(s.kind, s.turn, s.decision) for s in mine.steps] == [
            (s.kind, s.turn, s.decision) for s in theirs.steps
        ]

    def test_diagram_counts_each_transition_once(
        self, traces: tuple[Path, Path, list[Key]], tmp_path: Path
    ) -> None:
        """`agentfsm diagram --trace` draws the same counts for both files."""
        clean, failed, _ = traces
        drawn = [
            subprocess.run(
                [sys.executable, "-m", "agentfsm", "diagram", "--format", "dot", "--trace", str(p)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            ).stdout
            for p in (clean, failed)
        ]
        assert drawn[0] == drawn[1]


class TestARetractionThatDoesNotFit:
    """A retraction line that does not match the events before it is a TraceError."""

    def write(self, tmp_path: Path) -> tuple[Path, int]:
        """A trace of one answered turn, and how many events that input wrote."""
        path = tmp_path / "t.jsonl"
        with TraceWriter(path) as writer:
            af.Controller(run_id="r", observers=[writer]).on_model_output(turn("done"))
        return path, len([e for e in lines(path) if e.get("turn") == 1])

    def append(self, path: Path, **fields: Any) -> None:
        with path.open("a", encoding="utf-8") as file:
            event = {"event": RETRACTED, "run_id": "r", "turn": 1, "error": "BoomError", **fields}
            file.write(json.dumps(event) + "\n")

    @pytest.mark.parametrize(
        ("fields", "says"),
        [
            ({"events": 2}, "takes back 2 events, but the input before it has"),
            ({"events": -1}, "needs a count 'events' >= 0"),
            ({"events": True}, "needs a count 'events' >= 0"),
            ({"turn": 7}, "is for turn 7, but the events before it are of turn 1"),
            ({"run_id": "other"}, "is for run_id 'other'"),
        ],
    )
    def test_a_mismatch_names_the_file_and_line(
        self, tmp_path: Path, fields: dict[str, Any], says: str
    ) -> None:
        """Another count, turn or run than the input before it is refused with its line."""
        path, count = self.write(tmp_path)
        before = list(read_trace(path))
        self.append(path, **{"events": count, **fields})
        with pytest.raises(TraceError, match=says) as caught:
            list(read_trace(path))
        assert caught.value.details["line"] == len(lines(path))
        errors: list[TraceError] = []
        assert list(read_trace(path, errors=errors)) == before  # nothing recorded is lost
        assert len(errors) == 1

    def test_a_matching_retraction_takes_back_the_last_input(self, tmp_path: Path) -> None:
        """The same file with the right count reads as a run that only started."""
        path, count = self.write(tmp_path)
        assert count > 2
        self.append(path, events=count)
        assert [e["event"] for e in read_trace(path)] == ["run_started"]

    def test_a_retraction_of_nothing_takes_nothing(self, tmp_path: Path) -> None:
        """`events: 0` (an observer that failed on its first event) leaves the trace as it was."""
        path, _ = self.write(tmp_path)
        before = list(read_trace(path))
        self.append(path, events=0)
        assert list(read_trace(path)) == before

    def test_holding_back_is_bounded(self, tmp_path: Path) -> None:
        """A hostile run of events that never ends an input holds back at most the limit."""
        path = tmp_path / "t.jsonl"
        count = limits.MAX_INPUT_EVENTS * 3
        with TraceWriter(path) as writer:
            for i in range(count):
                writer({"event": "transition", "run_id": "r", "turn": 1, "src": "a", "dst": str(i)})
            writer({"event": RETRACTED, "run_id": "r", "turn": 1, "events": count})
        with pytest.raises(TraceError, match=f"takes back {count} events"):
            list(read_trace(path))


FULL_DISK = textwrap.dedent(
    """
    import json, resource, signal, sys
    import agentfsm as af
    from agentfsm._replay.trace import TraceWriter
    from agentfsm.testing import call, turn

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    path, room = sys.argv[1], int(sys.argv[2])
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    writer = TraceWriter(path)
    ctl = af.Controller(run_id="run-1", observers=[writer], clock=lambda: 0.0)
    ctl.on_model_output(turn(calls=[call("get_weather", {"city": "Oslo"}, id="c1")]))
    results = [af.ToolResult(call_id="c1", content="sunny")]
    resource.setrlimit(resource.RLIMIT_FSIZE, (writer._size + room, hard))
    try:
        ctl.on_tool_results(results)
    except OSError as exc:
        print("failed:", exc.errno, ctl.state)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # the disk has room again
    ctl.on_tool_results(results)
    ctl.on_model_output(turn("sunny"))
    writer.close()
    """
)


class TestTheTraceWriterOnAFullDisk:
    """The trace writer itself fails mid-step: its retraction is written once it can write."""

    def test_the_retried_step_is_read_once(self, tmp_path: Path) -> None:
        """A file size limit cuts a step after two lines; the file still reads as the clean run."""
        clean = tmp_path / "clean.jsonl"
        inputs: list[Input] = [
            ("on_model_output", (turn(calls=[call("get_weather", {"city": "Oslo"}, id="c1")]),)),
            ("on_tool_results", ([af.ToolResult(call_id="c1", content="sunny")],)),
            ("on_model_output", (turn("sunny"),)),
        ]
        with TraceWriter(clean) as writer:
            give(af.Controller(run_id="run-1", observers=[writer], clock=still), inputs)
        raw = clean.read_bytes().splitlines(keepends=True)
        first_step = next(i for i, line in enumerate(raw) if b'"tool_results"' in line)
        room = len(raw[first_step]) + len(raw[first_step + 1])  # two lines fit, the third not
        failed = tmp_path / "failed.jsonl"
        done = subprocess.run(
            [sys.executable, "-c", FULL_DISK, str(failed), str(room)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
        assert done.stdout.startswith("failed: 27 ")  # EFBIG, the run left in execute
        assert "execute" in done.stdout
        kept = lines(failed)
        (retraction,) = [e for e in kept if e["event"] == RETRACTED]
        assert retraction["events"] == 2
        assert retraction["error"] == "OSError"
        assert list(read_trace(failed)) == list(read_trace(clean))


def draw_input(ctl: af.Controller, data: st.DataObject) -> Input:
    """One input the controller takes in its current state, drawn at random."""
    if ctl.state == "await_model":
        if data.draw(st.integers(0, 5)) == 0:
            return ("on_user_message", (data.draw(st.text(max_size=5)),))
        return ("on_model_output", (data.draw(model_turns(calls=tool_calls(), max_calls=2)),))
    if ctl.state == "await_human":
        return ("on_human_reply", (data.draw(st.booleans()), data.draw(st.none() | st.just("no"))))
    pending = ctl.pending_calls
    picked = data.draw(st.lists(st.integers(0, len(pending) - 1), unique=True))
    results = [af.ToolResult(call_id=pending[i].id, content="ok") for i in picked]
    return ("on_tool_results", (results,))


class TestRetractionProperty:
    """The property: wherever an observer fails, the trace reads as the run without the failure."""

    @settings(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(fail_at=st.integers(0, 40), before=st.booleans(), data=st.data())
    def test_a_random_failure_reads_as_no_failure(
        self, fail_at: int, before: bool, data: st.DataObject
    ) -> None:
        """A flaky observer before or after the writer, failing anywhere, changes nothing read."""
        with tempfile.TemporaryDirectory() as folder:
            failed, clean = Path(folder, "failed.jsonl"), Path(folder, "clean.jsonl")
            inputs: list[Input] = []
            with TraceWriter(failed) as writer:
                flaky = FlakyObserver(fail_at)
                observers: list[Observer] = [flaky, writer] if before else [writer, flaky]
                try:  # even the start of the run may fail, and be retracted
                    ctl = af.Controller(POLICY, run_id="run-1", observers=observers, clock=still)
                except BoomError:
                    ctl = af.Controller(POLICY, run_id="run-1", observers=observers, clock=still)
                for _ in range(data.draw(st.integers(1, 6))):
                    if ctl.done:
                        break
                    inputs.append(draw_input(ctl, data))
                    give(ctl, inputs[-1:])
            live = write_trace(clean, inputs, [])
            assert list(read_trace(failed)) == list(read_trace(clean))
            (run,) = list(read_runs(str(failed)))
            result = replay_run(run)
            replayed = [(r.action, r.priority, r.guard, r.exit_reason) for r in result.decisions]
            assert replayed == live
            assert divergence(run, result) is None
