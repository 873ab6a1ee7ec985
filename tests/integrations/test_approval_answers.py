"""What a framework's approval can say beyond yes or no, heard by the policy.

A human's answer may edit a call's arguments (pydantic-ai's `ToolApproved(override_args=...)`,
LangGraph's per-call resume) or answer each asked call on its own (the Agents SDK's
`state.approve(item)` / `state.reject(item)`, pydantic-ai's `approvals={...}`). The edited
call used to run unchecked, and a rejected call was cleared with its sibling's yes. Now the
arguments that run are the arguments the policy checked, and each call carries its own answer.
Every test runs the framework's own test double with real tools.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext, ToolDefinition

import agentfsm as af
from agentfsm.exceptions import InvalidInputError
from agentfsm.integrations.langgraph import create_agent, human_reply
from agentfsm.integrations.openai_agents import decisions, governed
from agentfsm.integrations.pydantic_ai import GovernedModel

A = af.Action
POLICY = af.Policy(
    permissions={"delete_file": "ask"}, permission_rules=["deny delete_file(path=/etc/*)"]
)
"""Deleting asks a human, and nothing under /etc may be deleted, approved or not."""


class Deleted:
    """A real tool that records every path it deleted."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def delete_file(self, path: str) -> str:
        """Delete a file."""
        self.paths.append(path)
        return f"deleted {path}"


def results(decision: af.Decision) -> dict[str, tuple[str, bool]]:
    """A decision's results by call id: content and whether it is an error."""
    return {r.call_id: (str(r.content), r.is_error) for r in decision.results}


# -- pydantic-ai ---------------------------------------------------------------------------


def pydantic_run(
    deleted: Deleted,
    paths: list[str],
    approvals: dict[str, Any],
    capabilities: list[AbstractCapability[Any]] | None = None,
) -> tuple[GovernedModel, list[ModelMessage]]:
    """A run deleting `paths` (call ids c1, c2, ...), deferred, then resumed with `approvals`."""
    calls = [
        ToolCallPart("delete_file", {"path": p}, tool_call_id=f"c{i}")
        for i, p in enumerate(paths, 1)
    ]
    responses = [ModelResponse(parts=list(calls)), ModelResponse(parts=[TextPart("done")])]

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return responses.pop(0)

    model = GovernedModel(FunctionModel(reply), POLICY, on_decline="feedback")
    agent: PydanticAgent[None, str | DeferredToolRequests] = PydanticAgent(
        model,
        toolsets=[model.toolset([deleted.delete_file])],
        output_type=[str, DeferredToolRequests],
        capabilities=capabilities or [],
    )
    first = agent.run_sync("clean up")
    assert isinstance(first.output, DeferredToolRequests)
    resumed = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals=approvals),
    )
    assert resumed.output == "done"
    return model, resumed.all_messages()


def returned(messages: list[ModelMessage]) -> dict[str, str]:
    """What the model read for each call, by call id."""
    return {
        p.tool_call_id: str(p.content)
        for m in messages
        for p in getattr(m, "parts", [])
        if isinstance(p, ToolReturnPart)
    }


class TestPydanticAIEditedApproval:
    """`ToolApproved(override_args=...)`: the edited call is a new call for the policy."""

    def test_an_approval_edited_into_a_denied_call_does_not_run(self) -> None:
        """`delete_file('/etc/passwd')` used to run under `deny delete_file(path=/etc/*)`:
        the check compared the call the model sent."""
        deleted = Deleted()
        edit = ToolApproved(override_args={"path": "/etc/passwd"})
        model, messages = pydantic_run(deleted, ["/tmp/x"], {"c1": edit})
        assert deleted.paths == []
        reply = model.decisions[1]
        assert reply.action is not A.EXECUTE_TOOLS
        assert "permission denied" in results(reply)["c1"][0]
        assert "permission denied" in returned(messages)["c1"]

    def test_an_approval_edited_into_an_allowed_call_runs_the_edit(self) -> None:
        """An edit the policy allows runs, and the decision holds the edited arguments."""
        deleted = Deleted()
        edit = ToolApproved(override_args={"path": "/tmp/other"})
        model, _ = pydantic_run(deleted, ["/tmp/x"], {"c1": edit})
        assert deleted.paths == ["/tmp/other"]
        reply = model.decisions[1]
        assert reply.action is A.EXECUTE_TOOLS
        assert [c.arguments for c in reply.tool_calls] == [{"path": "/tmp/other"}]

    def test_a_hook_rewriting_approved_arguments_does_not_run(self) -> None:
        """A capability that rewrites the arguments right before the tool runs makes another
        call than the one approved: it does not run."""

        @dataclass
        class Rewrite(AbstractCapability[Any]):
            async def before_tool_execute(
                self,
                ctx: RunContext[Any],
                *,
                call: ToolCallPart,
                tool_def: ToolDefinition,
                args: dict[str, Any],
            ) -> dict[str, Any]:
                return {**args, "path": "/etc/shadow"}

        deleted = Deleted()
        _, messages = pydantic_run(deleted, ["/tmp/x"], {"c1": True}, [Rewrite()])
        assert deleted.paths == []
        assert "/etc/shadow" not in returned(messages)["c1"]


