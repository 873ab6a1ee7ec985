"""`agentfsm run`: the runner through litellm, with Python tools named as module:function."""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable
from typing import Any

from agentfsm._cli._options import Once
from agentfsm._engine.policy import Policy
from agentfsm.exceptions import AgentFSMError

__all__ = ["add_parser", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `run` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run", help="run an agent through litellm with Python tools"
    )
    parser.add_argument("prompt", help="the user's request")
    parser.add_argument(
        "--model", action=Once, required=True, help="litellm model name, e.g. openai/gpt-4o"
    )
    parser.add_argument("--tool", action="append", default=[], metavar="MODULE:FUNCTION")
    parser.add_argument("--policy", action=Once, metavar="FILE")
    parser.add_argument("--api-base", action=Once, metavar="URL", help="the provider's base URL")
    parser.add_argument(
        "--api-key", action=Once, metavar="KEY", help="else the provider's usual variable"
    )
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--trace", action=Once, metavar="FILE")
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Run the agent and print a JSON summary; 0 when it completed."""
    from agentfsm._runner.loop import run

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


def _load_tool(spec: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise AgentFSMError(f"--tool {spec!r}: expected module:function")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an import runs the module's code: any error can come out
        raise AgentFSMError(
            f"--tool {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    tool: Any = getattr(module, attr, None)
    if not callable(tool):
        raise AgentFSMError(f"--tool {spec!r}: {attr!r} is not a callable in {module_name}")
    return tool  # type: ignore[no-any-return]
