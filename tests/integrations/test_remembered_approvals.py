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


class TestMiniSweAgent:
    """`approve(calls)` answering `(True, message, remember)`."""

    @staticmethod
    def permission(call: af.ToolCall) -> str:
        command = str((call.arguments or {}).get("command"))
        return "deny" if "rm " in command else "ask" if "echo one" in command else "allow"

    @staticmethod
    def agent(tmp_path: Any, approve: Any) -> Any:
        from minisweagent.environments.local import LocalEnvironment

        from agentfsm.integrations.mini_swe_agent import GovernedAgent
        from tests.integrations.test_mini_swe_agent import CONFIG, SUBMIT, LitellmShaped, bash
        from tests.integrations.test_mini_swe_agent import output as out

        (tmp_path / "victim").write_text("x")
        echo = "echo one >> log"
        outputs = [
            out(bash("c1", echo)),
            out(bash("c2", echo)),
            out(bash("c3", "rm -f victim")),
            out(bash("c4", echo)),
            out(bash("c5", SUBMIT)),
        ]
        policy = af.Policy(permission=TestMiniSweAgent.permission)
        env = LocalEnvironment(cwd=str(tmp_path))
        config = CONFIG | {"step_limit": 8}
        return GovernedAgent(
            LitellmShaped(outputs=outputs), env, policy=policy, approve=approve, **config
        )

    def test_a_remembered_approval_covers_its_uses_and_never_a_deny(self, tmp_path: Any) -> None:
        asked: list[str] = []

        def approve(calls: list[af.ToolCall]) -> Any:
            asked.append(calls[0].id)
            return (True, None, "uses=1")

        agent = self.agent(tmp_path, approve)
        assert agent.run("task")["exit_status"] == "Submitted"
        # c2 ran under the approval c1 remembered; its one use spent, c4 was asked again.
        assert asked == ["c1", "c4"]
        assert (tmp_path / "log").read_text().split() == ["one", "one", "one"]
        assert (tmp_path / "victim").exists()
        covered = [d.covered for d in agent.decisions if d.covered]
        assert covered == [{"c2": "a1"}]

    def test_a_bad_scope_raises(self, tmp_path: Any) -> None:
        agent = self.agent(tmp_path, lambda calls: (True, None, "forever"))
        with pytest.raises(InvalidInputError, match="remember"):
            agent.run("task")
        assert not (tmp_path / "log").exists()


class TestPydanticAI:
    """`DeferredToolResults(approvals=..., metadata={call_id: {REMEMBER: SCOPE}})`."""

    @staticmethod
    def run(
        first_answer: Any, metadata: Any, ran: list[str] | None = None
    ) -> tuple[Any, list[str], Any]:
        from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel

        from agentfsm.integrations.pydantic_ai import GovernedModel
        from tests.integrations.test_pydantic_ai import Script

        ran = [] if ran is None else ran

        def delete_file(path: str) -> str:
            """Delete a file."""
            ran.append(path)
            return f"deleted {path}"

        def delete(path: str, id: str) -> ModelResponse:
            return ModelResponse(
                parts=[ToolCallPart("delete_file", {"path": path}, tool_call_id=id)]
            )

        script = Script(
            [
                delete("/tmp/a", "d1"),
                delete("/tmp/b", "d2"),
                delete("/etc/passwd", "d3"),
                ModelResponse(parts=[TextPart("Done.")]),
            ]
        )
        model = GovernedModel(FunctionModel(script), POLICY)
        agent: Agent[None, str | DeferredToolRequests] = Agent(
            model, toolsets=[model.toolset([delete_file])], output_type=[str, DeferredToolRequests]
        )
        first = agent.run_sync("clean up")
        assert isinstance(first.output, DeferredToolRequests)
        answers = DeferredToolResults(approvals={"d1": first_answer}, metadata=metadata)
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=answers)
        return first, ran, (model, second)

    def test_a_remembered_approval_covers_a_later_call_and_never_a_deny(self) -> None:
        from agentfsm.integrations.pydantic_ai import OFFERED, REMEMBER

        first, ran, (model, second) = self.run(True, {"d1": {REMEMBER: UNDER_TMP}})
        assert first.output.metadata["d1"][OFFERED] == list(SCOPES)
        # d2 ran under the approval without a second deferral; d3 stayed denied.
        assert second.output == "Done."
        assert ran == ["/tmp/a", "/tmp/b"]
        assert [d.covered for d in model.decisions if d.covered] == [{"d2": "a1"}]
        assert [d.action for d in model.decisions].count(A.ASK_HUMAN) == 1

    def test_a_denial_remembers_nothing(self) -> None:
        from pydantic_ai import ToolDenied

        from agentfsm.integrations.pydantic_ai import REMEMBER

        _, ran, (model, _) = self.run(ToolDenied("no"), {"d1": {REMEMBER: "conversation"}})
        assert ran == []
        assert model.controller.approvals == ()

    def test_a_bad_scope_raises_and_runs_nothing(self) -> None:
        from agentfsm.integrations.pydantic_ai import REMEMBER

        ran: list[str] = []
        with pytest.raises(InvalidInputError, match="remember"):
            self.run(True, {"d1": {REMEMBER: "forever"}}, ran)
        assert ran == []


