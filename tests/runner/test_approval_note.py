"""A human's note given with an approval reaches the model (issue 30, item 19).

The Controller puts the note on the decision that executes the approved calls
(`Decision.note`); the runner sends it as a user message after those calls' results,
as it sends a refusal's note. Driven through `af.run` against the local scripted server.
"""

from __future__ import annotations

from typing import Any

from agentfsm import Policy
from agentfsm._model.types import Action, Decision, ExitReason
from agentfsm.testing.scripted import call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_run

pytestmark = LITELLM_CLIENT

TASK = [{"role": "user", "content": "Deploy the service."}]


def deploy(env: str) -> str:
    """Deploy to an environment."""
    return f"deployed {env}"


def test_an_approval_note_follows_the_results_in_the_next_request() -> None:
    asked: list[Decision] = []

    def on_ask(decision: Decision) -> tuple[bool, str]:
        asked.append(decision)
        return True, "use the canary first next time"

    script = [tool_calls(call("deploy", {"env": "staging"}, id="d1")), say("deployed")]
    with ScriptedServer(script) as server:
        result = scripted_run(
            server,
            TASK,
            tools=[deploy],
            policy=Policy(permissions={"deploy": "ask"}),
            on_ask=on_ask,
        )
        second: list[dict[str, Any]] = server.requests[1].body["messages"]
    assert [d.action for d in asked] == [Action.ASK_HUMAN]
    assert result.exit_reason is ExitReason.COMPLETED
    roles = [(m["role"], m.get("tool_call_id") or m.get("content")) for m in second[-3:]]
    assert roles == [
        ("assistant", None),
        ("tool", "d1"),
        ("user", "use the canary first next time"),
    ]


def test_an_approval_without_a_note_adds_no_message() -> None:
    script = [tool_calls(call("deploy", {"env": "staging"}, id="d1")), say("deployed")]
    with ScriptedServer(script) as server:
        scripted_run(
            server,
            TASK,
            tools=[deploy],
            policy=Policy(permissions={"deploy": "ask"}),
            on_ask=lambda _d: (True, None),
        )
        second: list[dict[str, Any]] = server.requests[1].body["messages"]
    assert second[-1]["role"] == "tool"
    assert [m["role"] for m in second].count("user") == 1
