"""pydantic-ai's own tools under agentfsm: governed, or refused before anything runs.

The agent's own tools (`@agent.tool_plain`, `@agent.tool`, `Tool(...)` in `tools=`, a toolset in
`toolsets=`) run on pydantic-ai's own `FunctionModel` with real functions. A tool agentfsm cannot
govern used to run whatever the policy said (an `ask` ran unasked); now the run refuses to start.
`model.capability()` governs every tool of the agent. pydantic-ai's own deferrals still hold:
`requires_approval=True` waits for its approval, and an external tool is handed to the caller only
once agentfsm cleared it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext, Tool
from pydantic_ai.capabilities import NativeTool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.native_tools import CodeExecutionTool
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset

import agentfsm as af
from agentfsm.exceptions import RunError, ToolDefinitionError
from agentfsm.integrations.pydantic_ai import GovernedModel

A, X = af.Action, af.ExitReason
Output = str | DeferredToolRequests
OUTPUT: list[Any] = [str, DeferredToolRequests]


def caps(model: GovernedModel, governing: bool) -> list[Any]:
    """`[model.capability()]` when `governing`, else no capability."""
    return [model.capability()] if governing else []


class Script:
    """Delete `/x`, then answer; every request is kept."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The call first, the answer after."""
        self.seen.append(list(messages))
        if len(self.seen) == 1:
            call = ToolCallPart("delete_file", {"path": "/x"}, tool_call_id="d1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("Done.")])


def governed(verdict: str, **options: Any) -> tuple[GovernedModel, Script]:
    """A GovernedModel whose policy says `verdict` of `delete_file`."""
    script = Script()
    policy = af.Policy(permissions={"delete_file": verdict})
    return GovernedModel(FunctionModel(script), policy, on_decline="feedback", **options), script


def answered(agent: Agent[None, Output], approve: bool, result: Any = None) -> Any:
    """Run the agent (or go on from `result`), answering every approval request with
    `approve`."""
    result = result if result is not None else agent.run_sync("go")
    while isinstance(result.output, DeferredToolRequests) and result.output.approvals:
        approvals: dict[str, Any] = {c.tool_call_id: approve for c in result.output.approvals}
        result = agent.run_sync(
            message_history=result.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals=approvals),
        )
    return result


def plain(model: GovernedModel, ran: list[str], governing: bool) -> Agent[None, Output]:
    """`@agent.tool_plain`."""
    agent: Agent[None, Output] = Agent(
        model, output_type=OUTPUT, capabilities=caps(model, governing)
    )

    @agent.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    return agent


