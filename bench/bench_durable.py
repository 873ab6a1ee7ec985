"""Durable runs at scale: N runs paused for a human, a restart, and every run resumed.

    python bench/bench_durable.py [N] [--postgres DSN]

Phase 1 (one process): start N runs on SQLite (and on PostgreSQL when a DSN is
given); each asks a human before its only tool call. Measured: runs/s until all
are paused, the RSS a paused run costs, and the threads alive (a paused run
must hold none). The process then dies without shutting down (os._exit).
Phase 2 (a new process on the same database): recovery, a reply to every run,
and every run must end COMPLETED with its tool's result in its messages.
Figures go to bench/RESULTS-durable.md.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentfsm import Policy, durable  # noqa: E402
from agentfsm.testing import ScriptedServer  # noqa: E402
from agentfsm.testing.scripted import Reply, call, say, tool_calls  # noqa: E402


def approve(ticket: str) -> str:
    """Approve a ticket (needs a human)."""
    return f"approved {ticket}"


def script(body: Mapping[str, Any]) -> Reply:
    """Ask to approve the ticket named in the user message, then answer."""
    messages = body.get("messages") or []
    if any(m.get("role") == "tool" for m in messages):
        return say("done")
    return tool_calls(call("approve", {"ticket": str(messages[0]["content"])}, id="a1"))


def rss_kib() -> int:
    """Resident memory now, in KiB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def wait_all(ids: list[str], want: str, limit: float) -> None:
    """Poll until every run is `want`; runs already seen there are not asked again."""
    from dbos import DBOS

    deadline = time.monotonic() + limit
    left = list(ids)
    while left:
        if want == "done":  # one query for all, instead of one per run
            ended = DBOS.list_workflows(
                workflow_ids=left, status="SUCCESS", load_input=False, load_output=False
            )
            gone = {w.workflow_id for w in ended}
            left = [i for i in left if i not in gone]
        else:
            left = [i for i in left if durable.status(i) != want]
        if left and time.monotonic() > deadline:
            raise SystemExit(f"{len(left)} runs never reached {want}")
        if left:
            time.sleep(1.0)


def phase(kind: str, db: str, api_base: str, n: int) -> dict[str, Any]:
    agent = durable.DurableAgent(
        "bench",
        "openai/scripted",
        tools=[approve],
        policy=Policy(permissions={"approve": "ask"}),
        api_base=api_base,
        api_key="sk-local",
    )
    durable.launch([agent], database_url=db)
    ids = [f"bench-{i}" for i in range(n)]
    if kind == "pause":
        before, threads_before = rss_kib(), threading.active_count()
        started = time.perf_counter()
        for i in ids:
            durable.start("bench", i, run_id=i)
        wait_all(ids, "waiting_for_human", 1800)
        took = time.perf_counter() - started
        return {
            "runs_per_s": n / took,
            "seconds": took,
            "rss_per_paused_kib": (rss_kib() - before) / n,
            "threads_before": threads_before,
            "threads_paused": threading.active_count(),
        }
    started = time.perf_counter()
    wait_all(ids, "waiting_for_human", 1800)
    recovered = time.perf_counter() - started
    for i in ids:
        durable.reply(i, approved=True)
    wait_all(ids, "done", 1800)
    took = time.perf_counter() - started
    bad = []
    for i in ids:
        result = durable.result(i)
        tool = [m["content"] for m in result.messages if m.get("role") == "tool"]
        if result.exit_reason != "completed" or tool != [f"approved {i}"]:
            bad.append(i)
    return {"runs_per_s": n / took, "seconds": took, "recovery_s": recovered, "wrong": len(bad)}


def child(kind: str, db: str, api_base: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", kind, db, api_base, str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"phase {kind} failed:\n{out.stderr[-4000:]}")
    return dict(json.loads(lines[-1]))


def bench(db: str, n: int) -> dict[str, Any]:
    with ScriptedServer([script] * (2 * n + 10)) as server:
        paused = child("pause", db, server.openai_base, n)
        resumed = child("resume", db, server.openai_base, n)
        return {"pause": paused, "resume": resumed, "model_calls": len(server.requests)}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--phase"]:
        kind, db, api_base, n = argv[1], argv[2], argv[3], int(argv[4])
        figures = phase(kind, db, api_base, n)
        print(json.dumps(figures), flush=True)
        os._exit(0)  # no shutdown: the next phase is a restart after a crash
    n = int(argv[0]) if argv and argv[0].isdigit() else 1000
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["SQLite"] = bench(f"sqlite:///{tmp}/runs.sqlite", n)
    if "--postgres" in argv:
        dsn = argv[argv.index("--postgres") + 1].rstrip("/")
        database = f"{dsn.rsplit('/', 1)[0]}/afsm_bench_{uuid.uuid4().hex[:8]}"
        results["PostgreSQL"] = bench(database, n)
    write(results, n)


def write(results: dict[str, Any], n: int) -> None:
    lines = [
        "# Durable runs: many sessions paused for a human",
        "",
        (
            f"`python bench/bench_durable.py {n} [--postgres DSN]` on {platform.machine()}, "
            f"Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other work; "
            "model: agentfsm.testing.ScriptedServer on 127.0.0.1 through litellm."
        ),
        "",
        (
            f"{n} runs each ask a human before their one tool call. Phase 1 starts them and "
            "waits until all are paused, then the process dies (`os._exit`). Phase 2 is a new "
            "process on the same database: DBOS recovers the runs, each gets a reply, and each "
            "must end COMPLETED with its own tool result."
        ),
        "",
        (
            "| database | start→paused runs/s | RSS per paused run "
            "| threads before / with all paused | restart→all done runs/s | recovery (s) "
            "| wrong results | model calls |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        p, s = r["pause"], r["resume"]
        lines.append(
            f"| {name} | {p['runs_per_s']:.1f} | {p['rss_per_paused_kib']:.1f} KiB "
            f"| {p['threads_before']} / {p['threads_paused']} | {s['runs_per_s']:.1f} "
            f"| {s['recovery_s']:.1f} | {s['wrong']} | {r['model_calls']} |"
        )
    lines += [
        "",
        (
            "A paused run is a coroutine waiting in `DBOS.recv_async` on DBOS's event loop: the "
            "thread count does not grow with the number of paused runs."
        ),
        "",
    ]
    (HERE / "RESULTS-durable.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
