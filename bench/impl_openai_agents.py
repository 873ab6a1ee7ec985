"""OpenAI Agents SDK: `Runner.run` with a custom `Model` that returns scripted responses."""

from __future__ import annotations

import json
from typing import Any

from _harness import FINAL_TEXT, Builder, Run, UnavailableError, call_args, main, on_loop


def builders() -> dict[str, Builder]:
    """The runner variant, or `UnavailableError` when the SDK is not installed."""
    try:
        from agents import (
            Agent,
            Model,
            ModelResponse,
            Runner,
            Usage,
            function_tool,
            set_tracing_disabled,
        )
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )
    except ImportError as exc:
        raise UnavailableError(f"openai-agents: {exc}") from exc

    set_tracing_disabled(True)

    def reply(k: int, n: int) -> Any:
        if k < n:
            return ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{k}",
                call_id=f"call_{k}",
                name="echo",
                arguments=json.dumps(call_args(k)),
                status="completed",
            )
        text = ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])
        return ResponseOutputMessage(
            type="message", id=f"msg_{k}", role="assistant", status="completed", content=[text]
        )

    class ScriptedModel(Model):
        """Answers with the next scripted output item; `turn` is rewound per run."""

        def __init__(self, n: int) -> None:
            self.n = n
            self.turn = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.turn += 1
            output = [reply(self.turn, self.n)]
            return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    def build(n: int) -> Run:
        calls = 0

        @function_tool
        def echo(i: int) -> dict[str, int]:
            """Return the argument unchanged."""
            nonlocal calls
            calls += 1
            return {"i": i}

        model = ScriptedModel(n)
        agent = Agent(name="bench", instructions="Call echo.", model=model, tools=[echo])

        async def run() -> tuple[str, int]:
            nonlocal calls
            calls = 0
            model.turn = 0
            result = await Runner.run(agent, "go", max_turns=n + 5)
            return result.final_output, calls

        return on_loop(run)

    return {"runner": build}


if __name__ == "__main__":
    main("openai-agents", builders)
