"""A human's reply names the question it answers: a stale approval never approves another call.

DBOS runs in this test process (on SQLite, and on PostgreSQL where
AGENTFSM_TEST_POSTGRES_DSN is set). The agent deploys with a policy that asks a human
before every `deploy`; the model first asks to deploy to staging, and after a refusal (or
a wait that timed out) to production. The reply meant for staging must not approve
production: it is refused where it is given, and a reply that reaches the run after it
moved on is dropped by the run.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from dbos import DBOS
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import durable
from agentfsm.durable import HUMAN_TOPIC, Client
from agentfsm.durable._registry import register
from agentfsm.exceptions import InvalidInputError
from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from tests.conftest import LITELLM_CLIENT
from tests.durable.conftest import database
from tests.strategies import hostile_values

_names = itertools.count(1)
WAIT = 60.0

# Both modules launch DBOS in this process (one per process at a time): one worker runs them,
# one module after the other.
# The runs call litellm's real client: its warnings about its own types are not errors.
pytestmark = [pytest.mark.xdist_group("dbos-in-process"), *LITELLM_CLIENT]


def deploys(body: Mapping[str, Any]) -> Reply:
    """The model: deploy to staging; once that is answered, to production; then answer."""
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if answered == 0:
        return tool_calls(call("deploy", {"env": "staging"}, id="d1"))
    if answered == 1:
        return tool_calls(call("deploy", {"env": "production"}, id="d2"))
    return say("deploys handled")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DBOS launched in this process on a fresh database, for the module's tests."""
    url = database(request.param, tmp_path_factory.mktemp("replies"))
    durable.launch([durable.DurableAgent("placeholder", "openai/scripted")], database_url=url)
    try:
        yield url
    finally:
        durable.shutdown()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer([deploys] * 16) as srv:
        yield srv


class Deployer:
    """A declared deploying agent, the environments it really deployed to, and its run."""

    def __init__(self, server: ScriptedServer, human_timeout: float | None = None) -> None:
        self.deployed: list[str] = []

        def deploy(env: str) -> str:
            """Deploy to an environment."""
            self.deployed.append(env)
            return f"deployed {env}"

        agent = durable.DurableAgent(
            f"deployer-{next(_names)}",
            "openai/scripted",
            tools=[deploy],
            policy=af.Policy(permissions={"deploy": "ask"}),
            api_base=server.openai_base,
            api_key="sk-local",
            human_timeout=human_timeout,
        )
        register([agent])
        self.run_id = durable.start(agent, "deploy it")

    def question(self, env: str) -> dict[str, Any]:
        """Wait until the run asks about deploying to `env`; what it asks."""
        deadline = time.monotonic() + WAIT
        while True:
            asked = durable.asked(self.run_id) or {}
            if [c["arguments"] for c in asked.get("tool_calls", [])] == [{"env": env}]:
                return asked
            if durable.status(self.run_id) in ("done", "failed", "cancelled"):
                pytest.fail(f"the run ended before it asked to deploy to {env}: {self.ended()}")
            assert time.monotonic() < deadline, f"the run never asked to deploy to {env}"
            time.sleep(0.02)

    def ended(self) -> str:
        """How the run ended, for a failure message."""
        try:
            done = durable.result(self.run_id, timeout=1.0)
        except af.AgentFSMError as error:
            return f"{type(error).__name__}: {error}"
        return f"{done.exit_reason.value} ({done.error or done.decisions[-1].reason})"

    def result(self) -> durable.DurableResult:
        return durable.result(self.run_id, timeout=WAIT)


