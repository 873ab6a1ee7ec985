"""A durable worker process for the kill tests: runs (or recovers) one run, maybe dies on cue.

    python -m tests.durable.worker DB_URL API_BASE RUN_ID LOG [POINT ...]

Each POINT kills this process there, with `exit` (os._exit) or `sigkill`:
- `KIND:N:HOW`: at the Nth `KIND` progress report (`model`, `tool`, `ask_human`; replays of
  recorded steps count too), so after that step's output is recorded;
- `in:TOOL:WHEN:HOW`: inside TOOL, `before` or `after` its side effect;
- `sql:STEP:CALL_ID:HOW`: as DBOS is about to record the output of STEP (`started` or `tool`)
  for the call CALL_ID, so after the step ran and before its output is in the database.
Unless a point is at `ask_human`, the worker answers the human (approves), and it prints the
result (or the error `result` raised) as JSON. The environment names the worker's executor id
(`AGENTFSM_TEST_EXECUTOR`), a dead worker whose runs it takes over (`AGENTFSM_TEST_TAKE_OVER`),
the seconds it waits for the run before reporting it pending (`AGENTFSM_TEST_WAIT`), whether
a client starts and answers the run (`AGENTFSM_TEST_CLIENT`: the worker prints `ready` once
launched, then only runs it), `launch`'s `other_versions` (`AGENTFSM_TEST_OTHER_VERSIONS`) and
a frozen wall clock for the run's recorded times (`AGENTFSM_TEST_CLOCK`, seconds).
The tools append `name value` to LOG each time they really run; `charge` adds its
idempotency key.
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

from agentfsm import AgentFSMError, Controller, Policy, durable
from agentfsm._runner.executor import tool
from agentfsm.durable._workflow import use_wall_clock

AGENT = "killable"
DEADLINE = 8.0
"""The `max_seconds` of the "deadline" policy. The tests that use it freeze the run's wall
clock (`AGENTFSM_TEST_CLOCK`), so how long the run really takes never decides them."""
LOG = os.environ.get("AGENTFSM_SIDE_EFFECTS", "")
INSIDE: dict[tuple[str, str], str] = {}
"""Kill points inside tools: (tool, before/after) -> how."""


def die(how: str) -> None:
    """Stop this process now, the way a kill point says."""
    if how == "exit":
        os._exit(3)
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)


def _side_effect(name: str, value: str) -> str:
    die(INSIDE.get((name, "before"), ""))
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{name} {value}\n")
    die(INSIDE.get((name, "after"), ""))
    return f"{name}({value}) ok"


@tool(idempotent=True)
def search(q: str) -> str:
    """Search quickly."""
    return _side_effect("search", q)


@tool(idempotent=True)
def slow_search(q: str) -> str:
    """Search slowly: its effect lands after a pause."""
    time.sleep(1.5)
    return _side_effect("slow_search", q)


def write_file(path: str) -> str:
    """Write a file (needs a human's approval)."""
    return _side_effect("write_file", path)


@tool(idempotent=True)
def charge(amount: int) -> str:
    """Charge a card through an API that deduplicates by idempotency key."""
    return _side_effect("charge", f"{amount} {durable.idempotency_key()}")


def transfer(amount: int) -> str:
    """Transfer money: not idempotent, so it runs at most once."""
    return _side_effect("transfer", str(amount))


def agent(api_base: str, kills: Mapping[tuple[str, int], str]) -> durable.DurableAgent:
    """The agent every worker declares; the kill points are its progress hook."""
    seen: Counter[str] = Counter()

    def on_progress(kind: str, run_id: str, details: Mapping[str, Any]) -> None:
        seen[kind] += 1
        die(kills.get((kind, seen[kind]), ""))

    return durable.DurableAgent(
        AGENT,
        "openai/scripted",
        tools=[search, slow_search, write_file, charge, transfer],
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


def kill_on_record(step: str, call_id: str, how: str) -> None:
    """Die as DBOS is about to write the output of `step` for `call_id` to the database."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def before(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        text = str(params)
        if (
            "INSERT INTO" in statement
            and "operation_outputs" in statement
            and f"agentfsm.durable.{step}" in text
            and f'"{call_id}"' in text
        ):
            die(how)

    event.listen(Engine, "before_cursor_execute", before)


def refuse(call_id: str) -> None:
    """Make the run's Controller refuse to clear `call_id` (the durable path must obey)."""
    cleared = Controller.may_run

    def may_run(self: Controller, call: str, *args: Any, **kwargs: Any) -> bool:
        return call != call_id and cleared(self, call, *args, **kwargs)

    Controller.may_run = may_run  # type: ignore[method-assign,assignment]


def points(specs: list[str]) -> dict[tuple[str, int], str]:
    """Set the kill points inside tools and at records; return those at progress reports."""
    kills = {}
    for spec in specs:
        parts = spec.split(":")
        if parts[0] == "in":
            INSIDE[(parts[1], parts[2])] = parts[3]
        elif parts[0] == "sql":
            kill_on_record(parts[1], parts[2], parts[3])
        else:
            kills[(parts[0], int(parts[1]))] = parts[2]
    return kills


def finish(run_id: str, answer: bool, wait: float) -> dict[str, Any]:
    """Wait for the run to end (approving when asked, if `answer`); its result or error."""
    replied = False
    question: str | None = None
    deadline = time.monotonic() + wait
    while durable.status(run_id) not in ("done", "failed", "cancelled"):
        if time.monotonic() > deadline:
            return {"pending": durable.status(run_id)}
        if answer and not replied and durable.status(run_id) == "waiting_for_human":
            asked = durable.asked(run_id) or {}
            question = asked.get("question")
            durable.reply(run_id, approved=True, question=question)
            replied = True
        time.sleep(0.05)
    try:
        result = durable.result(run_id).model_dump(mode="json")
    except AgentFSMError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    try:
        durable.reply(run_id, approved=True, question=question)
        late = "accepted"
    except AgentFSMError as exc:
        late = f"{type(exc).__name__}: {exc}"
    return {"result": result, "late_reply": late}


def main(argv: list[str]) -> int:
    db, api_base, run_id, log = argv[:4]
    global LOG
    LOG = log
    kills = points(argv[4:])
    if os.environ.get("AGENTFSM_TEST_CLOCK"):  # a frozen wall clock: the run's time is given
        frozen = float(os.environ["AGENTFSM_TEST_CLOCK"])
        use_wall_clock(lambda: frozen)
    if os.environ.get("AGENTFSM_TEST_NOT_CLEARED"):
        refuse(os.environ["AGENTFSM_TEST_NOT_CLEARED"])
    executor = os.environ.get("AGENTFSM_TEST_EXECUTOR")
    others: Any = os.environ.get("AGENTFSM_TEST_OTHER_VERSIONS") or "refuse"
    try:
        version = durable.launch(
            [agent(api_base, kills)], database_url=db, executor_id=executor, other_versions=others
        )
    except AgentFSMError as exc:
        print(json.dumps({"launch_error": f"{type(exc).__name__}: {exc}"}))
        return 0
    try:
        dead = os.environ.get("AGENTFSM_TEST_TAKE_OVER")
        taken = durable.recover(dead) if dead else []
        wait = float(os.environ.get("AGENTFSM_TEST_WAIT") or "inf")
        if os.environ.get("AGENTFSM_TEST_CLIENT"):
            print("ready", flush=True)
            appeared(run_id, wait)
        else:
            try:
                durable.status(run_id)
            except AgentFSMError:
                durable.start(AGENT, "Find a, then b and c, then write x.", run_id=run_id)
        answer = not os.environ.get("AGENTFSM_TEST_CLIENT") and not any(
            kind == "ask_human" for kind, _ in kills
        )
        print(json.dumps({**finish(run_id, answer, wait), "taken": taken, "version": version}))
    finally:
        durable.shutdown()
    return 0


def appeared(run_id: str, wait: float) -> None:
    """Wait until a client has started `run_id` (or `wait` seconds passed)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            durable.status(run_id)
            return
        except AgentFSMError:
            time.sleep(0.05)


def forked(argv: list[str], env: dict[str, str], cwd: str, out: Any, err: Any) -> None:
    """The body of a worker forked from the tests' forkserver: `main` as its own process.

    The forkserver imported this module and litellm once; each forked worker is still a
    separate process (its own DBOS, its own death by SIGKILL or os._exit) that sets the
    environment, directory and standard streams (`out` and `err`: the write ends of the
    test's pipes) a `python -m tests.durable.worker` would have had, then exits with
    `main`'s code.
    """
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, pipe in ((1, out), (2, err)):
        os.dup2(pipe.fileno(), fd)
        pipe.close()
    sys.exit(main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
