"""Executor overhead and concurrency, measured against the tools' own time.

Run: `python bench/bench_executor.py [--write]` from the repo root. Targets (issue 8):
- overhead beyond the tools' own time <= 50 µs per call, for a batch of 10 no-op tools;
- ten tools that each sleep 100 ms finish in <= 150 ms with the cap at 10, ~1 s with the cap at 1.
`--write` writes the figures to bench/RESULTS-executor.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentfsm._model.types import ToolCall  # noqa: E402  (needs the repo on sys.path)
from agentfsm._runner.executor import Executor, tool  # noqa: E402

BATCH = 10


@tool(effect="read")
def noop(n: int) -> str:
    """Return at once: the executor's own cost is all there is."""
    return "ok"


@tool(effect="write")
def noop_write(n: int) -> str:
    """Return at once, declared as a writer (the batch runs one call after another)."""
    return "ok"


@tool(effect="read")
async def anoop(n: int) -> str:
    """Return at once, as a coroutine."""
    return "ok"


@tool(effect="read")
def nap(n: int) -> str:
    """Sleep 100 ms."""
    time.sleep(0.1)
    return "ok"


@tool(effect="read")
async def anap(n: int) -> str:
    """Sleep 100 ms on the event loop."""
    await asyncio.sleep(0.1)
    return "ok"


def batch(name: str) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name=name, arguments={"n": i}) for i in range(BATCH)]


def median_us_per_call(fn: Callable[[], object], rounds: int) -> float:
    """Median over `rounds` batches of the batch's time per call, in µs (after a warm-up)."""
    for _ in range(20):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / BATCH * 1e6


def async_us_per_call(ex: Executor, calls: list[ToolCall], rounds: int) -> float:
    """Like `median_us_per_call`, for `arun` inside one running event loop (as a host has)."""

    async def main() -> float:
        for _ in range(20):
            await ex.arun(calls)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            await ex.arun(calls)
            times.append(time.perf_counter() - start)
        return statistics.median(times) / BATCH * 1e6

    return asyncio.run(main())


def seconds(fn: Callable[[], object], rounds: int = 5) -> float:
    """Median wall time of one batch, in seconds."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure() -> dict[str, float]:
    ex = Executor([noop, noop_write, anoop, nap, anap])
    one = Executor([nap, anap], max_concurrency=1)
    reads, writes, naps, anaps = batch("noop"), batch("noop_write"), batch("nap"), batch("anap")
    bare = median_us_per_call(lambda: [noop(**(c.arguments or {})) for c in reads], 2000)
    return {
        "bare loop, µs/call": bare,
        "sync, 10 no-op readers, µs/call": median_us_per_call(lambda: ex.run(reads), 2000) - bare,
        "sync, 10 no-op writers, µs/call": median_us_per_call(lambda: ex.run(writes), 2000) - bare,
        "async, 10 no-op async readers, µs/call": async_us_per_call(ex, batch("anoop"), 1000)
        - bare,
        "async, 10 no-op sync readers (threads), µs/call": async_us_per_call(ex, reads, 1000)
        - bare,
        "sync, 10 x 100 ms, cap 10, ms": seconds(lambda: ex.run(naps)) * 1e3,
        "sync, 10 x 100 ms, cap 1, ms": seconds(lambda: one.run(naps), 3) * 1e3,
        "async, 10 x 100 ms (async tools), cap 10, ms": seconds(lambda: asyncio.run(ex.arun(anaps)))
        * 1e3,
        "async, 10 x 100 ms (sync tools), cap 10, ms": seconds(lambda: asyncio.run(ex.arun(naps)))
        * 1e3,
    }


def report(figures: dict[str, float]) -> str:
    lines = [
        "# Executor benchmark",
        "",
        (
            "`python bench/bench_executor.py --write`; "
            f"Python {platform.python_version()}, {os.cpu_count()} CPUs (shared with other jobs)."
        ),
        "Overheads are the batch's median time per call minus a bare loop calling the same",
        "function (the tools' own time). Targets: overhead <= 50 µs/call; 10 x 100 ms <= 150 ms",
        "with the cap at 10, ~1 s with the cap at 1.",
        "",
        "| measure | figure |",
        "|---|---|",
    ]
    lines += [f"| {name} | {value:.1f} |" for name, value in figures.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS-executor.md")
    args = parser.parse_args()
    text = report(measure())
    print(text)
    if args.write:
        (ROOT / "bench" / "RESULTS-executor.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