def with_context(model: GovernedModel, ran: list[str], governing: bool) -> Agent[None, Output]:
    """`@agent.tool` (the tool takes the run context)."""
    agent: Agent[None, Output] = Agent(
        model, output_type=OUTPUT, capabilities=caps(model, governing)
    )

    @agent.tool
    def delete_file(ctx: RunContext[None], path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    return agent


def delete_function(ran: list[str]) -> Callable[[str], str]:
    """A plain function deleting a file (logged)."""

    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    return delete_file


def in_tools(model: GovernedModel, ran: list[str], governing: bool) -> Agent[None, Output]:
    """`Tool(...)` in `tools=`."""
    tool = Tool(delete_function(ran))
    return Agent(model, tools=[tool], output_type=OUTPUT, capabilities=caps(model, governing))


def in_toolsets(model: GovernedModel, ran: list[str], governing: bool) -> Agent[None, Output]:
    """A `FunctionToolset` in `toolsets=` (as an MCP server would be)."""
    toolset = FunctionToolset([delete_function(ran)])
    return Agent(model, toolsets=[toolset], output_type=OUTPUT, capabilities=caps(model, governing))


AGENTS = [
    pytest.param(plain, id="tool_plain"),
    pytest.param(with_context, id="tool"),
    pytest.param(in_tools, id="Tool-in-tools"),
    pytest.param(in_toolsets, id="toolset"),
]
Build = Callable[[GovernedModel, list[str], bool], Agent[None, Output]]


class TestUngovernedToolsAreRefused:
    """A tool outside agentfsm's governed toolset: the run refuses to start."""

    @pytest.mark.parametrize("build", AGENTS)
    def test_an_ask_never_runs_unasked(self, build: Build) -> None:
        """With `ask`, the tool used to run with no human asked; now the run raises
        ToolDefinitionError naming the tool and the fix, and neither the model nor the tool ran."""
        model, script = governed("ask")
        ran: list[str] = []
        with pytest.raises(ToolDefinitionError, match=r"'delete_file'.*model\.capability\(\)"):
            answered(build(model, ran, False), approve=True)
        assert ran == []
        assert script.seen == []

    def test_a_native_tool_is_refused(self) -> None:
        """A native tool runs on the provider's server during the model call: refused."""
        script = Script()
        profile = ModelProfile(supported_native_tools=frozenset({CodeExecutionTool}))
        model = GovernedModel(FunctionModel(script, profile=profile))
        agent = Agent(model, capabilities=[NativeTool(CodeExecutionTool())])
        with pytest.raises(ToolDefinitionError, match="'code_execution'"):
            agent.run_sync("go")
        assert script.seen == []


class TestCapabilityGovernsTheAgentsOwnTools:
    """`Agent(model, ..., capabilities=[model.capability()])`: every tool asks `may_run`."""

    @pytest.mark.parametrize("build", AGENTS)
    @pytest.mark.parametrize(
        ("verdict", "approve", "runs"),
        [
            ("ask", True, ["/x"]),
            ("ask", False, []),
            ("allow", False, ["/x"]),
            ("deny", True, []),
        ],
    )
    def test_the_policy_holds(
        self, build: Build, verdict: str, approve: bool, runs: list[str]
    ) -> None:
        """An `ask` runs once approved and never when declined, a `deny` never runs, an `allow`
        runs once; the run ends with the model's answer."""
        model, _ = governed(verdict)
        ran: list[str] = []
        result = answered(build(model, ran, True), approve)
        assert ran == runs
        assert result.output == "Done."
        asked = A.ASK_HUMAN in [d.action for d in model.decisions]
        assert asked == (verdict == "ask")

    def test_a_governed_toolset_inside_the_capability_asks_once(self) -> None:
        """A tool in `model.toolset(...)` under `model.capability()` too is checked by one of
        them (the inner), so it runs once and is not refused by the outer."""
        model, _ = governed("allow")
        ran: list[str] = []
        agent = Agent(
            model,
            toolsets=[model.toolset([delete_function(ran)])],
            capabilities=[model.capability()],
        )
        assert agent.run_sync("go").output == "Done."
        assert ran == ["/x"]


class TestFrameworkApprovalStillHolds:
    """pydantic-ai's own `requires_approval=True`: the strongest verdict wins."""

    def agent(self, model: GovernedModel, ran: list[str]) -> Agent[None, Output]:
        """The tool with pydantic-ai's own approval flag, in the governed toolset."""
        tool = Tool(delete_function(ran), requires_approval=True)
        return Agent(
            model, toolsets=[model.toolset([tool])], output_type=[str, DeferredToolRequests]
        )

    @pytest.mark.parametrize("verdict", ["allow", "ask"])
    @pytest.mark.parametrize("approve", [True, False])
    def test_it_waits_for_a_human_whatever_agentfsm_allows(
        self, verdict: str, approve: bool
    ) -> None:
        """Allowed or asked by agentfsm, the tool runs only once a human approved it; a decline
        is told as the human's (the run goes on with `on_decline="feedback"`)."""
        model, _ = governed(verdict)
        ran: list[str] = []
        agent = self.agent(model, ran)
        first = agent.run_sync("go")
        assert isinstance(first.output, DeferredToolRequests)
        assert [c.tool_call_id for c in first.output.approvals] == ["d1"]
        assert ran == []
        result = answered(agent, approve, first)
        assert ran == (["/x"] if approve else [])
        assert result.output == "Done."

    def test_a_deny_is_never_put_to_a_human(self) -> None:
        """agentfsm's deny wins over pydantic-ai's approval: nobody is asked, nothing runs."""
        model, _ = governed("deny")
        ran: list[str] = []
        result = self.agent(model, ran).run_sync("go")
        assert result.output == "Done."
        assert ran == []


class TestExternalTools:
    """An `ExternalToolset` tool: its call is handed to the caller to run."""

    def agent(self, model: GovernedModel) -> Agent[None, Output]:
        """The external tool, in the governed toolset."""
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        external = ExternalToolset(
            [ToolDefinition(name="delete_file", parameters_json_schema=schema)]
        )
        return Agent(
            model, toolsets=[model.toolset(external)], output_type=[str, DeferredToolRequests]
        )

    def test_an_asked_external_call_is_approved_before_it_is_handed_out(self) -> None:
        """With `ask`, the call used to be handed to the caller at once, no human asked; now
        the run first asks for approval, and only an approved call is handed out."""
        model, _ = governed("ask")
        agent = self.agent(model)
        first = agent.run_sync("go")
        assert isinstance(first.output, DeferredToolRequests)
        assert (first.output.calls, len(first.output.approvals)) == ([], 1)
        approvals: dict[str, Any] = {"d1": True}
        second = agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals=approvals),
        )
        assert isinstance(second.output, DeferredToolRequests)
        assert [c.tool_call_id for c in second.output.calls] == ["d1"]
        done = agent.run_sync(
            message_history=second.all_messages(),
            deferred_tool_results=DeferredToolResults(calls={"d1": "deleted"}),
        )
        assert done.output == "Done."
        assert [d.action for d in model.decisions][:2] == [A.ASK_HUMAN, A.EXECUTE_TOOLS]

    def test_a_declined_external_call_is_never_handed_out(self) -> None:
        """Declined, the call never reaches the caller."""
        model, _ = governed("ask")
        result = answered(self.agent(model), approve=False)
        assert result.output == "Done."

    def test_a_denied_external_call_is_never_handed_out(self) -> None:
        """Denied, the call never reaches the caller; the model reads the refusal."""
        model, _ = governed("deny")
        result = self.agent(model).run_sync("go")
        assert result.output == "Done."


class TestOutputTools:
    """An output tool (an output function): pydantic-ai ends the run with it, no approval."""

    def run(self, rule: str, ran: list[int]) -> tuple[GovernedModel, Any]:
        """The model calls the output function; the policy has `rule`."""

        def out(x: int) -> str:
            """The output function."""
            ran.append(x)
            return "out"

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            name = info.output_tools[0].name
            return ModelResponse(parts=[ToolCallPart(name, {"x": 1}, tool_call_id="o1")])

        model = GovernedModel(FunctionModel(respond), af.Policy(permission_rules=[rule]))
        return model, Agent(model, output_type=[out, DeferredToolRequests])

    def test_an_ask_on_it_raises_and_it_never_runs(self) -> None:
        """With `ask *`, the output function used to run with no human asked; now the run
        raises RunError naming it, and it never ran."""
        ran: list[int] = []
        _, agent = self.run("ask *", ran)
        with pytest.raises(RunError, match="output tool 'final_result'"):
            agent.run_sync("go")
        assert ran == []

    def test_an_allowed_one_ends_the_run(self) -> None:
        """Allowed, it ends the run as pydantic-ai does."""
        ran: list[int] = []
        _, agent = self.run("allow *", ran)
        assert agent.run_sync("go").output == "out"
        assert ran == [1]
