"""agentfsm's Controller driven by a host loop: the host calls the model and runs the tools.

Variants: `turn` feeds prebuilt `ModelTurn`s; `openai` feeds OpenAI chat-completions
bodies (dicts), so it also pays for normalizing; `declared` is `openai` with `echo` declared
by a JSON schema (an integer `i` with a `minimum`), so every call's arguments are checked, as
LangGraph's ToolNode validates its tool's arguments; `turn_declared` is `turn` with that schema;
`observed` is `turn` with one observer
(`deque.append`), so every event is built; `transitions` is `turn` on the reference engine
where the shared `transitions` machine picks every edge.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from typing import Any

from _harness import FINAL_TEXT, Builder, Run, UnavailableError, call_args, echo, main

ECHO_SPEC = {
    "name": "echo",
    "description": "Return the argument unchanged.",
    "parameters": {
        "type": "object",
        "properties": {"i": {"type": "integer", "minimum": 0}},
        "required": ["i"],
        "additionalProperties": False,
    },
}
"""`echo` declared with a schema, as a host that validates its tools' arguments declares it."""


def _controller_loop(
    af: Any, n: int, script: list[Any], declared: Any = "echo", **options: Any
) -> Run:
    """The host loop: model output in, decision out, tools run when told, until the end."""
    tools = {"echo": echo}
    execute, ends = af.Action.EXECUTE_TOOLS, (af.Action.FINAL, af.Action.STOP)

    def run() -> tuple[str, int]:
        ctl = af.Controller(af.Policy(max_turns=n + 5), tools=[declared], **options)
        replies = iter(script)
        calls = 0
        while True:
            reply = next(replies)  # the model call
            d = ctl.on_model_output(reply)
            if d.action == execute:
                results = []
                for c in d.tool_calls:
                    results.append(af.ToolResult(call_id=c.id, content=tools[c.name](c.arguments)))
                    calls += 1
                d = ctl.on_tool_results(results)
            if d.action in ends:
                return _final_text(reply), calls

    return run


def _final_text(reply: Any) -> str:
    if isinstance(reply, dict):
        return reply["choices"][0]["message"]["content"]
    return reply.text


def _turns(af: Any, n: int) -> list[Any]:
    turns = [
        af.ModelTurn(
            text="",
            tool_calls=[af.ToolCall(id=f"call_{k}", name="echo", arguments=call_args(k))],
            finish_reason=af.FinishReason.TOOL_CALLS,
        )
        for k in range(1, n)
    ]
    turns.append(af.ModelTurn(text=FINAL_TEXT, finish_reason=af.FinishReason.STOP))
    return turns


def _completion(k: int, message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{k}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 20 + k, "completion_tokens": 10, "total_tokens": 30 + k},
    }


def _openai_bodies(n: int) -> list[dict[str, Any]]:
    bodies = []
    for k in range(1, n):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "echo", "arguments": json.dumps(call_args(k))},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        bodies.append(_completion(k, message, "tool_calls"))
    bodies.append(_completion(n, {"role": "assistant", "content": FINAL_TEXT}, "stop"))
    return bodies


def builders() -> dict[str, Builder]:
    """The variants, or `UnavailableError` while agentfsm has no Controller."""
    try:
        import agentfsm as af

        af.Controller  # noqa: B018 - fail here, not inside the timed run
    except (ImportError, AttributeError) as exc:
        raise UnavailableError(f"agentfsm.Controller: {exc}") from exc

    def variant(script_of: Callable[[int], list[Any]], **options: Any) -> Builder:
        return lambda n: _controller_loop(af, n, script_of(n), **options)

    def turns(n: int) -> list[Any]:
        return _turns(af, n)

    events: deque[Any] = deque(maxlen=64)  # bounded: the repetitions must not pile up events
    return {
        "turn": variant(turns),
        "openai": variant(_openai_bodies),
        "declared": variant(_openai_bodies, declared=ECHO_SPEC),
        "turn_declared": variant(turns, declared=ECHO_SPEC),
        "observed": variant(turns, observers=[events.append]),
        "transitions": variant(turns, engine="transitions"),
    }


if __name__ == "__main__":
    main("agentfsm-controller", builders)
