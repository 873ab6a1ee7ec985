"""Everything agentfsm does with MCP, in one room.

- `MCPServerTools` (`_client`): an MCP server's tools as governed agentfsm tools, for
  `af.run`, `af.arun` and `af.Executor`.
- The proxy (`_proxy`, `_wire`, `_http`): `agentfsm mcp-proxy` sits between a host and a
  server and asks the same permission check before each `tools/call` it forwards; `_wire`
  holds what it knows of the protocol, `_http` its Streamable HTTP front. The command line
  (`agentfsm._cli.mcp_proxy`) only reads arguments and starts it.
- `_revisions` and `_era`: the MCP revisions the proxy serves a host under (the handshake
  ones and the stateless 2026-07-28), and what each session's revision changes; the
  stateless revision over HTTP is `_http_stateless`.
- `_oauth`: the `mcp` package's OAuth client on the proxy's `--url` connection, with its
  token file.
- `_hints`: what a tool's annotations add to a policy, shared by both sides.
"""

from __future__ import annotations

from agentfsm import _public
from agentfsm.integrations.mcp._client import (
    MCPNotSentError,
    MCPServerError,
    MCPServerTools,
    MCPToolError,
)

__all__ = ["MCPNotSentError", "MCPServerError", "MCPServerTools", "MCPToolError"]

_public.publish(__name__, globals(), __all__)