class TestOpenAIAgents:
    """`state.approve(item)` with `remember(result, item, SCOPE)` beside it."""

    @staticmethod
    def first() -> tuple[Any, Any, Any]:
        import asyncio

        from agents import Runner
        from agents.testing import assistant_message, function_call

        from agentfsm.integrations.openai_agents import governed
        from tests.integrations.test_openai_agents import CONFIG, Tools, native

        def delete(path: str, call_id: str) -> list[Any]:
            return [function_call("delete_file", {"path": path}, call_id=call_id)]

        script = [
            delete("/tmp/a", "c1"),
            delete("/tmp/b", "c2"),
            delete("/etc/passwd", "c3"),
            [assistant_message("Done.")],
        ]
        tools = Tools()
        agent = governed(native(script, tools), POLICY)
        result = asyncio.run(Runner.run(agent, "clean up", run_config=CONFIG))
        return agent, result, tools

    @staticmethod
    def resume(agent: Any, state: Any) -> Any:
        import asyncio

        from agents import Runner

        from tests.integrations.test_openai_agents import CONFIG

        return asyncio.run(Runner.run(agent, state, run_config=CONFIG))

    def test_a_remembered_approval_covers_a_later_call_and_never_a_deny(self) -> None:
        from agentfsm.integrations.openai_agents import decisions, remember

        agent, first, tools = self.first()
        item = first.interruptions[0]
        state = first.to_state()
        state.approve(item)
        remember(first, item, UNDER_TMP)
        result = self.resume(agent, state)
        # c2 ran under the approval, without an interruption; c3 stayed denied.
        assert result.interruptions == []
        assert tools.ran == [("delete_file", "/tmp/a"), ("delete_file", "/tmp/b")]
        assert [d.covered for d in decisions(result) if d.covered] == [{"c2": "a1"}]

    def test_a_standing_yes_is_still_no_scope(self) -> None:
        """`always_approve=True` alone remembers nothing: c2 is asked again."""
        from agentfsm.integrations.openai_agents import decisions

        agent, first, tools = self.first()
        state = first.to_state()
        state.approve(first.interruptions[0], always_approve=True)
        result = self.resume(agent, state)
        assert not any(d.covered for d in decisions(result))
        assert tools.ran == [("delete_file", "/tmp/a")]

    def test_a_rejected_item_remembers_nothing_and_a_bad_scope_raises(self) -> None:
        from agentfsm.integrations.openai_agents import decisions, remember

        agent, first, tools = self.first()
        item = first.interruptions[0]
        with pytest.raises(InvalidInputError, match="remember"):
            remember(first, item, "forever")
        with pytest.raises(InvalidInputError, match="not a call agentfsm asks about"):
            remember(first, "c9", "run")
        state = first.to_state()
        state.reject(item, rejection_message="no")
        remember(first, item, "conversation")
        result = self.resume(agent, state)
        assert tools.ran == []
        assert not any(d.covered for d in decisions(result))


def test_the_integration_examples_of_the_docs_page_read() -> None:
    """docs/approvals.md's integration examples are Python that compiles (each is a part of
    the flows the tests above run whole)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "approvals.md").read_text("utf-8")
    section = text.partition("## The integrations")[2].partition("\n## ")[0]
    examples = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(examples) == 4
    for example in examples:
        compile(example.replace("await ", ""), "approvals.md", "exec")
