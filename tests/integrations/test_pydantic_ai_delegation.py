"""pydantic-ai's agent delegation: a governed agent run by a governed tool is a child of the
calling run, narrowed by its policy and charged to its budgets as it spends."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import agentfsm as af
from agentfsm.integrations.pydantic_ai import GovernedModel

A, X = af.Action, af.ExitReason


def spent(parts: list[Any]) -> ModelResponse:
    """A response of 30 tokens (20 in, 10 out)."""
    return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=20, output_tokens=10))


class Delegation:
    """A parent that delegates `dig` to a child agent, which looks up keys until told to stop."""

    def __init__(self, parent_policy: af.Policy, child_policy: af.Policy | None = None) -> None:
        self.child_calls = 0
        self.looked: list[str] = []
        self.child_model = GovernedModel(FunctionModel(self.child_reply), child_policy)
        self.child = Agent(self.child_model, toolsets=[self.child_model.toolset([self.lookup])])
        self.parent_model = GovernedModel(FunctionModel(self.parent_reply), parent_policy)
        self.parent = Agent(
            self.parent_model, toolsets=[self.parent_model.toolset([self.delegate])]
        )

    def lookup(self, key: str) -> str:
        """Look a key up."""
        self.looked.append(key)
        return "nothing"

    async def delegate(self, ctx: RunContext[None], task: str) -> str:
        """Hand a task to the child agent."""
        return str((await self.child.run(task)).output)

    def child_reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.child_calls += 1
        if self.child_calls > 10:
            return spent([TextPart("found nothing")])
        return spent([ToolCallPart("lookup", {"key": f"k{self.child_calls}"})])

    def parent_reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return spent([ToolCallPart("delegate", {"task": "dig"}, tool_call_id="d1")])
        return spent([TextPart("parent done")])


class TestDelegationSharesTheLedger:
    def test_the_child_stops_at_the_parents_cap(self) -> None:
        """Parent 30 + child 3 x 30 tokens passes the parent's 100: the child stops there by
        TreeBudget() (it made 11 calls before), and the parent stops at its next decision."""
        tree = Delegation(af.Policy(max_tokens=100))
        result = tree.parent.run_sync("find x")
        assert tree.child_calls == 3
        child_end = tree.child_model.decisions[-1]
        assert (child_end.action, child_end.exit_reason, child_end.guard) == (
            A.STOP,
            X.TOKEN_BUDGET,
            "TreeBudget()",
        )
        parent_end = tree.parent_model.decisions[-1]
        assert (parent_end.action, parent_end.exit_reason) == (A.STOP, X.TOKEN_BUDGET)
        assert "120 tokens used of a budget of 100" in parent_end.reason
        assert str(result.output).startswith("[agentfsm stop: token_budget]")

    def test_the_child_never_runs_what_the_parent_denies(self) -> None:
        """The parent denies `lookup` (a rule for any tool named so); the child's own policy
        allows it: the child's calls are refused, none runs."""
        parent = af.Policy(permission_rules=["deny look*"])
        tree = Delegation(parent, af.Policy(permissions={"lookup": "allow"}, max_turns=3))
        tree.parent.run_sync("find x")
        assert tree.looked == []
        refused = [r for d in tree.child_model.decisions for r in d.results]
        assert refused
        assert all("denied" in str(r.content) for r in refused)


class TestShowBudget:
    """`GovernedModel(..., show_budget=True)` adds what the run tree has left to each
    request's instructions; pydantic-ai's own history is not changed."""

    @staticmethod
    def run(**given: Any) -> tuple[list[str | None], Any]:
        seen: list[str | None] = []

        def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            last = messages[-1]
            seen.append(getattr(last, "instructions", None))
            if len(seen) == 1:
                return spent([ToolCallPart("lookup", {"key": "a"}, tool_call_id="l1")])
            return spent([TextPart("done")])

        model = GovernedModel(FunctionModel(reply), af.Policy(max_tokens=100, max_turns=5), **given)

        def lookup(key: str) -> str:
            """Look a key up."""
            return "nothing"

        agent = Agent(model, instructions="Be brief.", toolsets=[model.toolset([lookup])])
        result = agent.run_sync("find a")
        assert result.output == "done"
        return seen, result

    def test_each_request_sees_what_is_left(self) -> None:
        seen, result = self.run(show_budget=True)
        assert seen == [
            "Be brief.\n\nBudget left: 5 model turns, 100 tokens.",
            "Be brief.\n\nBudget left: 4 model turns, 70 tokens.",
        ]
        kept = [getattr(m, "instructions", None) for m in result.all_messages()]
        assert not any(k and "Budget left" in k for k in kept)

    def test_nothing_is_shown_unless_asked(self) -> None:
        assert self.run()[0] == ["Be brief.", "Be brief."]
