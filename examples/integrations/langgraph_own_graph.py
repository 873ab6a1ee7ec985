"""agentfsm deciding in a LangGraph graph you built: your model node, your state, your ToolNode."""

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import agentfsm as af
from agentfsm.integrations.langgraph import Decide


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


tools = [get_weather]
call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
model = GenericFakeChatModel(
    messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="Sunny.")])
)
decide = Decide(af.Policy(max_turns=10), tools)


def agent(state: MessagesState) -> dict[str, Any]:
    # decide.adjusted: after a RETRY of a cut output, the model with max_tokens raised
    return {"messages": [decide.adjusted(model, state).invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("agent", decide.wrap(agent))  # your node, deciding on its own output
builder.add_node("tools", ToolNode(tools, wrap_tool_call=decide.wrap_tool_call))
builder.add_node("human", decide.human)
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", decide.route, decide.destinations)  # not tools_condition
builder.add_edge("tools", "agent")
builder.add_conditional_edges("human", decide.route, decide.destinations)
graph = builder.compile()

# MessagesState has no "decisions" key; the nodes added it, so ask for it by name
out = graph.invoke(
    {"messages": [("user", "weather in Paris?")]}, output_keys=["messages", "decisions"]
)
print(out["messages"][-2].content)  # the tool's result
print(out["messages"][-1].content)
print([d["action"] for d in out["decisions"]], out["decisions"][-1]["exit_reason"])
