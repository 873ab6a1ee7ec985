"""Fixtures for the durable tests: a scripted model server and worker processes."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
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
        """Run one worker process to its end (or its kill point).

        The process is forked from `FORKSERVER`, which has imported the worker's modules
        once, instead of started as `command()`: the same code in its own process, with its
        own exit code (3 after os._exit, -9 after SIGKILL), stdout and stderr, minus the
        seconds of imports each new interpreter would spend before ~50 ms of work.
        """
        args = self.command(*kills)
        with tempfile.TemporaryDirectory(prefix="afsm-worker-") as streams:
            out, err = Path(streams, "stdout"), Path(streams, "stderr")
            process = FORKSERVER.Process(
                target=worker_main,
                args=(args[3:], self.environment(policy, env), str(ROOT), str(out), str(err)),
            )
            process.start()
            process.join(timeout)
            if process.exitcode is None:
                process.kill()
                process.join()
                raise subprocess.TimeoutExpired(args, timeout)
            return subprocess.CompletedProcess(
                args,
                process.exitcode,
                out.read_text(encoding="utf-8") if out.exists() else "",
                err.read_text(encoding="utf-8") if err.exists() else "",
            )

    def spawn(
        self, *, policy: str = "same", env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start a worker process in the background (the caller waits for it)."""
        return subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.environment(policy, env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

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
