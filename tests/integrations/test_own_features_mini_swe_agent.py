"""mini-swe-agent's own features beside agentfsm's policy: neither side's stop is lost.

Drawn runs mix mini-swe-agent's own ways of acting and ending: tool-call messages (one or more
commands), the responses its LitellmModel refuses with `FormatError` (an unknown tool beside a
valid call, a text-only reply), text-based messages (fenced actions, as its `DeterministicModel`
keeps them), and its submission (empty, as its own prompts write it, or with text; alone or
after other commands in one message). Random policies allow, ask about or deny commands by
their text; the human answers yes or no, or there is none (`approve=None`). Everything runs in
a real `LocalEnvironment`; each command appends its tag and number to `log`.

Oracle: no command the policy denies runs, none it asks about runs unapproved, none twice;
nothing runs after a submission ran, and the run then ends as mini-swe-agent ends it
(`Submitted`, with the submission); every decision's story is true: a human was asked about
every ASK_HUMAN, and no run ends HUMAN_DECLINED unless the human declined.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicModel, make_output

import agentfsm as af
from agentfsm.integrations.mini_swe_agent import GovernedAgent
from tests.integrations.test_mini_swe_agent import (
    CONFIG,
    LitellmShaped,
    bash,
    body,
    fenced,
    output,
    rejected,
)

MARKER = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
TAGS = ("rm", "ls", "cat", "sub")
RULES = (
    "deny bash(command=*rm:*)",
    "ask bash(command=*ls:*)",
    "allow bash(command=*cat:*)",
    "ask bash(command=*sub:*)",
    "deny bash(command=*COMPLETE*fixed*)",
    "allow bash(command=*)",
)
_numbers = iter(range(1, 10**9))


@st.composite
def policies(draw: st.DrawFn) -> af.Policy:
    """Rules and a table over the command text; budgets that leave mini-swe-agent's end alone."""
    rules = draw(st.lists(st.sampled_from(RULES), max_size=3, unique=True))
    table = draw(
        st.dictionaries(st.sampled_from(["bash", "*"]), st.sampled_from(["allow", "ask", "deny"]))
    )
    return af.Policy(
        permission_rules=rules,
        permissions=table,
        on_deny=draw(st.sampled_from(["feedback", "stop"])),
        max_consecutive_tool_errors=50,
    )


@st.composite
def commands(draw: st.DrawFn) -> str:
    """A command that logs `tag:n` (n never repeats)."""
    return f"echo {draw(st.sampled_from(TAGS))}:{next(_numbers)} >> log"


@st.composite
def submissions(draw: st.DrawFn) -> str:
    """mini-swe-agent's submit command, logging `sub:n`: empty, or with text."""
    text = draw(st.sampled_from(["", "; echo fixed"]))
    return f"echo sub:{next(_numbers)} >> log; {MARKER}{text}"


@dataclass(frozen=True)
class Step:
    """One model output: its form and its commands."""

    form: str
    """`calls`, `unknown_tool` (refused by the model class), `text_only`, or `fenced`."""
    commands: tuple[str, ...]


@st.composite
def steps(draw: st.DrawFn, text: bool) -> list[Step]:
    """A run's outputs: for a text-based model fenced ones, else tool calls and refused forms."""
    forms = ["fenced"] if text else ["calls", "calls", "unknown_tool", "text_only"]
    found: list[Step] = []
    for _ in range(draw(st.integers(1, 4))):
        form = draw(st.sampled_from(forms))
        most = 0 if form == "text_only" else 3
        listed = draw(st.lists(commands() | submissions(), min_size=min(most, 1), max_size=most))
        found.append(Step(form, tuple(listed)))
    return found


def tool_output(index: int, step: Step) -> dict[str, Any]:
    """A step as LitellmModel returns it, or as the FormatError it raises."""
    calls = [bash(f"c{index}_{i}", c) for i, c in enumerate(step.commands)]
    if step.form == "unknown_tool":
        extra = bash(f"c{index}_x", "print(1)", name="python")
        return rejected("Unknown tool 'python'.", body([*calls, extra], "tool_calls"))
    if step.form == "text_only":
        return rejected("No tool calls found.", body([], "stop", content="I am done."))
    return output(*calls)


def text_output(step: Step) -> dict[str, Any]:
    """A text-based model's message: the fenced commands, and the actions it parsed."""
    return make_output(fenced(*step.commands), [{"command": c} for c in step.commands])


def model(drawn: list[Step], text: bool) -> Any:
    """mini-swe-agent's deterministic model with the drawn outputs, then empty submissions."""
    last = Step("fenced" if text else "calls", (f"echo sub:0 >> log; {MARKER}",))
    padded = [*drawn, *[last] * 12]
    if text:
        return DeterministicModel(  # type: ignore[no-untyped-call]
            outputs=[text_output(s) for s in padded]
        )
    return LitellmShaped(outputs=[tool_output(i, s) for i, s in enumerate(padded)])


