"""mini-swe-agent with agentfsm deciding, beside mini-swe-agent's own `DefaultAgent`.

Both run mini-swe-agent's own deterministic model (`DeterministicToolcallModel`) on a real
`LocalEnvironment`. The scripted outputs have the shape mini-swe-agent's LitellmModel returns
(tool calls, parsed actions, and the full response in `extra.response`); where LitellmModel
rejects a response with `FormatError` (its response kept in the error, as LitellmModel does),
the deterministic model raises that same error. Each test says what mini-swe-agent does
natively and what agentfsm does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.exceptions import FormatError
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel
from minisweagent.models.test_models import DeterministicToolcallModel

import agentfsm as af
from agentfsm.integrations.mini_swe_agent import GovernedAgent
from agentfsm.testing import EventCapture

A, X = af.Action, af.ExitReason
CONFIG: dict[str, Any] = {
    "system_template": "You are a helpful assistant.",
    "instance_template": "{{task}}",
    "step_limit": 6,
}
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo fixed"


def bash(call_id: str, command: str, name: str = "bash", raw: str | None = None) -> dict[str, Any]:
    """An OpenAI tool call, as the chat completion carries it."""
    arguments = raw if raw is not None else json.dumps({"command": command})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def body(
    calls: list[dict[str, Any]], finish: str, content: str = "", **message: Any
) -> dict[str, Any]:
    """The chat completion LitellmModel keeps in `extra.response`."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "message": {"role": "assistant", "content": content, "tool_calls": calls or None}
                | message,
            }
        ],
    }


def output(*calls: dict[str, Any], finish: str = "tool_calls") -> dict[str, Any]:
    """A message as LitellmModel returns it when it parsed every call."""
    actions = [
        {"command": json.loads(c["function"]["arguments"])["command"], "tool_call_id": c["id"]}
        for c in calls
    ]
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": list(calls),
        "extra": {"actions": actions, "cost": 0.0, "response": body(list(calls), finish)},
    }


def rejected(error: str, response: dict[str, Any]) -> dict[str, Any]:
    """A step where LitellmModel raises FormatError (the response kept in the error)."""
    return {"role": "assistant", "content": "", "extra": {"reject": error, "response": response}}


class LitellmShaped(DeterministicToolcallModel):
    """The deterministic model, raising FormatError where LitellmModel would."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]

    def query(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        """The next scripted output, or the FormatError LitellmModel raises for it."""
        out: dict[str, Any] = super().query(messages, **kwargs)
        extra = out["extra"]
        if "reject" in extra:
            raise FormatError(
                {
                    "role": "user",
                    "content": extra["reject"],
                    "extra": {"interrupt_type": "FormatError", "response": extra["response"]},
                }
            )
        return out


class Sandbox:
    """A scratch directory the commands run in."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def native(self, outputs: list[dict[str, Any]]) -> DefaultAgent:
        """mini-swe-agent's own agent on the deterministic model."""
        model = LitellmShaped(outputs=outputs)
        return DefaultAgent(model, LocalEnvironment(cwd=str(self.root)), **CONFIG)

    def ruled(self, outputs: list[dict[str, Any]], **options: Any) -> GovernedAgent:
        """The same agent with agentfsm deciding."""
        model = LitellmShaped(outputs=outputs)
        return GovernedAgent(model, LocalEnvironment(cwd=str(self.root)), **options, **CONFIG)

    def log(self) -> list[str]:
        """The lines the commands appended to `log`."""
        path = self.root / "log"
        return path.read_text().split() if path.exists() else []


def model_calls(agent: DefaultAgent) -> int:
    """How many outputs the deterministic model gave."""
    model = agent.model
    assert isinstance(model, LitellmShaped)
    return int(model.current_index) + 1


def actions(agent: GovernedAgent) -> list[af.Action]:
    """The actions agentfsm decided."""
    return [d.action for d in agent.decisions]


