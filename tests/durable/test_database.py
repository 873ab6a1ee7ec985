"""The durable database is data: an edited row is a CheckpointError naming the run, never code.

A hostile pickle (its `__reduce__` creates a marker file when unpickled) is written
into the SQLite database where a step output, a run's input or a run's result
lives, labelled as DBOS labels its pickles (or as agentfsm's JSON); a new worker
then recovers or reads the run. The marker must never appear.
"""

from __future__ import annotations

import base64
import json
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentfsm.durable._serializer import FORMAT
from agentfsm.testing import ScriptedServer
from tests.durable.conftest import Worker

RUN = "run-1"
LABEL_PICKLE = (
    "UPDATE workflow_status SET serialization = 'py_pickle' WHERE workflow_uuid = 'run-1'"
)
"""A run's input and result are read with the format its status row names."""


class Hostile:
    """Unpickling it opens (so creates) the marker file: code run from the database."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def hostile(marker: Path) -> str:
    """The pickle as DBOS stores its pickles: base64 text."""
    return base64.b64encode(pickle.dumps(Hostile(marker))).decode()


def edit(db: Path, sql: str, *params: Any) -> None:
    """Change the database as someone with write access to the file would."""
    with sqlite3.connect(db) as conn:
        changed = conn.execute(sql, params).rowcount
    assert changed == 1, sql


def refused(worker: Worker, marker: Path) -> None:
    """A worker recovers or reads the run: CheckpointError naming it, and no code ran."""
    done = worker.run()
    assert done.returncode == 0, done.stderr[-3000:]
    output = json.loads(done.stdout.strip().splitlines()[-1])
    assert output["error"].startswith("CheckpointError: durable run 'run-1' cannot be read"), output
    assert not marker.exists()


def setup(server: ScriptedServer, tmp_path: Path) -> tuple[Worker, Path, Path]:
    """A worker on a SQLite file, the file, and where the payload would leave its marker."""
    db = tmp_path / "runs.sqlite"
    return Worker(f"sqlite:///{db}", server, tmp_path / "effects.log"), db, tmp_path / "marker"


class TestHostilePickle:
    def test_the_payload_runs_code_when_unpickled(self, tmp_path: Path) -> None:
        """The payload is live: plain pickle creates the marker (so its absence means something)."""
        proof = tmp_path / "proof"
        pickle.loads(base64.b64decode(hostile(proof))).close()
        assert proof.exists()

    @pytest.mark.parametrize("label", ["py_pickle", FORMAT, None])
    def test_a_step_output_replayed_on_recovery(
        self, label: str | None, transfer_server: ScriptedServer, tmp_path: Path
    ) -> None:
        """A recorded tool output edited into a pickle fails the recovery, naming the run."""
        worker, db, marker = setup(transfer_server, tmp_path)
        died = worker.run("tool:1:sigkill")
        assert died.returncode == -9, died.stderr[-3000:]
        edit(
            db,
            "UPDATE operation_outputs SET output = ?, serialization = ? "
            "WHERE workflow_uuid = 'run-1' AND function_name = 'agentfsm.durable.tool'",
            hostile(marker),
            label,
        )
        refused(worker, marker)

    def test_a_run_input_read_on_recovery(
        self, transfer_server: ScriptedServer, tmp_path: Path
    ) -> None:
        """A pending run's input edited into a pickle fails the recovery, naming the run."""
        worker, db, marker = setup(transfer_server, tmp_path)
        died = worker.run("model:1:sigkill")
        assert died.returncode == -9, died.stderr[-3000:]
        edit(
            db,
            "UPDATE workflow_input SET inputs = ? WHERE workflow_uuid = 'run-1'",
            hostile(marker),
        )
        edit(
            db,
            "UPDATE workflow_status SET serialization = 'py_pickle' WHERE workflow_uuid = 'run-1'",
        )
        refused(worker, marker)

    def test_a_finished_run_result(self, transfer_server: ScriptedServer, tmp_path: Path) -> None:
        """A finished run's result edited into a pickle is refused when read, naming the run."""
        worker, db, marker = setup(transfer_server, tmp_path)
        done = worker.run()
        assert done.returncode == 0, done.stderr[-3000:]
        edit(
            db,
            "UPDATE workflow_output SET output = ? WHERE workflow_uuid = 'run-1'",
            hostile(marker),
        )
        edit(
            db,
            "UPDATE workflow_status SET serialization = 'py_pickle' WHERE workflow_uuid = 'run-1'",
        )
        refused(worker, marker)
