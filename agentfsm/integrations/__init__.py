"""Drop agentfsm into the agents people already have: one module per framework.

Each module is an optional extra (`pip install agentfsm[langgraph]`, `[openai-agents]`,
`[pydantic-ai]`, `[mini-swe-agent]`, or `[integrations]` for all) and imports its framework
only when it is imported itself; the core never imports anything here.

- `agentfsm.integrations.langgraph`: a decide node and routing function in place of
  `tools_condition`, and `create_agent`, a prebuilt ReAct-style graph.
- `agentfsm.integrations.openai_agents`: `governed(model)`, a `Model` wrapper for `Runner`.
- `agentfsm.integrations.pydantic_ai`: `governed(model)`, a pydantic-ai `Model` wrapper.
- `agentfsm.integrations.mini_swe_agent`: `GovernedAgent`, a `DefaultAgent` whose `step()`
  asks agentfsm.
- `agentfsm.integrations.mcp`: `MCPServerTools`, an MCP server's tools as governed tools, and
  the room of `agentfsm mcp-proxy` (the gateway between a host and a server).
"""
