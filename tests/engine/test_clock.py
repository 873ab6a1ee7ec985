"""The run's clock: time budgets read it once per input, and it can be given (replay, durable)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

import agentfsm as af
from agentfsm.exceptions import DefinitionError
from agentfsm.testing import call, turn

A = af.Action


def stepping(*readings: float) -> tuple[Callable[[], float], list[int]]:
    """A clock that gives `readings` in order (the last one again after), and its read count."""
    reads = [0]

    def clock() -> float:
        reads[0] += 1
        return readings[min(reads[0], len(readings)) - 1]

    return clock, reads


class TestClockArgument:
    """A clock that cannot give seconds is refused when it is given."""

    @pytest.mark.parametrize("clock", ["monotonic", 3.0, object()])
    def test_a_clock_that_is_not_callable_is_refused(self, clock: object) -> None:
        """A value that cannot be called is a DefinitionError naming the clock."""
        with pytest.raises(DefinitionError, match="clock must be a callable"):
            af.Controller(clock=clock)  # type: ignore[arg-type]

    @pytest.mark.parametrize("reading", ["0", None, True, math.nan, math.inf])
    def test_a_clock_that_does_not_return_seconds_is_refused(self, reading: object) -> None:
        """A reading that is not a finite number fails at construction, not at the first input."""
        with pytest.raises(DefinitionError, match="not a number of seconds"):
            af.Controller(clock=lambda: reading)  # type: ignore[arg-type,return-value]

    def test_a_clock_that_raises_is_refused(self) -> None:
        """A clock that raises is a DefinitionError naming what it raised."""

        def broken() -> float:
            raise OSError("no time source")

        with pytest.raises(DefinitionError, match="OSError: no time source"):
            af.Controller(clock=broken)


class TestTimeBudgets:
    """max_seconds reads the given clock: the deadline fires at the reading that passes it."""

    def test_the_deadline_fires_when_the_clock_passes_it(self) -> None:
        """Start at 100 s, a 10 s budget: 105 s continues, 111 s stops with DEADLINE."""
        clock, _ = stepping(100.0, 105.0, 111.0)
        ctl = af.Controller(af.Policy(max_seconds=10), clock=clock)
        first = ctl.on_model_output(turn(calls=[call("search", {"q": "a"}, id="c1")]))
        assert first.action is A.EXECUTE_TOOLS
        last = ctl.on_tool_results([af.ToolResult(call_id="c1", content="x")])
        assert last.action is A.STOP
        assert last.exit_reason is af.ExitReason.DEADLINE
        assert "11.0s elapsed of 10.0s" in last.reason

    def test_the_clock_is_read_once_per_input(self) -> None:
        """One reading at the start and one per routed input: a user message reads none."""
        clock, reads = stepping(0.0, 1.0, 2.0, 3.0)
        ctl = af.Controller(af.Policy(max_seconds=60), clock=clock)
        ctl.on_user_message("hello")
        ctl.on_model_output(turn(calls=[call("search", {"q": "a"}, id="c1")]))
        ctl.on_tool_results([af.ToolResult(call_id="c1", content="x")])
        assert reads[0] == 3

    def test_a_restored_run_keeps_the_time_it_had_used(self) -> None:
        """dump at 7 s used; load on a clock that reads 1,000: the next input sees 7 s more."""
        clock, _ = stepping(0.0, 7.0)
        ctl = af.Controller(af.Policy(max_seconds=10), clock=clock)
        ctl.on_model_output(turn(calls=[call("search", {"q": "a"}, id="c1")]))
        data = ctl.dump()
        later, _ = stepping(1000.0, 1002.0, 1004.0)
        restored = af.Controller.load(data, clock=later)
        done = restored.on_tool_results([af.ToolResult(call_id="c1", content="x")])
        assert done.action is A.STOP  # 7 + (1004 - 1000) = 11 s > 10 s
        assert done.exit_reason is af.ExitReason.DEADLINE
