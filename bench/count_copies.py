"""Instructions of the Controller's argument copies alone, counted by valgrind's cachegrind.

    python bench/count_copies.py

`own_turn` (the host's turn and its call, copied on the way in) and `own_call` (a
decision's call, copied on the way out), each on the bench's one-call turn
(bench/impl_agentfsm_controller.py), called 12,000 and 2,000 times in fresh
interpreters; the difference over 10,000 is one call's count, start-up cancelled.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from _harness import cachegrind

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
    return cachegrind([sys.executable, "-c", program], env=env)


def main() -> None:
    for what in ("own_turn", "own_call"):
        per_call = (instructions(what, 12_000) - instructions(what, 2_000)) / 10_000
        print(f"{what:9} {per_call:10,.0f} instructions per call")


if __name__ == "__main__":
    main()
