"""Durable runs at scale: N runs paused for a human, a restart, and every run resumed.

    python bench/bench_durable.py [N] [--postgres DSN]

Phase 1 (one process): start N runs on SQLite (and on PostgreSQL when a DSN is
given); each asks a human before its only tool call. Measured: runs/s until all
are paused, the RSS a paused run costs, and the threads alive (a paused run
must hold none). The process then dies without shutting down (os._exit).
Phase 2 (a new process on the same database): recovery, a reply to every run,
and every run must end COMPLETED with its tool's result in its messages.
Figures go to bench/RESULTS-durable.md.

    python bench/bench_durable.py --workers [N] [--postgres DSN]

Workers and a client: 1, then 2, worker processes (`launch` with their own executor
ids) serve one database; a `durable.Client` in this process starts N runs, waits until
all are paused at their question, answers all, and waits until all are done. Measured:
runs/s started (queued by the client), paused and completed, and which worker ran each
run. With py-spy installed (`pip install py-spy`, a bench tool, not a dependency) the
single worker is sampled (`py-spy record --format raw`, idle threads left out) and the
samples are split by the package of the innermost frame. The section "Workers and a
client" of bench/RESULTS-durable.md is replaced.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
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
        durable.reply(i, approved=True, question=(durable.asked(i) or {}).get("question"))
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


def bench_agent(api_base: str) -> durable.DurableAgent:
    """The agent every process of the bench declares."""
    return durable.DurableAgent(
        "bench",
        "openai/scripted",
        tools=[approve],
        policy=Policy(permissions={"approve": "ask"}),
        api_base=api_base,
        api_key="sk-local",
    )


def serve(db: str, api_base: str, executor: str) -> None:
    """A worker: launch, say so, and run the queued runs until stdin closes."""
    durable.launch([bench_agent(api_base)], database_url=db, executor_id=executor)
    print("ready", flush=True)
    sys.stdin.read()
    durable.shutdown()
    os._exit(0)


def wait_client(client: durable.Client, ids: list[str], want: str, limit: float) -> float:
    """Poll until every run is `want` (runs seen there are not asked again); the time taken."""
    started = time.perf_counter()
    left = list(ids)
    while left:
        left = [i for i in left if client.status(i) != want]
        if left and time.perf_counter() - started > limit:
            raise SystemExit(f"{len(left)} runs never reached {want}")
        if left:
            time.sleep(0.2)
    return time.perf_counter() - started


BUCKETS = (
    ("agentfsm", "agentfsm/"),
    ("DBOS", "dbos/"),
    ("SQLAlchemy", "sqlalchemy/"),
    ("psycopg", "psycopg"),
    ("sqlite3", "sqlite3/"),
    ("litellm", "litellm/"),
    ("HTTP client (httpx, httpcore, openai, aiohttp)", "httpx/|httpcore/|openai/|aiohttp/"),
    ("pydantic", "pydantic"),
    ("asyncio, threads, selectors", "asyncio/|selectors.py|threading.py|concurrent/"),
    ("json", "json/"),
)


def bucket_of(frame: str) -> str:
    """The package of a py-spy frame `function (path/file.py:line)`."""
    path = frame[frame.rfind("(") + 1 :]
    for name, marks in BUCKETS:
        if any(path.startswith(m) or f"/{m}" in path for m in marks.split("|")):
            return name
    return "other (stdlib, logging, ...)"


def where_time_goes(raw: Path) -> dict[str, float]:
    """Share of py-spy's samples by the package of the innermost frame."""
    counts: Counter[str] = Counter()
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        counts[bucket_of(stack.rsplit(";", 1)[-1])] += int(count)
        if any(bucket_of(f) == "agentfsm" for f in stack.split(";")):
            counts["(any agentfsm frame on the stack)"] += int(count)
    total = sum(v for k, v in counts.items() if not k.startswith("("))
    return {k: 100 * v / total for k, v in counts.most_common()} if total else {}


