"""pydantic-ai's toolset combinators: the policy names the tools the model actually calls.

A toolset that renames or wraps tools (`.prefixed()`, `.renamed()`, `.filtered()`,
`.prepared()`, `WrapperToolset`, `CombinedToolset`) changes the names the model calls. The
integration declares the final names to the Controller, so a rule or a `permissions` entry
naming an old (or any undeclared) name is refused before the model is called, with "did you
mean"; a permissions entry used to be silently dead, and the renamed tool ran. The property
draws chains of combinators, where agentfsm's toolset sits in them, policies written for the
old or the final names, model outputs and every kind of approval answer (yes, no, a denial
with a message, `ToolApproved()`, an approval that edits the arguments).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, function_call
from hypothesis import event, given
from hypothesis import strategies as st
from langchain_core.tools import tool as lc_tool
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import (
    AbstractToolset,
    CombinedToolset,
    FunctionToolset,
    WrapperToolset,
)

import agentfsm as af
from agentfsm._permissions import is_glob
from agentfsm.exceptions import PolicyError
from agentfsm.integrations.langgraph import Decide
from agentfsm.integrations.openai_agents import governed
from agentfsm.integrations.pydantic_ai import GovernedModel
from tests.seam_strategies import VALUES, SideEffects, check_log, model_outputs, policies, raw_calls

Toolset = AbstractToolset[Any]
Step = tuple[str, Any]
"""One combinator: ("prefixed", prefix), ("renamed", names), ("filtered", names), ("wrapper",
None), ("prepared", None), ("combined", names split off)."""


def deleting_toolset(ran: list[str]) -> FunctionToolset[Any]:
    """One real tool that deletes (records) a path."""

    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return FunctionToolset([delete_file])


def deny_run(policy: af.Policy, governed: Callable[[GovernedModel], Agent[None, Any]]) -> None:
    """Run an agent whose model calls `fs_delete_file('/etc/x')`."""
    responses = [
        ModelResponse(
            parts=[ToolCallPart("fs_delete_file", {"path": "/etc/x"}, tool_call_id="c1")]
        ),
        ModelResponse(parts=[TextPart("done")]),
    ]

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return responses.pop(0)

    model = GovernedModel(FunctionModel(reply), policy)
    governed(model).run_sync("clean up")


PLACES: dict[str, Callable[[GovernedModel, list[str]], Agent[None, Any]]] = {
    "inside": lambda model, ran: Agent(
        model, toolsets=[model.toolset(deleting_toolset(ran).prefixed("fs"))]
    ),
    "outside": lambda model, ran: Agent(
        model, toolsets=[model.toolset(deleting_toolset(ran)).prefixed("fs")]
    ),
    "capability": lambda model, ran: Agent(
        model,
        toolsets=[deleting_toolset(ran).prefixed("fs")],
        capabilities=[model.capability()],
    ),
}
"""Where agentfsm's toolset sits: around the prefixed toolset, inside it, or as a capability."""


class TestRenamedTools:
    """A prefixed tool, with agentfsm's toolset inside, outside or as a capability."""

    @pytest.mark.parametrize("place", list(PLACES))
    def test_a_permissions_entry_for_the_old_name_is_refused(self, place: str) -> None:
        """`permissions={"delete_file": "deny"}` used to be dead and `fs_delete_file` ran."""
        ran: list[str] = []
        policy = af.Policy(permissions={"delete_file": "deny"})
        with pytest.raises(PolicyError, match="did you mean 'fs_delete_file'"):
            deny_run(policy, lambda model: PLACES[place](model, ran))
        assert ran == []

    @pytest.mark.parametrize("place", list(PLACES))
    def test_a_rule_for_the_old_name_is_refused(self, place: str) -> None:
        """The same intent as a rule is refused the same way."""
        ran: list[str] = []
        with pytest.raises(PolicyError, match="did you mean 'fs_delete_file'"):
            deny_run(
                af.Policy(permission_rules=["deny delete_file"]),
                lambda model: PLACES[place](model, ran),
            )
        assert ran == []

    @pytest.mark.parametrize("place", list(PLACES))
    def test_the_final_name_is_governed(self, place: str) -> None:
        """A permissions entry naming the name the model calls denies it."""
        ran: list[str] = []
        policy = af.Policy(permissions={"fs_delete_file": "deny"})
        deny_run(policy, lambda model: PLACES[place](model, ran))
        assert ran == []

    def test_a_rule_for_a_tool_filtered_away_is_refused(self) -> None:
        """With every tool filtered away the integration declared no tools at all (any name
        accepted), so a rule naming the filtered tool was never checked."""
        ran: list[str] = []

        def agent(model: GovernedModel) -> Agent[None, Any]:
            hidden = deleting_toolset(ran).filtered(lambda ctx, tool: False)
            return Agent(model, toolsets=[model.toolset(hidden)])

        with pytest.raises(PolicyError, match="delete_file"):
            deny_run(af.Policy(permission_rules=["deny delete_file"]), agent)
        assert ran == []