class TestToolCallsUnderStop:
    """Tool calls under finish reason `stop`."""

    def test_both_execute(self, tmp_path: Path) -> None:
        """Natively the actions run; with agentfsm they run too, and P7 names the conflict."""
        outputs = [output(bash("c1", "echo a >> log"), finish="stop"), output(bash("c2", SUBMIT))]
        sandbox = Sandbox(tmp_path)
        assert sandbox.native(outputs).run("task")["exit_status"] == "Submitted"
        assert sandbox.log() == ["a"]
        (tmp_path / "log").unlink()
        agent = sandbox.ruled(outputs)
        assert agent.run("task")["exit_status"] == "Submitted"
        assert sandbox.log() == ["a"]
        assert agent.decisions[0].priority == "P7"


class TestLengthCutCall:
    """A call cut by the token limit: LitellmModel rejects the response."""

    CUT = body([bash("c1", "", raw='{"command": "echo a >')], "length")

    def test_native_feeds_a_format_error_agentfsm_retries(self, tmp_path: Path) -> None:
        """Natively a format-error message enters the history; agentfsm asks again cleanly."""
        outputs = [
            rejected("Error parsing tool call arguments", self.CUT),
            output(bash("c2", "echo a >> log")),
            output(bash("c3", SUBMIT)),
        ]
        sandbox = Sandbox(tmp_path)
        agent = sandbox.native(outputs)
        agent.run("task")
        assert any("Error parsing" in str(m.get("content")) for m in agent.messages)
        governed = Sandbox(tmp_path).ruled(outputs)
        assert governed.run("task")["exit_status"] == "Submitted"
        assert actions(governed)[0] is A.RETRY
        assert not any("Error parsing" in str(m.get("content")) for m in governed.messages)


class TestUndeclaredTool:
    """A call to an undeclared tool beside a valid one."""

    def test_native_rejects_both_agentfsm_runs_the_valid_one(self, tmp_path: Path) -> None:
        """Natively LitellmModel rejects the whole message and nothing runs; agentfsm runs the
        valid call and answers the other with an error tool message."""
        both = [bash("c1", "echo a >> log"), bash("c2", "ls", name="python")]
        outputs = [
            rejected("Unknown tool 'python'.", body(both, "tool_calls")),
            output(bash("c3", SUBMIT)),
        ]
        sandbox = Sandbox(tmp_path)
        sandbox.native(outputs).run("task")
        assert sandbox.log() == []
        agent = sandbox.ruled(outputs)
        assert agent.run("task")["exit_status"] == "Submitted"
        assert sandbox.log() == ["a"]
        errors = [m for m in agent.messages if m["role"] == "tool" and m["tool_call_id"] == "c2"]
        assert len(errors) == 1
        assert "python" in errors[0]["content"]


class TestThirdIdenticalCall:
    """The same command three times in a row."""

    def test_native_runs_to_the_step_limit_agentfsm_stops(self, tmp_path: Path) -> None:
        """Natively it runs until LimitsExceeded; agentfsm stops at the third (doom_loop)."""
        outputs = [output(bash(f"c{i}", "echo a >> log")) for i in range(8)]
        sandbox = Sandbox(tmp_path)
        assert sandbox.native(outputs).run("task")["exit_status"] == "LimitsExceeded"
        assert len(sandbox.log()) == 6
        (tmp_path / "log").unlink()
        agent = sandbox.ruled(outputs)
        assert agent.run("task")["exit_status"] == "doom_loop"
        assert len(sandbox.log()) == 2