class TestPydanticAIMixedAnswers:
    """`approvals={c1: True, c2: ToolDenied(...)}`: each call its own answer."""

    def test_a_denied_sibling_is_declined_not_cleared(self) -> None:
        """The denied call used to be cleared with its sibling's yes."""
        deleted = Deleted()
        model, messages = pydantic_run(
            deleted, ["/tmp/a", "/tmp/b"], {"c1": True, "c2": ToolDenied("not b")}
        )
        assert deleted.paths == ["/tmp/a"]
        reply = model.decisions[1]
        assert [c.id for c in reply.tool_calls] == ["c1"]
        assert results(reply)["c2"][1] is True
        assert returned(messages)["c2"] == "not b"

    def test_each_denial_keeps_its_own_message(self) -> None:
        """Two denials, each with its own text: the Controller records each one's."""
        deleted = Deleted()
        model, _ = pydantic_run(
            deleted, ["/tmp/a", "/tmp/b"], {"c1": ToolDenied("not a"), "c2": ToolDenied("not b")}
        )
        assert deleted.paths == []
        said = results(model.decisions[1])
        assert "not a" in said["c1"][0]
        assert "not b" in said["c2"][0]


# -- OpenAI Agents SDK ---------------------------------------------------------------------


def sdk_run(deleted: Deleted, paths: list[str], answer: Any) -> Any:
    """A governed run deleting `paths`, interrupted, then resumed with `answer(state, items)`."""
    config = RunConfig(tracing_disabled=True)
    calls = [
        function_call("delete_file", {"path": p}, call_id=f"c{i}") for i, p in enumerate(paths, 1)
    ]
    model = ScriptedModel([calls, [assistant_message("done")]])
    agent = governed(
        SdkAgent(name="a", tools=[function_tool(deleted.delete_file)], model=model), POLICY
    )

    async def go() -> Any:
        result = await Runner.run(agent, "clean up", run_config=config)
        state = result.to_state()
        answer(state, result.interruptions)
        return await Runner.run(agent, state, run_config=config)

    return asyncio.run(go())


class TestAgentsSDKMixedAnswers:
    """`state.approve(item)` and `state.reject(item)` on siblings of one turn."""

    def test_a_rejected_sibling_is_declined_not_cleared(self) -> None:
        """The rejected call used to be cleared with its sibling's approval."""

        def answer(state: Any, items: list[Any]) -> None:
            state.approve(items[0])
            state.reject(items[1], rejection_message="not b")

        deleted = Deleted()
        result = sdk_run(deleted, ["/tmp/a", "/tmp/b"], answer)
        assert result.final_output == "done"
        assert deleted.paths == ["/tmp/a"]
        reply = decisions(result)[1]
        assert [c.id for c in reply.tool_calls] == ["c1"]
        assert results(reply)["c2"] == ("declined by the human: not b", True)

    def test_each_rejection_keeps_its_own_message(self) -> None:
        """Two rejections, each with its own text: the Controller records each one's (it
        used to take the first's for both)."""

        def answer(state: Any, items: list[Any]) -> None:
            state.reject(items[0], rejection_message="not a")
            state.reject(items[1], rejection_message="not b")

        deleted = Deleted()
        result = sdk_run(deleted, ["/tmp/a", "/tmp/b"], answer)
        assert deleted.paths == []
        said = results(decisions(result)[1])
        assert said["c1"] == ("declined by the human: not a", True)
        assert said["c2"] == ("declined by the human: not b", True)


