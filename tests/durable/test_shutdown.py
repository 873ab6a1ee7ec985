"""`shutdown` with a run still waiting: the run is left pending, cleanly, for the next launch.

A run paused for a human is a task on agentfsm's event loop. `shutdown` must unwind it
while DBOS is still up; left to the garbage collector, its coroutine is closed later on
whatever thread collects it, where DBOS finds no context and raises (an unraisable error
in someone else's code, which is how CI first saw this).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm import durable
from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from tests.conftest import LITELLM_CLIENT
from tests.durable.conftest import database

pytestmark = [pytest.mark.xdist_group("dbos-in-process"), *LITELLM_CLIENT]
WAIT = 60.0


def deploys(body: Mapping[str, Any]) -> Reply:
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    return tool_calls(call("deploy", {"env": "staging"}, id="d1")) if not answered else say("done")


@pytest.fixture
def unraisable() -> Iterator[list[str]]:
    """What Python reports as unraisable (an exception in a finalizer) while the test runs."""
    seen: list[str] = []
    before = sys.unraisablehook
    sys.unraisablehook = lambda info: seen.append(f"{info.exc_type.__name__}: {info.exc_value}")
    try:
        yield seen
    finally:
        sys.unraisablehook = before


def asked(run_id: str) -> dict[str, Any]:
    """What the run asks, once it waits for the answer (a recovered run is queued first)."""
    deadline = time.monotonic() + WAIT
    while durable.status(run_id) != "waiting_for_human":
        assert time.monotonic() < deadline, f"run {run_id} never waited for a human"
        time.sleep(0.02)
    question = durable.asked(run_id)
    assert question is not None
    return question


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_run_waiting_for_a_human_survives_shutdown_and_continues_after_launch(
    kind: str, tmp_path: Path, unraisable: list[str]
) -> None:
    deployed: list[str] = []

    def deploy(env: str) -> str:
        """Deploy to an environment."""
        deployed.append(env)
        return f"deployed {env}"

    with ScriptedServer([deploys] * 4) as server:
        agent = durable.DurableAgent(
            "shutdown-deployer",
            "openai/scripted",
            tools=[deploy],
            policy=af.Policy(permissions={"deploy": "ask"}),
            api_base=server.openai_base,
            api_key="sk-local",
        )
        url = database(kind, tmp_path)
        durable.launch([agent], database_url=url)
        try:
            run_id = durable.start(agent, "deploy it")
            question = asked(run_id)
            loop = durable._runs_loop()  # the loop the run waits on
        finally:
            durable.shutdown()
        # A task left pending on a dead loop is what the collector later closes, anywhere.
        for thread in [t for t in threading.enumerate() if t.name == "agentfsm-durable"]:
            thread.join(timeout=5)
            assert not thread.is_alive(), "shutdown left the runs' loop running"
        assert loop.is_closed()
        assert [t for t in asyncio.all_tasks(loop) if not t.done()] == []
        gc.collect()
        assert unraisable == []

        durable.launch([agent], database_url=url)
        try:
            assert durable.status(run_id) not in ("done", "failed", "cancelled")
            assert asked(run_id) == question
            durable.reply(run_id, approved=True, question=question["question"])
            done = durable.result(run_id, timeout=WAIT)
        finally:
            durable.shutdown()
    assert done.exit_reason is af.ExitReason.COMPLETED
    assert deployed == ["staging"]
    gc.collect()
    assert unraisable == []
