"""A front-end process for the client-role tests: it declares no agent and runs nothing.

    python -m tests.durable.client DB_URL RUN_ID [VERSION_WAIT]

It starts a run of an agent no worker declares, then RUN_ID (an agent named `killable`,
which only the workers declare), answers
its question (approves), and prints as JSON what it saw: the statuses, the question,
the result, the runs still pending, and whether a model library was ever imported here.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from agentfsm import AgentFSMError
from agentfsm.durable import Client


def wait_for(client: Client, run_id: str, want: str, seen: list[str]) -> None:
    """Poll the run's status until it is `want`, noting each new status."""
    deadline = time.monotonic() + 180
    while (now := client.status(run_id)) != want:
        if not seen or seen[-1] != now:
            seen.append(now)
        if now in ("done", "failed", "cancelled") or time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} is {now}, never {want}")
        time.sleep(0.05)
    seen.append(now)


def main(argv: list[str]) -> int:
    db, run_id = argv[:2]
    seen: list[str] = []
    with Client(db) as client:
        ghost = client.start("ghost", "no worker declares this agent")
        started = client.start("killable", "Find a, then b and c, then write x.", run_id=run_id)
        again = client.start("killable", "ignored: the id is taken", run_id=run_id)
        wait_for(client, run_id, "waiting_for_human", seen)
        question = client.asked(run_id)
        pending = client.pending()
        client.reply(run_id, approved=True, question=question["question"] if question else None)
        output: dict[str, Any] = {
            "started": [started, again],
            "asked": question,
            "pending": pending,
            "result": client.result(run_id, timeout=180).model_dump(mode="json"),
        }
        wait_for(client, run_id, "done", seen)
        try:
            client.reply(run_id, approved=True, question=question["question"] if question else None)
            output["late_reply"] = "accepted"
        except AgentFSMError as exc:
            output["late_reply"] = type(exc).__name__
        try:
            client.result(ghost, timeout=180)
            output["ghost"] = "done"
        except AgentFSMError as exc:
            output["ghost"] = f"{type(exc).__name__}: {exc}"
    output["seen"] = seen
    output["litellm"] = "litellm" in sys.modules
    print(json.dumps(output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
