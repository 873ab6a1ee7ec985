"""Timing, memory and output helpers shared by the `bench/impl_*.py` scripts.

Every implementation runs the same workload: a fake model whose turns 1..N-1 each
ask for one call `echo({"i": k})` and whose turn N answers `FINAL_TEXT`, and a
no-op tool `echo` that returns its argument. An implementation script defines one
or more builders `build(n) -> run`, where `run()` performs one whole agent run
and returns `(final_text, echo_calls)`; `main()` times it and prints one JSON
object on stdout, which `bench/run.py` collects.

Per-step cost is the wall time of one whole run divided by N. Work that a real
model would have done before answering (building the scripted replies) happens in
`build`, outside the timed region.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import re
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Coroutine
from typing import Any

FINAL_TEXT = "done"
"""What the fake model answers on its last turn."""

Run = Callable[[], tuple[str, int]]
Builder = Callable[[int], Run]


class UnavailableError(Exception):
    """The implementation cannot run here (framework missing, API not there yet)."""


def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    """Return the tool's arguments unchanged: the no-op tool of the workload."""
    return arguments


def call_args(k: int) -> dict[str, Any]:
    """Arguments of the k-th tool call."""
    return {"i": k}


def on_loop(make_coro: Callable[[], Coroutine[Any, Any, tuple[str, int]]]) -> Run:
    """Turn an async run into a sync one on a single event loop reused by every repetition."""
    loop = asyncio.new_event_loop()
    return lambda: loop.run_until_complete(make_coro())


def _timed(run: Run, n: int) -> tuple[float, float]:
    """Run once and return the per-step wall and CPU time in microseconds, checking the outcome.

    CPU time (`process_time`, all threads) is what other work on the machine inflates
    least; wall time is the figure reported first.
    """
    cpu, start = time.process_time(), time.perf_counter()
    outcome = run()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if outcome != (FINAL_TEXT, n - 1):
        raise SystemExit(f"wrong outcome {outcome!r}, expected {(FINAL_TEXT, n - 1)!r}")
    return elapsed / n * 1e6, cpu / n * 1e6


def measure(run: Run, n: int, *, warmup: int, budget: float, min_reps: int, max_reps: int) -> dict:
    """Time `run` after `warmup` runs; repeat until `budget` seconds or `max_reps` runs.

    The runs follow each other with the collector left on, as in a real process. A
    `gc.collect()` before each run would leave the caches cold and add ~200 µs to the
    run after it, which is 20 µs a step at N=10; one collection before timing is enough.
    """
    for _ in range(warmup):
        _timed(run, n)
    gc.collect()
    samples: list[float] = []
    cpu: list[float] = []
    deadline = time.perf_counter() + budget
    while len(samples) < max_reps and (len(samples) < min_reps or time.perf_counter() < deadline):
        wall, used = _timed(run, n)
        samples.append(wall)
        cpu.append(used)
    return {
        "reps": len(samples),
        "warmup": warmup,
        "min": min(samples),
        "median": statistics.median(samples),
        "max": max(samples),
        "cpu_median": statistics.median(cpu),
    }


def _maxrss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(run: Run, n: int) -> dict:
    """Peak RSS over one run in a fresh process, then the traced peak of a second run."""
    rss_setup = _maxrss_mib()
    gc.collect()
    _timed(run, n)
    rss_peak = _maxrss_mib()
    gc.collect()
    tracemalloc.start()
    run()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "rss_setup_mib": rss_setup,
        "rss_peak_mib": rss_peak,
        "traced_peak_kib": traced_peak / 1024,
    }


def _emit(record: dict) -> None:
    json.dump(record, sys.stdout)
    sys.stdout.write("\n")


def main(name: str, builders: dict[str, Builder] | Callable[[], dict[str, Builder]]) -> None:
    """Parse the command line, build the chosen variant, time or measure it, print JSON.

    `builders` may be a function returning them, so that a missing framework is
    reported as `UnavailableError` rather than failing at import.
    """
    parser = argparse.ArgumentParser(description=f"bench implementation: {name}")
    parser.add_argument("--n", type=int, required=True, help="model turns per run")
    parser.add_argument("--variant", default=None, help="which builder to run")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of timed runs")
    parser.add_argument("--min-reps", type=int, default=7)
    parser.add_argument("--max-reps", type=int, default=2000)
    parser.add_argument("--memory", action="store_true", help="measure memory, not time")
    args = parser.parse_args()
    record: dict[str, Any] = {"impl": name, "n": args.n, "variant": args.variant}
    try:
        table = builders() if callable(builders) else builders
        variant = args.variant or next(iter(table))
        record["variant"] = variant
        run = table[variant](args.n)
    except UnavailableError as exc:
        _emit({**record, "available": False, "reason": str(exc)})
        return
    if args.memory:
        record.update(memory(run, args.n))
    else:
        record.update(
            measure(
                run,
                args.n,
                warmup=args.warmup,
                budget=args.budget,
                min_reps=args.min_reps,
                max_reps=args.max_reps,
            )
        )
    _emit({**record, "available": True})


VALGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")
"""Instruction counts without cache simulation and without an output file."""


def cachegrind(command: list[str], **options: Any) -> int:
    """Instructions (`I refs`) cachegrind counts while `command` runs in a process of its own.

    `options` go to `subprocess.run` (`env`, `cwd`). Exits naming the command when it fails.
    """
    done = subprocess.run(
        [*VALGRIND, *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        **options,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"cachegrind failed for {command[:6]}:\n{done.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))