class TestApproval:
    """A command that needs a human."""

    POLICY = af.Policy(
        permission=lambda c: "ask" if "rm " in str((c.arguments or {}).get("command")) else "allow"
    )

    def outputs(self) -> list[dict[str, Any]]:
        """Remove a file, then submit."""
        return [output(bash("c1", "rm -f victim; echo rm >> log")), output(bash("c2", SUBMIT))]

    def test_native_runs_it_agentfsm_runs_it_once_approved(self, tmp_path: Path) -> None:
        """Natively the command runs at once; governed, it runs after `approve` says yes."""
        sandbox = Sandbox(tmp_path)
        sandbox.native(self.outputs()).run("task")
        assert sandbox.log() == ["rm"]
        (tmp_path / "log").unlink()
        asked: list[list[af.ToolCall]] = []

        def approve(calls: list[af.ToolCall]) -> bool:
            asked.append(calls)
            return True

        agent = sandbox.ruled(self.outputs(), policy=self.POLICY, approve=approve)
        assert agent.run("task")["exit_status"] == "Submitted"
        assert sandbox.log() == ["rm"]
        assert asked[0][0].id == "c1"
        assert actions(agent)[:2] == [A.ASK_HUMAN, A.EXECUTE_TOOLS]

    def test_without_a_human_the_command_is_declined(self, tmp_path: Path) -> None:
        """With no `approve`, the command never runs and the model reads why."""
        sandbox = Sandbox(tmp_path)
        agent = sandbox.ruled(self.outputs(), policy=self.POLICY)
        agent.run("task")
        assert sandbox.log() == []
        assert any(m["role"] == "tool" and m["tool_call_id"] == "c1" for m in agent.messages)


class TestRefusal:
    """The model refuses (no tool calls, OpenAI's `refusal` field)."""

    REFUSED = body([], "stop", refusal="I can't help with that.")

    def test_native_loops_on_format_errors_agentfsm_stops(self, tmp_path: Path) -> None:
        """Natively LitellmModel's "no tool calls" errors repeat until RepeatedFormatError;
        agentfsm stops at once with REFUSAL."""
        outputs = [rejected("No tool calls found in the response.", self.REFUSED)] * 4
        sandbox = Sandbox(tmp_path)
        assert sandbox.native(outputs).run("task")["exit_status"] == "RepeatedFormatError"
        agent = sandbox.ruled(outputs)
        assert agent.run("task")["exit_status"] == "refusal"
        assert agent.decisions[-1].exit_reason is X.REFUSAL


