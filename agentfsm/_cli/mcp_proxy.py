"""`agentfsm mcp-proxy --policy FILE [--shadow FILE] [--approvals FILE] [--http [HOST:]PORT]
[--trace FILE] (--url URL [--header H]... | -- CMD...)`: an MCP server behind a policy.

The proxy speaks MCP to the host (Claude Code, Cursor, any MCP client) on its own stdin and
stdout, or with `--http` over streamable HTTP at http://HOST:PORT/mcp (127.0.0.1 unless a
host is given; port 0 picks a free one; the URL is stdout's one line). The server is the
command after `--`, started as a child process (one per HTTP session), or with `--url` a
streamable HTTP MCP server (`--header 'Authorization: Bearer ${TOKEN}'` sends a header with
every request to it, the token read from the environment; `--oauth` reaches a server behind
MCP's OAuth authorization with the tokens `--oauth-login` stored once, refreshed when they
expire, kept in `--oauth-store DIR` or $XDG_STATE_HOME/agentfsm/oauth, never in the trace).
Hosts of every MCP revision the mcp package speaks are served, the stateless 2026-07-28 one
included (its `ask` is answered by the host sending the call again). Every `tools/call` is checked
against the policy first, as one turn of a session-long Controller (one per HTTP session): a
denied call never reaches the server, `ask` is put to the host's user through MCP
elicitation (denied when the host cannot ask), budgets and the doom-loop guard stop a
session that runs away. `max_turns` applies only when the policy file sets it. A tool whose
description or input schema changes after its first listing is flagged and asked again. With
`--trace`, the session is written as an agentfsm trace (with `--http`, one file per session:
FILE's name with the session id before its suffix) that `agentfsm replay` and `agentfsm
report` read. `--shadow FILE` judges every call by a candidate policy too and records its
verdict in the trace beside the enforced one, never enforcing it (docs/shadow.md).
The elicitation form lets the user remember an answer (N uses, an hour, the session);
`--approvals FILE` grants remembered approvals out of band to a host that cannot ask, re-read
when the file changes (docs/mcp-proxy.md#remembered-approvals).

Exit 0 when the host closes the session or on SIGTERM or SIGINT, 1 when the
server exits or breaks, 2 for bad arguments, a policy file that cannot be read, a server
that cannot be started or reached, or a port that cannot be opened.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentfsm._cli._options import Once, bounded, subcommand
from agentfsm._engine.policy import Policy
from agentfsm.exceptions import AgentFSMError
from agentfsm.integrations.mcp import _proxy as _mcp_proxy

__all__ = ["add_parser", "main"]


_positive = bounded(int, "a whole number >= 1", 1)
_seconds = bounded(float, "0 or more seconds", 0.0)


DEFAULT_MAX_SESSIONS = 16
"""HTTP sessions open at once before a new one is refused: each holds its own server child
(a Node.js server such as @modelcontextprotocol/server-filesystem takes about 68 MiB), so
abandoned sessions must not add up without bound while they wait to expire."""
DEFAULT_SESSION_IDLE = 1800.0
"""Seconds an HTTP session may sit with no request open (the mcp package's own servers
keep an idle session as long) before the proxy ends it and stops its server child."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `mcp-proxy` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser = subcommand(
        subparsers,
        "mcp-proxy",
        "put an MCP server behind a policy (stdio or streamable HTTP proxy)",
        __doc__,
    )
    parser.add_argument(
        "--policy", action=Once, required=True, metavar="FILE", help="policy (JSON or TOML)"
    )
    parser.add_argument(
        "--shadow",
        action=Once,
        metavar="FILE",
        help="a candidate policy judged beside --policy and recorded in the trace, never enforced",
    )
    parser.add_argument(
        "--trace", action=Once, metavar="FILE", help="write the session as an agentfsm trace"
    )
    parser.add_argument(
        "--approvals",
        action=Once,
        metavar="FILE",
        help="approve calls out of band: a JSON or TOML file of remembered approvals, re-read "
        "when it changes (for hosts that cannot ask; docs/mcp-proxy.md)",
    )
    parser.add_argument(
        "--max-result-bytes",
        action=Once,
        type=_positive,
        default=_mcp_proxy.DEFAULT_MAX_RESULT_BYTES,
        metavar="N",
        help="cut a tool result larger than this (default %(default)s)",
    )
    parser.add_argument(
        "--http",
        action=Once,
        metavar="[HOST:]PORT",
        help="serve hosts over streamable HTTP at http://HOST:PORT/mcp (HOST 127.0.0.1)",
    )
    parser.add_argument(
        "--session-idle",
        action=Once,
        type=_seconds,
        metavar="SECONDS",
        help="with --http: end a session whose host has had no request open for this long "
        f"(default {DEFAULT_SESSION_IDLE:g}; 0: never)",
    )
    parser.add_argument(
        "--max-sessions",
        action=Once,
        type=_positive,
        metavar="N",
        help="with --http: refuse a new session while N are open, each with its own server "
        f"(default {DEFAULT_MAX_SESSIONS})",
    )
    parser.add_argument(
        "--url", action=Once, metavar="URL", help="the server is a streamable HTTP MCP server"
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="send this header to the --url server (repeatable); ${VAR} in VALUE is read from "
        "the environment, so a token need not be on the command line",
    )
    parser.add_argument(
        "--oauth",
        action="store_true",
        help="the --url server uses MCP's OAuth authorization: send its stored token, "
        "refreshed when it expires (log in first with --oauth-login)",
    )
    parser.add_argument(
        "--oauth-login",
        action="store_true",
        help="authorize the proxy at the --url server once: print the URL to open in a "
        "browser, wait for its redirect on 127.0.0.1, store the tokens, and exit",
    )
    parser.add_argument(
        "--oauth-store",
        action=Once,
        metavar="DIR",
        help="where --oauth keeps its tokens, one 0600 file per server (default "
        "$XDG_STATE_HOME/agentfsm/oauth); never in the trace",
    )
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- the server's command line")
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Serve until the host closes the session (stdio) or a signal (--http); the status."""
    command = _command(args)
    _check_options(args)
    if args.oauth_login:
        return _oauth_login(args.url, args.oauth_store)
    if args.http is None and args.url is None:
        policy = Policy.from_file(args.policy)
        args.shadow = _shadow(args.shadow)
        return _serve_stdio(args, policy, _mcp_proxy.child_server(command))
    try:
        from agentfsm.integrations.mcp import _http as _mcp_http
    except ImportError as exc:
        raise AgentFSMError(
            f"--http and --url need the mcp package ({exc}): pip install 'agentfsm[mcp]'"
        ) from None
    listen = None
    if args.http is not None:
        try:
            listen = _mcp_http.parse_listen(args.http)
        except ValueError as exc:
            raise AgentFSMError(f"--http takes [HOST:]PORT: {exc}") from None
    policy = Policy.from_file(args.policy)
    args.shadow = _shadow(args.shadow)
    auth = _oauth(args.url, args.oauth_store) if args.oauth or args.oauth_store else None
    connect = _server(args.url, command, listen is not None, _headers(args.header), auth)
    if listen is None:
        return _serve_stdio(args, policy, connect)
    idle = DEFAULT_SESSION_IDLE if args.session_idle is None else args.session_idle
    most = DEFAULT_MAX_SESSIONS if args.max_sessions is None else args.max_sessions
    return _mcp_http.serve_http(
        _sessions(args, policy, connect), *listen, idle=idle or None, max_sessions=most
    )


def _check_options(args: argparse.Namespace) -> None:
    """AgentFSMError for an option given without the one it needs."""
    if args.session_idle is not None and args.http is None:
        raise AgentFSMError("--session-idle is for the sessions of --http: give --http too")
    if args.max_sessions is not None and args.http is None:
        raise AgentFSMError("--max-sessions is for the sessions of --http: give --http too")
    if args.header and args.url is None:
        raise AgentFSMError("--header is sent to the --url server: give --url too")
    if (args.oauth or args.oauth_login or args.oauth_store) and args.url is None:
        raise AgentFSMError("--oauth, --oauth-login and --oauth-store are for a --url server")


def _shadow(path: str | None) -> Policy | None:
    """The --shadow policy file's policy, or None; AgentFSMError naming --shadow."""
    if path is None:
        return None
    try:
        return Policy.from_file(path)
    except AgentFSMError as exc:
        raise AgentFSMError(f"--shadow: {exc.message}") from None


