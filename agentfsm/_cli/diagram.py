"""`agentfsm diagram`: draw the state machine from its route table, optionally with the
path that traced or replayed runs took."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentfsm._cli._options import Once
from agentfsm._engine.policy import Policy

__all__ = ["add_parser", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `diagram` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "diagram", help="draw the state machine from its route table"
    )
    parser.add_argument(
        "--format", action=Once, choices=["mermaid", "dot", "svg", "png"], default="mermaid"
    )
    parser.add_argument("--policy", action=Once, metavar="FILE", help="policy file (JSON or TOML)")
    parser.add_argument(
        "--trace", action=Once, metavar="FILE", help="overlay the path a traced run took"
    )
    parser.add_argument(
        "--shadow",
        action=Once,
        metavar="FILE",
        help="note where this shadow policy judges each call (recorded, never enforced)",
    )
    parser.add_argument(
        "-o", "--output", action=Once, metavar="FILE", help="write here instead of stdout"
    )
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Write the diagram; return the exit status."""
    from agentfsm._diagrams import dot, mermaid, render

    policy = Policy.from_file(args.policy) if args.policy else Policy()
    overlay = _overlay(args.trace, policy) if args.trace else None
    shadow = Policy.from_file(args.shadow) if args.shadow else None
    if args.format == "mermaid":
        data: bytes = mermaid(policy.routes, overlay, shadow=shadow).encode()
    else:
        source = dot(policy.routes, overlay, shadow=shadow)
        data = source.encode() if args.format == "dot" else render(source, args.format)
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
    return 0


def _overlay(path: str, policy: Policy) -> Any:
    """Count the path runs took: the transitions an agentfsm trace recorded, or, for any
    other recorded format, the transitions of replaying it through `policy`.

    Both stream: the trace is read one line at a time and a replay is counted one
    run at a time, so memory stays flat in the file's size.
    """
    from agentfsm._diagrams import Overlay

    transitions = _recorded_transitions(path)
    first = next(transitions, None)
    if first is not None:
        return Overlay.from_events(itertools.chain([first], transitions))
    from agentfsm._replay.engine import replay_run
    from agentfsm._replay.trajectories import read_runs

    total = Overlay()
    for run in read_runs(path):
        events: list[Any] = []
        replay_run(run, policy, observers=[events.append], keep_decisions=False)
        part = Overlay.from_events(events)
        total.states.update(part.states)
        total.edges.update(part.edges)
    return total


def _recorded_transitions(path: str) -> Iterator[dict[str, Any]]:
    """The transition events of an agentfsm trace, one at a time; none for other files.

    A file whose header is not an agentfsm trace's yields nothing (it is replayed
    instead); a malformed line after a good header raises `TraceError`.
    """
    from agentfsm._replay.trace import read_numbered
    from agentfsm.exceptions import TraceError

    events = read_numbered(path)
    try:
        first = next(events, None)
    except TraceError:
        return
    for number, event in itertools.chain([first] if first is not None else [], events):
        if event.get("event") != "transition":
            continue
        if not all(isinstance(event.get(key), str) for key in ("src", "dst", "guard")):
            raise TraceError(
                f"{path}:{number}: a transition event needs string src, dst and guard",
                path=path,
                line=number,
            )
        yield event
