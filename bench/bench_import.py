"""Import time of agentfsm and the peers, each measured in fresh interpreters.

`python bench/bench_import.py` prints the median `import agentfsm` time against
its 150 ms target; `python bench/bench_import.py "import langgraph.graph"` times
any statement instead. `bench/run.py` uses `import_times` for its table.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_MS = 150.0

_PROBE = (
    "import time\nt = time.perf_counter()\n{statement}\nprint((time.perf_counter() - t) * 1000)\n"
)


def child_env() -> dict[str, str]:
    """The environment of every child: the working tree's agentfsm first on the path.

    litellm reads its price map from the package, not the network (see DESIGN.md).
    """
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def import_times(statement: str, runs: int = 7) -> list[float] | None:
    """Milliseconds `statement` takes in `runs` fresh interpreters, or None if it fails.

    One untimed run comes first so that bytecode caches are written.
    """
    probe = [sys.executable, "-c", _PROBE.format(statement=statement)]
    times = []
    for i in range(runs + 1):
        done = subprocess.run(probe, capture_output=True, text=True, env=child_env(), check=False)
        if done.returncode != 0:
            return None
        if i:
            times.append(float(done.stdout.strip().splitlines()[-1]))
    return times


def main() -> int:
    statements = sys.argv[1:] or ["import agentfsm"]
    failed = False
    for statement in statements:
        times = import_times(statement)
        if times is None:
            print(f"{statement}: failed")
            failed = True
            continue
        median = statistics.median(times)
        line = f"{statement}: median {median:.1f} ms (min {min(times):.1f}, max {max(times):.1f})"
        if statement == "import agentfsm":
            line += f"; target <= {TARGET_MS:.0f} ms: {'met' if median <= TARGET_MS else 'MISSED'}"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
