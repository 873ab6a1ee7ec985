"""A checkpointed LangGraph run whose state is edited with `update_state` runs nothing denied.

The Controller's dump lives in the graph state, so anyone with the checkpointer can edit it
through LangGraph's own `update_state`. A dump edited so that a denied call is pending, with
a decision sending it to the guarded `ToolNode`, must not run it: the restored Controller
checks the call again against the live policy, `may_run` says no, and the model reads an
error result for it.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent

CONFIG: Any = {"configurable": {"thread_id": "edited"}, "recursion_limit": 20}
POLICY = af.Policy(permissions={"rm": "deny", "deploy": "ask"})


def tools(ran: list[str]) -> list[Any]:
    """Real LangChain tools that record each run."""

    @tool
    def deploy(target: str) -> str:
        """Deploy to `target`."""
        ran.append(f"deploy {target}")
        return "deployed"

    @tool
    def rm(target: str) -> str:
        """Remove `target`."""
        ran.append(f"rm {target}")
        return "removed"

    return [deploy, rm]


def call(name: str) -> dict[str, Any]:
    return {"name": name, "args": {"target": "/"}, "id": "c1", "type": "tool_call"}


class TestUpdateState:
    def test_an_edited_pending_denied_call_never_runs(self) -> None:
        """update_state puts a denied call in the dump as cleared; the ToolNode does not run it."""
        ran: list[str] = []
        script = iter(
            [
                AIMessage(content="", tool_calls=[call("deploy")]),
                AIMessage(content="I could not remove it.", response_metadata={}),
            ]
        )
        graph = create_agent(
            GenericFakeChatModel(messages=script), tools(ran), POLICY, checkpointer=InMemorySaver()
        )
        paused = graph.invoke({"messages": [("user", "clean up")]}, CONFIG)
        assert paused["decisions"][-1]["action"] == "ask_human"
        # The edit: a dump of the same turn cleared under a policy that allows rm, given the
        # live policy's data, and a decision that sends the call to the tools.
        other = af.Controller(af.Policy(), run_id=af.Controller.load(paused["agentfsm"]).run_id)
        other.on_model_output(AIMessage(content="", tool_calls=[call("rm")]))
        edited = json.loads(json.dumps(other.dump()))
        edited["policy"] = paused["agentfsm"]["policy"]
        edited["tools"] = paused["agentfsm"]["tools"]
        record = {**paused["decisions"][-1], "action": "execute_tools", "tool_calls": [call("rm")]}
        last = paused["messages"][-1]
        graph.update_state(
            CONFIG,
            {
                "agentfsm": edited,
                "decisions": [record],
                "messages": [AIMessage(content="", tool_calls=[call("rm")], id=last.id)],
            },
            as_node="agent",
        )
        out = graph.invoke(None, CONFIG)
        assert ran == []
        messages: list[BaseMessage] = out["messages"]
        replies = [m for m in messages if isinstance(m, ToolMessage)]
        assert [(m.tool_call_id, m.status) for m in replies] == [("c1", "error")]
        assert out["decisions"][-1]["exit_reason"] == "completed"
