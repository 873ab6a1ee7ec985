"""The `agentfsm` command: diagram, replay, demo and run.

Subcommands import what they need when they run, so `agentfsm diagram` never
loads litellm.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentfsm._policy import Policy
from agentfsm.exceptions import AgentFSMError

__all__ = ["main"]


def _diagram(args: argparse.Namespace) -> int:
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
        from agentfsm._replay import replay_run
        from agentfsm._trajectories import read_runs

        for run in read_runs(path):
            replay_run(run, policy, observers=[events.append], keep_decisions=False)
    return Overlay.from_events(events)


def _recorded_transitions(path: str) -> list[Any]:
    from agentfsm._trace import read_trace
    from agentfsm.exceptions import TraceError

    try:
        return [e for e in read_trace(path) if e.get("event") == "transition"]
    except TraceError:
        return []


def _load_tool(spec: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise AgentFSMError(f"--tool {spec!r}: expected module:function")
    tool: Any = getattr(importlib.import_module(module_name), attr, None)
    if not callable(tool):
        raise AgentFSMError(f"--tool {spec!r}: {attr!r} is not a callable in {module_name}")
    return tool  # type: ignore[no-any-return]


def _run(args: argparse.Namespace) -> int:
    from agentfsm._runner import run

    policy = Policy.from_file(args.policy) if args.policy else Policy()
    result = run(
        args.model,
        [{"role": "user", "content": args.prompt}],
        tools=[_load_tool(t) for t in args.tool],
        policy=policy,
        api_base=args.api_base,
        api_key=args.api_key,
        stream=args.stream,
        trace=args.trace,
    )
    summary = {"exit_reason": result.exit_reason, "text": result.text, "error": result.error}
    print(json.dumps(summary, default=str))
    return 0 if result.exit_reason == "completed" else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentfsm", description="Decide, after every LLM turn, what an agent does next."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    diagram = sub.add_parser("diagram", help="draw the state machine from its route table")
    diagram.add_argument("--format", choices=["mermaid", "dot", "svg", "png"], default="mermaid")
    diagram.add_argument("--policy", metavar="FILE", help="policy file (JSON or TOML)")
    diagram.add_argument("--trace", metavar="FILE", help="overlay the path a traced run took")
    diagram.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    diagram.set_defaults(handler=_diagram)

    from agentfsm import _cli_replay, _demo

    _cli_replay.add_parser(sub).set_defaults(handler=_cli_replay.main)
    _demo.add_parser(sub).set_defaults(handler=_demo.run_demo)

    runner = sub.add_parser("run", help="run an agent through litellm with Python tools")
    runner.add_argument("prompt", help="the user's request")
    runner.add_argument("--model", required=True, help="litellm model name, e.g. openai/gpt-4o")
    runner.add_argument("--tool", action="append", default=[], metavar="MODULE:FUNCTION")
    runner.add_argument("--policy", metavar="FILE")
    runner.add_argument("--api-base", metavar="URL", help="the provider's base URL")
    runner.add_argument("--api-key", metavar="KEY", help="else the provider's usual variable")
    runner.add_argument("--stream", action="store_true")
    runner.add_argument("--trace", metavar="FILE")
    runner.set_defaults(handler=_run)
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
