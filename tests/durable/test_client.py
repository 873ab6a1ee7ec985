"""The client role and upgrades: front ends that run nothing, and two versions side by side.

A `Client` process declares no agent and imports no model library: it starts a run,
sees it ask, answers, and reads the result, while a worker process runs it. During an
upgrade, a new-version worker launched with `other_versions="leave"` takes the new
runs, and the old run waiting for a human finishes on an old-version worker.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfsm.durable import Client
from agentfsm.exceptions import DataError, DefinitionError, InvalidInputError, RunError
from agentfsm.testing import ScriptedServer
from tests.durable.conftest import ROOT, Forked, Worker, database
from tests.durable.test_kill import ONCE
from tests.strategies import Raising, RaisingMapping, hostile_values


def ready(process: Forked) -> None:
    """Wait until a client-mode worker says it launched."""
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != "ready":
        _, err = process.communicate(timeout=60)
        pytest.fail(f"the worker did not launch: {line!r} {err[-3000:]}")


def printed(process: Forked) -> dict[str, Any]:
    """What a background worker printed last, once it ended."""
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err[-3000:]
    output: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return output


def client(db: str, run_id: str) -> dict[str, Any]:
    """Run tests/durable/client.py: start, answer and read `run_id`; what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.durable.client", db, run_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return output


def served_by_a_worker(kind: str, server: ScriptedServer, tmp_path: Path) -> None:
    """A client starts and answers the run; a worker runs it; the client reads its result."""
    worker = Worker(database(kind, tmp_path), server, tmp_path / "effects.log")
    process = worker.spawn(env={"AGENTFSM_TEST_CLIENT": "1", "AGENTFSM_TEST_WAIT": "200"})
    ready(process)
    seen = client(worker.db, "run-1")
    ran = printed(process)
    assert seen["started"] == ["run-1", "run-1"]
    assert seen["asked"]["tool_calls"][0]["name"] == "write_file"
    assert seen["pending"]["run-1"] == ran["version"]
    assert seen["result"]["exit_reason"] == "completed"
    assert seen["result"]["text"] == "all done"
    assert seen["late_reply"] == "InvalidInputError"
    assert seen["seen"][-2:] == ["waiting_for_human", "done"]
    assert seen["litellm"] is False
    assert seen["ghost"].startswith("RunError: durable run")
    assert "no durable agent named 'ghost'" in seen["ghost"]
    assert ran["result"]["decisions"] == seen["result"]["decisions"]
    assert worker.effects() == ONCE


