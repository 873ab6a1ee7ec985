"""Where a Controller step goes: a split timing, then a cProfile of the bench's host loop.

    python bench/profile_controller.py [--n 500] [--variant turn|openai|observed] [--top 30]

The split times, without a profiler, the parts of one run: making the Controller,
each `on_model_output`, building the ToolResults, each `on_tool_results`. The
profile then says which functions inside agentfsm those microseconds go to.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from typing import Any

from _harness import echo
from impl_agentfsm_controller import _turns, builders


def split(af: Any, n: int, runs: int) -> dict[str, float]:
    """Median microseconds of each part of a run, per call (the host loop of the bench)."""
    parts: dict[str, list[float]] = {"Controller(...)": [], "on_model_output": []}
    parts |= {"ToolResult(...) by the host": [], "on_tool_results": []}
    script = _turns(af, n)
    clock = time.perf_counter
    for _ in range(runs):
        t = clock()
        ctl = af.Controller(af.Policy(max_turns=n + 5), tools=["echo"])
        parts["Controller(...)"].append(clock() - t)
        for turn in script:
            t = clock()
            d = ctl.on_model_output(turn)
            parts["on_model_output"].append(clock() - t)
            if d.action != af.Action.EXECUTE_TOOLS:
                break
            t = clock()
            results = [af.ToolResult(call_id=c.id, content=echo(c.arguments)) for c in d.tool_calls]
            parts["ToolResult(...) by the host"].append(clock() - t)
            t = clock()
            ctl.on_tool_results(results)
            parts["on_tool_results"].append(clock() - t)
    return {name: statistics.median(times) * 1e6 for name, times in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--variant", default="turn")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    import agentfsm as af

    print(f"split, median µs per call over {args.runs} runs of N={args.n}:")
    for name, us in split(af, args.n, args.runs).items():
        print(f"  {name:28} {us:8.2f}")
    run = builders()[args.variant](args.n)
    run()  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.runs):
        run()
    profiler.disable()
    print(f"\ncProfile of {args.runs} runs x {args.n} steps ({args.variant}); totals over all:")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
