"""The `agentfsm` command: one module per subcommand (diagram, replay, report, run, demo,
lint, explain, serve-script, mcp-proxy).

Subcommands import what they need when they run, so `agentfsm diagram` never
loads litellm.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentfsm._cli._text import one_line
from agentfsm._version import __version__
from agentfsm.exceptions import AgentFSMError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from agentfsm._cli import (
        demo,
        diagram,
        explain,
        lint,
        mcp_proxy,
        replay,
        report,
        run,
        serve_script,
    )

    parser = argparse.ArgumentParser(
        prog="agentfsm", description="Decide, after every LLM turn, what an agent does next."
    )
    parser.add_argument("--version", action="version", version=f"agentfsm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    diagram.add_parser(sub)
    replay.add_parser(sub).set_defaults(handler=replay.main)
    demo.add_parser(sub)
    run.add_parser(sub)
    report.add_parser(sub)
    lint.add_parser(sub)
    explain.add_parser(sub)
    serve_script.add_parser(sub)
    mcp_proxy.add_parser(sub)
    return parser


EXIT_BAD_INPUT = 2
"""Bad input or usage (argparse exits with 2 for usage errors too)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `agentfsm` command line; return the exit status.

    0 success (or the same decisions), 1 the policies' decisions differ (or a
    self-replay diverges, or `lint` found something), 2 bad input or usage: a file
    that cannot be read or written, a malformed policy or trace, a bad argument;
    3 the replay's engine failed (a Ray cluster lost). Bad input prints one line,
    never a traceback.
    """
    args = _parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except AgentFSMError as exc:
        print(f"agentfsm {args.command}: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # unreadable file, symlink loop, directory, missing folder
        print(f"agentfsm {args.command}: {one_line(describe_os_error(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeError as exc:
        print(f"agentfsm {args.command}: not UTF-8 text: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return status


def describe_os_error(exc: OSError) -> str:
    """An OSError as `file: what went wrong`, in the words of the OS."""
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if exc.filename is not None else what


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
