"""A submission ends the governed mini-swe-agent run as it ends mini-swe-agent's own.

mini-swe-agent's own `DefaultAgent` and the `GovernedAgent` run the same scripted outputs on a
real `LocalEnvironment`, with mini-swe-agent's own deterministic models: tool calls
(`DeterministicToolcallModel`, shaped as LitellmModel answers) and text-based
(`DeterministicModel`, fenced actions). Its own prompts submit with the bare
`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`: an empty submission, which ends the run natively.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicModel, make_output

import agentfsm as af
from agentfsm.integrations.mini_swe_agent import GovernedAgent
from tests.integrations.test_mini_swe_agent import (
    CONFIG,
    LitellmShaped,
    bash,
    fenced,
    output,
    text_based,
)

A, X = af.Action, af.ExitReason
MARKER = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SPARE = 8
"""Outputs scripted past the last one, so a run that asks the model again has an answer."""


def text_output(command: str) -> dict[str, Any]:
    """A text-based model's message: one fenced command, and the action it parsed from it."""
    return make_output(fenced(command), [{"command": command}])


def model(commands: list[str], text: bool) -> Any:
    """mini-swe-agent's deterministic model sending `commands` in turn (then the last again)."""
    padded = [*commands, *[commands[-1]] * SPARE]
    if text:
        return DeterministicModel(  # type: ignore[no-untyped-call]
            outputs=[text_output(c) for c in padded]
        )
    return LitellmShaped(outputs=[output(bash(f"c{i}", c)) for i, c in enumerate(padded)])


@dataclass(frozen=True)
class End:
    """How a run ended: mini-swe-agent's exit, its submission, how many model calls it made and
    what the commands appended to `log`."""

    exit_status: str
    submission: str
    model_calls: int
    log: tuple[str, ...]


def run(commands: list[str], text: bool, governed: bool, **options: Any) -> tuple[End, Any]:
    """Run the commands' outputs natively or governed, in a scratch directory."""
    with TemporaryDirectory() as folder:
        root = Path(folder)
        env = LocalEnvironment(cwd=str(root))
        scripted = model(commands, text)
        agent = (
            GovernedAgent(scripted, env, **options, **CONFIG)
            if governed
            else DefaultAgent(scripted, env, **CONFIG)
        )
        result = agent.run("task")
        log = (root / "log").read_text().split() if (root / "log").exists() else []
    end = End(result["exit_status"], result["submission"], scripted.current_index + 1, tuple(log))
    return end, agent


SUBMISSIONS = [
    pytest.param([MARKER], id="empty"),
    pytest.param([f"{MARKER}; echo fixed"], id="text"),
    pytest.param(["echo a >> log", "echo b >> log", MARKER], id="work-then-empty"),
    pytest.param([f"echo a >> log; {MARKER}"], id="work-and-empty-in-one-command"),
]


class TestSubmissionEndsAsNative:
    """The same outputs end the same way, natively and governed."""

    @pytest.mark.parametrize("commands", SUBMISSIONS)
    @pytest.mark.parametrize("text", [False, True], ids=["tool-calls", "text-based"])
    def test_governed_ends_as_native(self, commands: list[str], text: bool) -> None:
        """An empty submission used to end `doom_loop` (tool calls) or at the step limit
        (text-based); now it ends Submitted with the same submission and model calls."""
        native, _ = run(commands, text, governed=False)
        governed, agent = run(commands, text, governed=True)
        assert native.exit_status == "Submitted"
        assert governed == native
        last = agent.decisions[-1]
        assert (last.action, last.exit_reason) == (A.FINAL, X.COMPLETED)

    def test_an_empty_submission_says_why_it_ended(self) -> None:
        """The decision ending on an empty submission names mini-swe-agent's submit command."""
        _, agent = run([MARKER], text=False, governed=True)
        last = agent.decisions[-1]
        assert "empty submission" in last.reason
        assert agent.controller.exit_reason is X.COMPLETED

    def test_a_policy_with_completion_checks_still_judges_it(self) -> None:
        """A policy that checks completion (`on_incomplete="ask"`) asks the human about an empty
        submission; a decline ends the run as declined, a human having been asked."""
        asked: list[list[af.ToolCall]] = []

        def approve(calls: list[af.ToolCall]) -> bool:
            asked.append(calls)
            return False

        policy = af.Policy(on_incomplete="ask")
        end, agent = run([MARKER], False, governed=True, policy=policy, approve=approve)
        assert end.exit_status == "human_declined"
        assert asked == [[]]
        assert agent.decisions[-1].exit_reason is X.HUMAN_DECLINED


@pytest.mark.litellm
@pytest.mark.filterwarnings("ignore:Items? .+ on TypedDict class .+ using the `ReadOnly` qualifier")
class TestTextBasedLitellmModel:
    """mini-swe-agent's `LitellmTextbasedModel` (its regex finds the fenced action)."""

    def test_an_empty_fenced_submission_ends_as_native(self, tmp_path: Path) -> None:
        """The bare submit command in a fence ends Submitted after one model call, as natively."""
        env = LocalEnvironment(cwd=str(tmp_path))
        native = DefaultAgent(text_based(fenced(MARKER)), env, **CONFIG)
        assert native.run("task") == {"exit_status": "Submitted", "submission": ""}
        agent = GovernedAgent(text_based(fenced(MARKER)), env, **CONFIG)
        assert agent.run("task") == {"exit_status": "Submitted", "submission": ""}
        assert agent.n_calls == native.n_calls == 1


_WORK = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3, unique=True).map(
    lambda names: [f"echo {n} >> log" for n in names]
)
_SUBMIT = st.sampled_from([MARKER, f"{MARKER}; echo fixed", f"{MARKER}; printf ''"])


class TestSubmissionProperty:
    """Distinct commands then a submission, any of its forms, on both kinds of model."""

    @given(_WORK, _SUBMIT, st.booleans())
    def test_governed_ends_as_native(self, work: list[str], submit: str, text: bool) -> None:
        """With the default policy the governed run ends exactly as the native one: the same
        exit, submission, model calls and commands run."""
        commands = [*work, submit]
        native, _ = run(commands, text, governed=False)
        governed, _ = run(commands, text, governed=True)
        assert governed == native
