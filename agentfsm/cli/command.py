"""The `agentfsm` command: one module per subcommand (diagram, replay, report, run, demo).

Subcommands import what they need when they run, so `agentfsm diagram` never
loads litellm.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentfsm.exceptions import AgentFSMError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from agentfsm.cli import demo, diagram, replay, report, run

    parser = argparse.ArgumentParser(
        prog="agentfsm", description="Decide, after every LLM turn, what an agent does next."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    diagram.add_parser(sub)
    replay.add_parser(sub).set_defaults(handler=replay.main)
    demo.add_parser(sub)
    run.add_parser(sub)
    report.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `agentfsm` command line; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except AgentFSMError as exc:
        print(f"agentfsm {args.command}: {exc}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
