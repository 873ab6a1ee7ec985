"""LangGraph's own features beside agentfsm's policy: neither side's stop is lost.

Each drawn graph (agentfsm's `create_agent`, with LangGraph's `ToolNode` and an in-memory
checkpointer) gives every tool one of LangGraph's own forms: a plain tool, a tool declared
`return_direct=True` (LangGraph ends the run with its result), or a tool that asks a human
itself with LangGraph's `interrupt()` (its human-in-the-loop pattern: it acts only on a yes).
Random policies (rules, tables, hooks) and model outputs come from tests/seam_strategies.py; the
model is LangChain's GenericFakeChatModel, the human a drawn list of answers to every interrupt,
agentfsm's or a tool's.

Oracle: no call the policy denies runs, none it asks about runs before agentfsm's human said
yes, none twice; a tool that asks its own human acts only on its yes; once a `return_direct`
tool answered, no call of a later model output runs; every decision's story is true: a human
was asked about every ASK_HUMAN, and no run ends HUMAN_DECLINED unless agentfsm's human
declined.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import event, given
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent
from tests.integrations.test_seam_properties import calls_message
from tests.seam_strategies import (
    TOOLS,
    SideEffects,
    calls_by_n,
    check_log,
    human_answers,
    policies,
    raw_calls,
    tool_kinds,
    turns_of_a_run,
)

KINDS = ("plain", "direct", "asks")


@dataclass
class Host:
    """The tools in their drawn forms, and what the humans said."""

    kinds: dict[str, str]
    answers: Iterator[bool]
    effects: SideEffects = field(default_factory=SideEffects)
    approved: set[int] = field(default_factory=set)
    """The `n` of calls agentfsm's human approved."""
    tool_yes: set[int] = field(default_factory=set)
    """The `n` of calls whose tool's own interrupt was answered yes."""
    asked: set[str] = field(default_factory=set)
    declined: bool = False

    def tools(self) -> list[BaseTool]:
        """Each logging tool in its form."""
        return [self._tool(t) for t in self.effects.tools()]

    def _tool(self, function: Any) -> BaseTool:
        kind = self.kinds[function.__name__]
        if kind != "asks":
            return StructuredTool.from_function(function, return_direct=kind == "direct")

        def asks(n: int, query: str = "", command: str = "", path: str = "", task: str = "") -> str:
            if interrupt({"tool": function.__name__, "n": n}) is not True:
                return "the user said no"
            return str(function(n, query, command, path, task))

        return StructuredTool.from_function(
            asks, name=function.__name__, description=function.__doc__
        )

    def reply(self, value: Any) -> bool:
        """The next answer to one interrupt, recorded by whose it is."""
        yes = next(self.answers, False)
        if "tool" in value:  # the tool's own question
            if yes:
                self.tool_yes.add(int(value["n"]))
            return yes
        calls = value["tool_calls"]
        self.asked.update(str(c["id"]) for c in calls)
        if yes:
            self.approved.update(int((c.get("args") or {}).get("n", 0)) for c in calls)
        self.declined |= not yes
        return yes

    def run(self, graph: Any) -> dict[str, Any]:
        """Run to the end, answering every interrupt."""
        config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 80}
        out: dict[str, Any] = graph.invoke({"messages": [("user", "go")]}, config)
        while "__interrupt__" in out:
            pending = out["__interrupt__"]
            resume = {i.id: self.reply(i.value) for i in pending}
            out = graph.invoke(Command(resume=resume), config)
        return out


class TestOwnFeaturesBesidePolicy:
    """Plain, `return_direct` and self-asking (`interrupt()`) tools under random policies."""

    @given(
        policies(hooks=True),
        tool_kinds(KINDS),
        turns_of_a_run(),
        human_answers(),
    )
    def test_no_stopped_call_runs_and_every_story_is_true(
        self,
        policy: af.Policy,
        kinds: dict[str, str],
        outputs: list[dict[str, Any]],
        answers: list[bool],
    ) -> None:
        """No call the policy or the tool's own human stops runs, none twice, none after a
        `return_direct` tool answered; every ASK_HUMAN was put to agentfsm's human and a
        HUMAN_DECLINED end had that human decline."""
        host = Host(kinds, iter(answers * 8))
        replies = [calls_message(raw_calls(o)) for o in outputs]
        fake = GenericFakeChatModel(messages=iter([*replies, *[calls_message([])] * 12]))
        graph = create_agent(fake, host.tools(), policy, checkpointer=InMemorySaver())
        out = host.run(graph)
        calls = calls_by_n(outputs)
        check_log(host.effects, calls, policy, host.approved)
        for name, n in host.effects.log:
            if kinds[name] == "asks":
                assert n in host.tool_yes, f"{name} #{n} acted without its own human's yes"
        self.check_direct(host, outputs)
        self.check_stories(out["decisions"], host)
        event(f"calls ran: {bool(host.effects.log)}")

    @staticmethod
    def check_direct(host: Host, outputs: list[dict[str, Any]]) -> None:
        """No call of a later output ran once a `return_direct` tool answered."""
        turn_of = {int(a.get("n", 0)): t for t, o in enumerate(outputs) for _, _, a in raw_calls(o)}
        direct = [turn_of[n] for name, n in host.effects.log if host.kinds[name] == "direct"]
        if direct:
            last = min(direct)
            later = [(name, n) for name, n in host.effects.log if turn_of[n] > last]
            assert not later, f"ran after a return_direct tool answered: {later}"
            event("a return_direct tool answered")

    @staticmethod
    def check_stories(decisions: list[dict[str, Any]], host: Host) -> None:
        """Every ASK_HUMAN reached agentfsm's human; HUMAN_DECLINED only after a no."""
        for decision in decisions:
            if decision["action"] == "ask_human":
                ids = {str(c["id"]) for c in decision["tool_calls"]}
                assert ids <= host.asked, f"no human was asked about {ids - host.asked}"
            if decision["exit_reason"] == "human_declined":
                assert host.declined, f"declined with no human declining: {decision['reason']}"


class TestReturnDirect:
    """A tool declared `return_direct=True`."""

    def test_the_run_ends_with_its_result(self) -> None:
        """Natively LangGraph ends the run once it answered; the governed graph used to call
        the model again, whose next call then ran. Now the run ends FINAL with its result."""
        host = Host({name: "plain" for name in TOOLS} | {"sql": "direct"}, iter([]))
        first = calls_message([("c1", "sql", {"n": 1})])
        after = calls_message([("c2", "read", {"n": 2})])
        fake = GenericFakeChatModel(messages=iter([first, after, calls_message([])]))
        graph = create_agent(fake, host.tools(), af.Policy(), checkpointer=InMemorySaver())
        out = host.run(graph)
        assert host.effects.log == [("sql", 1)]
        last = out["decisions"][-1]
        assert (last["action"], last["exit_reason"]) == ("final", "completed")
        assert out["messages"][-1].content == "sql ran 1"