def cluster(db: str, n: int, workers: int, profile: Path | None) -> dict[str, Any]:
    """N runs started by a client and run by `workers` worker processes on `db`."""
    with ScriptedServer([script] * (2 * n + 10)) as server:
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--serve", db, server.openai_base, f"w{k}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(workers)
        ]
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("a worker did not launch")
        spy = None
        if profile is not None:
            spy = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "--pid",
                    str(procs[0].pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--nonblocking",
                    "--output",
                    str(profile),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
        ids = [f"bench-{i}" for i in range(n)]
        with durable.Client(db) as client:
            t0 = time.perf_counter()
            for i in ids:
                client.start("bench", i, run_id=i)
            queued = time.perf_counter() - t0
            paused = wait_client(client, ids, "waiting_for_human", 1800) + queued
            t1 = time.perf_counter()
            for i in ids:
                client.reply(i, approved=True, question=(client.asked(i) or {}).get("question"))
            wait_client(client, ids, "done", 1800)
            done = time.perf_counter() - t1
            wrong = sum(
                1
                for i in ids
                if [m["content"] for m in client.result(i).messages if m.get("role") == "tool"]
                != [f"approved {i}"]
            )
        from dbos import DBOSClient

        from agentfsm.durable._serializer import JsonSerializer

        reader = DBOSClient(system_database_url=db, serializer=JsonSerializer())
        ran_on = Counter(
            str(w.executor_id)
            for w in reader.list_workflows(workflow_ids=ids, load_input=False, load_output=False)
        )
        reader.destroy()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=120)
        if spy is not None:
            spy.wait(timeout=120)
        return {
            "started_per_s": n / queued,
            "paused_per_s": n / paused,
            "completed_per_s": n / done,
            "wrong": wrong,
            "model_calls": len(server.requests),
            "ran_on": dict(sorted(ran_on.items())),
        }


def workers_bench(argv: list[str]) -> None:
    """The --workers mode: SQLite (and PostgreSQL), 1 and 2 workers, a profile of one."""
    n = int(argv[0]) if argv and argv[0].isdigit() else 200
    spy = shutil.which("py-spy") is not None
    rows: list[tuple[str, int, dict[str, Any]]] = []
    profiles: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        targets: list[tuple[str, Callable[[int], str]]] = [
            ("SQLite", lambda k: f"sqlite:///{tmp}/runs-{k}.sqlite")
        ]
        if "--postgres" in argv:
            dsn = argv[argv.index("--postgres") + 1].rstrip("/")
            base = dsn.rsplit("/", 1)[0]
            targets.append(("PostgreSQL", lambda k: f"{base}/afsm_bench_{uuid.uuid4().hex[:8]}"))
        for name, url in targets:
            for workers in (1, 2):
                raw = Path(tmp) / f"{name}.txt" if spy and workers == 1 else None
                figures = cluster(url(workers), n, workers, raw)
                rows.append((name, workers, figures))
                print(name, workers, figures, flush=True)
                if raw is not None and raw.exists():
                    profiles[name] = where_time_goes(raw)
    write_workers(rows, profiles, n)


def write_workers(
    rows: list[tuple[str, int, dict[str, Any]]], profiles: dict[str, dict[str, float]], n: int
) -> None:
    """Replace the "Workers and a client" section of RESULTS-durable.md."""
    lines = [
        "## Workers and a client",
        "",
        (
            f"`python bench/bench_durable.py --workers {n} --postgres DSN` on "
            f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} CPUs "
            "shared with other work (other jobs were running: figures are a floor). A "
            "`durable.Client` in the bench process starts the runs (queued), waits until all are "
            "paused at their question, answers all, and waits until all are done; worker "
            "processes (`launch(executor_id=...)`) take the runs from the queue."
        ),
        "",
        (
            "| database | workers | started runs/s (queued) | start→paused runs/s "
            "| reply→done runs/s | runs per worker | wrong | model calls |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, workers, r in rows:
        spread = ", ".join(f"{k}: {v}" for k, v in r["ran_on"].items())
        lines.append(
            f"| {name} | {workers} | {r['started_per_s']:.1f} | {r['paused_per_s']:.1f} "
            f"| {r['completed_per_s']:.1f} | {spread} | {r['wrong']} | {r['model_calls']} |"
        )
    for name, shares in profiles.items():
        lines += [
            "",
            (
                f"Where one worker's time goes on {name} (py-spy samples of busy threads, by the "
                "package of the innermost frame):"
            ),
            "",
            "| package | share of samples |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v:.1f}% |" for k, v in shares.items()]
    path = HERE / "RESULTS-durable.md"
    text = path.read_text(encoding="utf-8")
    head = text.split("## Workers and a client", 1)[0].rstrip()
    path.write_text(head + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        serve(argv[1], argv[2], argv[3])
    if argv[:1] == ["--workers"]:
        workers_bench(argv[1:])
        return
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
