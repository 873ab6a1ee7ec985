"""Once means once: a tool killed mid-flight is re-run only when it is declared idempotent.

Each test kills a real worker process with SIGKILL at one point of a call's life
(before its start is recorded, after that and before its side effect, inside
the tool after the effect, after the tool and before its result is recorded,
after the result), then recovers the run in a new worker. The tools append to
a side-effect log each time they really run: `transfer` (at most once) must
never appear twice, and `charge` (idempotent) may, always with the same key.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentfsm.durable import INTERRUPTED
from agentfsm.testing import ScriptedServer
from tests.durable.conftest import Worker, database

CHARGE = "charge 100 run-1:1:c1"
"""The idempotent call's effect: its key is the run, the turn and the call id."""
TRANSFER = "transfer 100"
OK = "transfer(100) ok"
CUT = INTERRUPTED.format(name="transfer")

POINTS = [
    # (kill points, one worker each; what really ran; what the model read for the transfer)
    pytest.param(
        ("in:charge:before:sigkill", "sql:started:t1:sigkill"),
        Counter({CHARGE: 1, TRANSFER: 1}),
        OK,
        id="before-the-start-is-recorded",
    ),
    pytest.param(
        ("in:charge:after:sigkill", "in:transfer:before:sigkill"),
        Counter({CHARGE: 2}),
        CUT,
        id="after-the-start-before-the-effect",
    ),
    pytest.param(
        ("sql:tool:c1:sigkill", "in:transfer:after:sigkill"),
        Counter({CHARGE: 2, TRANSFER: 1}),
        CUT,
        id="inside-the-tool-after-the-effect",
    ),
    pytest.param(
        ("tool:1:sigkill", "sql:tool:t1:sigkill"),
        Counter({CHARGE: 1, TRANSFER: 1}),
        CUT,
        id="after-the-tool-before-its-result-is-recorded",
    ),
    pytest.param(("tool:2:sigkill",), Counter({CHARGE: 1, TRANSFER: 1}), OK, id="after-the-result"),
]

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""The databases a run is recorded in; PostgreSQL only where a server is given (CI)."""


def recovered(worker: Worker, points: tuple[str, ...]) -> dict[str, Any]:
    """Kill a worker at each point in turn, then let one finish the run; its result."""
    for point in points:
        died = worker.run(point)
        assert died.returncode == -9, (point, died.returncode, died.stderr[-3000:])
    done = worker.run()
    assert done.returncode == 0, done.stderr[-3000:]
    output = json.loads(done.stdout.strip().splitlines()[-1])
    assert "result" in output, output
    result: dict[str, Any] = output["result"]
    assert result["exit_reason"] == "completed"
    return result


def read(result: dict[str, Any], call_id: str) -> Any:
    """What the model read as the result of `call_id`."""
    (content,) = [
        m["content"]
        for m in result["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    ]
    return content


class TestAtMostOnce:
    @pytest.mark.parametrize(("points", "effects", "transfer"), POINTS)
    @pytest.mark.parametrize("kind", KINDS)
    def test_a_killed_call_runs_again_only_when_idempotent(
        self,
        kind: str,
        points: tuple[str, ...],
        effects: Counter[str],
        transfer: str,
        transfer_server: ScriptedServer,
        tmp_path: Path,
    ) -> None:
        """SIGKILL at each point of a call's life, on SQLite and on PostgreSQL: transfer never
        twice, charge by one key."""
        worker = Worker(database(kind, tmp_path), transfer_server, tmp_path / "effects.log")
        result = recovered(worker, points)
        assert worker.effects() == effects
        assert read(result, "t1") == transfer
        assert read(result, "c1") == "charge(100 run-1:1:c1) ok"

    def test_the_interrupted_result_says_the_effect_is_unknown(self) -> None:
        """The model is told the call may or may not have taken effect, and was not re-run."""
        assert "may or may not have taken effect" in CUT
        assert "not run again" in CUT


class TestPermission:
    def test_a_call_the_controller_does_not_clear_never_runs(
        self, transfer_server: ScriptedServer, tmp_path: Path
    ) -> None:
        """The durable path asks may_run before each tool: a refused call gets an error result."""
        worker = Worker(database("sqlite", tmp_path), transfer_server, tmp_path / "effects.log")
        done = worker.run(env={"AGENTFSM_TEST_NOT_CLEARED": "t1"})
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])["result"]
        assert worker.effects() == Counter({CHARGE: 1})
        assert read(result, "t1").startswith("not run: the controller did not clear call 't1'")
