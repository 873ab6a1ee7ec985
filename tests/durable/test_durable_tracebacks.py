"""agentfsm.durable's own errors point at the user's call, not into its modules."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

import agentfsm as af
from agentfsm import durable

PACKAGE = Path(af.__file__).resolve().parent

CALLS: dict[str, Callable[[], object]] = {
    "status(42)": lambda: durable.status(42),  # type: ignore[arg-type]
    "asked(42)": lambda: durable.asked(42),  # type: ignore[arg-type]
    "result(42)": lambda: durable.result(42),  # type: ignore[arg-type]
    "start(42, [])": lambda: durable.start(42, []),  # type: ignore[arg-type]
    "DurableAgent(name='')": lambda: durable.DurableAgent("", "openai/gpt-4o-mini"),
    "Client(42)": lambda: durable.Client(42),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", list(CALLS))
def test_an_error_shows_at_most_one_frame_of_agentfsm(name: str) -> None:
    with pytest.raises(af.AgentFSMError) as caught:
        CALLS[name]()
    inside = [
        f"{Path(frame.filename).name}:{frame.name}"
        for frame in traceback.extract_tb(caught.value.__traceback__)
        if Path(frame.filename).resolve().is_relative_to(PACKAGE)
    ]
    assert len(inside) <= 1, inside
