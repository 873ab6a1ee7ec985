"""`agentfsm serve-script SCRIPT`: serve scripted model replies over HTTP until interrupted.

The server is `agentfsm.testing.ScriptedServer`: OpenAI chat completions
(`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`), streaming
or not. Each request gets the script's next reply; a request after the last one gets
HTTP 400 `script exhausted`.

SCRIPT is JSON (a list of replies) or JSON Lines (one reply per line; blank lines
and lines starting with `#` are skipped). A reply is a string (the answer text) or an
object with the fields of `agentfsm.testing.Reply`, for example:

    "Hello!"
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    {"text": "cut", "finish_reason": "length"}
    {"status": 429, "retry_after": 1}

The first line on stdout is the OpenAI base URL (`http://127.0.0.1:PORT/v1`): start
the server in the background and set `OPENAI_BASE_URL` to that line (docs/cli.md shows
how), or give `--port` and know it in advance. It runs until interrupted: Ctrl-C or
SIGTERM stops it (exit 0). Exit 2: the script cannot be read
or a reply is invalid (the message names the file and line), or the port cannot be
listened on.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from agentfsm._cli._options import Once, bounded, subcommand
from agentfsm._cli._text import one_line
from agentfsm.exceptions import AgentFSMError

__all__ = ["add_parser", "main", "read_script"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `serve-script` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser = subcommand(
        subparsers,
        "serve-script",
        "serve scripted replies as an OpenAI/Anthropic-compatible server",
        __doc__,
    )
    parser.add_argument("script", metavar="SCRIPT", help="replies: JSON list or JSON Lines")
    parser.add_argument(
        "--port", action=Once, type=_port, default=0, help="port to listen on (default: a free one)"
    )
    parser.add_argument("--host", action=Once, default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--model", action=Once, default="scripted", help="model name written into replies"
    )
    parser.set_defaults(handler=main)
    return parser


_port = bounded(int, "a port from 0 to 65535", 0, 65535)


def read_script(path: str) -> list[Any]:
    """The replies of a script file, as `Reply` objects.

    Raises:
        AgentFSMError: the file cannot be read, is neither JSON nor JSON Lines, holds no
            reply, or a reply is invalid; the message names the file (and line).
    """
    from agentfsm.testing import Reply, say

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentFSMError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeError as exc:
        raise AgentFSMError(f"{path}: not UTF-8 text: {exc}") from exc
    items = _items(path, text)
    if not items:
        raise AgentFSMError(f"{path}: no replies: the script is empty")
    replies = []
    for where, item in items:
        try:
            if isinstance(item, str):
                replies.append(say(item))
            elif isinstance(item, dict):
                replies.append(Reply.model_validate(item))
            else:
                raise AgentFSMError(f"a reply is a string or an object, not {type(item).__name__}")
        except AgentFSMError as exc:
            raise AgentFSMError(f"{where}: {one_line(str(exc))}") from exc
    return replies


def _items(path: str, text: str) -> list[tuple[str, Any]]:
    """Each reply of the file with where it is (`file` or `file:line`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    else:
        if isinstance(data, list):
            return [(f"{path}: reply {n}", item) for n, item in enumerate(data, 1)]
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            items.append((f"{path}:{number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise AgentFSMError(f"{path}:{number}: not valid JSON: {exc.msg}") from exc
    return items


def main(args: argparse.Namespace) -> int:
    """Serve the script until interrupted; print the OpenAI base URL first."""
    from agentfsm.testing import ScriptedServer

    replies = read_script(args.script)
    try:
        server = ScriptedServer(replies, model=args.model, port=args.port, host=args.host)
    except OSError as exc:
        raise AgentFSMError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from exc
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    with server:
        print(server.openai_base, flush=True)
        print(
            f"agentfsm serve-script: {len(replies)} scripted reply(ies); OpenAI base "
            f"{server.openai_base}, Anthropic base {server.anthropic_base}; Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            pass
        served = len(replies) - server.remaining
        print(f"agentfsm serve-script: served {served} of {len(replies)}", file=sys.stderr)
    return 0
