"""`agentfsm mcp-proxy --policy FILE [--trace FILE] -- SERVER COMMAND...`: an MCP server
behind a policy.

The proxy speaks MCP to the host (Claude Code, Cursor, any MCP client) on its own stdin
and stdout, and to the server it starts as a child process. Every `tools/call` is
checked against the policy first, as one turn of a session-long Controller: a denied
call never reaches the server, `ask` is put to the host's user through MCP elicitation
(denied when the host cannot ask), budgets and the doom-loop guard stop a session that
runs away. A tool whose description or input schema changes after its first listing is
flagged and asked again. With `--trace`, the session is written as an agentfsm trace
that `agentfsm replay` and `agentfsm report` read.

Exit 0 when the host closes the session, 1 when the server exits or breaks, 2 for bad
arguments or a policy file that cannot be read.
"""

from __future__ import annotations

import argparse
from typing import Any

from agentfsm.cli import _mcp_proxy
from agentfsm.engine.policy import Policy
from agentfsm.exceptions import AgentFSMError

__all__ = ["add_parser", "main"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `mcp-proxy` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp-proxy",
        help="put an MCP server behind a policy (stdio proxy)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--policy", required=True, metavar="FILE", help="policy (JSON or TOML)")
    parser.add_argument("--trace", metavar="FILE", help="write the session as an agentfsm trace")
    parser.add_argument(
        "--max-result-bytes",
        type=_positive,
        default=_mcp_proxy.DEFAULT_MAX_RESULT_BYTES,
        metavar="N",
        help="cut a tool result larger than this (default %(default)s)",
    )
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- the server's command line")
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Serve the host until it closes the session; 0 then, 1 if the server fails first."""
    command = list(args.server)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise AgentFSMError("give the MCP server's command after --, e.g. -- python server.py")
    policy = Policy.from_file(args.policy)
    if args.trace is None:
        return _mcp_proxy.serve(policy, command, (), args.max_result_bytes)
    from agentfsm.replay.trace import TraceWriter

    with TraceWriter(args.trace) as writer:
        return _mcp_proxy.serve(policy, command, (writer,), args.max_result_bytes)
