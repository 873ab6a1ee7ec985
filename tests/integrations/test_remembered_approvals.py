"""Remembered approvals given through each framework's own approval API (docs/approvals.md).

Each test drives the real framework with its own test doubles: the human approves one call
with a scope through the framework's way of answering, a later call the scope covers runs
without asking, and a call a deny rule refuses is never covered.
"""

from __future__ import annotations

from typing import Any

import pytest

import agentfsm as af
from agentfsm._model.approvals import SCOPES
from agentfsm.exceptions import InvalidInputError

A = af.Action
POLICY = af.Policy(
    permissions={"delete_file": "ask"}, permission_rules=["deny delete_file(path=/etc/*)"]
)
UNDER_TMP = {"scope": "conversation", "pattern": "path^=/tmp/*"}


class TestLangGraph:
    """`Command(resume={"approved": True, "remember": SCOPE})`."""

    @staticmethod
    def graph() -> tuple[Any, Any, list[str]]:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool
        from langgraph.checkpoint.memory import InMemorySaver

        from agentfsm.integrations.langgraph import create_agent

        ran: list[str] = []

        @tool
        def delete_file(path: str) -> str:
            """Delete a file."""
            ran.append(path)
            return f"deleted {path}"

        def ai(path: str, id: str) -> AIMessage:
            call = {"name": "delete_file", "args": {"path": path}, "id": id, "type": "tool_call"}
            return AIMessage(content="", tool_calls=[call])

        script = [
            ai("/tmp/a", "c1"),
            ai("/tmp/b", "c2"),
            ai("/etc/passwd", "c3"),
            AIMessage(content="Done.", response_metadata={"finish_reason": "stop"}),
        ]
        fake = GenericFakeChatModel(messages=iter(script))
        graph = create_agent(fake, [delete_file], POLICY, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
        return graph, config, ran

    def test_a_remembered_approval_covers_a_later_call_and_never_a_deny(self) -> None:
        from langgraph.types import Command

        graph, config, ran = self.graph()
        out = graph.invoke({"messages": [("user", "clean up")]}, config)
        asked = out["__interrupt__"][0].value
        assert asked["scopes"] == list(SCOPES)
        out = graph.invoke(Command(resume={"approved": True, "remember": UNDER_TMP}), config)
        # /tmp/b ran without a second interrupt; /etc/passwd stayed denied.
        assert "__interrupt__" not in out
        assert ran == ["/tmp/a", "/tmp/b"]
        actions = [d["action"] for d in out["decisions"]]
        assert actions.count(A.ASK_HUMAN) == 1
        assert actions[-1] == A.FINAL
        assert any("remembered approval a1" in d["reason"] for d in out["decisions"])

    def test_a_bad_scope_raises_and_answers_nothing(self) -> None:
        from langgraph.types import Command

        graph, config, ran = self.graph()
        graph.invoke({"messages": [("user", "clean up")]}, config)
        with pytest.raises(InvalidInputError, match="remember"):
            graph.invoke(Command(resume={"approved": True, "remember": "forever"}), config)
        # Nothing ran and nothing was answered: the graph still waits on the human.
        assert ran == []
        state = graph.get_state(config)
        assert state.next == ("human",)
        assert [d["action"] for d in state.values["decisions"]] == [A.ASK_HUMAN]

    def test_a_per_call_answer_takes_scopes_by_call_id(self) -> None:
        from langgraph.types import Command

        graph, config, ran = self.graph()
        graph.invoke({"messages": [("user", "clean up")]}, config)
        answer = {"approved": {"c1": True}, "remember": {"c1": UNDER_TMP}}
        out = graph.invoke(Command(resume=answer), config)
        assert ran == ["/tmp/a", "/tmp/b"]
        assert "__interrupt__" not in out
