"""Instructions of the Controller's argument copies alone, counted by valgrind's cachegrind.

    python bench/count_copies.py

`own_turn` (the host's turn and its call, copied on the way in) and `own_call` (a
decision's call, copied on the way out), each on the bench's one-call turn
(bench/impl_agentfsm_controller.py), called 12,000 and 2,000 times in fresh
interpreters; the difference over 10,000 is one call's count, start-up cancelled.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

_PROGRAM = """
import sys
sys.path[:0] = [{bench!r}, {repo!r}]
import agentfsm as af
from agentfsm._model.copies import own_call, own_turn
from impl_agentfsm_controller import _turns
turn = _turns(af, 3)[0]
work, value = (own_turn, turn) if {what!r} == "own_turn" else (own_call, turn.tool_calls[0])
for _ in range({k}):
    work(value)
"""


def instructions(what: str, k: int) -> int:
    """Instructions of a fresh interpreter making `k` copies with `what`."""
    program = _PROGRAM.format(bench=str(BENCH), repo=str(REPO), what=what, k=k)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = subprocess.run(
        [*cmd, sys.executable, "-c", program], capture_output=True, text=True, env=env, check=False
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"cachegrind failed for {what}:\n{done.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    for what in ("own_turn", "own_call"):
        per_call = (instructions(what, 12_000) - instructions(what, 2_000)) / 10_000
        print(f"{what:9} {per_call:10,.0f} instructions per call")


if __name__ == "__main__":
    main()
