"""A tiny MCP server over stdio, for the Agents SDK tests: every tool call appends a line to a log.

Run as `python mcp_log_server.py LOG`: the Agents SDK's `MCPServerStdio` starts it as a
subprocess. Each tool writes `<tool>:<argument>` to LOG when it runs, so a test reads what
really ran in another process.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

LOG = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("mcp-calls.log")
server = MCPServer("records")


def _ran(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(line + "\n")


@server.tool()
def drop_table(table: str) -> str:
    """Drop a table."""
    _ran(f"drop_table:{table}")
    return f"dropped {table}"


@server.tool()
def read_row(key: str) -> str:
    """Read a row by key."""
    _ran(f"read_row:{key}")
    return f"row {key}"


if __name__ == "__main__":
    server.run("stdio")
