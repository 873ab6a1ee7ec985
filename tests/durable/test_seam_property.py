"""Durable steps ask `may_run` too: random policies and model outputs through the DBOS workflow.

DBOS runs in this test process on a SQLite file (worker processes would make each example
cost a launch); each example declares a fresh agent with the drawn policy, a scripted model
server on 127.0.0.1 and tools that log every run by the call's `n`, some of them declared
idempotent. A human's answers come through `durable.reply`. Oracle: the policy's verdict
per call. No denied call runs, an `ask` call runs only once approved, none runs twice, and
every call of every turn the model read has exactly one result.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import durable
from agentfsm._runner.executor import ToolOptions
from agentfsm.durable._registry import register
from agentfsm.testing import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.seam_strategies import (
    TOOLS,
    SideEffects,
    as_reply,
    calls_by_n,
    chat_body,
    check_log,
    exchanges,
    policies,
    scripts,
)

_names = itertools.count(1)
ENDED = ("done", "failed", "cancelled")
WAIT = 120.0
"""Seconds one run may take before the example fails: each of its steps is a local call."""

# Both modules launch DBOS in this process (one per process at a time): one worker runs them,
# one module after the other.
# The runs call litellm's real client: its warnings about its own types are not errors.
pytestmark = [pytest.mark.xdist_group("dbos-in-process"), *LITELLM_CLIENT]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """DBOS launched in this process on a fresh SQLite file, for the module's examples."""
    folder = tmp_path_factory.mktemp("durable")
    durable.launch(
        [durable.DurableAgent("placeholder", "openai/scripted")],
        database_url=f"sqlite:///{Path(folder) / 'runs.sqlite'}",
    )
    try:
        yield
    finally:
        durable.shutdown()


def finish(run_id: str, answers: Iterator[bool], approved: set[int]) -> durable.DurableResult:
    """Answer the run's questions with `answers` until it ends; its result."""
    deadline = time.monotonic() + WAIT
    while durable.status(run_id) not in ENDED:
        assert time.monotonic() < deadline, f"run {run_id} did not end in {WAIT} s"
        if durable.status(run_id) == "waiting_for_human":
            question = durable.asked(run_id) or {}
            yes = next(answers, False)
            if yes:
                approved.update(
                    (c.get("arguments") or {}).get("n", 0) for c in question.get("tool_calls", [])
                )
            durable.reply(run_id, approved=yes, question=question.get("question"))
            while durable.asked(run_id) == question:  # until the run took the answer
                time.sleep(0.01)
        time.sleep(0.02)
    return durable.result(run_id, timeout=WAIT)


class TestDurableStepsAsk:
    """The durable workflow, in process on SQLite, against a scripted model server."""

    # DBOS's own threads (its queue poller) draw from the `random` module while hypothesis
    # draws an example; hypothesis takes that for a strategy using `random`. None does.
    @pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
    @given(
        policies(hooks=True),
        scripts(),
        st.lists(st.booleans(), min_size=4, max_size=4),
        st.frozensets(st.sampled_from(TOOLS)),
    )
    def test_no_denied_call_runs_and_every_call_gets_one_result(
        self,
        launched: None,
        policy: af.Policy,
        outputs: list[dict[str, Any]],
        answers: list[bool],
        idempotent: frozenset[str],
    ) -> None:
        """Through durable steps: no denied or unapproved call runs, none runs twice, and each
        call the model made is answered once."""
        effects = SideEffects()
        replies = [as_reply(o) for o in outputs] + [as_reply(chat_body([], "done"))] * 12
        approved: set[int] = set()
        with ScriptedServer(replies) as server:
            agent = durable.DurableAgent(
                f"seams-{next(_names)}",
                "openai/scripted",
                tools=effects.tools(),
                policy=policy,
                api_base=server.openai_base,
                api_key="sk-local",
                options={name: ToolOptions(idempotent=True) for name in idempotent},
            )
            register([agent])
            run_id = durable.start(agent, "go")
            result = finish(run_id, iter(answers * 4), approved)
        check_log(effects, calls_by_n(outputs), policy, approved)
        for asked, answered in exchanges(result.messages):
            assert sorted(answered) == sorted(asked), (asked, answered)
        texts = [m["content"] for m in result.messages if m["role"] == "tool"]
        for name, n in effects.log:  # every call that ran reached the model once
            assert sum(t == f"{name} ran {n}" for t in texts) == 1
        event(f"calls ran: {bool(effects.log)}")
        event(f"asked a human: {any(d.action is af.Action.ASK_HUMAN for d in result.decisions)}")