class TestAReplyNamesItsQuestion:
    def test_a_second_approval_of_staging_does_not_approve_production(
        self, db: str, server: ScriptedServer
    ) -> None:
        """Staging approved, then approved again (a double click, a stale page) while the run
        asks about production: refused, nothing sent, and production does not deploy."""
        run = Deployer(server)
        staging = run.question("staging")
        assert staging["question"] == f"{run.run_id}/q1"
        durable.reply(run.run_id, approved=True, question=staging["question"])
        production = run.question("production")
        assert production["question"] == f"{run.run_id}/q2"
        with pytest.raises(InvalidInputError, match=r"does not ask .*q1.* now"):
            durable.reply(run.run_id, approved=True, question=staging["question"])
        assert durable.asked(run.run_id) == production
        durable.reply(run.run_id, approved=False, message="no", question=production["question"])
        assert run.result().exit_reason is af.ExitReason.COMPLETED
        assert run.deployed == ["staging"]

    def test_an_approval_given_after_the_wait_timed_out_is_refused(
        self, db: str, server: ScriptedServer
    ) -> None:
        """The staging question times out (declined, the run ends): the late approval is
        refused, and nothing deploys."""
        run = Deployer(server, human_timeout=1.0)
        staging = run.question("staging")
        assert run.result().exit_reason is af.ExitReason.HUMAN_DECLINED
        with pytest.raises(InvalidInputError, match="is not waiting for a human"):
            durable.reply(run.run_id, approved=True, question=staging["question"])
        assert run.deployed == []

    def test_a_reply_that_crosses_the_run_moving_on_is_dropped_by_the_run(
        self, db: str, server: ScriptedServer
    ) -> None:
        """A second approval of staging that reaches the run once it asks about production
        (sent just as the run moved on) approves nothing: the run drops it and still waits."""
        run = Deployer(server)
        staging = run.question("staging")
        durable.reply(run.run_id, approved=True, question=staging["question"])
        production = run.question("production")
        # What reply(question=staging) sends, arriving late; with the turn the run is at now.
        stale = {
            "question": staging["question"],
            "turn": production["turn"],
            "approved": True,
            "message": None,
        }
        DBOS.send(run.run_id, stale, topic=HUMAN_TOPIC)
        time.sleep(1.0)
        assert durable.status(run.run_id) == "waiting_for_human"
        assert durable.asked(run.run_id) == production
        assert run.deployed == ["staging"]
        durable.reply(run.run_id, approved=False, message="no", question=production["question"])
        assert run.result().exit_reason is af.ExitReason.COMPLETED
        assert run.deployed == ["staging"]

    def test_a_reply_without_its_question_is_refused(self, db: str, server: ScriptedServer) -> None:
        """The old `reply(run, approved=True)` raises, naming `question`, and sends nothing;
        from a `Client` too."""
        run = Deployer(server)
        staging = run.question("staging")
        with pytest.raises(InvalidInputError, match=r"question=asked\(run_id\)\['question'\]"):
            durable.reply(run.run_id, approved=True)
        with Client(db) as client, pytest.raises(InvalidInputError, match="question"):
            client.reply(run.run_id, True)
        time.sleep(0.5)
        assert durable.asked(run.run_id) == staging
        assert run.deployed == []
        with Client(db) as client:
            client.reply(run.run_id, True, question=staging["question"])
        production = run.question("production")
        durable.reply(run.run_id, approved=False, message="no", question=production["question"])
        assert run.result().exit_reason is af.ExitReason.COMPLETED
        assert run.deployed == ["staging"]

    # The waiting run's threads (DBOS's pollers, litellm's workers) use the `random` module
    # while hypothesis draws an example; hypothesis then warns that the strategy did.
    @pytest.mark.filterwarnings(
        "ignore:Do not use the `random` module inside strategies"
        ":hypothesis.errors.HypothesisDeprecationWarning"
    )
    @given(question=st.one_of(st.text(), hostile_values()))
    def test_any_other_question_is_refused_and_changes_nothing(
        self, db: str, waiting: tuple[Deployer, dict[str, Any]], question: Any
    ) -> None:
        """Whatever is given as the question, unless it is the one asked now, the reply is an
        InvalidInputError and the run still asks the same question; nothing ran."""
        run, staging = waiting
        if isinstance(question, str) and question == staging["question"]:
            return
        with pytest.raises(InvalidInputError):
            durable.reply(run.run_id, approved=True, question=question)
        assert durable.asked(run.run_id) == staging
        assert run.deployed == []


@pytest.fixture(scope="module")
def waiting(db: str) -> Iterator[tuple[Deployer, dict[str, Any]]]:
    """A run waiting for its first question (staging), shared by a property's examples."""
    with ScriptedServer([deploys] * 16) as srv:
        run = Deployer(srv)
        yield run, run.question("staging")
        DBOS.cancel_workflow(run.run_id)


class TestRememberedApprovals:
    def test_a_remembered_approval_covers_the_next_deploy_without_asking(
        self, db: str, server: ScriptedServer
    ) -> None:
        """Staging approved with `remember` for any deploy: production runs without a second
        question, the decision says which approval covered it, and each deploy runs once."""
        run = Deployer(server)
        staging = run.question("staging")
        assert staging["scopes"] == ["once", "uses", "seconds", "run", "conversation", "deployment"]
        durable.reply(
            run.run_id,
            approved=True,
            question=staging["question"],
            remember={"scope": "conversation", "pattern": "*"},
        )
        done = run.result()
        assert done.exit_reason is af.ExitReason.COMPLETED
        assert run.deployed == ["staging", "production"]
        covered = [d.covered for d in done.decisions if d.covered]
        assert covered == [{"d2": "a1"}]

    def test_a_bad_remember_is_refused_and_nothing_is_sent(
        self, db: str, server: ScriptedServer
    ) -> None:
        """A scope that does not read raises where it is given; the run still asks."""
        run = Deployer(server)
        staging = run.question("staging")
        with pytest.raises(InvalidInputError, match="remember"):
            durable.reply(
                run.run_id, approved=True, question=staging["question"], remember="forever"
            )
        assert durable.asked(run.run_id) == staging
        durable.reply(run.run_id, approved=False, message="no", question=staging["question"])
        production = run.question("production")
        durable.reply(run.run_id, approved=False, message="no", question=production["question"])
        assert run.result().exit_reason is af.ExitReason.COMPLETED
        assert run.deployed == []