class TestFinalAnswer:
    """The run ends normally."""

    def test_submit_command_is_the_hosts_end(self, tmp_path: Path) -> None:
        """Both end Submitted with the submission; agentfsm's last decision is COMPLETED."""
        outputs = [output(bash("c1", SUBMIT))]
        sandbox = Sandbox(tmp_path)
        assert sandbox.native(outputs).run("task") == {
            "exit_status": "Submitted",
            "submission": "fixed\n",
        }
        agent = sandbox.ruled(outputs)
        assert agent.run("task") == {"exit_status": "Submitted", "submission": "fixed\n"}
        assert (agent.decisions[-1].action, agent.decisions[-1].exit_reason) == (
            A.FINAL,
            X.COMPLETED,
        )

    def test_the_submission_is_decided_as_the_final_answer(self, tmp_path: Path) -> None:
        """Natively two model calls; governed also two, and the submission is then decided as
        the run's answer (a turn of its own), ending FINAL/COMPLETED by the answer's guard."""
        outputs = [output(bash("c1", "echo a >> log")), output(bash("c2", SUBMIT))]
        sandbox = Sandbox(tmp_path)
        native = sandbox.native(outputs)
        assert native.run("task")["exit_status"] == "Submitted"
        assert model_calls(native) == 2
        agent = sandbox.ruled(outputs)
        assert agent.run("task") == {"exit_status": "Submitted", "submission": "fixed\n"}
        assert model_calls(agent) == 2
        assert agent.controller.exit_reason is X.COMPLETED
        last = agent.decisions[-1]
        assert (last.action, last.exit_reason, last.turn) == (A.FINAL, X.COMPLETED, 3)
        assert not last.guard.startswith("Stop(")

    def test_a_verifier_refusing_the_submission_sends_the_model_back(self, tmp_path: Path) -> None:
        """A completion check that refuses the submission keeps the run going: the model reads
        why, and its next submission, accepted, ends the run Submitted."""

        def says_fixed_twice(snap: af.RunSnapshot) -> str | None:
            out = snap.output
            return None if out and out.text.count("fixed") == 2 else "say fixed twice"

        twice = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo fixed fixed"
        outputs = [output(bash("c1", SUBMIT)), output(bash("c2", twice))]
        agent = Sandbox(tmp_path).ruled(outputs, policy=af.Policy(verifiers=(says_fixed_twice,)))
        assert agent.run("task") == {"exit_status": "Submitted", "submission": "fixed fixed\n"}
        assert [d.action for d in agent.decisions] == [
            A.EXECUTE_TOOLS,
            A.CONTINUE,
            A.CONTINUE,
            A.EXECUTE_TOOLS,
            A.CONTINUE,
            A.FINAL,
        ]
        told = [m["content"] for m in agent.messages if m["role"] == "user"]
        assert any("say fixed twice" in str(t) for t in told)

    @pytest.mark.parametrize(
        ("approved", "status"), [(True, "Submitted"), (False, "human_declined")]
    )
    def test_an_incomplete_submission_asks_the_human(
        self, tmp_path: Path, approved: bool, status: str
    ) -> None:
        """With `on_incomplete="ask"` an empty submission asks `approve` once: yes sends the
        model back to work (it then submits for real), no ends the run as declined."""
        empty = output(bash("c1", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))
        outputs = [empty, output(bash("c2", SUBMIT))]
        asked: list[list[af.ToolCall]] = []

        def approve(calls: list[af.ToolCall]) -> bool:
            asked.append(calls)
            return approved

        policy = af.Policy(on_incomplete="ask")
        agent = Sandbox(tmp_path).ruled(outputs, policy=policy, approve=approve)
        assert agent.run("task")["exit_status"] == status
        assert asked == [[]]
        assert model_calls(agent) == (2 if approved else 1)

    def test_the_commands_before_the_submit_are_answered_with_their_output(
        self, tmp_path: Path
    ) -> None:
        """In one message, a command before the submit runs and is answered with its own
        output; one after it never runs and is answered with an error."""
        first = bash("c1", "echo a >> log; echo ran")
        after = bash("c3", "echo b >> log")
        outputs = [output(first, bash("c2", SUBMIT), after)]
        sandbox = Sandbox(tmp_path)
        events = EventCapture()
        agent = sandbox.ruled(outputs, observers=[events])
        assert agent.run("task")["exit_status"] == "Submitted"
        assert sandbox.log() == ["a"]
        assert agent.controller.turn == 2  # the submission is an answer of its own
        (given,) = events.named("tool_results")
        assert [(r["call_id"], r["content"]) for r in given["results"]] == [
            ("c1", "ran\n"),
            ("c2", "fixed\n"),
        ]
        answered = {r.call_id: r for d in agent.decisions for r in d.results}
        assert answered["c3"].is_error
        assert agent.controller.exit_reason is X.COMPLETED

    def test_a_text_answer_completes(self, tmp_path: Path) -> None:
        """Natively a text-only answer is a format error; agentfsm takes it as the answer."""
        answer = body([], "stop", content="The bug is fixed.")
        outputs = [rejected("No tool calls found in the response.", answer)] * 4
        sandbox = Sandbox(tmp_path)
        assert sandbox.native(outputs).run("task")["exit_status"] == "RepeatedFormatError"
        agent = sandbox.ruled(outputs)
        result = agent.run("task")
        assert (result["exit_status"], result["submission"]) == ("Submitted", "The bug is fixed.")
        assert result["agentfsm"] == {"action": "final", "exit_reason": "completed"}


FENCE = "```"


