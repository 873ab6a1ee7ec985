"""The Agents SDK's agents-as-tools and handoffs join the run tree: a governed agent run as a
tool of, or handed off to by, a governed run is its child (narrowed, charged live)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage

import agentfsm as af
from agentfsm.exceptions import DefinitionError
from agentfsm.integrations.openai_agents import GovernedModel, governed

A, X = af.Action, af.ExitReason
USAGE = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)


class Child:
    """A child agent that looks up five keys, then answers; every lookup is recorded."""

    def __init__(self, policy: af.Policy | None = None) -> None:
        self.ran: list[str] = []

        @function_tool
        def lookup(key: str) -> str:
            """Look a key up."""
            self.ran.append(key)
            return "nothing"

        script = [[function_call("lookup", {"key": f"k{n}"}, call_id=f"l{n}")] for n in range(5)]
        script.append([assistant_message("found nothing")])
        self.agent = governed(
            Agent(
                name="child",
                tools=[lookup],
                model=ScriptedModel(script, default_usage=USAGE),
            ),
            policy,
        )


def parent_run(parent: Agent[Any]) -> Any:
    return asyncio.run(Runner.run(parent, "find x", max_turns=20))


class TestAgentAsTool:
    def test_the_child_stops_at_the_parents_cap(self) -> None:
        """Parent 15 + child 3 x 15 tokens passes the parent's 50: the child stops by
        TreeBudget() after two lookups (it ran all five before); the parent stops next."""
        child = Child()
        dig = child.agent.as_tool(tool_name="dig", tool_description="Dig for x.")
        script = [
            [function_call("dig", {"input": "x"}, call_id="d1")],
            [assistant_message("parent done")],
        ]
        parent = governed(
            Agent(name="parent", tools=[dig], model=ScriptedModel(script, default_usage=USAGE)),
            af.Policy(max_tokens=50),
        )
        result = parent_run(parent)
        assert child.ran == ["k0", "k1"]
        model = child.agent.model
        assert isinstance(model, GovernedModel)
        child_end = model.decisions[-1]
        assert (child_end.exit_reason, child_end.guard) == (X.TOKEN_BUDGET, "TreeBudget()")
        assert str(result.final_output).startswith("[agentfsm stop: token_budget]")

    def test_the_child_never_runs_what_the_parent_denies(self) -> None:
        """The parent denies `lookup` by a rule; the child allows it: nothing runs."""
        child = Child(af.Policy(permissions={"lookup": "allow"}, max_turns=3))
        dig = child.agent.as_tool(tool_name="dig", tool_description="Dig for x.")
        script = [
            [function_call("dig", {"input": "x"}, call_id="d1")],
            [assistant_message("parent done")],
        ]
        parent = governed(
            Agent(name="parent", tools=[dig], model=ScriptedModel(script, default_usage=USAGE)),
            af.Policy(permission_rules=["deny look*"]),
        )
        parent_run(parent)
        assert child.ran == []


class TestHandoff:
    def test_the_agent_handed_off_to_stops_at_the_parents_cap(self) -> None:
        """A handoff target's turns charge the parent's 50 tokens: it stops after two lookups."""
        child = Child()
        script = [[function_call("transfer_to_child", {}, call_id="h1")]]
        parent = governed(
            Agent(
                name="parent",
                handoffs=[child.agent],
                model=ScriptedModel(script, default_usage=USAGE),
            ),
            af.Policy(max_tokens=50),
        )
        result = parent_run(parent)
        assert child.ran == ["k0", "k1"]
        assert str(result.final_output).startswith("[agentfsm stop: token_budget]")


class TestShowBudget:
    """`governed(..., show_budget=True)` adds what the run tree has left to the system
    instructions of each model call; without it the instructions are the agent's own."""

    @staticmethod
    def run(**given: Any) -> ScriptedModel:
        @function_tool
        def lookup(key: str) -> str:
            """Look a key up."""
            return "nothing"

        model = ScriptedModel(
            [
                [function_call("lookup", {"key": "a"}, call_id="l1")],
                [assistant_message("done")],
            ],
            default_usage=USAGE,
        )
        agent = Agent(name="brief", instructions="Be brief.", tools=[lookup], model=model)
        result = parent_run(governed(agent, af.Policy(max_tokens=100, max_turns=5), **given))
        assert result.final_output == "done"
        return model

    def test_each_call_sees_what_is_left(self) -> None:
        first, second = self.run(show_budget=True).calls
        assert first.system_instructions == "Be brief.\n\nBudget left: 5 model turns, 100 tokens."
        assert second.system_instructions == "Be brief.\n\nBudget left: 4 model turns, 85 tokens."

    def test_a_function_chooses_the_words(self) -> None:
        said = self.run(show_budget=lambda left: f"{left.tokens} tokens to go").calls
        assert [c.system_instructions for c in said] == [
            "Be brief.\n\n100 tokens to go",
            "Be brief.\n\n85 tokens to go",
        ]

    def test_nothing_is_shown_unless_asked(self) -> None:
        assert [c.system_instructions for c in self.run().calls] == ["Be brief.", "Be brief."]

    def test_a_bad_show_budget_is_refused_where_given(self) -> None:
        agent = Agent(name="x", model=ScriptedModel([]))
        with pytest.raises(DefinitionError, match="show_budget must be True, False or a function"):
            governed(agent, show_budget="yes")  # type: ignore[arg-type]
