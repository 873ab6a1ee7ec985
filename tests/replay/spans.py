"""What the span readers' tests share: any JSON value, reading a file to its end, a file's
one run and its steps, its JSON lines, and what a recording without content reads as."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from agentfsm._replay.trajectories import RecordedRun, read_runs
from agentfsm._replay.trajectories._otel import NOT_RECORDED
from agentfsm.exceptions import TraceError

__all__ = ["JSON", "assert_read_blind", "json_lines", "one_run", "read_all", "steps"]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["chat", "execute_tool", "[", "[{}]", '[{"parts": 1}]', "12"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=8,
)
"""Any JSON value, with the strings the reader looks for."""


def read_all(path: Path) -> str | None:
    """Read every step of every run: None, or the TraceError's message."""
    try:
        for run in read_runs(path):
            list(run.steps)
    except TraceError as exc:
        return str(exc)
    return None


def one_run(path: Path) -> RecordedRun:
    """The file's one run."""
    (run,) = list(read_runs(path))
    return run


def steps(run: RecordedRun) -> list[Any]:
    """The run's steps, typed loosely: each test checks the kind of the steps it reads."""
    return list(run.steps)


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Each non-blank line of a JSON-lines file, parsed."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_read_blind(run: RecordedRun) -> None:
    """A recording made with content capture off (a turn calling delete_file and read_file,
    their results, an answer): the calls are read with no arguments, never invented ones,
    and counted; the results and the answer read as not recorded."""
    first, results, last = steps(run)
    assert [(c.name, c.arguments) for c in first.turn.tool_calls] == [
        ("delete_file", {}),
        ("read_file", {}),
    ]
    assert run.info["calls_without_arguments"] == 2
    assert [r.content for r in results.results] == [NOT_RECORDED, NOT_RECORDED]
    assert last.turn.text == NOT_RECORDED
