"""`agentfsm run` drives a model through litellm with tools named as module:function."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from agentfsm._cli.command import main
from agentfsm.testing.scripted import Reply, Responder, call, last_tool_result, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.runner.test_runner_litellm import SHANGHAI, pytestmark

__all__ = ["pytestmark"]


class TestRunCommand:
    def test_run_completes_and_prints_the_answer(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The command runs the tool, prints the exit reason and text, and exits 0."""

        def answer(body: Mapping[str, Any]) -> Reply:
            return say(f"Forecast: {last_tool_result(body)}")

        script: list[Reply | Responder] = [tool_calls(call("get_weather", SHANGHAI)), answer]
        with ScriptedServer(script) as server:
            status = main(
                [
                    "run",
                    "What will the weather be like in Shanghai tomorrow?",
                    "--model",
                    "openai/scripted",
                    "--tool",
                    "agentfsm._cli.demo:get_weather",
                    "--api-base",
                    server.openai_base,
                    "--api-key",
                    "sk-local",
                ]
            )
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert status == 0
        assert out["exit_reason"] == "completed"
        assert '"latitude": 31.23' in out["text"]

    def test_a_tool_that_is_not_importable_is_a_clear_error(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A --tool that names no callable exits 2 and says which."""
        status = main(["run", "hi", "--model", "openai/x", "--tool", "agentfsm._cli.demo:nope"])
        assert status == 2
        assert "'nope' is not a callable" in capsys.readouterr().err
