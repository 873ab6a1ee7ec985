"""agentfsm's own runner, `agentfsm.run(...)`: the whole loop, model calls through litellm.

The fake model is a litellm custom provider (`litellm.CustomLLM`) registered as
`bench/scripted`: in process, no HTTP, like the peers' fake models. So this
measures the runner as users get it, litellm's per-call work included. It needs
the `litellm` extra (`pip install -e .[litellm]`); without it, or without
`agentfsm.run`, it reports "not available".
"""

from __future__ import annotations

import json
import os
from typing import Any

from _harness import FINAL_TEXT, Builder, Run, UnavailableError, call_args, main

# Read litellm's price map from the package, never from the network (see DESIGN.md).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _reply(k: int, n: int) -> dict[str, Any]:
    """The k-th chat-completions choice of the script."""
    if k < n:
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "echo", "arguments": json.dumps(call_args(k))},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"index": 0, "message": message, "finish_reason": "tool_calls"}
    message = {"role": "assistant", "content": FINAL_TEXT}
    return {"index": 0, "message": message, "finish_reason": "stop"}


def builders() -> dict[str, Builder]:
    """The runner variant, or `UnavailableError` without `agentfsm.run` or litellm."""
    try:
        import litellm

        import agentfsm as af

        af.run  # noqa: B018 - fail here, not inside the timed run
    except (ImportError, AttributeError) as exc:
        raise UnavailableError(f"agentfsm.run through litellm: {exc}") from exc

    class ScriptedProvider(litellm.CustomLLM):  # type: ignore[misc]
        """Answers each completion with the next scripted choice; `turn` is rewound per run."""

        def __init__(self, n: int) -> None:
            super().__init__()
            self.n = n
            self.turn = 0

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            self.turn += 1
            usage = {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
            choice = _reply(self.turn, self.n)
            return litellm.ModelResponse(choices=[choice], model="scripted", usage=usage)

    def build(n: int) -> Run:
        calls = 0

        def echo(i: int) -> dict[str, int]:
            """Return the argument unchanged."""
            nonlocal calls
            calls += 1
            return {"i": i}

        provider = ScriptedProvider(n)
        litellm.custom_provider_map = [{"provider": "bench", "custom_handler": provider}]
        messages = [{"role": "user", "content": "go"}]

        def run() -> tuple[str, int]:
            nonlocal calls
            calls = provider.turn = 0
            policy = af.Policy(max_turns=n + 5)
            result = af.run("bench/scripted", messages, tools=[echo], policy=policy)
            return result.text, calls

        return run

    return {"litellm-custom-provider": build}


if __name__ == "__main__":
    main("agentfsm-runner", builders)