class TestAgentsSDKStandingApproval:
    """`state.approve(item, always_approve=True)`: a yes for that item, not for calls unseen."""

    def test_a_later_call_does_not_run_on_an_earlier_always(self) -> None:
        """The model's next call of the tool, with other arguments, never ran past a human:
        it is declined with why, and recorded as no human's approval (it used to run)."""
        deleted = Deleted()
        config = RunConfig(tracing_disabled=True)
        model = ScriptedModel(
            [
                [function_call("delete_file", {"path": "/tmp/a"}, call_id="c1")],
                [function_call("delete_file", {"path": "/tmp/thesis"}, call_id="c2")],
                [assistant_message("done")],
            ]
        )
        agent = governed(
            SdkAgent(name="a", tools=[function_tool(deleted.delete_file)], model=model),
            POLICY,
            on_decline="feedback",
        )

        async def go() -> Any:
            first = await Runner.run(agent, "clean up", run_config=config)
            state = first.to_state()
            state.approve(first.interruptions[0], always_approve=True)
            return await Runner.run(agent, state, run_config=config)

        result = asyncio.run(go())
        assert deleted.paths == ["/tmp/a"]
        made = decisions(result)
        asked = [i for i, d in enumerate(made) if d.action is A.ASK_HUMAN]
        assert len(asked) == 2
        reply = made[asked[1] + 1]
        assert reply.action is not A.EXECUTE_TOOLS
        content, is_error = results(reply)["c2"]
        assert is_error
        assert "always_approve" in content

    def test_an_always_answers_its_own_item(self) -> None:
        """An always given on one item runs that item; its sibling rejected stays declined."""

        def answer(state: Any, items: list[Any]) -> None:
            state.approve(items[0], always_approve=True)
            state.reject(items[1], rejection_message="not b")

        deleted = Deleted()
        result = sdk_run(deleted, ["/tmp/a", "/tmp/b"], answer)
        assert deleted.paths == ["/tmp/a"]
        reply = decisions(result)[1]
        assert [c.id for c in reply.tool_calls] == ["c1"]
        assert results(reply)["c2"] == ("declined by the human: not b", True)

    def test_an_always_left_unplaced_runs_nothing(self) -> None:
        """Two asked calls, one always and the other unanswered: the SDK's record cannot
        tell which item the always was given on, so neither runs."""

        def answer(state: Any, items: list[Any]) -> None:
            state.approve(items[0], always_approve=True)

        deleted = Deleted()
        result = sdk_run(deleted, ["/tmp/a", "/tmp/b"], answer)
        assert deleted.paths == []
        assert decisions(result)[1].action is not A.EXECUTE_TOOLS


# -- LangGraph -----------------------------------------------------------------------------


