"""Fixtures for the durable tests: a scripted model server and worker processes."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from tests.durable.worker import forked as worker_main

ROOT = Path(__file__).resolve().parents[2]

# litellm reads this at import, and the forkserver imports it once for every worker.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
PRELOAD = [
    "tests.durable.worker",  # agentfsm, agentfsm.durable and DBOS
    "litellm",
    # What a worker's first run imports on top: litellm's lazy imports on its first call,
    # the provider normalizers and DBOS's SQLite back end. A name missing after an upgrade
    # is skipped by the forkserver (the worker imports what it needs itself).
    "litellm.proxy._types",
    "litellm._service_logger",
    "litellm.litellm_core_utils.logging_callback_manager",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.integrations.generic_api.generic_api_callback",
    "litellm.integrations.prometheus_services",
    "agentfsm.providers",
    "dbos._sys_db_sqlite",
    "sqlalchemy.dialects.sqlite",
]
FORKSERVER = multiprocessing.get_context("forkserver")
"""Starts the worker processes: a server process that imported `PRELOAD` once (none of it
starts a thread at import, so forking that process is safe) forks one process per run."""
FORKSERVER.set_forkserver_preload(PRELOAD)
POSTGRES_ENV = "AGENTFSM_TEST_POSTGRES_DSN"


def script(body: Mapping[str, Any]) -> Reply:
    """The model: its reply depends only on how many tool results the conversation holds."""
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if answered == 0:
        return tool_calls(call("search", {"q": "a"}, id="s1"))
    if answered == 1:  # a parallel batch: the slow call finishes after the fast one
        return tool_calls(
            call("slow_search", {"q": "b"}, id="p1"), call("search", {"q": "c"}, id="p2")
        )
    if answered == 3:
        return tool_calls(call("write_file", {"path": "x"}, id="w1"))
    return say("all done")


def transfer_script(body: Mapping[str, Any]) -> Reply:
    """The model: charge (idempotent), then transfer (at most once), then answer."""
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if answered == 0:
        return tool_calls(call("charge", {"amount": 100}, id="c1"))
    if answered == 1:
        return tool_calls(call("transfer", {"amount": 100}, id="t1"))
    return say("transfer handled")


class Forked:
    """A worker process forked from `FORKSERVER`, read as a `subprocess.Popen` of `command`.

    Instead of starting `python -m tests.durable.worker ...`, which spends seconds of imports
    before ~50 ms of work, the forkserver (which imported the worker's modules once) forks a
    process that runs the same `main` with the same arguments, environment and directory.
    It is its own process all the same: its own exit code (3 after os._exit, -9 after
    SIGKILL), and its stdout and stderr are pipes read here, as `subprocess.PIPE` would be.
    """

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.args = args
        self.returncode: int | None = None
        out_read, out_write = FORKSERVER.Pipe(duplex=False)
        err_read, err_write = FORKSERVER.Pipe(duplex=False)
        self.process = FORKSERVER.Process(
            target=worker_main, args=(args[3:], env, str(ROOT), out_write, err_write)
        )
        self.process.start()
        # Only the worker holds the write ends now: the reads below end when it exits.
        out_write.close()
        err_write.close()
        self.stdout = os.fdopen(os.dup(out_read.fileno()), encoding="utf-8")
        self.stderr = os.fdopen(os.dup(err_read.fileno()), encoding="utf-8")
        out_read.close()
        err_read.close()

    def communicate(self, timeout: float) -> tuple[str, str]:
        """Wait for the process to end; what it printed on stdout and stderr."""
        texts: dict[str, str] = {}
        readers = [
            threading.Thread(target=lambda: texts.__setitem__("out", self.stdout.read())),
            threading.Thread(target=lambda: texts.__setitem__("err", self.stderr.read())),
        ]
        for reader in readers:
            reader.start()
        self.process.join(timeout)
        timed_out = self.process.exitcode is None
        if timed_out:
            self.process.kill()
            self.process.join()
        for reader in readers:
            reader.join()
        self.stdout.close()
        self.stderr.close()
        self.returncode = self.process.exitcode
        if timed_out:
            raise subprocess.TimeoutExpired(self.args, timeout, texts["out"], texts["err"])
        return texts["out"], texts["err"]


@dataclass
class Worker:
    """Runs tests/durable/worker.py against one database, model server and side-effect log."""

    db: str
    server: ScriptedServer
    log: Path
    run_id: str = "run-1"

    def command(self, *kills: str) -> list[str]:
        """The worker's command line."""
        return [
            sys.executable,
            "-m",
            "tests.durable.worker",
            self.db,
            self.server.openai_base,
            self.run_id,
            str(self.log),
            *kills,
        ]

    def environment(self, policy: str, env: Mapping[str, str] | None) -> dict[str, str]:
        """The worker's environment: its policy variant and the test's variables."""
        return {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "AGENTFSM_TEST_POLICY": policy,
            **(env or {}),
        }

    def run(
        self,
        *kills: str,
        timeout: float = 240,
        policy: str = "same",
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run one worker process to its end (or its kill point)."""
        process = Forked(self.command(*kills), self.environment(policy, env))
        out, err = process.communicate(timeout=timeout)
        assert process.returncode is not None  # communicate returns once the process ended
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def spawn(self, *, policy: str = "same", env: Mapping[str, str] | None = None) -> Forked:
        """Start a worker process in the background (the caller waits for it)."""
        return Forked(self.command(), self.environment(policy, env))

    def effects(self) -> Counter[str]:
        """How many times each tool call really ran."""
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        return Counter(lines)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 that answers from the conversation."""
    with ScriptedServer([script] * 64) as srv:
        yield srv


@pytest.fixture
def transfer_server() -> Iterator[ScriptedServer]:
    """The scripted server of `transfer_script`."""
    with ScriptedServer([transfer_script] * 64) as srv:
        yield srv


def database(kind: str, path: Path) -> str:
    """A fresh database URL: a SQLite file under `path`, or a new PostgreSQL database."""
    if kind == "sqlite":
        return f"sqlite:///{path / 'runs.sqlite'}"
    dsn = postgres_dsn().rstrip("/")
    return f"{dsn.rsplit('/', 1)[0]}/afsm_{uuid.uuid4().hex[:10]}"


def postgres_dsn() -> str:
    """The PostgreSQL DSN for the postgres tests: skipped locally without it, failed in CI."""
    dsn = os.environ.get(POSTGRES_ENV)
    if dsn:
        return dsn
    how = (
        f"set {POSTGRES_ENV}=postgresql://postgres:postgres@127.0.0.1:5432/postgres "
        "(bash .ci/run installs and starts Debian's postgresql)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests need a server in CI: {how}")
    pytest.skip(f"no PostgreSQL server: {how}")
