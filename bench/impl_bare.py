"""The floor: a hand-written agent loop over plain dicts, with no framework at all."""

from __future__ import annotations

from typing import Any

from _harness import FINAL_TEXT, Run, call_args, echo, main


def build(n: int) -> Run:
    """Script N assistant messages in OpenAI chat shape; the loop appends to a history."""
    script: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{k}", "name": "echo", "arguments": call_args(k)}],
        }
        for k in range(1, n)
    ]
    script.append({"role": "assistant", "content": FINAL_TEXT, "tool_calls": []})
    tools = {"echo": echo}

    def run() -> tuple[str, int]:
        replies = iter(script)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        calls = 0
        while True:
            message = next(replies)  # the model call
            messages.append(message)
            if not message["tool_calls"]:
                return message["content"], calls
            for call in message["tool_calls"]:
                result = tools[call["name"]](call["arguments"])
                calls += 1
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    return run


if __name__ == "__main__":
    main("bare", {"dicts": build})
