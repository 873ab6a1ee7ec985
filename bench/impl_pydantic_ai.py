"""pydantic-ai: an `Agent` over a `FunctionModel` that answers from a script."""

from __future__ import annotations

from typing import Any

from _harness import FINAL_TEXT, Builder, Run, UnavailableError, call_args, main, on_loop


def builders() -> dict[str, Builder]:
    """The agent variant, or `UnavailableError` when pydantic-ai is not installed."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.usage import UsageLimits
    except ImportError as exc:
        raise UnavailableError(f"pydantic-ai: {exc}") from exc

    def build(n: int) -> Run:
        calls = 0
        turn = 0

        def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
            nonlocal turn
            turn += 1
            if turn < n:
                part = ToolCallPart(
                    tool_name="echo", args=call_args(turn), tool_call_id=f"call_{turn}"
                )
                return ModelResponse(parts=[part])
            return ModelResponse(parts=[TextPart(FINAL_TEXT)])

        agent = Agent(FunctionModel(scripted))

        @agent.tool_plain
        def echo(i: int) -> dict[str, int]:
            """Return the argument unchanged."""
            nonlocal calls
            calls += 1
            return {"i": i}

        limits = UsageLimits(request_limit=None)

        async def run() -> tuple[str, int]:
            nonlocal calls, turn
            calls = turn = 0
            result = await agent.run("go", usage_limits=limits)
            return result.output, calls

        return on_loop(run)

    return {"agent": build}


if __name__ == "__main__":
    main("pydantic-ai", builders)
