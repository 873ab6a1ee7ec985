"""Embed agentfsm as the controller of an agent loop you already have.

The "model" here is scripted with the exact OpenAI chat-completions bodies a
provider would send (the second one says finish_reason "stop" although it
carries a tool call, as some OpenAI-compatible servers do), and the tool is a
real Python function. Run it: `python examples/embed_controller.py`.
"""

from __future__ import annotations

import json
from typing import Any

import agentfsm as af
from agentfsm._cli.demo import get_weather


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    """An OpenAI chat-completions body around one assistant message."""
    return {
        "id": "chatcmpl-demo",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
    }


SCRIPT = [
    completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_weather_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"latitude": 31.23, "longitude": 121.47}',
                    },
                }
            ],
        },
        "stop",
    ),
    completion({"role": "assistant", "content": "Tomorrow in Shanghai: see the forecast."}, "stop"),
]


def main() -> af.Decision:
    """Drive the scripted model and the real tool until the controller ends the run."""
    ctl = af.Controller(af.Policy(max_turns=5), tools=[get_weather])
    outputs = iter(SCRIPT)
    decision = ctl.on_model_output(next(outputs))
    while decision.action not in (af.Action.FINAL, af.Action.STOP):
        print(f"{decision.action.value:14} {decision.priority} {decision.guard}: {decision.reason}")
        if decision.action is af.Action.EXECUTE_TOOLS:
            results = [
                af.ToolResult(call_id=c.id, content=json.dumps(get_weather(**(c.arguments or {}))))
                for c in decision.tool_calls
            ]
            decision = ctl.on_tool_results(results)
        else:
            decision = ctl.on_model_output(next(outputs))
    print(
        f"{decision.action.value:14} {decision.priority} {decision.guard}: {decision.exit_reason}"
    )
    return decision


if __name__ == "__main__":
    main()
