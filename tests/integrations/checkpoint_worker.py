"""One LangGraph process of the checkpoint test: start a run, or resume it, on a SQLite file.

Run as `python -m tests.integrations.checkpoint_worker start|resume|whole DB LOG`. Prints the
decisions the graph state holds, as JSON, on its last line. The tools append to LOG, so the test
can see that each ran exactly once across the processes.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

import agentfsm as af
from agentfsm.integrations.langgraph import create_agent

CONFIG: Any = {"configurable": {"thread_id": "run-1"}}
POLICY = af.Policy(permissions={"delete_file": "ask"})


def script() -> list[AIMessage]:
    """The model's outputs: a free call, a call that needs approval, then the answer."""

    def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
        return {"name": name, "args": args, "id": call_id, "type": "tool_call"}

    return [
        AIMessage(content="", tool_calls=[call("get_weather", "c1", city="Paris")]),
        AIMessage(content="", tool_calls=[call("delete_file", "c2", path="/tmp/x")]),
        AIMessage(
            content="Done: sunny, and the file is gone.",
            response_metadata={"finish_reason": "stop"},
        ),
    ]


def tools(log: Path) -> list[BaseTool]:
    """Tools that append each execution to `log`."""

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        with log.open("a") as out:
            out.write(f"get_weather {city}\n")
        return f"sunny in {city}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        with log.open("a") as out:
            out.write(f"delete_file {path}\n")
        return f"deleted {path}"

    return [get_weather, delete_file]


def graph(checkpointer: Any, log: Path, skip: int) -> Any:
    """The prebuilt graph, its model replaying the script from output `skip` on."""
    model = GenericFakeChatModel(messages=iter(script()[skip:]))
    return create_agent(model, tools(log), POLICY, checkpointer=checkpointer)


def decisions(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The decisions in a graph state, without the fields that name nothing decided."""
    return [
        {k: d[k] for k in ("action", "priority", "guard", "reason", "exit_reason", "turn")}
        for d in state.get("decisions", [])
    ]


def main(phase: str, db: str, log: str) -> None:
    """Run one phase and print the decisions so far."""
    path = Path(log)
    if phase == "whole":  # the reference: one process, never interrupted for long
        g = graph(InMemorySaver(), path, 0)
        g.invoke({"messages": [("user", "weather, then delete /tmp/x")]}, CONFIG)
        out = g.invoke(Command(resume=True), CONFIG)
    else:
        with sqlite3.connect(db, check_same_thread=False) as conn:
            saver = SqliteSaver(conn)
            if phase == "start":
                out = graph(saver, path, 0).invoke(
                    {"messages": [("user", "weather, then delete /tmp/x")]}, CONFIG
                )
            else:
                saved = graph(saver, path, 0).get_state(CONFIG).values
                seen = sum(isinstance(m, AIMessage) for m in saved["messages"])
                out = graph(saver, path, seen).invoke(Command(resume=True), CONFIG)
    print(json.dumps({"decisions": decisions(out), "interrupted": "__interrupt__" in out}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