# -- the property --------------------------------------------------------------------------

NAMES = ("sql", "bash", "read", "write", "submit", "research")
"""The tools of SideEffects, as the model's outputs name them."""


@st.composite
def chains(draw: st.DrawFn) -> list[Step]:
    """A chain of pydantic-ai's toolset combinators, innermost first."""
    step = st.one_of(
        st.tuples(st.just("prefixed"), st.sampled_from(["fs", "x"])),
        st.tuples(st.just("renamed"), st.sets(st.sampled_from(NAMES), max_size=3)),
        st.tuples(st.just("filtered"), st.sets(st.sampled_from(NAMES), min_size=1)),
        st.tuples(st.just("wrapper"), st.none()),
        st.tuples(st.just("prepared"), st.none()),
        st.tuples(st.just("combined"), st.sets(st.sampled_from(NAMES), max_size=3)),
    )
    return draw(st.lists(step, max_size=3))


def renamed(kind: str, value: Any, current: dict[str, str]) -> dict[str, str]:
    """What each original tool is called after one combinator (a tool filtered away is
    absent), given what it was called before."""
    if kind == "prefixed":
        return {o: f"{value}_{c}" for o, c in current.items()}
    if kind == "renamed":
        return {o: f"{c}2" if o in value else c for o, c in current.items()}
    if kind == "filtered":
        return {o: c for o, c in current.items() if o in value}
    return current


def final_names(chain: list[Step]) -> dict[str, str]:
    """What each original tool is called after the whole chain."""
    names = {n: n for n in NAMES}
    for kind, value in chain:
        names = renamed(kind, value, names)
    return names


def apply(chain: list[Step], base: Toolset, wrap_first: Callable[[Toolset], Toolset]) -> Toolset:
    """`base` through the chain; `wrap_first` is applied to the innermost toolset."""
    toolset = wrap_first(base)
    current = {n: n for n in NAMES}
    for kind, value in chain:
        after = renamed(kind, value, current)
        if kind == "prefixed":
            toolset = toolset.prefixed(value)
        elif kind == "renamed":
            toolset = toolset.renamed({after[o]: current[o] for o in value if o in current})
        elif kind == "filtered":
            toolset = toolset.filtered(_keeping(set(after.values())))
        elif kind == "wrapper":
            toolset = WrapperToolset(toolset)
        elif kind == "prepared":
            toolset = toolset.prepared(_described)
        elif kind == "combined":
            toolset = CombinedToolset([toolset])
        current = after
    return toolset


def _keeping(names: set[str]) -> Callable[[Any, Any], bool]:
    """A `filtered` function keeping the tools of these names."""
    return lambda ctx, tool: tool.name in names


async def _described(ctx: Any, tools: list[Any]) -> list[Any]:
    """A `prepare` function that rewrites every description (names stay)."""
    return [dataclasses.replace(t, description=f"{t.description} (prepared)") for t in tools]


