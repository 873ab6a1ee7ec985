"""Proof by killing: a worker killed anywhere finishes, after a restart, as if never killed.

Each test kills one run's worker again and again (os._exit and SIGKILL), right
after a tool step, between steps, inside a parallel batch and while paused for a
human; the last worker finishes the run. The result and the trace must equal an
uninterrupted run's, and the tools' side-effect log must show every call ran once.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentfsm.testing import ScriptedServer
from tests.durable.conftest import Worker, postgres_dsn

ONCE = Counter({"search a": 1, "slow_search b": 1, "search c": 1, "write_file x": 1})
"""Every tool call of the scripted run, exactly once."""

EXIT_FIRST = ("tool:1:exit", "model:2:sigkill", "tool:2:exit", "ask_human:1:sigkill")
"""Kill points in order, one per worker; counts include the replays of recorded steps."""
SIGKILL_FIRST = ("tool:1:sigkill", "model:2:exit", "tool:2:sigkill", "ask_human:1:exit")


def finished(worker: Worker) -> dict[str, Any]:
    """Run a worker without kill points; return the run's result."""
    done = worker.run()
    assert done.returncode == 0, done.stderr[-3000:]
    output = json.loads(done.stdout.strip().splitlines()[-1])
    # A reply to a run that no longer waits is refused, naming the run.
    assert output["late_reply"].startswith("InvalidInputError: run 'run-1' is not waiting")
    result: dict[str, Any] = output["result"]
    return result


def untimed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without the run time that input events record."""
    return [{k: v for k, v in e.items() if k != "elapsed"} for e in events]


def killed(
    worker: Worker, point: str, policy: str = "same", env: Mapping[str, str] | None = None
) -> None:
    """Run a worker that must die at `point`."""
    how = point.rsplit(":", 1)[1]
    died = worker.run(point, policy=policy, env=env)
    expected = 3 if how == "exit" else -signal.SIGKILL
    assert died.returncode == expected, (point, died.returncode, died.stderr[-3000:])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], int]:
    """The result of the run never killed, and how many model calls it made."""
    from tests.durable.conftest import script

    base = tmp_path_factory.mktemp("uninterrupted")
    with ScriptedServer([script] * 64) as server:
        worker = Worker(f"sqlite:///{base / 'runs.sqlite'}", server, base / "effects.log")
        result = finished(worker)
        assert worker.effects() == ONCE
        return result, len(server.requests)


def check_same(
    result: dict[str, Any], worker: Worker, baseline: tuple[dict[str, Any], int]
) -> None:
    """The killed run ended like the uninterrupted one, and every tool ran once."""
    expected, model_calls = baseline
    assert result["exit_reason"] == "completed"
    assert result["text"] == "all done"
    assert result["decisions"] == expected["decisions"]
    # Input events record the run's time, which differs between two runs; nothing else may.
    assert untimed(result["events"]) == untimed(expected["events"])
    assert result["messages"] == expected["messages"]
    assert {**result, "events": None} == {**expected, "events": None}
    assert worker.effects() == ONCE
    assert len(worker.server.requests) == model_calls


class TestKilledWorkers:
    @pytest.mark.parametrize(
        "points", [EXIT_FIRST, SIGKILL_FIRST], ids=["exit-first", "sigkill-first"]
    )
    def test_a_run_killed_at_every_point_finishes_as_if_never_killed(
        self,
        points: tuple[str, ...],
        server: ScriptedServer,
        tmp_path: Path,
        uninterrupted: tuple[dict[str, Any], int],
    ) -> None:
        """Killed after a tool, between steps, in a batch, while paused: same result, tools once."""
        worker = Worker(f"sqlite:///{tmp_path / 'runs.sqlite'}", server, tmp_path / "effects.log")
        for point in points:
            killed(worker, point)
        check_same(finished(worker), worker, uninterrupted)

    def test_the_tools_had_run_before_the_kill_inside_the_batch(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """A kill inside the parallel batch comes after the fast call and before the slow one."""
        worker = Worker(f"sqlite:///{tmp_path / 'runs.sqlite'}", server, tmp_path / "effects.log")
        killed(worker, "tool:2:exit")
        assert worker.effects() == Counter({"search a": 1, "search c": 1})


START = "1800000000.0"
"""The frozen wall time (seconds) of the runs that test `max_seconds`."""


class TestTimeAcrossRecovery:
    def test_max_seconds_counts_the_time_the_worker_was_down(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """Killed while paused, restarted after the budget: the reply is routed past DEADLINE.

        The run's wall clock is frozen in each worker: the first stands still at START, the
        second at START + DEADLINE + 1 (the worker was down that long); no test time passes."""
        from tests.durable.worker import DEADLINE

        worker = Worker(f"sqlite:///{tmp_path / 'runs.sqlite'}", server, tmp_path / "effects.log")
        killed(worker, "ask_human:1:exit", policy="deadline", env={"AGENTFSM_TEST_CLOCK": START})
        later = str(float(START) + DEADLINE + 1)
        done = worker.run(policy="deadline", env={"AGENTFSM_TEST_CLOCK": later})
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])["result"]
        assert result["exit_reason"] == "deadline"
        last = result["decisions"][-1]
        elapsed = float(last["reason"].split("s elapsed")[0].rsplit(" ", 1)[-1])
        assert elapsed == DEADLINE + 1  # exactly the time the frozen clocks say passed
        # The approved write never ran: the budget was spent before the reply was routed.
        assert worker.effects() == Counter({"search a": 1, "slow_search b": 1, "search c": 1})

    def test_a_run_within_its_budget_completes(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """The same policy without a crash: the run ends completed, every tool once (its wall
        clock frozen: however slow the machine, the run spends none of its budget)."""
        worker = Worker(f"sqlite:///{tmp_path / 'runs.sqlite'}", server, tmp_path / "effects.log")
        done = worker.run(policy="deadline", env={"AGENTFSM_TEST_CLOCK": START})
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])["result"]
        assert result["exit_reason"] == "completed"
        assert worker.effects() == ONCE


class TestVersions:
    def test_a_changed_policy_refuses_to_launch_over_pending_runs(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """Runs recorded under another policy are never silently left unrecovered."""
        worker = Worker(f"sqlite:///{tmp_path / 'runs.sqlite'}", server, tmp_path / "effects.log")
        killed(worker, "ask_human:1:exit")
        changed = worker.run(policy="changed")
        assert changed.returncode == 0, changed.stderr[-3000:]
        error = json.loads(changed.stdout.strip().splitlines()[-1])["launch_error"]
        assert error.startswith("StrandedRunsError")
        assert "run-1" in error
        assert worker.effects() == Counter({"search a": 1, "slow_search b": 1, "search c": 1})


@pytest.mark.postgres
class TestPostgres:
    def test_a_killed_run_on_postgresql_finishes_as_if_never_killed(
        self, server: ScriptedServer, tmp_path: Path, uninterrupted: tuple[dict[str, Any], int]
    ) -> None:
        """The same code on PostgreSQL: killed at every point, the run ends as uninterrupted."""
        dsn = postgres_dsn().rstrip("/")
        database = f"{dsn.rsplit('/', 1)[0]}/afsm_{uuid.uuid4().hex[:10]}"
        worker = Worker(database, server, tmp_path / "effects.log")
        for point in EXIT_FIRST:
            killed(worker, point)
        check_same(finished(worker), worker, uninterrupted)
