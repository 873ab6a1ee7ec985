"""An input's events are delivered all or nothing: an observer that raises retracts them.

When an observer raises, the Controller puts the run back as it was; every
observer that had received some of that input's events is told so with one
`step_retracted` event, and the observer's own exception propagates unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import pytest
import structlog

import agentfsm as af
from agentfsm._engine.events import RETRACTED
from agentfsm.testing import EventCapture, call, turn


class BoomError(Exception):
    """The failure an observer raises in these tests."""


class FailOnce:
    """An observer that raises once, on event `skip + at` (0-based) of all it is given."""

    def __init__(self, at: int, skip: int = 0) -> None:
        self.at = at
        self.skip = skip  # events to let through before counting
        self.seen: list[dict[str, Any]] = []
        self.raised: BoomError | None = None

    def __call__(self, event: Mapping[str, Any]) -> None:
        if self.raised is None and len(self.seen) == self.skip + self.at:
            self.raised = BoomError(f"failed on event {len(self.seen)}")
            raise self.raised
        self.seen.append(dict(event))


def step_events(capture: EventCapture) -> list[dict[str, Any]]:
    """The events after run_started, as one observer received them."""
    return [e for e in capture.events if e["event"] != "run_started"]


class TestRetraction:
    """What each observer receives when one of them raises in the middle of an input."""

    def test_an_earlier_observer_gets_the_whole_step_then_its_retraction(self) -> None:
        """The observer before the failing one got every event of the step, then one retraction."""
        first, failing = EventCapture(), FailOnce(at=1, skip=1)
        ctl = af.Controller(run_id="r1", observers=[first, failing])
        with pytest.raises(BoomError):
            ctl.on_model_output(turn(calls=[call("search", {"q": "x"}, id="c1")]))
        events = step_events(first)
        kinds = [e["event"] for e in events]
        assert kinds[0] == "model_output"
        assert kinds[-2] == "decision"
        assert events[-1] == {
            "event": RETRACTED,
            "run_id": "r1",
            "turn": 1,
            "events": len(events) - 1,
            "error": "BoomError",
        }

    def test_the_failing_observer_is_told_how_many_it_took(self) -> None:
        """The observer that raised gets a retraction counting the events it took before raising."""
        failing = FailOnce(at=2, skip=1)
        ctl = af.Controller(run_id="r1", observers=[failing])
        with pytest.raises(BoomError):
            ctl.on_model_output(turn("done"))
        taken = failing.seen[1:]
        assert [e["event"] for e in taken[:2]] == ["model_output", "transition"]
        assert taken[2] == {
            "event": RETRACTED,
            "run_id": "r1",
            "turn": 1,
            "events": 2,
            "error": "BoomError",
        }

    def test_later_observers_get_nothing_of_the_failed_step(self) -> None:
        """Observers after the one that raised never see the step at all."""
        failing, last = FailOnce(at=0, skip=1), EventCapture()
        ctl = af.Controller(observers=[failing, last])
        with pytest.raises(BoomError):
            ctl.on_model_output(turn("done"))
        assert step_events(last) == []

    def test_the_original_exception_propagates_unchanged(self) -> None:
        """The exception the host catches is the very object the observer raised."""
        failing = FailOnce(at=1, skip=1)
        ctl = af.Controller(observers=[EventCapture(), failing])
        with pytest.raises(BoomError) as caught:
            ctl.on_model_output(turn("done"))
        assert caught.value is failing.raised
        assert str(caught.value) == "failed on event 2"

    def test_the_same_input_given_again_is_seen_once(self) -> None:
        """After the retraction, the retried input's events follow and the run goes on."""
        first = EventCapture()
        ctl = af.Controller(observers=[first, FailOnce(at=3, skip=1)])
        output = turn(calls=[call("search", {"q": "x"}, id="c1")])
        with pytest.raises(BoomError):
            ctl.on_model_output(output)
        assert ctl.turn == 0
        assert ctl.state == "await_model"
        decision = ctl.on_model_output(output)
        assert decision.action is af.Action.EXECUTE_TOOLS
        kinds = [e["event"] for e in step_events(first)]
        retraction = kinds.index(RETRACTED)
        assert kinds[:retraction] == kinds[retraction + 1 :]

    def test_a_user_message_that_opens_an_episode_is_one_delivery(self) -> None:
        """The episode's start and the message are retracted together: the episode did not open."""
        first = EventCapture()
        ctl = af.Controller(run_id="r1", observers=[first])
        ctl.on_model_output(turn("done"))
        ctl.add_observer(FailOnce(at=1))
        with pytest.raises(BoomError):
            ctl.on_user_message("and now?")
        assert ctl.state == "end"
        assert [e["event"] for e in first.events[-3:]] == [
            "episode_started",
            "user_message",
            RETRACTED,
        ]
        assert first.events[-1]["events"] == 2

    def test_a_stop_from_outside_is_retracted_too(self) -> None:
        """stop() delivers its transition and decision together; a failure retracts both."""
        first = EventCapture()
        ctl = af.Controller(observers=[first, FailOnce(at=1, skip=1)])
        with pytest.raises(BoomError):
            ctl.stop(af.ExitReason.COMPLETED)
        assert not ctl.done
        assert [e["event"] for e in step_events(first)] == ["transition", "decision", RETRACTED]
        assert ctl.stop(af.ExitReason.COMPLETED).exit_reason is af.ExitReason.COMPLETED

    def test_an_observer_failing_its_retraction_is_named_on_the_exception(self) -> None:
        """When an earlier observer cannot take the retraction, the original error says so."""

        def refuses_retractions(event: Mapping[str, Any]) -> None:
            if event["event"] == RETRACTED:
                raise OSError("disk full")

        ctl = af.Controller(observers=[refuses_retractions, FailOnce(at=0, skip=1)])
        with pytest.raises(BoomError) as caught:
            ctl.on_model_output(turn("done"))
        assert any("raised OSError on the retraction" in n for n in caught.value.__notes__)

    def test_structlog_failing_retracts_the_observers_step(self) -> None:
        """structlog is the last receiver: when its logging raises, the observers are told."""
        first = EventCapture()
        ctl = af.Controller(observers=[first])

        def refuse(_: Any, name: str, event_dict: MutableMapping[str, Any]) -> Mapping[str, Any]:
            if event_dict.get("event") == "decision":
                raise BoomError("logging failed")
            return event_dict

        structlog.configure(processors=[refuse, structlog.processors.KeyValueRenderer()])
        try:
            with pytest.raises(BoomError):
                ctl.on_model_output(turn("done"))
        finally:
            structlog.reset_defaults()  # leave structlog unconfigured for the other tests
        assert step_events(first)[-1]["event"] == RETRACTED
        assert ctl.turn == 0
