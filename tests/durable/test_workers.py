"""Several workers on one database: each has a stable identity, and a dead one's runs come back.

DBOS recovers the pending runs recorded under a worker's executor id when a
worker with that id launches. A run of a killed worker therefore finishes when
that worker restarts under its id, or on another worker that takes it over with
`durable.recover(dead id)`; a worker under another id leaves it alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.testing import ScriptedServer
from tests.durable.conftest import Worker, database
from tests.durable.test_kill import ONCE


def as_worker(worker: Worker, executor: str, **env: str) -> dict[str, Any]:
    """Run the worker under `executor`; what it printed."""
    done = worker.run(env={"AGENTFSM_TEST_EXECUTOR": executor, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    output: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return output


def killed_on_worker_a(worker: Worker) -> None:
    """Worker A starts the run and is killed with SIGKILL after its first tool."""
    died = worker.run("tool:1:sigkill", env={"AGENTFSM_TEST_EXECUTOR": "worker-a"})
    assert died.returncode == -9, died.stderr[-3000:]


def check_finished(output: dict[str, Any], worker: Worker) -> None:
    """The run completed, and every tool call ran exactly once."""
    assert output["result"]["exit_reason"] == "completed", output
    assert worker.effects() == ONCE


def take_over(kind: str, server: ScriptedServer, tmp_path: Path) -> None:
    """A killed on its run; B, another worker, takes its runs over and finishes the run."""
    worker = Worker(database(kind, tmp_path), server, tmp_path / "effects.log")
    killed_on_worker_a(worker)
    output = as_worker(worker, "worker-b", AGENTFSM_TEST_TAKE_OVER="worker-a")
    assert output["taken"] == ["run-1"]
    check_finished(output, worker)


class TestWorkers:
    def test_another_worker_leaves_a_dead_workers_run_until_it_restarts(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """Under another id a worker does not touch the run; A restarted under its id ends it."""
        worker = Worker(database("sqlite", tmp_path), server, tmp_path / "effects.log")
        killed_on_worker_a(worker)
        waited = as_worker(worker, "worker-b", AGENTFSM_TEST_WAIT="3")
        assert waited["pending"] == "running"
        check_finished(as_worker(worker, "worker-a"), worker)

    def test_a_live_worker_takes_over_a_dead_workers_runs(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """recover(dead id) on worker B finishes A's run there, every tool once."""
        take_over("sqlite", server, tmp_path)


@pytest.mark.postgres
class TestWorkersOnPostgres:
    def test_a_live_worker_takes_over_a_dead_workers_runs(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """The same take-over on PostgreSQL, where workers share the database over the network."""
        take_over("postgres", server, tmp_path)
