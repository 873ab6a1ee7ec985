"""`agentfsm demo`: the weather agent, end to end, with no key and no network.

The user asks for tomorrow's weather in Shanghai; the model calls
`get_weather(latitude, longitude)`; a real Python tool answers; the model
replies. The model is the local scripted server (OpenAI chat completions or
Anthropic Messages on 127.0.0.1) reached through litellm's own HTTP client, so
every byte goes through the same path as a real provider. With `--model` and
that provider's key in the environment, the same loop talks to the provider.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any, TextIO

from agentfsm._cli._options import Once
from agentfsm.testing.scripted import Reply, call, last_tool_result, say, tool_calls

__all__ = ["QUESTION", "add_arguments", "add_parser", "get_weather", "main", "run_demo"]

QUESTION = "What will the weather be like in Shanghai tomorrow?"
"""The user's message."""
SHANGHAI = {"latitude": 31.23, "longitude": 121.47}
_CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "showers", "thunderstorms")
_LOCAL_MODELS = {"openai": "openai/scripted-weather", "anthropic": "anthropic/scripted-weather"}


def get_weather(latitude: float, longitude: float) -> dict[str, Any]:
    """Forecast tomorrow's weather at a point on Earth.

    Deterministic and offline: the forecast is computed from the coordinates
    (warmer towards the equator, the sky picked from the position), so the demo
    prints the same numbers on every run.
    """
    if not -90 <= latitude <= 90 or not -180 <= longitude <= 180:
        raise ValueError(f"no such place: latitude {latitude}, longitude {longitude}")
    seed = int(abs(latitude) * 100) * 31 + int(abs(longitude) * 100) * 17
    high = round(31 - abs(latitude) * 0.35 + seed % 5, 1)
    low = round(high - 5 - seed % 4, 1)
    condition = _CONDITIONS[seed % len(_CONDITIONS)]
    rain = 70 if "rain" in condition or "shower" in condition or "thunder" in condition else 10
    return {
        "latitude": latitude,
        "longitude": longitude,
        "day": "tomorrow",
        "condition": condition,
        "high_c": high,
        "low_c": low,
        "precipitation_chance": rain + seed % 20,
    }


def _answer(body: Mapping[str, Any]) -> Reply:
    """Write the model's final answer from the forecast the tool returned."""
    raw = last_tool_result(body) or "{}"
    try:
        f = json.loads(raw)
        text = (
            f"Tomorrow in Shanghai: {f['condition']}, {f['low_c']:g}–{f['high_c']:g} °C, "
            f"{f['precipitation_chance']}% chance of rain."
        )
    except (ValueError, KeyError, TypeError):
        text = f"I could not read the forecast: {raw}"
    return say(text)


def script() -> list[Reply | Any]:
    """The local model's side of the conversation: one tool call, then the answer."""
    return [tool_calls(call("get_weather", SHANGHAI)), _answer]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the demo's options to `parser` (for `agentfsm demo`)."""
    parser.add_argument(
        "--model",
        action=Once,
        help="a litellm model (e.g. openai/gpt-4o-mini); needs its provider key in the "
        "environment. Default: the local scripted server, no key needed",
    )
    parser.add_argument("--stream", action="store_true", help="stream every model call")
    parser.add_argument(
        "--trace",
        action=Once,
        default="traces/demo.jsonl",
        metavar="FILE",
        help="write the run's events here as JSON lines (default: %(default)s)",
    )
    parser.add_argument(
        "--protocol",
        action=Once,
        choices=("openai", "anthropic"),
        default="openai",
        help="the wire protocol the local server speaks (default: %(default)s)",
    )
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `demo` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="run the weather agent end to end through litellm, no key needed"
    )
    add_arguments(parser)
    parser.set_defaults(handler=run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo from command-line arguments; return the exit status (0 when completed)."""
    parser = add_arguments(argparse.ArgumentParser(prog="agentfsm demo", description=__doc__))
    return run_demo(parser.parse_args(argv))


def run_demo(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the demo with parsed arguments, printing to `out` (stdout by default)."""
    from agentfsm._runner.loop import _litellm, run
    from agentfsm.testing.server import ScriptedServer

    out = out or sys.stdout
    litellm = _litellm()
    litellm.suppress_debug_info = True  # the demo's output is the transitions, not litellm's hints
    with ExitStack() as stack:
        if args.model:
            missing = litellm.validate_environment(args.model).get("missing_keys") or []
            if missing:
                print(f"agentfsm demo: {args.model} needs {', '.join(missing)}", file=sys.stderr)
                return 2
            model, api_base, api_key = args.model, None, None
            print(f"model: {model} (real provider)", file=out)
        else:
            server = stack.enter_context(ScriptedServer(script()))
            model, api_key = _LOCAL_MODELS[args.protocol], "sk-local-demo"
            api_base = server.anthropic_base if args.protocol == "anthropic" else server.openai_base
            print(f"model: {model} at {api_base} (local scripted server)", file=out)
        print(f"user: {QUESTION}", file=out)
        result = run(
            model,
            [{"role": "user", "content": QUESTION}],
            tools=[get_weather],
            api_base=api_base,
            api_key=api_key,
            stream=args.stream,
            observers=[_Printer(out)],
            trace=args.trace,
        )
    print(f"assistant: {result.text}", file=out)
    usage = result.usage
    print(
        f"exit: {result.exit_reason.value} after {result.turns} model turn(s), "
        f"{usage.input_tokens} in / {usage.output_tokens} out tokens" + _error(result.error),
        file=out,
    )
    print(f"trace: {args.trace}", file=out)
    return 0 if result.exit_reason.value == "completed" else 1


def _error(error: str | None) -> str:
    return "" if error is None else f"; {error}"


class _Printer:
    """Print each transition as `turn src -> dst  P1 Guard()  reason`, and each tool result."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("event") == "transition":
            e = {k: event.get(k, "") for k in ("turn", "src", "dst", "priority", "guard", "reason")}
            line = f"{e['turn']:>3} {e['src']:>12} -> {e['dst']:<12} {e['priority']} {e['guard']}"
            print(f"{line}  {e['reason']}".rstrip(), file=self.out)
        elif event.get("event") == "tool_results":
            for result in event.get("results") or []:
                flag = " (error)" if result.get("is_error") else ""
                content = result.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                print(
                    f"    tool {result.get('name') or result.get('call_id')}{flag}: {text}",
                    file=self.out,
                )