def _command(args: argparse.Namespace) -> list[str]:
    """The server's command line after `--`: given, or empty with --url (not both)."""
    command = list(args.server)
    if command[:1] == ["--"]:
        command = command[1:]
    if command and args.url is not None:
        raise AgentFSMError("give either --url or the server's command after --, not both")
    if not command and args.url is None:
        raise AgentFSMError(
            "give the MCP server's command after --, e.g. -- python server.py, or --url URL"
        )
    return command


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""A header name, as HTTP spells a token."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _headers(given: list[str]) -> dict[str, str]:
    """`--header 'NAME: VALUE'` options as a mapping, with `${VAR}` read from the environment.

    AgentFSMError for a header that is not `NAME: VALUE`, a value holding a line break (it
    would start another header), or a variable that is not set (sending the header without
    its token would only fail later, at the server, with less said).
    """
    headers: dict[str, str] = {}
    for text in given:
        name, colon, value = text.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise AgentFSMError(f"--header takes 'NAME: VALUE', not {text!r:.80}")
        unset = [v for v in _VARIABLE.findall(value) if v not in os.environ]
        if unset:
            raise AgentFSMError(f"--header {name}: the environment variable {unset[0]} is not set")
        value = _VARIABLE.sub(lambda found: os.environ[found.group(1)], value)
        if "\r" in value or "\n" in value:
            raise AgentFSMError(f"--header {name}: a value must not hold a line break")
        headers[name] = value
    return headers


