"""Profile the Controller host loop of the bench with cProfile, to see what a step costs.

    python bench/profile_controller.py [--n 500] [--variant turn|openai] [--top 30]

Prints the functions by internal time and by cumulative time, per step.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

from impl_agentfsm_controller import builders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--variant", default="turn")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    run = builders()[args.variant](args.n)
    run()  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.runs):
        run()
    profiler.disable()
    print(f"{args.runs} runs x {args.n} steps; times are totals over all of them")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
