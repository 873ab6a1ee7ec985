"""LangGraph: a StateGraph with ToolNode and tools_condition around a fake chat model."""

from __future__ import annotations

from typing import Any

from _harness import FINAL_TEXT, Builder, Run, UnavailableError, call_args, main


def builders() -> dict[str, Builder]:
    """The graph variant, or `UnavailableError` when langgraph is not installed."""
    try:
        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import tool
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode, tools_condition
    except ImportError as exc:
        raise UnavailableError(f"langgraph: {exc}") from exc

    class ScriptedChatModel(BaseChatModel):
        """Answers with the next scripted AIMessage; `reset` rewinds the script."""

        n: int
        turn: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: list[Any], stop: Any = None, **kwargs: Any) -> ChatResult:
            self.turn += 1
            k = self.turn
            if k < self.n:
                call = {"id": f"call_{k}", "name": "echo", "args": call_args(k)}
                message = AIMessage(content="", tool_calls=[call])
            else:
                message = AIMessage(content=FINAL_TEXT)
            return ChatResult(generations=[ChatGeneration(message=message)])

    def build(n: int) -> Run:
        calls = 0

        @tool
        def echo(i: int) -> dict[str, int]:
            """Return the argument unchanged."""
            nonlocal calls
            calls += 1
            return {"i": i}

        model = ScriptedChatModel(n=n)

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode([echo]))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        app = graph.compile()
        config = {"recursion_limit": 2 * n + 10}

        def run() -> tuple[str, int]:
            nonlocal calls
            calls = 0
            model.turn = 0
            state = app.invoke({"messages": [HumanMessage(content="go")]}, config)
            return state["messages"][-1].content, calls

        return run

    return {"graph": build}


if __name__ == "__main__":
    main("langgraph", builders)