def fenced(*commands: str) -> str:
    """A text-based model's reply: a thought, then each command in its fenced block."""
    blocks = "".join(f"\n{FENCE}mswea_bash_command\n{c}\n{FENCE}\n" for c in commands)
    return f"THOUGHT: I will do what the task asks.\n{blocks}"


def text_based(reply: str) -> LitellmTextbasedModel:
    """mini-swe-agent's text-based model, answered by litellm's own `mock_response`."""
    return LitellmTextbasedModel(  # type: ignore[no-untyped-call]
        model_name="openai/gpt-4o-mini",
        cost_tracking="ignore_errors",
        model_kwargs={"mock_response": reply},
    )


@pytest.mark.litellm
@pytest.mark.filterwarnings(
    # litellm's own TypedDicts use `ReadOnly`: the warning is about litellm's types, not ours.
    "ignore:Items? .+ on TypedDict class .+ using the `ReadOnly` qualifier"
)
class TestTextBasedModel:
    """mini-swe-agent's text-based model: actions are fenced blocks its regex finds."""

    def test_the_fenced_command_runs(self, tmp_path: Path) -> None:
        """Natively the fenced command runs and submits; governed it runs too (before, the
        reply's prose was taken as the final answer and nothing ran)."""
        reply = fenced("echo a >> log; echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo fixed")
        env = LocalEnvironment(cwd=str(tmp_path))
        assert DefaultAgent(text_based(reply), env, **CONFIG).run("task") == {
            "exit_status": "Submitted",
            "submission": "fixed\n",
        }
        (tmp_path / "log").unlink()
        agent = GovernedAgent(text_based(reply), env, **CONFIG)
        assert agent.run("task") == {"exit_status": "Submitted", "submission": "fixed\n"}
        assert Sandbox(tmp_path).log() == ["a"]
        first = agent.decisions[0]
        assert first.action is A.EXECUTE_TOOLS
        assert [c.arguments for c in first.tool_calls] == [
            {"command": "echo a >> log; echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo fixed"}
        ]

    def test_a_denied_fenced_command_never_runs(self, tmp_path: Path) -> None:
        """A fenced command a rule denies never runs, and the model reads why as a user
        message (a text-based model has no tool messages)."""
        policy = af.Policy(permission_rules=["deny bash(command=rm *)"])
        env = LocalEnvironment(cwd=str(tmp_path))
        (tmp_path / "victim").write_text("x")
        agent = GovernedAgent(text_based(fenced("rm victim")), env, policy=policy, **CONFIG)
        agent.run("task")
        assert (tmp_path / "victim").exists()
        assert not any(m["role"] == "tool" for m in agent.messages)
        assert any("permission denied" in str(m["content"]) for m in agent.messages)

    def test_two_fenced_commands_are_each_decided(self, tmp_path: Path) -> None:
        """Natively two blocks are a format error and nothing runs; governed, agentfsm reads
        both with the model's own regex and runs each."""
        reply = fenced("echo a >> log", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo ok")
        env = LocalEnvironment(cwd=str(tmp_path))
        native = DefaultAgent(text_based(reply), env, **CONFIG)
        assert native.run("task")["exit_status"] == "RepeatedFormatError"
        assert Sandbox(tmp_path).log() == []
        agent = GovernedAgent(text_based(reply), env, **CONFIG)
        assert agent.run("task") == {"exit_status": "Submitted", "submission": "ok\n"}
        assert Sandbox(tmp_path).log() == ["a"]


class Unmapped(GovernedAgent):
    """A GovernedAgent whose execute step is handed every call of the turn (a mis-mapping)."""

    def _execute(self, decision: af.Decision) -> list[dict[str, Any]]:
        turn = self.controller.last_output
        calls = list(turn.tool_calls) if turn is not None else []
        return super()._execute(decision.model_copy(update={"tool_calls": calls}))


class TestMayRun:
    """The execute step asks `may_run` by call id right before each command."""

    def test_a_call_agentfsm_denied_never_runs(self, tmp_path: Path) -> None:
        """A denied call handed to the execute step anyway never reaches the environment."""
        policy = af.Policy(permission_rules=["deny bash(command=rm *)"])
        (tmp_path / "victim").write_text("x")
        outputs = [
            output(bash("c1", "rm victim"), bash("c2", "echo a >> log")),
            output(bash("c3", SUBMIT)),
        ]
        model = LitellmShaped(outputs=outputs)
        agent = Unmapped(model, LocalEnvironment(cwd=str(tmp_path)), policy=policy, **CONFIG)
        assert agent.run("task")["exit_status"] == "Submitted"
        assert (tmp_path / "victim").exists()
        assert Sandbox(tmp_path).log() == ["a"]
        answers = [m for m in agent.messages if m.get("tool_call_id") == "c1"]
        assert len(answers) == 1


class TestDecline:
    """What `approve` answering False means: `on_decline="stop"` (default) or `"feedback"`."""

    POLICY = af.Policy(permissions={"bash": "ask"})

    def decline(self, tmp_path: Path, answer: bool | str, **options: Any) -> GovernedAgent:
        """Ask to remove a file, answer `answer`, then the model submits."""
        outputs = [output(bash("c1", "echo rm >> log")), output(bash("c2", SUBMIT))]
        agent = Sandbox(tmp_path).ruled(outputs, policy=self.POLICY, **options)
        agent.approve = lambda calls: answer if calls[0].id == "c1" else True
        agent.run("task")
        return agent

    def test_by_default_a_plain_decline_ends_the_run(self, tmp_path: Path) -> None:
        """False ends the run HUMAN_DECLINED with no other model call."""
        agent = self.decline(tmp_path, False)
        assert agent.decisions[-1].exit_reason is X.HUMAN_DECLINED
        assert agent.messages[-1]["extra"]["exit_status"] == "human_declined"
        assert model_calls(agent) == 1

    def test_with_feedback_a_plain_decline_goes_to_the_model(self, tmp_path: Path) -> None:
        """With `on_decline="feedback"` the model reads the decline and goes on to submit."""
        agent = self.decline(tmp_path, False, on_decline="feedback")
        assert agent.decisions[-1].exit_reason is X.COMPLETED
        assert any("declined by the human" in str(m.get("content")) for m in agent.messages)
        assert model_calls(agent) == 2

    def test_a_message_goes_to_the_model_either_way(self, tmp_path: Path) -> None:
        """A decline with the human's message is told to the model, by default too."""
        agent = self.decline(tmp_path, "not now")
        assert agent.decisions[-1].exit_reason is X.COMPLETED
        assert any("not now" in str(m.get("content")) for m in agent.messages)


class TestLoopLadder:
    """One command written three ways under `Policy(loops=...)`."""

    def test_the_warning_reaches_the_model_and_the_loop_stops(self, tmp_path: Path) -> None:
        """Natively the paraphrases run to the step limit; with the ladder (warn 2, stop 3) the
        second runs and the model reads the warning after its output, the third never runs."""
        said = ["echo a >> log", "echo  'a' >>log", 'echo "a" >> log']
        outputs = [output(bash(f"c{i}", command)) for i, command in enumerate(said * 2)]
        sandbox = Sandbox(tmp_path)
        assert sandbox.native(outputs).run("task")["exit_status"] == "LimitsExceeded"
        (tmp_path / "log").unlink()
        policy = af.Policy(loops={"warn": 2, "ask": 0, "stop": 3})
        agent = sandbox.ruled(outputs, policy=policy)
        assert agent.run("task")["exit_status"] == "doom_loop"
        assert sandbox.log() == ["a", "a"]
        warned = [m for m in agent.messages if str(m.get("content")).startswith("loop warning:")]
        assert len(warned) == 1
        assert warned[0]["role"] == "user"
        assert agent.messages.index(warned[0]) > agent.messages.index(
            next(m for m in agent.messages if m.get("tool_call_id") == "c1")
        )
