"""agentfsm's own errors point at the user's call, not into agentfsm's internals."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

import agentfsm as af
from agentfsm import guards, providers
from agentfsm.exceptions import TraceError

PACKAGE = Path(af.__file__).resolve().parent


def frames_inside(error: BaseException) -> list[str]:
    """The traceback's frames that are agentfsm's own files, as `file:function`."""
    return [
        f"{Path(frame.filename).name}:{frame.name}"
        for frame in traceback.extract_tb(error.__traceback__)
        if Path(frame.filename).resolve().is_relative_to(PACKAGE)
    ]


def test_a_bad_model_output_shows_one_frame_of_agentfsm() -> None:
    ctl = af.Controller(tools=["get_weather"])
    with pytest.raises(af.AgentFSMError) as caught:
        ctl.on_model_output(42)
    assert len(frames_inside(caught.value)) <= 1, frames_inside(caught.value)


def test_a_bad_policy_value_shows_no_pydantic_chain() -> None:
    with pytest.raises(af.AgentFSMError) as caught:
        af.Policy(max_turns=-1)
    error = caught.value
    assert "max_turns" in str(error)
    assert error.__cause__ is None
    assert error.__suppress_context__
    assert len(frames_inside(error)) <= 1, frames_inside(error)


def test_an_observers_own_exception_keeps_its_traceback() -> None:
    """What a user's observer raised is the user's to read: its frames stay."""

    def observer(event: Mapping[str, object]) -> None:
        if event["event"] != "run_started":
            raise KeyError("the observer's own bug")

    ctl = af.Controller(observers=[observer])
    with pytest.raises(Exception, match="observer") as caught:
        ctl.on_model_output(af.ModelTurn(text="done", finish_reason=af.FinishReason.STOP))
    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None and len(chain) < 10:
        chain.append(error)
        error = error.__cause__ or error.__context__
    raised = [e for e in chain if isinstance(e, KeyError)]
    assert raised, chain
    names = [frame.name for frame in traceback.extract_tb(raised[0].__traceback__)]
    assert "observer" in names


def _raise_from_run_with_bad_tools() -> None:
    af.run("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], tools=[42])


def _raise_from_arun_with_bad_tools() -> None:
    asyncio.run(af.arun("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], tools=[42]))


ENTRY_POINTS: dict[str, Callable[[], object]] = {
    "Controller(tools=[42])": lambda: af.Controller(tools=[42]),
    "Controller(policy=...)": lambda: af.Controller(policy={"max_turns": -1}),
    "Controller.load": lambda: af.Controller.load({"format": "nothing"}),
    "normalize(42)": lambda: af.normalize(42),
    "normalize({})": lambda: af.normalize({}),
    "providers.normalize({})": lambda: providers.normalize({}),
    "run(tools=[42])": _raise_from_run_with_bad_tools,
    "arun(tools=[42])": _raise_from_arun_with_bad_tools,
    "read_trace(missing)": lambda: list(af.read_trace("/nonexistent/trace.jsonl")),
    "replay_run(missing)": lambda: af.replay_run("/nonexistent/trace.jsonl"),
    "Executor(tools=42)": lambda: af.Executor(42),
    "ToolSpec(name='')": lambda: af.ToolSpec(name=""),
    "parse_guard": lambda: guards.parse_guard("TokenBudget(-1) | Nope("),
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_a_public_entry_points_own_error_shows_at_most_one_frame(name: str) -> None:
    """What the error says is about the argument; agentfsm's frames below the call are not."""
    with pytest.raises(af.AgentFSMError) as caught:
        ENTRY_POINTS[name]()
    assert len(frames_inside(caught.value)) <= 1, frames_inside(caught.value)


def test_a_trace_line_error_names_file_and_line_without_internal_frames(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    trace.write_text('{"event": "trace_started"}\nnot json\n')
    with pytest.raises(TraceError) as caught:
        list(af.read_trace(trace))
    assert str(trace) in str(caught.value)
    assert len(frames_inside(caught.value)) <= 1, frames_inside(caught.value)
