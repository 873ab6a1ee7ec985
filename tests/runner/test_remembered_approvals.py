"""`af.run`'s on_ask may answer `(approved, message, remember)`: the approval is remembered
for the scope (docs/approvals.md) and covers the later calls it fits, without asking again.
Driven through `af.run` against the local scripted server."""

from __future__ import annotations

import pytest

from agentfsm import Policy
from agentfsm._model.types import Decision, ExitReason
from agentfsm.testing.scripted import call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_run

pytestmark = LITELLM_CLIENT

TASK = [{"role": "user", "content": "Deploy the service."}]
DEPLOYS = [
    tool_calls(call("deploy", {"env": "staging"}, id="d1")),
    tool_calls(call("deploy", {"env": "canary"}, id="d2")),
    tool_calls(call("deploy", {"env": "prod"}, id="d3")),
    say("deployed"),
]


def deploy(env: str) -> str:
    """Deploy to an environment."""
    return f"deployed {env}"


def deploying(
    remember: object, ends: ExitReason = ExitReason.COMPLETED
) -> tuple[list[Decision], list[Decision]]:
    """Run the three deploys, approving each ask with `remember`: the asks and the decisions."""
    asked: list[Decision] = []

    def on_ask(decision: Decision) -> tuple[bool, None, object]:
        asked.append(decision)
        return True, None, remember

    with ScriptedServer(list(DEPLOYS)) as server:
        result = scripted_run(
            server,
            TASK,
            tools=[deploy],
            policy=Policy(
                permissions={"deploy": "ask"}, permission_rules=["deny deploy(env=prod)"]
            ),
            on_ask=on_ask,
        )
    assert result.exit_reason is ends
    return asked, result.decisions


def test_a_remembered_answer_covers_the_next_call_and_never_a_deny() -> None:
    """Asked once for staging; canary runs under the approval; prod stays denied."""
    asked, decisions = deploying({"scope": "run", "pattern": "env=*"})
    assert len(asked) == 1
    covered = [d.covered for d in decisions if d.covered]
    assert covered == [{"d2": "a1"}]
    denied = [r.content for d in decisions for r in d.results if r.call_id == "d3"]
    assert denied
    assert "permission denied" in denied[0]


def test_without_remember_every_call_is_asked() -> None:
    """A plain (approved, message) pair asks for staging and for canary."""
    asked, _ = deploying(None)
    assert len(asked) == 2


def test_a_scope_that_does_not_read_declines_with_a_warning() -> None:
    """on_ask answering a scope the Controller cannot take declines (fail closed)."""
    with pytest.warns(RuntimeWarning, match="remember a scope"):
        asked, decisions = deploying("forever", ExitReason.HUMAN_DECLINED)
    assert len(asked) == 1
    assert not any(d.covered for d in decisions)
