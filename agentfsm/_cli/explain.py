"""`agentfsm explain POLICY CALL`: which permission source decides one tool call, and why.

CALL is a JSON object `{"name": "bash", "arguments": {"command": "rm -rf /"}}` (the
arguments may also be a JSON string, as OpenAI sends them). It prints the permission
(`allow`, `ask` or `deny`) and the source that gave it: a rule (with the command that
matched a shell pattern, the argument a rule names that the call lacks, which makes the
call `ask`, or why a path cannot be read with confidence), the `permissions` table, or
the default. The policy file is read as `Policy.from_file` reads it (a repeated key, or
fields beside a `policy` key, are refused with the line). Rules, the table and
the default are what a policy file can hold; run-level guards (budgets, repeats) decide
on a whole run and are not a single call's. Exit 0; 2 when the policy or CALL is bad.
With `--exit-code`, for scripts, the exit status is the verdict: 0 allow, 1 deny, 3 ask
(2 stays bad input), so `agentfsm explain --exit-code POLICY CALL && run` runs only
what the policy allows outright.

A policy with a Cedar source (`cedar`, docs/cedar.md) also prints Cedar's own answer
and the deciding Cedar policies on a second line. Cedar's context holds the run's
history only when `--history '{"calls": 3, "tokens": 900, "cost_micros": 2000, "turn": 2}'`
gives it; without it the history is absent, and a Cedar policy that reads it denies.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from agentfsm._cedar import CallHistory
from agentfsm._cli._options import Once, subcommand
from agentfsm._engine.policy import Policy
from agentfsm._model.types import ToolCall
from agentfsm.exceptions import AgentFSMError

__all__ = ["add_parser", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `explain` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser = subcommand(
        subparsers, "explain", "say which rule decides a tool call under a policy, and why", __doc__
    )
    parser.add_argument("policy", metavar="POLICY", help="policy file (JSON, or TOML by suffix)")
    parser.add_argument("call", metavar="CALL", help='{"name": ..., "arguments": {...}}')
    parser.add_argument(
        "--exit-code",
        action="store_true",
        help="exit by the verdict: 0 allow, 1 deny, 3 ask (2 bad input)",
    )
    parser.add_argument(
        "--history",
        action=Once,
        metavar="JSON",
        default=None,
        help='the run so far, for a Cedar source: {"calls", "tokens", "cost_micros", "turn"}',
    )
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Print `PERMISSION: source` for the call under the policy file."""
    policy = Policy.from_file(args.policy)
    call, history = _call(args.call), _history(args.history)
    permission, source = policy.permission_verdict(call, history=history)
    print(f"{permission}: {source}")
    if policy.cedar is not None:
        said, why = policy.cedar.verdict(call, history)
        print(f"cedar said {said}: {why}")
    if not getattr(args, "exit_code", False):
        return 0
    # Anything but the three permissions (never expected) is not an allow: fail closed.
    return EXIT_BY_VERDICT.get(permission, EXIT_BY_VERDICT["deny"])


EXIT_BY_VERDICT = {"allow": 0, "deny": 1, "ask": 3}
"""`--exit-code`'s status for each verdict; 2 is bad input, as for every subcommand."""


def _history(text: str | None) -> CallHistory | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AgentFSMError(f"--history is not JSON: {exc.msg} (at column {exc.colno})") from exc
    if not isinstance(data, Mapping):
        raise AgentFSMError("--history must be a JSON object {calls, tokens, cost_micros, turn}")
    return CallHistory.model_validate(dict(data))


def _call(text: str) -> ToolCall:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AgentFSMError(f"CALL is not JSON: {exc.msg} (at column {exc.colno})") from exc
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise AgentFSMError('CALL must be a JSON object {"name": "...", "arguments": {...}}')
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise AgentFSMError(f"CALL's arguments string is not JSON: {exc.msg}") from exc
    if not isinstance(arguments, Mapping):
        raise AgentFSMError(f"CALL's arguments must be an object, not {type(arguments).__name__}")
    return ToolCall(id="explain", name=data["name"], arguments=dict(arguments))