def translated(policy: af.Policy, names: dict[str, str]) -> af.Policy:
    """`policy` written for the final names: each exact tool name mapped through `names`."""
    rules = [
        r.model_copy(update={"tool": names.get(r.tool, r.tool)}) for r in policy.permission_rules
    ]
    permissions = {names.get(k, k): v for k, v in policy.permissions.items()}
    named = {
        field: frozenset(names.get(n, n) for n in getattr(policy, field))
        for field in ("ask_floor", "final_tools", "handoffs")
    }
    return policy.model_copy(
        update={"permission_rules": rules, "permissions": permissions, **named}
    )


def stale(policy: af.Policy, final: set[str]) -> list[str]:
    """The exact names the policy gives that are no final tool: each makes it refused."""
    found = [k for k in policy.permissions if k != "*" and k not in final]
    found += [
        r.tool for r in policy.permission_rules if not is_glob(r.tool) and r.tool not in final
    ]
    for field in ("ask_floor", "final_tools", "handoffs"):
        found += [n for n in getattr(policy, field) if n not in final]
    return found


ANSWERS = st.sampled_from(["yes", "no", "denied", "approved", "edit"])


class Answers:
    """Answers to each approval request, drawn per call; what they approved, by `n`."""

    def __init__(self, kinds: list[str], edits: list[str]) -> None:
        self.kinds, self.edits = iter(kinds), iter(edits)
        self.approved: set[int] = set()
        self.edited: dict[int, af.ToolCall] = {}
        self.next_n = 900_000

    def answer(self, call: ToolCallPart) -> Any:
        """The answer to one asked call (the `n` it approves noted)."""
        kind = next(self.kinds, "no")
        args = call.args_as_dict()
        if kind in ("yes", "approved"):
            self.approved.add(int(args.get("n", 0)))
            return True if kind == "yes" else ToolApproved()
        if kind == "edit":
            self.next_n += 1
            override = {**args, "n": self.next_n, "path": next(self.edits, "x")}
            full = {"query": "", "command": "", "path": "", "task": "", **override}
            self.edited[self.next_n] = af.ToolCall(
                id=call.tool_call_id, name=call.tool_name, arguments=full
            )
            self.approved.add(self.next_n)
            return ToolApproved(override_args=override)
        return False if kind == "no" else ToolDenied("not this one")


def scripted(
    outputs: list[dict[str, Any]], names: dict[str, str]
) -> tuple[FunctionModel, dict[int, af.ToolCall]]:
    """The outputs as a FunctionModel calling the final names (a tool filtered away is called
    by its old name); every call by its `n`, as agentfsm reads it."""
    responses: list[ModelResponse] = []
    calls: dict[int, af.ToolCall] = {}
    for output in outputs:
        parts: list[TextPart | ToolCallPart] = []
        for call_id, name, arguments in raw_calls(output):
            final = names.get(name, name)
            part = ToolCallPart(final, arguments)  # a missing id: pydantic-ai makes one
            parts.append(dataclasses.replace(part, tool_call_id=call_id) if call_id else part)
            calls[int(arguments["n"])] = af.ToolCall(
                id=call_id or "x", name=final, arguments=arguments
            )
        responses.append(ModelResponse(parts=parts or [TextPart("done")]))

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return responses.pop(0) if responses else ModelResponse(parts=[TextPart("done")])

    return FunctionModel(reply), calls


async def run_answering(agent: Agent[None, Any], answers: Answers) -> None:
    """Run to the end, answering every approval request call by call."""
    result = await agent.run("go")
    for _ in range(8):
        if not isinstance(result.output, DeferredToolRequests):
            return
        approvals = {c.tool_call_id: answers.answer(c) for c in result.output.approvals}
        result = await agent.run(
            message_history=result.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals=approvals),
        )


