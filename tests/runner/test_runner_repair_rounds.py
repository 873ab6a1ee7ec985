"""The runner drives the Controller: failed rounds, skips and final tools decide as there."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentfsm import Policy
from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import Action, ExitReason, Priority
from agentfsm._runner.loop import Inbox
from agentfsm._runner.retry import ProviderRetry
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_run

pytestmark = LITELLM_CLIENT

TASK = [{"role": "user", "content": "Process the three files."}]
THREE = tool_calls(*(call("step", {"n": n}, id=f"s{n}") for n in range(3)))


def step(n: int) -> str:
    """Process one file; each fails."""
    raise OSError(f"file {n} is locked")


class TestRepairRounds:
    """A parallel batch that failed whole is one round: the model sees its errors."""

    def test_the_model_reads_a_failed_batch_before_the_bound_ends_the_run(self) -> None:
        """Three failed calls under a bound of 2: the model is called again with the three
        errors; only the second failed round ends the run TOOL_ERRORS."""
        seen: list[int] = []

        def again(body: Mapping[str, Any]) -> Reply:
            errors = [m for m in body["messages"] if m["role"] == "tool"]
            seen.append(len(errors))
            return THREE

        with ScriptedServer([THREE, again]) as server:
            result = scripted_run(
                server,
                TASK,
                tools=[step],
                policy=Policy(max_consecutive_tool_errors=2),
                retry=ProviderRetry(attempts=1),
            )
        assert seen == [3]
        assert result.exit_reason is ExitReason.TOOL_ERRORS
        assert [d.action for d in result.decisions].count(Action.EXECUTE_TOOLS) == 2


class TestSteeringInTheRunner:
    """The runner's skip results are no failure."""

    def test_a_message_mid_batch_continues_at_p1(self) -> None:
        """The two calls the message skipped do not make a P5 decision."""
        inbox = Inbox()

        def step(n: int) -> str:
            """Process one file; a message arrives meanwhile."""
            inbox.send("only the first file")
            return f"step {n} done"

        with ScriptedServer([THREE, say("ok")]) as server:
            result = scripted_run(
                server,
                TASK,
                tools=[step],
                inbox=inbox,
                retry=ProviderRetry(attempts=1),
                parallel_tool_calls=False,
            )
        after = result.decisions[1]
        assert (after.action, after.priority) == (Action.CONTINUE, Priority.P1)
        assert result.exit_reason is ExitReason.COMPLETED


class TestFinalToolInTheRunner:
    """A final tool's result that fails a verifier goes back to the model with the reason."""

    def test_a_refused_final_result_reaches_the_model_as_not_done_yet(self) -> None:
        """The verifier's reason reaches the model; the next submit passes and ends the run."""

        def submit(answer: str) -> str:
            """Submit the answer."""
            return answer

        def says_done(snap: RunSnapshot) -> str | None:
            text = snap.output.text if snap.output is not None else ""
            return None if "done" in text else "say that it is done"

        def check(body: Mapping[str, Any]) -> Reply:
            assert body["messages"][-1] == {
                "role": "user",
                "content": "Not done yet: say that it is done",
            }
            return tool_calls(call("submit", {"answer": "all done"}, id="f2"))

        script: list[Reply | Callable[[Mapping[str, Any]], Reply]] = [
            tool_calls(call("submit", {"answer": "maybe"}, id="f1")),
            check,
        ]
        with ScriptedServer(script) as server:
            result = scripted_run(
                server,
                TASK,
                tools=[submit],
                policy=Policy(final_tools=["submit"], verifiers=[says_done]),
                retry=ProviderRetry(attempts=1),
            )
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.decisions[-1].answer == "all done"
