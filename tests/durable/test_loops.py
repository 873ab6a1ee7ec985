"""A durable agent under the loop ladder: the warning reaches the model as a user message
after the repeated call's result, and the stop rung ends the run DOOM_LOOP. DBOS runs in this
test process, on SQLite."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm import durable
from agentfsm.durable._registry import register
from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import Reply, call, tool_calls
from tests.conftest import LITELLM_CLIENT
from tests.durable.conftest import database

pytestmark = [pytest.mark.xdist_group("dbos-in-process"), *LITELLM_CLIENT]

SAID = [{"path": "a", "n": 1}, {"n": 1, "path": "a"}, {"path": "a", "n": 1}]
"""One read, its keys in another order (the tool's own validation takes no `1.0` for an int)."""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DBOS launched in this process on a fresh SQLite database."""
    url = database("sqlite", tmp_path_factory.mktemp("loops"))
    durable.launch([durable.DurableAgent("placeholder", "openai/scripted")], database_url=url)
    try:
        yield url
    finally:
        durable.shutdown()


def test_a_durable_run_warns_then_stops_a_paraphrased_loop(db: str, tmp_path: Path) -> None:
    """Warn at 2, stop at 3: the second paraphrase runs and the model reads the warning after
    its result; the third does not run and the run ends DOOM_LOOP."""
    ran: list[str] = []
    bodies: list[Mapping[str, Any]] = []

    def read(path: str, n: int) -> str:
        """Read a file."""
        ran.append(path)
        return "contents"

    def model(body: Mapping[str, Any]) -> Reply:
        bodies.append(body)
        return tool_calls(call("read", SAID[len(bodies) - 1]))

    with ScriptedServer([model] * 3) as server:
        agent = durable.DurableAgent(
            "looping",
            "openai/scripted",
            tools=[read],
            policy=af.Policy(loops={"warn": 2, "ask": 0, "stop": 3}),
            api_base=server.openai_base,
            api_key="sk-local",
        )
        register([agent])
        done = durable.result(durable.start(agent, "read a"), timeout=60)
    assert done.exit_reason is af.ExitReason.DOOM_LOOP
    assert ran == ["a", "a"]
    last = bodies[2]["messages"]
    assert last[-2]["role"] == "tool"
    assert last[-1]["role"] == "user"
    assert last[-1]["content"].startswith("loop warning: read(")
    assert "to go on" in done.decisions[-1].reason
