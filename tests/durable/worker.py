"""A durable worker process for the kill tests: runs (or recovers) one run, maybe dies on cue.

    python -m tests.durable.worker DB_URL API_BASE RUN_ID LOG [KIND:N:HOW ...]

`KIND:N:HOW` kills this process at the Nth `KIND` progress report (`model`, `tool`,
`ask_human`; replays of recorded steps count too) with `exit` (os._exit) or `sigkill`.
Without a kill point the worker answers the human (approves) and prints the result as JSON.
The tools append `name call_id` to LOG each time they really run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from agentfsm import AgentFSMError, Policy, durable

AGENT = "killable"
DEADLINE = 8.0
"""The `max_seconds` of the "deadline" policy; the whole run takes about 2 s."""
LOG = os.environ.get("AGENTFSM_SIDE_EFFECTS", "")


def _side_effect(name: str, value: str) -> str:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{name} {value}\n")
    return f"{name}({value}) ok"


def search(q: str) -> str:
    """Search quickly."""
    return _side_effect("search", q)


def slow_search(q: str) -> str:
    """Search slowly: its effect lands after a pause."""
    time.sleep(1.5)
    return _side_effect("slow_search", q)


def write_file(path: str) -> str:
    """Write a file (needs a human's approval)."""
    return _side_effect("write_file", path)


def agent(api_base: str, kills: Mapping[tuple[str, int], str]) -> durable.DurableAgent:
    """The agent every worker declares; the kill points are its progress hook."""
    seen: Counter[str] = Counter()

    def on_progress(kind: str, run_id: str, details: Mapping[str, Any]) -> None:
        seen[kind] += 1
        how = kills.get((kind, seen[kind]))
        if how == "exit":
            os._exit(3)
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)

    return durable.DurableAgent(
        AGENT,
        "openai/scripted",
        tools=[search, slow_search, write_file],
        # A second variant of the policy stands for a changed deployment.
        policy=Policy(
            permissions={"write_file": "ask"},
            max_turns=40 if os.environ.get("AGENTFSM_TEST_POLICY") == "changed" else 50,
            # "deadline": a budget the run meets unless a crash's downtime is counted.
            max_seconds=DEADLINE if os.environ.get("AGENTFSM_TEST_POLICY") == "deadline" else None,
        ),
        api_base=api_base,
        api_key="sk-local",
        on_progress=on_progress,
    )


def main(argv: list[str]) -> int:
    db, api_base, run_id, log = argv[:4]
    global LOG
    LOG = log
    kills = {}
    for spec in argv[4:]:
        kind, n, how = spec.split(":")
        kills[(kind, int(n))] = how
    durable.launch([agent(api_base, kills)], database_url=db)
    try:
        try:
            durable.status(run_id)
        except Exception:
            durable.start(AGENT, "Find a, then b and c, then write x.", run_id=run_id)
        replied = False
        while True:
            now = durable.status(run_id)
            if now == "waiting_for_human" and not kills and not replied:
                durable.reply(run_id, approved=True)
                replied = True
            if now in ("done", "failed", "cancelled"):
                break
            time.sleep(0.05)
        result = durable.result(run_id).model_dump(mode="json")
        try:
            durable.reply(run_id, approved=True)
            late = "accepted"
        except AgentFSMError as exc:
            late = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"result": result, "late_reply": late}))
    finally:
        durable.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
