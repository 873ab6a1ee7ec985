"""Each integration page's real-client example, run against a real HTTP server on 127.0.0.1.

The examples live in `examples/integrations/<name>_example.py`; each page shows its file verbatim
(after the marker `<!-- example: examples/integrations/<name>_example.py -->`), and here each runs
as a script, with the framework's own OpenAI client pointed at `agentfsm.testing`'s
`ScriptedServer`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agentfsm.testing.scripted import Reply, call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.processes import python

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["langgraph", "mini_swe_agent", "openai_agents", "pydantic_ai"]
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat out"
SCRIPTS: dict[str, list[Reply]] = {
    "mini_swe_agent": [
        tool_calls(call("bash", {"command": "echo hello > out"})),
        tool_calls(call("bash", {"command": SUBMIT})),
    ],
}
"""What the server answers, per example: by default a weather call, then the answer."""
WEATHER = [tool_calls(call("get_weather", {"city": "Paris"})), say("It is sunny in Paris.")]
PRINTED = {"mini_swe_agent": "hello"}
"""What each example prints first (its answer or submission)."""


def shown(name: str) -> str:
    """The code block the page shows after its example marker."""
    page = (ROOT / "docs" / "integrations" / f"{name}.md").read_text(encoding="utf-8")
    marker = re.escape(f"<!-- example: examples/integrations/{name}_example.py -->")
    found = re.search(marker + r"\n```python\n(.*?)```", page, re.DOTALL)
    assert found, f"docs/integrations/{name}.md shows no examples/integrations/{name}_example.py"
    return found.group(1)


class TestRealClients:
    """The framework's own OpenAI client, over real HTTP, governed by agentfsm."""

    @pytest.mark.parametrize("name", NAMES)
    def test_the_page_shows_the_example_verbatim(self, name: str) -> None:
        """The page's code block is the example file, character for character."""
        path = ROOT / "examples" / "integrations" / f"{name}_example.py"
        assert shown(name) == path.read_text(encoding="utf-8")

    @pytest.mark.parametrize("name", NAMES)
    def test_the_example_runs_against_a_loopback_server(self, name: str) -> None:
        """Run as a user would (a fresh interpreter), the example completes after the tool
        ran, and the tool's output reached the model over HTTP."""
        path = ROOT / "examples" / "integrations" / f"{name}_example.py"
        with ScriptedServer(SCRIPTS.get(name, WEATHER)) as server:
            done = python(
                str(path),
                server.openai_base,
                timeout=300,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        assert done.returncode == 0, done.stderr
        printed = done.stdout.splitlines()
        assert printed[-1] == "completed", done.stdout
        assert PRINTED.get(name, "It is sunny in Paris.") in printed[:-1], done.stdout
        assert server.remaining == 0
        second = str(server.requests[1].body["messages"])
        assert ("hello" if name == "mini_swe_agent" else "sunny in Paris") in second