@dataclass
class Human:
    """Answers ASK_HUMAN with the drawn answers, keeping what it was asked."""

    answers: list[bool]
    asked: list[list[af.ToolCall]] = field(default_factory=list)
    approved: set[int] = field(default_factory=set)
    declined: bool = False

    def __call__(self, calls: list[af.ToolCall]) -> bool:
        """The next answer."""
        self.asked.append(calls)
        yes = self.answers[(len(self.asked) - 1) % len(self.answers)]
        if yes:
            self.approved.update(number(str((c.arguments or {}).get("command"))) for c in calls)
        self.declined |= not yes
        return yes


def number(command: str) -> int:
    """The `n` a command logs."""
    found = re.search(r"\w+:(\d+) >> log", command)
    return int(found.group(1)) if found else -1


def verdict(policy: af.Policy, command: str) -> str:
    """The policy's verdict on the bash call of `command`."""
    call = af.ToolCall(id="x", name="bash", arguments={"command": command})
    return policy.permission_for(call)


def submission(command: str) -> str:
    """What mini-swe-agent submits when `command` runs."""
    return "fixed\n" if command.endswith("echo fixed") else ""


class TestOwnFeaturesBesidePolicy:
    """Tool calls, refused forms, fenced actions and submissions under random policies."""

    @given(
        st.booleans().flatmap(lambda text: st.tuples(st.just(text), steps(text))),
        policies(),
        st.lists(st.booleans(), min_size=1, max_size=4) | st.none(),
    )
    def test_no_stopped_call_runs_and_every_story_is_true(
        self, drawn: tuple[bool, list[Step]], policy: af.Policy, answers: list[bool] | None
    ) -> None:
        """No denied, unapproved or repeated command runs; nothing runs after a submission,
        which ends the run Submitted; every ASK_HUMAN asked the human, and HUMAN_DECLINED
        only follows a human's no."""
        text, outputs = drawn
        human = Human(answers) if answers is not None else None
        with TemporaryDirectory() as folder:
            root = Path(folder)
            agent = GovernedAgent(
                model(outputs, text),
                LocalEnvironment(cwd=str(root)),
                policy=policy,
                approve=human,
                **{**CONFIG, "step_limit": 20},
            )
            result = agent.run("task")
            lines = (root / "log").read_text().split() if (root / "log").exists() else []
        by_number = {number(c): c for s in outputs for c in s.commands}
        by_number[0] = f"echo sub:0 >> log; {MARKER}"
        ran = [int(line.split(":")[1]) for line in lines]
        assert all(n == 1 for n in Counter(ran).values()), lines
        approved = human.approved if human is not None else set()
        for n in ran:
            said = verdict(policy, by_number[n])
            assert said != "deny", f"denied {by_number[n]} ran"
            assert said != "ask" or n in approved, f"{by_number[n]} ran unapproved"
        self.check_submission(ran, by_number, result)
        self.check_stories(agent, human)
        event(f"exit: {result['exit_status']}")

    @staticmethod
    def check_submission(ran: list[int], by_number: dict[int, str], result: dict[str, Any]) -> None:
        """A submission that ran is the last command and ends the run as mini-swe-agent does."""
        submitted = [n for n in ran if MARKER in by_number[n]]
        if not submitted:
            assert result["exit_status"] != "Submitted" or result["submission"]
            return
        assert ran[-1] == submitted[0], "a command ran after the submission"
        assert result["exit_status"] == "Submitted", result
        assert result["submission"] == submission(by_number[submitted[0]])

    @staticmethod
    def check_stories(agent: GovernedAgent, human: Human | None) -> None:
        """Each ASK_HUMAN asked the human once; a declined end had a human decline."""
        asks = [d for d in agent.decisions if d.action is af.Action.ASK_HUMAN]
        assert len(asks) == (len(human.asked) if human is not None else len(asks))
        if human is not None:
            for decision, calls in zip(asks, human.asked, strict=True):
                assert [c.id for c in decision.tool_calls] == [c.id for c in calls]
        ended = agent.controller.exit_reason
        if ended is af.ExitReason.HUMAN_DECLINED:
            assert human is not None, "declined with no human to ask"
            assert human.declined, "declined with no human declining"


class TestFoundByTheProperty:
    """What the property found, as plain regressions."""

    def test_without_a_human_nothing_is_said_to_be_declined(self, tmp_path: Path) -> None:
        """With no `approve`, an asked command used to end the run HUMAN_DECLINED, no human
        having been asked; now it ends PERMISSION_DENIED and the command never ran."""
        policy = af.Policy(permissions={"bash": "ask"})
        outputs = [output(bash("c1", "echo ls:1 >> log"))]
        agent = GovernedAgent(
            LitellmShaped(outputs=outputs),
            LocalEnvironment(cwd=str(tmp_path)),
            policy=policy,
            **CONFIG,
        )
        result = agent.run("task")
        assert not (tmp_path / "log").exists()
        assert result["exit_status"] == "permission_denied"
        assert agent.controller.exit_reason is af.ExitReason.PERMISSION_DENIED
        assert "no `approve`" in agent.decisions[-1].reason
        assert any(m.get("tool_call_id") == "c1" for m in agent.messages)
