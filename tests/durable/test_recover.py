"""`recover(dead worker)`: it answers within a bound, and it names the runs it cannot take.

A run pauses for a human on worker `dead` (DBOS in this test process, on a SQLite file, and
on PostgreSQL where AGENTFSM_TEST_POSTGRES_DSN is set), and
that worker stops for good. Then:
- a worker of another version calls `recover("dead")`: it takes nothing, and says which run
  waits for which version (it used to return `[]` and say nothing);
- a worker of the run's version whose whole connection pool is held elsewhere calls
  `recover("dead")`: it takes the run over at once on a connection of its own (DBOS's own
  recovery waited for the pool, with no deadline), and the run then ends on that worker;
- a database that does not answer makes `recover` try a bounded number of times, then raise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from dbos._dbos import _get_dbos_instance

import agentfsm as af
from agentfsm import durable
from agentfsm.durable import RecoveredRuns
from agentfsm.durable._recovery import RECOVER_ATTEMPTS, RECOVER_WAIT, Launched, take_over
from agentfsm.exceptions import RunError
from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from tests.conftest import LITELLM_CLIENT
from tests.durable.conftest import database
from tests.replay.ray_cluster import _free_ports

pytestmark = [pytest.mark.xdist_group("dbos-in-process"), *LITELLM_CLIENT]

KINDS = pytest.mark.parametrize(
    "kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
POOL = 1
"""The live worker's pool, all held by the pool test. SQLite only: on PostgreSQL DBOS's own
threads keep connections checked out, so a test cannot take a whole pool, and a pool of one
deadlocks DBOS there (a workflow needs a second connection)."""
BOUND = 120.0
"""Seconds a step of these tests may take before it fails with its cause: a generous bound
for a loaded machine, never a speed requirement."""


def deploys(body: Mapping[str, Any]) -> Reply:
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    return tool_calls(call("deploy", {"env": "staging"}, id="d1")) if not answered else say("done")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer([deploys] * 8) as srv:
        yield srv


def deployer(server: ScriptedServer, max_turns: int = 10) -> durable.DurableAgent:
    """The agent; another `max_turns` is another policy, so another application version."""

    def deploy(env: str) -> str:
        """Deploy to an environment."""
        return f"deployed {env}"

    return durable.DurableAgent(
        "recover-deployer",
        "openai/scripted",
        tools=[deploy],
        policy=af.Policy(max_turns=max_turns, permissions={"deploy": "ask"}),
        api_base=server.openai_base,
        api_key="sk-local",
    )


def until(what: str, ready: Any) -> None:
    """Wait until `ready()` holds, failing with `what` past the generous BOUND."""
    deadline = time.monotonic() + BOUND
    while not ready():
        assert time.monotonic() < deadline, f"{what} within {BOUND} s"
        time.sleep(0.02)


def paused_on_dead_worker(agent: durable.DurableAgent, url: str) -> tuple[str, str]:
    """A run of `agent` waiting for a human on worker `dead`, which then stops: (run, version)."""
    version = durable.launch([agent], database_url=url, executor_id="dead")
    try:
        run_id = durable.start(agent, "deploy it")
        until("the run asks a human", lambda: durable.status(run_id) == "waiting_for_human")
    finally:
        durable.shutdown()
    return run_id, version


@KINDS
def test_a_worker_of_another_version_names_the_runs_it_cannot_take(
    kind: str, server: ScriptedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """recover() from another version returns no run, lists the dead worker's run under its
    version in `waiting`, and warns; a worker of that version then takes it over."""
    url = database(kind, tmp_path)
    old = deployer(server)
    run_id, old_version = paused_on_dead_worker(old, url)

    new_version = durable.launch(
        [deployer(server, max_turns=9)],
        database_url=url,
        executor_id="new",
        other_versions="leave",
    )
    try:
        assert new_version != old_version
        with caplog.at_level(logging.WARNING, logger="agentfsm.durable"):
            taken = durable.recover("dead")
    finally:
        durable.shutdown()
    assert isinstance(taken, RecoveredRuns)
    assert taken == []
    assert taken.waiting == {run_id: old_version}
    warned = [r.getMessage() for r in caplog.records if r.name == "agentfsm.durable"]
    assert any(run_id in m and old_version in m and "recover('dead')" in m for m in warned)

    durable.launch([old], database_url=url, executor_id="old-2", other_versions="leave")
    try:
        again = durable.recover("dead")
        assert again == [run_id]
        assert again.waiting == {}
        done = _approved_to_the_end(run_id)
        assert durable.recover("dead") == []  # a second call takes nothing twice
    finally:
        durable.shutdown()
    assert done.exit_reason is af.ExitReason.COMPLETED


def _approved_to_the_end(run_id: str) -> Any:
    """Wait for the taken-over run to ask its human again, approve, and return its result."""
    until("the taken-over run asks again", lambda: durable.status(run_id) == "waiting_for_human")
    question = durable.asked(run_id)
    assert question is not None
    durable.reply(run_id, approved=True, question=question["question"])
    return durable.result(run_id, timeout=BOUND)


def test_recover_does_not_wait_for_the_workers_pool(server: ScriptedServer, tmp_path: Path) -> None:
    """With the live worker's whole pool held elsewhere, recover() still takes the
    dead worker's run over (on its own connection); once the pool is free the run ends there."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    agent = deployer(server)
    run_id, _ = paused_on_dead_worker(agent, url)

    durable.launch([agent], database_url=url, executor_id="live", config={"sys_db_pool_size": POOL})
    try:
        # The worker's whole pool: its connections, checked out and held (no transaction
        # begun, so no lock is held: only the pool is exhausted).
        engine = _get_dbos_instance()._sys_db.engine
        held = [engine.connect() for _ in range(POOL)]
        answered = threading.Event()
        answer: dict[str, Any] = {}

        def recovering() -> None:
            try:
                answer["taken"] = durable.recover("dead")
            except BaseException as exc:  # the test reports it below
                answer["error"] = exc
            finally:
                answered.set()

        try:
            threading.Thread(target=recovering, daemon=True).start()
            assert answered.wait(BOUND), "recover() waited for the worker's exhausted pool"
        finally:
            for connection in held:
                connection.close()
        assert "error" not in answer, answer.get("error")
        assert answer["taken"] == [run_id]
        done = _approved_to_the_end(run_id)
    finally:
        durable.shutdown()
    assert done.exit_reason is af.ExitReason.COMPLETED


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_an_unreachable_database_is_tried_a_bounded_number_of_times(
    kind: str, tmp_path: Path
) -> None:
    """A real connection that fails (a closed PostgreSQL port; a SQLite file in no directory)
    is tried RECOVER_ATTEMPTS times with doubling waits (recorded, not slept), then RunError
    names the worker, the cause, and that calling again is safe."""
    (port,) = _free_ports(1)
    url = {
        "postgres": f"postgresql://agentfsm:none@127.0.0.1:{port}/runs",
        "sqlite": f"sqlite:///{tmp_path / 'no-such-dir' / 'runs.sqlite'}",
    }[kind]
    waits: list[float] = []
    with pytest.raises(RunError) as caught:
        take_over("dead", Launched(url, "agentfsm", "v1"), sleep=waits.append)
    said = str(caught.value)
    assert "could not take over the runs of worker 'dead'" in said
    assert f"in {RECOVER_ATTEMPTS} attempt(s)" in said
    assert "OperationalError" in said
    assert "call recover('dead') again" in said
    first, longest = RECOVER_WAIT
    assert waits == [min(first * 2**n, longest) for n in range(RECOVER_ATTEMPTS - 1)]


def test_recover_before_launch_is_a_run_error() -> None:
    """No worker in this process: nothing to recover with, and it says so."""
    with pytest.raises(RunError, match="recover: no worker runs in this process"):
        durable.recover("dead")
