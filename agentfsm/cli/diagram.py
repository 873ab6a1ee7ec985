"""`agentfsm diagram`: draw the state machine from its route table, optionally with the
path that traced or replayed runs took."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agentfsm.core.policy import Policy

__all__ = ["add_parser", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `diagram` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "diagram", help="draw the state machine from its route table"
    )
    parser.add_argument("--format", choices=["mermaid", "dot", "svg", "png"], default="mermaid")
    parser.add_argument("--policy", metavar="FILE", help="policy file (JSON or TOML)")
    parser.add_argument("--trace", metavar="FILE", help="overlay the path a traced run took")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Write the diagram; return the exit status."""
    from agentfsm.diagrams import dot, mermaid, render

    policy = Policy.from_file(args.policy) if args.policy else Policy()
    overlay = _overlay(args.trace, policy) if args.trace else None
    if args.format == "mermaid":
        data: bytes = mermaid(policy.routes, overlay).encode()
    else:
        source = dot(policy.routes, overlay)
        data = source.encode() if args.format == "dot" else render(source, args.format)
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
    return 0


def _overlay(path: str, policy: Policy) -> Any:
    """Count the path runs took: the transitions an agentfsm trace recorded, or, for any
    other recorded format, the transitions of replaying it through `policy`."""
    from agentfsm.diagrams import Overlay

    events = _recorded_transitions(path)
    if not events:
        from agentfsm.replay.engine import replay_run
        from agentfsm.replay.trajectories import read_runs

        for run in read_runs(path):
            replay_run(run, policy, observers=[events.append], keep_decisions=False)
    return Overlay.from_events(events)


def _recorded_transitions(path: str) -> list[Any]:
    from agentfsm.exceptions import TraceError
    from agentfsm.replay.trace import read_trace

    try:
        return [e for e in read_trace(path) if e.get("event") == "transition"]
    except TraceError:
        return []