class TestToolsetProperty:
    """Chains of combinators, agentfsm's toolset anywhere in them, policies for old or final
    names, and every kind of approval answer."""

    @given(
        chains(),
        st.sampled_from(["inside", "outside", "capability"]),
        policies(hooks=True),
        st.booleans(),
        st.lists(model_outputs(wrappers=False), min_size=1, max_size=2),
        st.lists(ANSWERS, min_size=6, max_size=6),
        st.lists(st.sampled_from(VALUES), min_size=6, max_size=6),
    )
    def test_the_policy_names_what_the_model_calls(
        self,
        chain: list[Step],
        place: str,
        drawn: af.Policy,
        for_final_names: bool,
        outputs: list[dict[str, Any]],
        kinds: list[str],
        edits: list[str],
    ) -> None:
        """A policy naming a tool the model cannot call is refused before anything runs;
        otherwise no denied call runs, an asked one only once approved (an edited approval
        is checked as the edited call), and none twice."""
        names = final_names(chain)
        policy = translated(drawn, names) if for_final_names else drawn
        effects = SideEffects()
        model_fn, calls = scripted(outputs, names)
        model = GovernedModel(model_fn, policy, on_decline="feedback")
        base: Toolset = FunctionToolset(effects.tools())
        capabilities: list[Any] = []
        toolsets: list[Toolset] = []
        if place == "inside":
            toolsets = [model.toolset(apply(chain, base, _same))]
        elif place == "outside":
            toolsets = [apply(chain, base, model.toolset)]
        else:
            toolsets, capabilities = [apply(chain, base, _same)], [model.capability()]
        agent: Agent[None, Any] = Agent(
            model,
            toolsets=toolsets,
            capabilities=capabilities,
            output_type=[str, DeferredToolRequests],
        )
        answers = Answers(kinds, edits)
        refused = stale(policy, set(names.values()))
        error: PolicyError | None = None
        try:
            asyncio.run(run_answering(agent, answers))
        except PolicyError as exc:
            error = exc
        except UnexpectedModelBehavior:  # pydantic-ai's own limit on a tool's retries
            event("pydantic-ai ended the run (tool retries)")
        if error is not None:
            assert effects.log == []
            assert refused or _glob_matching_nothing(policy, set(names.values())), error
            event("refused: the policy names a tool the model cannot call")
            return
        assert not refused, f"the policy names {refused}, which the model cannot call"
        check_log(effects, {**calls, **answers.edited}, policy, answers.approved)
        event(f"chain: {[k for k, _ in chain]}, place: {place}, ran: {bool(effects.log)}")


def _same(toolset: Toolset) -> Toolset:
    """The toolset itself: agentfsm's toolset is elsewhere in the chain."""
    return toolset


def _glob_matching_nothing(policy: af.Policy, final: set[str]) -> bool:
    """Whether a rule's tool glob matches no final name (its arguments then fit no tool)."""
    return any(
        is_glob(r.tool) and not fnmatch.filter(final, r.tool) for r in policy.permission_rules
    )


class TestOtherFrameworksRenaming:
    """The Agents SDK's `name_override` and LangChain's tool `name` rename a function the same
    way: a permissions entry for the function's own name is refused before the model runs."""

    def test_the_agents_sdk_declares_the_overridden_name(self) -> None:
        """`function_tool(name_override=...)`: the policy must name what the model calls."""
        ran: list[str] = []

        def delete_file(path: str) -> str:
            """Delete a file."""
            ran.append(path)
            return "deleted"

        tool = function_tool(delete_file, name_override="fs_delete_file")
        script = [[function_call("fs_delete_file", {"path": "/etc/x"}, call_id="c1")]]
        agent = governed(
            SdkAgent(name="a", tools=[tool], model=ScriptedModel(script)),
            af.Policy(permissions={"delete_file": "deny"}),
        )
        config = RunConfig(tracing_disabled=True)
        with pytest.raises(PolicyError, match="did you mean 'fs_delete_file'"):
            asyncio.run(Runner.run(agent, "clean up", run_config=config))
        assert ran == []

    def test_langgraph_declares_the_tools_name(self) -> None:
        """A LangChain tool named apart from its function: `Decide` refuses the old name."""
        ran: list[str] = []

        @lc_tool("fs_delete_file")
        def delete_file(path: str) -> str:
            """Delete a file."""
            ran.append(path)
            return "deleted"

        with pytest.raises(PolicyError, match="did you mean 'fs_delete_file'"):
            Decide(af.Policy(permissions={"delete_file": "deny"}), [delete_file])
        assert ran == []
