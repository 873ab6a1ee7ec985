"""LangGraph: a governed graph invoked by a tool of a governed graph is a child of its run
(narrowed by its policy, charged to its budgets as it spends)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent

USAGE: Any = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def ai(text: str = "", calls: list[dict[str, Any]] | None = None) -> AIMessage:
    return AIMessage(content=text, tool_calls=calls or [], usage_metadata=USAGE)


def fake(script: list[AIMessage]) -> GenericFakeChatModel:
    messages: Iterator[AIMessage] = iter(script)
    return GenericFakeChatModel(messages=messages)


class Tree:
    """A parent graph whose `dig` tool invokes a child graph that looks up five keys."""

    def __init__(self, parent_policy: af.Policy, child_policy: af.Policy | None = None) -> None:
        self.ran: list[str] = []

        @tool
        def lookup(key: str) -> str:
            """Look a key up."""
            self.ran.append(key)
            return "nothing"

        child_script = [
            ai(calls=[{"name": "lookup", "args": {"key": f"k{n}"}, "id": f"l{n}"}])
            for n in range(5)
        ]
        child = create_agent(fake([*child_script, ai("found nothing")]), [lookup], child_policy)

        @tool
        def dig(task: str) -> str:
            """Hand a task to the child graph."""
            out = child.invoke({"messages": [("user", task)]})
            return str(out["messages"][-1].content)

        parent_script = [ai(calls=[{"name": "dig", "args": {"task": "x"}, "id": "d1"}]), ai("done")]
        self.parent = create_agent(fake(parent_script), [dig], parent_policy)

    def run(self) -> Any:
        return self.parent.invoke({"messages": [("user", "find x")]}, {"recursion_limit": 40})


class TestSubgraphInATool:
    def test_the_child_stops_at_the_parents_cap(self) -> None:
        """Parent 15 + child 3 x 15 tokens passes the parent's 50: two lookups run (all five
        did before), and the parent stops with TOKEN_BUDGET."""
        tree = Tree(af.Policy(max_tokens=50))
        out = tree.run()
        assert tree.ran == ["k0", "k1"]
        assert "run tree's spend included" in str(out["messages"][-1].content)
        assert out["agentfsm"]["run"]["exit_reason"] == "token_budget"

    def test_the_child_never_runs_what_the_parent_denies(self) -> None:
        """The parent denies `lookup` by a rule; the child's own policy allows it: none runs."""
        tree = Tree(
            af.Policy(permission_rules=["deny look*"]),
            af.Policy(permissions={"lookup": "allow"}, max_turns=3),
        )
        tree.run()
        assert tree.ran == []
