"""`agentfsm demo` runs the weather agent end to end through litellm, with no key."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentfsm._cli.demo import add_arguments, get_weather, main, run_demo
from tests.conftest import LITELLM_CLIENT

pytestmark = LITELLM_CLIENT


def demo(*argv: str) -> tuple[int, str]:
    """Run the demo with arguments; return its exit status and what it printed."""
    import argparse

    out = io.StringIO()
    args = add_arguments(argparse.ArgumentParser()).parse_args(list(argv))
    return run_demo(args, out), out.getvalue()


class TestDemo:
    """The demo command."""

    @pytest.mark.parametrize(
        "options",
        [(), ("--stream",), ("--protocol", "anthropic"), ("--protocol", "anthropic", "--stream")],
    )
    def test_completes_and_prints_transitions(
        self, tmp_path: Path, options: tuple[str, ...]
    ) -> None:
        """The run completes, prints each transition and the answer, and exits 0."""
        status, printed = demo("--trace", str(tmp_path / "demo.jsonl"), *options)
        assert status == 0
        assert "validate -> budget_check P1 HasToolCalls()" in printed
        assert "tool get_weather: {" in printed
        assert "assistant: Tomorrow in Shanghai:" in printed
        assert "exit: completed after 2 model turn(s)" in printed

    def test_writes_the_trace(self, tmp_path: Path) -> None:
        """The trace file holds the run's events, the tool results among them."""
        path = tmp_path / "nested" / "demo.jsonl"
        demo("--trace", str(path))
        events = [json.loads(line) for line in path.read_text().splitlines()]
        assert events[0]["event"] == "trace"
        assert any(e["event"] == "tool_results" for e in events)
        assert events[-1]["event"] == "decision"
        assert events[-1]["exit_reason"] == "completed"

    def test_model_without_key_is_refused(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--model` for a provider whose key is missing exits 2 and names the key."""
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        assert main(["--model", "openai/gpt-4o-mini"]) == 2
        assert "OPENAI_API_KEY" in capsys.readouterr().err


class TestGetWeather:
    """The demo's offline weather tool."""

    def test_is_deterministic(self) -> None:
        """The same coordinates always give the same forecast."""
        assert get_weather(31.23, 121.47) == get_weather(31.23, 121.47)

    def test_is_plausible(self) -> None:
        """The low is below the high and the rain chance is a percentage."""
        forecast = get_weather(31.23, 121.47)
        assert forecast["low_c"] < forecast["high_c"]
        assert 0 <= forecast["precipitation_chance"] <= 100

    def test_rejects_impossible_coordinates(self) -> None:
        """A latitude beyond the poles is an error (which the runner feeds back to the model)."""
        with pytest.raises(ValueError, match="no such place"):
            get_weather(123.0, 0.0)