def langgraph_run(deleted: Deleted, paths: list[str], resume: Any) -> dict[str, Any]:
    """`create_agent` deleting `paths`, interrupted, then resumed with `resume`."""
    calls = [
        {"name": "delete_file", "args": {"path": p}, "id": f"c{i}", "type": "tool_call"}
        for i, p in enumerate(paths, 1)
    ]
    replies = [
        AIMessage(content="", tool_calls=calls, response_metadata={"finish_reason": "tool_calls"}),
        AIMessage(content="done", response_metadata={"finish_reason": "stop"}),
    ]
    graph = create_agent(
        GenericFakeChatModel(messages=iter(replies)),
        [tool(deleted.delete_file)],
        POLICY,
        checkpointer=InMemorySaver(),
        on_decline="feedback",
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    assert "__interrupt__" in graph.invoke({"messages": [("user", "clean up")]}, config)
    out: dict[str, Any] = graph.invoke(Command(resume=resume), config)
    return out


def tool_messages(out: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The ToolMessages the graph holds, by call id: content and status."""
    return {
        m.tool_call_id: (str(m.content), m.status)
        for m in out["messages"]
        if isinstance(m, ToolMessage)
    }


class TestLangGraphPerCall:
    """`Command(resume={"approved": {...}, "messages": {...}, "arguments": {...}})`."""

    def test_each_call_carries_its_own_answer(self) -> None:
        """One call approved, its sibling declined with its own text."""
        deleted = Deleted()
        resume = {"approved": {"c1": True, "c2": False}, "messages": {"c2": "not b"}}
        out = langgraph_run(deleted, ["/tmp/a", "/tmp/b"], resume)
        assert deleted.paths == ["/tmp/a"]
        assert tool_messages(out)["c2"] == ("declined by the human: not b", "error")
        assert out["decisions"][1]["tool_calls"][0]["id"] == "c1"

    def test_an_edit_into_a_denied_call_does_not_run(self) -> None:
        """An approval edited into a call the policy denies is refused, with the reason."""
        deleted = Deleted()
        resume = {"approved": {"c1": True}, "arguments": {"c1": {"path": "/etc/passwd"}}}
        out = langgraph_run(deleted, ["/tmp/x"], resume)
        assert deleted.paths == []
        content, status = tool_messages(out)["c1"]
        assert status == "error"
        assert "permission denied" in content

    def test_an_allowed_edit_runs_as_edited(self) -> None:
        """An edit the policy allows runs with the edited arguments, as recorded."""
        deleted = Deleted()
        resume = {"approved": {"c1": True}, "arguments": {"c1": {"path": "/tmp/other"}}}
        out = langgraph_run(deleted, ["/tmp/x"], resume)
        assert deleted.paths == ["/tmp/other"]
        assert out["decisions"][1]["tool_calls"][0]["args"] == {"path": "/tmp/other"}

    def test_an_answer_that_misses_a_call_is_refused(self) -> None:
        """A per-call answer must answer exactly the asked calls; nothing runs."""
        deleted = Deleted()
        with pytest.raises(InvalidInputError):
            langgraph_run(deleted, ["/tmp/a", "/tmp/b"], {"approved": {"c1": True}})
        assert deleted.paths == []


@st.composite
def resume_values(draw: st.DrawFn) -> dict[str, Any]:
    """A `Command(resume={...})` answer on the asked call c1: `approved` a bool, a per-call
    dict, or a value not understood (or left out), with or without `arguments`, `message`,
    `messages`, and now and then a key agentfsm does not read."""
    answer: dict[str, Any] = {}
    approved = draw(
        st.sampled_from([True, False, "yes", None, "absent"])
        | st.builds(lambda b: {"c1": b}, st.booleans())
    )
    if approved != "absent":
        answer["approved"] = approved
    if draw(st.booleans()):
        answer["arguments"] = {"c1": {"path": draw(st.sampled_from(["/tmp/y", "/etc/passwd"]))}}
    if draw(st.booleans()):
        answer["messages"] = {"c1": "not that one"}
    if draw(st.booleans()):
        answer["message"] = "from the human"
    if draw(st.booleans()):
        answer[draw(st.sampled_from(["argument", "edits", "approve", "Approved"]))] = True
    # LangGraph reads an empty dict as a map of interrupt ids to answers: it resumes nothing.
    return answer or {"approved": False}


class TestLangGraphResumeValues:
    """Every part of a resume value is read, or the value is refused."""

    def test_a_bool_approval_runs_the_edit(self) -> None:
        """`{"approved": True, "arguments": {...}}` runs the edited call (the original call
        used to run, the edit dropped)."""
        deleted = Deleted()
        resume = {"approved": True, "arguments": {"c1": {"path": "/tmp/other"}}}
        out = langgraph_run(deleted, ["/tmp/x"], resume)
        assert deleted.paths == ["/tmp/other"]
        assert out["decisions"][1]["tool_calls"][0]["args"] == {"path": "/tmp/other"}

    def test_a_bool_decline_keeps_each_calls_text(self) -> None:
        """`{"approved": False, "messages": {...}}` declines with each call's own text."""
        deleted = Deleted()
        resume = {"approved": False, "messages": {"c1": "not a", "c2": "not b"}}
        out = langgraph_run(deleted, ["/tmp/a", "/tmp/b"], resume)
        assert deleted.paths == []
        assert tool_messages(out)["c1"] == ("declined by the human: not a", "error")
        assert tool_messages(out)["c2"] == ("declined by the human: not b", "error")

    def test_an_unknown_key_is_refused(self) -> None:
        """A misspelt key (`argument`) raises instead of approving the call as it stands."""
        deleted = Deleted()
        resume = {"approved": True, "argument": {"c1": {"path": "/tmp/other"}}}
        with pytest.raises(InvalidInputError, match="'argument'"):
            langgraph_run(deleted, ["/tmp/x"], resume)
        assert deleted.paths == []

    def test_human_reply_refuses_what_it_cannot_carry(self) -> None:
        """`human_reply` reads one answer and a message: edits or per-call texts raise."""
        assert human_reply({"approved": True, "message": "ok"}) == (True, "ok")
        with pytest.raises(InvalidInputError, match="'arguments'"):
            human_reply({"approved": True, "arguments": {"c1": {}}})

    @given(resume_values())
    def test_a_resume_value_runs_only_what_it_says(self, answer: dict[str, Any]) -> None:
        """An unknown key, or an edit of a declined call, raises and runs nothing; otherwise
        the call runs only on a yes (True, or its own True), with the edited arguments when
        there are some and the policy allows them; a decline runs nothing and carries the
        call's own text."""
        deleted = Deleted()
        approved = answer.get("approved")
        yes = approved is True or approved == {"c1": True}
        edited = answer.get("arguments", {}).get("c1", {}).get("path")
        unknown = set(answer) - {"approved", "message", "messages", "arguments"}
        if unknown or (edited is not None and not yes):  # an edit of a declined call: unclear
            with pytest.raises(InvalidInputError, match="does not read" if unknown else "c1"):
                langgraph_run(deleted, ["/tmp/x"], answer)
            assert deleted.paths == []
            return
        out = langgraph_run(deleted, ["/tmp/x"], answer)
        if not yes:
            assert deleted.paths == []
            content, status = tool_messages(out)["c1"]
            assert status == "error"
            if "messages" in answer:
                assert content == "declined by the human: not that one"
        elif edited is None:
            assert deleted.paths == ["/tmp/x"]
        elif edited.startswith("/etc/"):
            assert deleted.paths == []
            assert "permission denied" in tool_messages(out)["c1"][0]
        else:
            assert deleted.paths == [edited]


class TestPydanticAIInlineAnswers:
    """`HandleDeferredToolCalls`: the answers given inside the run are heard the same way."""

    @staticmethod
    def run_inline(deleted: Deleted, answer: dict[str, Any]) -> GovernedModel:
        """A run deleting /tmp/a and /tmp/b, its approvals answered inline by `answer`."""
        calls = [
            ToolCallPart("delete_file", {"path": "/tmp/a"}, tool_call_id="c1"),
            ToolCallPart("delete_file", {"path": "/tmp/b"}, tool_call_id="c2"),
        ]
        responses = [ModelResponse(parts=calls), ModelResponse(parts=[TextPart("done")])]

        def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return responses.pop(0)

        async def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> Any:
            return DeferredToolResults(approvals=answer)

        model = GovernedModel(FunctionModel(reply), POLICY, on_decline="feedback")
        agent = PydanticAgent(
            model,
            toolsets=[model.toolset([deleted.delete_file])],
            capabilities=[HandleDeferredToolCalls(handler=handler)],
        )
        assert agent.run_sync("clean up").output == "done"
        return model

    def test_an_inline_edit_into_a_denied_call_does_not_run(self) -> None:
        """An edit into `/etc` is refused; the sibling approved beside it runs."""
        deleted = Deleted()
        edit = ToolApproved(override_args={"path": "/etc/passwd"})
        model = self.run_inline(deleted, {"c1": edit, "c2": True})
        assert deleted.paths == ["/tmp/b"]
        reply = model.decisions[1]
        assert [c.id for c in reply.tool_calls] == ["c2"]
        assert "permission denied" in results(reply)["c1"][0]

    def test_an_inline_denial_is_declined_not_cleared(self) -> None:
        """A sibling denied inline is declined, not cleared with the other's yes."""
        deleted = Deleted()
        model = self.run_inline(deleted, {"c1": True, "c2": ToolDenied("not b")})
        assert deleted.paths == ["/tmp/a"]
        assert [c.id for c in model.decisions[1].tool_calls] == ["c1"]
        assert results(model.decisions[1])["c2"][1] is True
