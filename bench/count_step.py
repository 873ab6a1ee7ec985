"""Instructions per Controller step, counted by valgrind's cachegrind (load does not move them).

    python bench/count_step.py [--variants turn,openai,declared] [--n 100]

A step is one tool round of the bench's host loop (bench/impl_agentfsm_controller.py):
`on_model_output`, the host's `ToolResult`s, `on_tool_results`. Each variant is run
under cachegrind twice in fresh interpreters, once with 2 runs of N steps and once with
6; the difference holds only the 4 x N extra steps, so imports, start-up and the first
run's warm-up cancel out:

    per step = (I(6 runs) - I(2 runs)) / (4 * N)

Needs `valgrind` on PATH (Debian: `apt-get install valgrind`). Prints one line per variant
and, with `--markdown`, a table for bench/RESULTS-step.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from _harness import cachegrind

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

_PROGRAM = """
import sys
sys.path[:0] = [{bench!r}, {repo!r}]
from impl_agentfsm_controller import builders
run = builders()[{variant!r}]({n})
for _ in range({runs}):
    run()
"""


def instructions(variant: str, n: int, runs: int) -> int:
    """Instructions cachegrind counts for a fresh interpreter doing `runs` runs of N steps."""
    program = _PROGRAM.format(bench=str(BENCH), repo=str(REPO), variant=variant, n=n, runs=runs)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONHASHSEED": "0"}
    return cachegrind([sys.executable, "-c", program], env=env)


def per_step(variant: str, n: int) -> float:
    """Instructions of one step of `variant`: the difference of 6 and 2 runs, over 4 x N."""
    return (instructions(variant, n, 6) - instructions(variant, n, 2)) / (4 * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="turn,openai,declared")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("count_step.py needs valgrind on PATH (apt-get install valgrind)")
    counts = {v: per_step(v, args.n) for v in args.variants.split(",")}
    if args.markdown:
        print("| variant | instructions per step |\n|---|---:|")
        for variant, count in counts.items():
            print(f"| {variant} | {count:,.0f} |")
    else:
        for variant, count in counts.items():
            print(f"{variant:10} {count:12,.0f} instructions per step (N={args.n})")


if __name__ == "__main__":
    main()