class TestClient:
    def test_a_client_starts_answers_and_reads_a_run_a_worker_runs(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """The client process runs nothing (no model library), the worker runs each tool once."""
        served_by_a_worker("sqlite", server, tmp_path)

    def test_a_run_queued_while_no_worker_is_up_runs_when_one_launches(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """A queued run has no version yet: a launching worker takes it instead of refusing."""
        worker = Worker(database("sqlite", tmp_path), server, tmp_path / "effects.log")
        code = (
            "import sys\nfrom agentfsm import durable\ndurable.launch([], database_url=sys.argv[1])"
        )
        created = subprocess.run(
            [sys.executable, "-c", code, worker.db],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert created.returncode == 0, created.stderr[-3000:]
        with Client(worker.db) as c:
            c.start("killable", "Find a, then b and c, then write x.", run_id="run-1")
            assert c.status("run-1") == "queued"
            assert c.pending() == {"run-1": ""}
        done = worker.run()
        output = json.loads(done.stdout.strip().splitlines()[-1])
        assert output["result"]["exit_reason"] == "completed", output
        assert worker.effects() == ONCE

    @pytest.mark.parametrize(
        ("args", "error"),
        [
            (("",), DefinitionError),
            ((None,), DefinitionError),
            (("sqlite:///x.sqlite",), None),
        ],
    )
    def test_the_database_url_is_checked(
        self, args: tuple[Any, ...], error: type[Exception] | None, tmp_path: Path
    ) -> None:
        """A missing URL is a DefinitionError, a database no worker created a RunError."""
        url = f"sqlite:///{tmp_path / 'none.sqlite'}" if error is None else args[0]
        with pytest.raises(error or RunError), Client(url) as c:
            c.status("run-1")

    def test_arguments_are_checked_before_the_database(self, tmp_path: Path) -> None:
        """Bad agent names, messages, ids, answers and timeouts are InvalidInputErrors."""
        with Client(f"sqlite:///{tmp_path / 'x.sqlite'}") as c:
            for call in (
                lambda: c.start("", "hi"),
                lambda: c.start(3, "hi"),  # type: ignore[arg-type]
                lambda: c.start("a", 3),  # type: ignore[arg-type]
                lambda: c.start("a", ["hi"]),  # type: ignore[list-item]
                lambda: c.start("a", "hi", run_id=""),
                lambda: c.status(""),
                lambda: c.asked(None),  # type: ignore[arg-type]
                lambda: c.reply("r", approved="yes"),  # type: ignore[arg-type]
                lambda: c.reply("r", approved=True, message=3),  # type: ignore[arg-type]
                lambda: c.result("r", timeout=-1),
            ):
                with pytest.raises(InvalidInputError):
                    call()


_odd = hostile_values()
_IDS = _odd | st.just("run-1")


class TestClientArguments:
    """Client and its methods with any value: an AgentFSMError, never DBOS's or Python's."""

    @settings(deadline=None)
    @given(database_url=_odd, name=_odd | st.just("agentfsm"))
    @example(database_url="\ud800", name="agentfsm")
    @example(database_url="sqlite:///", name="agentfsm")
    @example(database_url=Raising(), name=Raising())
    def test_client_of_any_database(self, database_url: Any, name: Any) -> None:
        """A URL that is no str is a DefinitionError; a str no database answers, a RunError."""
        with contextlib.suppress(DefinitionError, RunError):
            Client(database_url, name=name).close()

    @settings(deadline=None)
    @given(
        agent=_odd | st.just("support"),
        messages=_odd | st.just("hi"),
        run_id=_IDS | st.none(),
        approved=_odd | st.booleans(),
        message=_odd | st.none(),
        timeout=_odd | st.none(),
    )
    @example(
        agent="support",
        messages=[RaisingMapping()],
        run_id=None,
        approved=True,
        message=None,
        timeout=None,
    )
    @example(
        agent="support",
        messages=[{1: "a"}],
        run_id=None,
        approved=True,
        message=None,
        timeout=None,
    )
    @example(
        agent="support",
        messages=b"hi",
        run_id="\ud800",
        approved=Raising(),
        message=Raising(),
        timeout=float("inf"),
    )
    def test_methods_of_any_value(
        self,
        agent: Any,
        messages: Any,
        run_id: Any,
        approved: Any,
        message: Any,
        timeout: Any,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> None:
        """On a database no worker created, each call names a bad argument (InvalidInputError,
        or DataError for a message the database cannot store) or, given good ones, says the
        database has no runs (RunError): nothing else."""
        db = f"sqlite:///{tmp_path_factory.getbasetemp() / 'no-worker.sqlite'}"
        with Client(db) as c:
            for ask in (
                lambda: c.start(agent, messages, run_id=run_id),
                lambda: c.status(run_id),
                lambda: c.asked(run_id),
                lambda: c.reply(run_id, approved, message),
                lambda: c.result(run_id, timeout=timeout),
            ):
                with pytest.raises((InvalidInputError, DataError, RunError)):
                    ask()
            with pytest.raises(InvalidInputError, match="messages must be a str or a list"):
                c.start("support", [{1: "a"}])  # type: ignore[dict-item]


@pytest.mark.postgres
class TestClientOnPostgres:
    def test_a_client_starts_answers_and_reads_a_run_a_worker_runs(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """The same client and worker on PostgreSQL."""
        served_by_a_worker("postgres", server, tmp_path)


class TestUpgrade:
    def test_old_runs_finish_on_old_workers_while_new_ones_take_new_runs(
        self, server: ScriptedServer, tmp_path: Path
    ) -> None:
        """A run paused under v1 blocks a default v2 launch (saying what to do); with
        other_versions='leave' v2 runs the client's new run and v1 finishes its own."""
        old = Worker(database("sqlite", tmp_path), server, tmp_path / "effects.log", "run-old")
        paused = old.run("ask_human:1:sigkill", env={"AGENTFSM_TEST_EXECUTOR": "old"})
        assert paused.returncode == -9, paused.stderr[-3000:]
        new = Worker(old.db, server, old.log, "run-new")
        refused = new.run(policy="changed", env={"AGENTFSM_TEST_EXECUTOR": "new"})
        error = json.loads(refused.stdout.strip().splitlines()[-1])["launch_error"]
        assert error.startswith("StrandedRunsError: 1 pending run(s)")
        assert "other_versions='leave'" in error
        assert "run-old" in error
        leave = {"AGENTFSM_TEST_OTHER_VERSIONS": "leave", "AGENTFSM_TEST_WAIT": "200"}
        v2 = new.spawn(
            policy="changed",
            env={**leave, "AGENTFSM_TEST_EXECUTOR": "new", "AGENTFSM_TEST_CLIENT": "1"},
        )
        ready(v2)
        v1 = old.spawn(env={**leave, "AGENTFSM_TEST_EXECUTOR": "old"})
        seen = client(old.db, "run-new")
        on_v2, on_v1 = printed(v2), printed(v1)
        assert on_v1["version"] != on_v2["version"]
        assert seen["pending"]["run-new"] == on_v2["version"]
        assert seen["pending"].get("run-old", on_v1["version"]) == on_v1["version"]
        assert seen["result"]["exit_reason"] == "completed"
        assert on_v1["result"]["exit_reason"] == "completed"
        assert old.effects() == Counter({k: 2 for k in ONCE})
