"""Calls without ids get the controller's ids, and the history the model reads keeps them."""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import ExitReason
from agentfsm.testing.scripted import call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.runner.conftest import scripted_run
from tests.runner.test_runner_litellm import QUESTION, SHANGHAI, WeatherTool, pytestmark

__all__ = ["pytestmark"]


class TestIssuedIds:
    def test_empty_ids_are_issued_once_and_used_in_the_history(
        self, get_weather: WeatherTool, weather_calls: list[Any]
    ) -> None:
        """Two calls with empty ids get afsm ids; the tool messages answer those ids."""
        beijing = {"latitude": 39.9, "longitude": 116.4}
        script = [
            tool_calls(call("get_weather", SHANGHAI, id=""), call("get_weather", beijing, id="")),
            say("Shanghai and Beijing: see above."),
        ]
        with ScriptedServer(script) as server:
            result = scripted_run(server, QUESTION, tools=[get_weather])
        assert result.exit_reason is ExitReason.COMPLETED
        assert len(weather_calls) == 2
        first = result.decisions[0]
        assert [c.id for c in first.tool_calls] == ["afsm_1_0", "afsm_1_1"]
        assert "issued id 'afsm_1_0'" in first.reason
        assistant = next(m for m in result.messages if m.get("tool_calls"))
        assert [c["id"] for c in assistant["tool_calls"]] == ["afsm_1_0", "afsm_1_1"]
        answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
        assert answered == ["afsm_1_0", "afsm_1_1"]