def _oauth(url: str, store: str | None) -> Any:
    """The OAuth client for the --url server; AgentFSMError, saying how to log in, when no
    token is stored for it (the proxy cannot open a browser for its host)."""
    from agentfsm.integrations.mcp import _oauth as _mcp_oauth

    where = Path(store) if store is not None else _mcp_oauth.default_store()
    if not _mcp_oauth.FileTokenStorage(where, url).stored():
        raise AgentFSMError(str(_mcp_oauth.OAuthLoginError(url, store)))
    return _mcp_oauth.oauth_client(url, where)


def _oauth_login(url: str, store: str | None) -> int:
    """Run the one interactive OAuth step for the --url server; 0 once tokens are stored."""
    import asyncio

    from agentfsm.integrations.mcp import _oauth as _mcp_oauth

    where = Path(store) if store is not None else _mcp_oauth.default_store()
    try:
        asyncio.run(_mcp_oauth.login(url, where, _mcp_proxy.say))
    except Exception as exc:  # the flow's failures are the server's or the person's
        raise AgentFSMError(f"--oauth-login at {url} failed: {_mcp_proxy._describe(exc)}") from None
    _mcp_proxy.say(f"authorized; the tokens are in {where}")
    return 0


def _server(
    url: str | None,
    command: list[str],
    per_session: bool,
    headers: dict[str, str],
    auth: Any = None,
) -> _mcp_proxy.ServerConnect:
    """The server's end: the server at `url` once it accepts a connection, else the command.

    AgentFSMError when the URL is not reached, or when a command that each HTTP session
    would start is not found (found out once here, not at each session).
    """
    if url is None:
        if per_session and shutil.which(command[0]) is None:
            raise AgentFSMError(f"cannot start the server {command[0]!r}: no such program")
        return _mcp_proxy.child_server(command)
    from agentfsm.integrations.mcp import _http as _mcp_http

    try:
        _mcp_http.check_reachable(url)
    except _mcp_proxy.StartError as exc:
        raise AgentFSMError(str(exc)) from None
    return _mcp_http.http_server(url, headers, auth)


def _serve_stdio(
    args: argparse.Namespace, policy: Policy, connect: _mcp_proxy.ServerConnect
) -> int:
    if args.trace is None:
        return _mcp_proxy.serve(
            policy, connect, (), args.max_result_bytes, args.shadow, args.approvals
        )
    from agentfsm._replay.trace import TraceWriter

    with TraceWriter(args.trace) as writer:
        return _mcp_proxy.serve(
            policy, connect, (writer,), args.max_result_bytes, args.shadow, args.approvals
        )


def session_trace(path: str, session_id: str) -> Path:
    """Where an HTTP session's trace goes: `path` with the session id before its suffix."""
    given = Path(path)
    return given.with_name(f"{given.stem}.{session_id}{given.suffix}")


def _sessions(
    args: argparse.Namespace, policy: Policy, connect: _mcp_proxy.ServerConnect
) -> Callable[[str, _mcp_proxy.HostSide], Awaitable[int]]:
    """Runs one HTTP session: its own Proxy (its own Controller), its own trace file."""
    from agentfsm._replay.trace import TraceWriter

    async def run_session(session_id: str, host: _mcp_proxy.HostSide) -> int:
        with contextlib.ExitStack() as stack:
            observers = []
            if args.trace is not None:
                try:
                    writer = TraceWriter(session_trace(args.trace, session_id))
                except AgentFSMError as exc:  # the session runs; its trace cannot be kept
                    _mcp_proxy.say(f"session {session_id}: {exc}")
                else:
                    observers.append(stack.enter_context(writer))
            proxy = _mcp_proxy.Proxy(
                policy,
                connect,
                observers,
                args.max_result_bytes,
                run_id=session_id,
                shadow=args.shadow,
                approvals=args.approvals,
            )
            return await proxy.run(host)

    return run_session
