"""pydantic-ai's own tool features beside agentfsm's policy: neither side's stop is lost.

Each drawn agent gives every tool one of pydantic-ai's own forms: a plain tool (`tools=`), a
`requires_approval=True` tool, a tool in a toolset of its own (`toolsets=`, as an MCP server
is), or an external tool (`ExternalToolset`, run by the caller when the run hands it out). The
tools are governed with `model.capability()`, or not at all (the run must then refuse to start).
Random policies (rules, tables, hooks) and model outputs come from tests/seam_strategies.py; the
model is pydantic-ai's own `FunctionModel`, the human a drawn list of answers.

Oracle: no call the policy denies runs, no call the policy or pydantic-ai asks about runs
unapproved, none runs twice; and every decision's story is true: a human was asked about every
ASK_HUMAN, and no run ends HUMAN_DECLINED unless a human declined.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, Tool
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, FunctionToolset

import agentfsm as af
from agentfsm.exceptions import ToolDefinitionError
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.seam_strategies import (
    SideEffects,
    calls_by_n,
    check_log,
    human_answers,
    policies,
    raw_calls,
    tool_kinds,
    turns_of_a_run,
)

KINDS = ("plain", "approval", "toolset", "external")
SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "query": {"type": "string"},
        "command": {"type": "string"},
        "path": {"type": "string"},
        "task": {"type": "string"},
    },
    "required": ["n"],
}


def scripted(outputs: list[dict[str, Any]]) -> FunctionModel:
    """A FunctionModel answering with the drawn outputs in turn, then text."""
    turns = iter(outputs)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        output = next(turns, None)
        calls = raw_calls(output) if output is not None else []
        if not calls:
            return ModelResponse(parts=[TextPart("done")])
        # A missing id ("") is left to pydantic-ai, which makes one up as for a provider's.
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=i) if i else ToolCallPart(name, args)
                for i, name, args in calls
            ]
        )

    return FunctionModel(respond)


@dataclass
class Host:
    """The agent's tools in their drawn forms, and what the human and the caller did."""

    kinds: dict[str, str]
    effects: SideEffects = field(default_factory=SideEffects)
    approved: set[int] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)
    """The call ids a human was asked about."""
    declined: bool = False

    def agent(self, model: GovernedModel, governing: bool) -> Agent[None, Any]:
        """The agent with each tool in its form, governed by `model.capability()` or not."""
        functions = {t.__name__: t for t in self.effects.tools()}
        tools: list[Any] = []
        toolsets: list[AbstractToolset[None]] = []
        for name, kind in self.kinds.items():
            if kind == "external":
                definition = ToolDefinition(name=name, parameters_json_schema=SCHEMA)
                toolsets.append(ExternalToolset([definition]))
            elif kind == "toolset":
                toolsets.append(FunctionToolset([functions[name]]))
            else:
                tools.append(Tool(functions[name], requires_approval=kind == "approval"))
        return Agent(
            model,
            tools=tools,
            toolsets=toolsets,
            output_type=[str, DeferredToolRequests],
            capabilities=[model.capability()] if governing else [],
        )

    def answer(self, requests: DeferredToolRequests, yes: bool) -> DeferredToolResults:
        """The human's answer to every approval, and the caller's run of every external call."""
        for call in requests.approvals:
            self.asked.add(call.tool_call_id)
            if yes:
                self.approved.add(int(call.args_as_dict().get("n", 0)))
        self.declined |= bool(requests.approvals) and not yes
        results: dict[str, Any] = {}
        for call in requests.calls:
            n = int(call.args_as_dict().get("n", 0))
            self.effects.log.append((call.tool_name, n))
            results[call.tool_call_id] = f"{call.tool_name} ran {n}"
        approvals: dict[str, Any] = {c.tool_call_id: yes for c in requests.approvals}
        return DeferredToolResults(approvals=approvals, calls=results)

    async def run(self, agent: Agent[None, Any], answers: Iterator[bool]) -> None:
        """Run to the end, answering each request for approval with the next answer."""
        result = await agent.run("go")
        while isinstance(result.output, DeferredToolRequests):
            given = self.answer(result.output, next(answers, False))
            result = await agent.run(
                message_history=result.all_messages(), deferred_tool_results=given
            )


class TestOwnFeaturesBesidePolicy:
    """pydantic-ai's plain, approval, toolset and external tools under random policies."""

    @given(
        policies(hooks=True),
        tool_kinds(KINDS),
        turns_of_a_run(),
        human_answers(),
        st.sampled_from([True, True, True, False]),
    )
    def test_no_stopped_call_runs_and_every_story_is_true(
        self,
        policy: af.Policy,
        kinds: dict[str, str],
        outputs: list[dict[str, Any]],
        answers: list[bool],
        governing: bool,
    ) -> None:
        """No call the policy denies or the framework or policy asks about runs unapproved,
        none twice; every ASK_HUMAN was put to a human, and a HUMAN_DECLINED end had a human
        decline; without `model.capability()` the run refuses to start and nothing runs."""
        host = Host(kinds)
        model = GovernedModel(scripted(outputs), policy, on_decline="feedback")
        agent = host.agent(model, governing)
        ended, refused = True, ""
        try:
            asyncio.run(host.run(agent, iter(answers * 4)))
        except ToolDefinitionError as exc:
            refused = str(exc)
        except UnexpectedModelBehavior:  # pydantic-ai's own limit on a tool's retries
            ended = False
            event("pydantic-ai ended the run (tool retries)")
        if not governing:  # every drawn agent has tools: an ungoverned one never starts
            assert "model.capability()" in refused
            assert host.effects.log == []
            event("ungoverned: refused")
            return
        assert not refused, refused
        calls = calls_by_n(outputs)
        check_log(host.effects, calls, policy, host.approved)
        for name, n in host.effects.log:  # pydantic-ai's own approval held too
            if kinds[name] == "approval":
                assert n in host.approved, f"{name} #{n} ran without pydantic-ai's approval"
        self.check_stories(model, host, ended)
        event(f"calls ran: {bool(host.effects.log)}")

    @staticmethod
    def check_stories(model: GovernedModel, host: Host, ended: bool) -> None:
        """Every ASK_HUMAN was put to a human; a human-declined end had a human decline."""
        for decision in model.decisions:
            if decision.exit_reason is af.ExitReason.HUMAN_DECLINED:
                assert host.declined, f"declined with no human declining: {decision.reason}"
            if decision.action is af.Action.ASK_HUMAN and ended:
                asked = {c.id for c in decision.tool_calls}
                assert asked <= host.asked, f"no human was asked about {asked - host.asked}"


@pytest.mark.parametrize("kind", KINDS)
def test_each_form_alone_runs_when_allowed(kind: str) -> None:
    """One allowed call to a tool of each form runs exactly once (the external one by the
    caller, the approval one once a human approved)."""
    host = Host({"sql": kind})
    call = {"choices": [{"message": {"tool_calls": [_call("c1", "sql", 7)]}}]}
    model = GovernedModel(scripted([call]), af.Policy(), on_decline="feedback")
    asyncio.run(host.run(host.agent(model, governing=True), iter([True])))
    assert host.effects.log == [("sql", 7)]


def _call(call_id: str, name: str, n: int) -> dict[str, Any]:
    """A chat tool call with `n`."""
    arguments = json.dumps({"n": n})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
