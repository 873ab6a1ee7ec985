"""Every output that other projects recorded, read and decided: `../shared/corpus/wire/`.

The 205 files are real provider outputs taken from the test fixtures of the OpenAI,
Anthropic and Google SDKs, the Vercel AI SDK, pydantic-ai, litellm and Ollama
(`SOURCES.md` names each one's origin). agentfsm never saw them while being written.
The table holds, for each file, what reading the payload says it means: the provider's
finish claim, the answer's first characters and length, every tool call with its
arguments (exactly, or the facts `Sub` names) and kind, and what the default controller
must decide. It holds expectations only: the data stays in `../shared`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import agentfsm as af
from agentfsm import Action, ExitReason, FinishReason, ModelTurn
from agentfsm.exceptions import PayloadError

WIRE = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "wire"

A, F, X = Action, FinishReason, ExitReason


class Sub(NamedTuple):
    """Facts the arguments must hold, by dotted path (`recipe.ingredients.0.name`)."""

    facts: dict[str, Any]


class C(NamedTuple):
    """One expected tool call: its name, its arguments (or `Sub` facts), its kind."""

    name: str
    arguments: dict[str, Any] | Sub
    kind: str = "function"


class W(NamedTuple):
    """What one wire file means: the turn's facts, and the default controller's decision."""

    provider: str
    finish: FinishReason
    raw_finish: str | None
    text: str
    """The answer's first characters (up to 24)."""
    length: int
    """The answer's length in characters."""
    action: Action
    calls: tuple[C, ...] = ()
    truncated: bool = False
    refusal: str | None = None
    """The refusal's first characters (up to 24)."""
    server: int = 0
    """Calls the provider ran itself."""
    exit: ExitReason | None = None
    """Why a STOP ends the run (a FINAL always ends it COMPLETED)."""


TABLE: dict[str, W] = {
    "anthropic/anthropic-sdk-basic_response.sse": W(
        "anthropic", F.STOP, "end_turn", "Hello there!", 12, A.FINAL
    ),
    "anthropic/anthropic-sdk-compaction_response.sse": W(
        "anthropic", F.STOP, "end_turn", "Hello there!", 12, A.FINAL
    ),
    "anthropic/anthropic-sdk-fallback_credit_response.sse": W(
        "anthropic", F.STOP, "end_turn", "Hello there!", 12, A.FINAL
    ),
    "anthropic/anthropic-sdk-fallback_response.sse": W(
        "anthropic", F.STOP, "end_turn", "Hello there!", 12, A.FINAL
    ),
    "anthropic/anthropic-sdk-refusal_response.sse": W(
        "anthropic",
        F.REFUSAL,
        "refusal",
        "",
        0,
        A.STOP,
        refusal="This request was refused",
        exit=X.REFUSAL,
    ),
    "anthropic/anthropic-sdk-stream-a-refusal.sse": W(
        "anthropic", F.REFUSAL, "refusal", "Hi", 2, A.STOP, refusal="Hi", exit=X.REFUSAL
    ),
    "anthropic/anthropic-sdk-stream-a-toolrefusal.sse": W(
        "anthropic",
        F.REFUSAL,
        "refusal",
        "Here's a summary of this",
        54,
        A.STOP,
        refusal="Here's a summary of this",
        server=1,
        exit=X.REFUSAL,
    ),
    "anthropic/anthropic-sdk-stream-b-fallback.sse": W(
        "anthropic", F.STOP, "end_turn", " there! Happy to explain", 1312, A.FINAL
    ),
    "anthropic/pydantic-ai-tcm-auto-anthropic.0.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "anthropic/pydantic-ai-tcm-auto-anthropic.1.json": W(
        "anthropic", F.STOP, "end_turn", "The weather in Paris is ", 110, A.FINAL
    ),
    "anthropic/pydantic-ai-tcm-required-anthropic.0.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "anthropic/pydantic-ai-test_anthropic_mcp_servers_stream.0.sse": W(
        "anthropic", F.STOP, "end_turn", "**Pydantic-AI** is a fra", 806, A.FINAL, server=1
    ),
    "anthropic/pydantic-ai-test_anthropic_memory_tool.0.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "I'll check my memory to ",
        71,
        A.EXECUTE_TOOLS,
        calls=(C("memory", {"command": "view", "path": "/memories"}),),
    ),
    "anthropic/pydantic-ai-test_anthropic_memory_tool.1.json": W(
        "anthropic", F.STOP, "end_turn", "\n\nAccording to my memory", 54, A.FINAL
    ),
    "anthropic/pydantic-ai-test_anthropic_model_retrying_after_empty_response.0.json": W(
        "anthropic", F.STOP, "end_turn", "# Hi there! 👋\n\nHow can I", 40, A.FINAL
    ),
    "anthropic/pydantic-ai-test_anthropic_model_thinking_part_stream.0.sse": W(
        "anthropic", F.STOP, "end_turn", "Here are the basic steps", 1021, A.FINAL
    ),
    "anthropic/vercel-anthropic-advisor-stop-reasons.json": W(
        "anthropic", F.STOP, "end_turn", "", 0, A.CONTINUE, server=2
    ),
    "anthropic/vercel-anthropic-advisor-stop-reasons.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "", 0, A.CONTINUE, server=2
    ),
    "anthropic/vercel-anthropic-claude-opus-5-reasoning-high.1.json": W(
        "anthropic", F.STOP, "end_turn", "## Step 1: Set up the pr", 2644, A.FINAL
    ),
    "anthropic/vercel-anthropic-clear-thinking.1.json": W(
        "anthropic", F.STOP, "end_turn", "925 ÷ 5 = 185", 13, A.FINAL
    ),
    "anthropic/vercel-anthropic-clear-thinking.1.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "925 ÷ 5 = 185", 13, A.FINAL
    ),
    "anthropic/vercel-anthropic-code-execution-20250825.1.json": W(
        "anthropic", F.STOP, "end_turn", "I'll create a Python scr", 509, A.FINAL, server=2
    ),
    "anthropic/vercel-anthropic-code-execution-20250825.1.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "I'll create a Python scr", 795, A.FINAL, server=2
    ),
    "anthropic/vercel-anthropic-duplicate-message-start.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "Hello, World!", 13, A.FINAL
    ),
    "anthropic/vercel-anthropic-fallback.json": W(
        "anthropic", F.STOP, "end_turn", "The printing press was i", 66, A.FINAL
    ),
    "anthropic/vercel-anthropic-fallback.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "The printing press was i", 66, A.FINAL
    ),
    "anthropic/vercel-anthropic-json-other-tool.1.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "anthropic/vercel-anthropic-json-other-tool.1.stream.jsonl": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "anthropic/vercel-anthropic-json-tool.1.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("json", Sub({"elements.0.location": "San Francisco", "elements.3.temperature": -9})),
        ),
    ),
    "anthropic/vercel-anthropic-json-tool.2.stream.jsonl": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "I'll invoke the JSON res",
        35,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "json",
                {
                    "elements": [
                        {"location": "San Francisco", "temperature": 58, "condition": "sunny"}
                    ]
                },
            ),
        ),
    ),
    "anthropic/vercel-anthropic-mcp.1.json": W(
        "anthropic", F.STOP, "end_turn", "The echo tool responded ", 127, A.FINAL, server=1
    ),
    "anthropic/vercel-anthropic-mcp.1.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "The echo tool responded ", 112, A.FINAL, server=1
    ),
    "anthropic/vercel-anthropic-memory-20250818.1.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("memory", {"command": "view", "path": "/memories"}),),
    ),
    "anthropic/vercel-anthropic-message-delta-input-tokens.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "pong", 4, A.FINAL
    ),
    "anthropic/vercel-anthropic-programmatic-tool-calling.1.json": W(
        "anthropic", F.STOP, "end_turn", "I'll help you simulate t", 857, A.FINAL, server=1
    ),
    "anthropic/vercel-anthropic-programmatic-tool-calling.1.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "## Game Results\n\n**Playe", 675, A.FINAL
    ),
    "anthropic/vercel-anthropic-text.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "Hello! I'm doing well, t", 108, A.FINAL
    ),
    "anthropic/vercel-anthropic-tool-search-bm25.1.json": W(
        "anthropic",
        F.TOOL_CALLS,
        "tool_use",
        "I'll search for a weathe",
        179,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"location": "San Francisco, CA"}),),
        server=1,
    ),
    "anthropic/vercel-anthropic-tool-search-bm25.1.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "The current weather in S", 119, A.FINAL
    ),
    "anthropic/vercel-anthropic-web-fetch-tool.1.json": W(
        "anthropic", F.STOP, "end_turn", "I'll fetch the Wikipedia", 1716, A.FINAL, server=1
    ),
    "anthropic/vercel-anthropic-web-fetch-tool.1.stream.jsonl": W(
        "anthropic", F.STOP, "end_turn", "I'll fetch the content f", 1664, A.FINAL, server=1
    ),
    "anthropic/vercel-anthropic-web-fetch-tool.error.json": W(
        "anthropic", F.STOP, "end_turn", "I'll fetch the PDF docum", 579, A.FINAL, server=1
    ),
    "anthropic/vercel-anthropic-web-search-tool.1.json": W(
        "anthropic", F.STOP, "end_turn", "Let me search for more s", 1874, A.FINAL, server=2
    ),
    "bedrock/pydantic-ai-tcm-auto-bedrock.0.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "bedrock/pydantic-ai-tcm-auto-bedrock.1.json": W(
        "bedrock", F.STOP, "end_turn", "The weather in Paris is ", 110, A.FINAL
    ),
    "bedrock/pydantic-ai-tcm-required-bedrock.0.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "bedrock/pydantic-ai-test_bedrock_model_code_execution_tool_stream.0.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("final_result", {"result": 7006652.0}),),
        server=1,
    ),
    "bedrock/pydantic-ai-test_bedrock_model_iter_stream.0.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "<thinking> To find the t",
        283,
        A.EXECUTE_TOOLS,
        calls=(C("get_temperature", {"city": "Paris"}),),
    ),
    "bedrock/pydantic-ai-test_bedrock_model_iter_stream.1.stream.jsonl": W(
        "bedrock", F.STOP, "end_turn", "The current temperature ", 65, A.FINAL
    ),
    "bedrock/pydantic-ai-test_bedrock_model_stream_empty_text_delta.0.stream.jsonl": W(
        "bedrock", F.STOP, "end_turn", "Hello! How can I help yo", 32, A.FINAL
    ),
    "bedrock/pydantic-ai-test_bedrock_model_thinking_part_redacted.0.json": W(
        "bedrock", F.STOP, "end_turn", "I notice you've sent wha", 388, A.FINAL
    ),
    "bedrock/pydantic-ai-test_bedrock_model_thinking_part_redacted.1.json": W(
        "bedrock", F.STOP, "end_turn", "That appeared to be an a", 669, A.FINAL
    ),
    "bedrock/pydantic-ai-test_bedrock_model_thinking_part_stream.0.stream.jsonl": W(
        "bedrock", F.STOP, "end_turn", "Hello! It's nice to meet", 55, A.FINAL
    ),
    "bedrock/pydantic-ai-test_bedrock_moonshotai_tool_call.0.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_temperature", {"city": "London"}),),
    ),
    "bedrock/pydantic-ai-test_bedrock_moonshotai_tool_call.1.json": W(
        "bedrock", F.STOP, "end_turn", " <think> The temperature", 43, A.FINAL
    ),
    "bedrock/vercel-amazon-bedrock-json-only-text-first.1.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "Here is your data:",
        18,
        A.EXECUTE_TOOLS,
        calls=(C("json", {"name": "John"}),),
    ),
    "bedrock/vercel-amazon-bedrock-json-other-tool.1.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get-weather", {"location": "San Francisco"}),),
    ),
    "bedrock/vercel-amazon-bedrock-json-other-tool.1.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get-weather", {"location": "San Francisco"}),),
    ),
    "bedrock/vercel-amazon-bedrock-json-tool-text-then-weather-then-json.1.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "2 + 2 equals 4. Now let ",
        53,
        A.EXECUTE_TOOLS,
        calls=(
            C("weather", {"location": "San Francisco"}),
            C("weather", {"location": "London"}),
        ),
    ),
    "bedrock/vercel-amazon-bedrock-json-tool-with-answer.1.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "2 + 2 equals 4.",
        15,
        A.EXECUTE_TOOLS,
        calls=(C("json", {"firstName": "John", "lastName": "Doe"}),),
    ),
    "bedrock/vercel-amazon-bedrock-json-tool.2.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "Let me generate that JSO",
        34,
        A.EXECUTE_TOOLS,
        calls=(C("json", {"value": "test data"}),),
    ),
    "bedrock/vercel-amazon-bedrock-json-tool.2.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "Let me generate that JSO",
        34,
        A.EXECUTE_TOOLS,
        calls=(C("json", {"value": "test"}),),
    ),
    "bedrock/vercel-amazon-bedrock-json-with-tools.1.json": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "Calling multiple tools.F",
        49,
        A.EXECUTE_TOOLS,
        calls=(
            C("tool-a", {"param": "a"}),
            C("tool-b", {"param": "b"}),
            C("json", {"final": "result"}),
        ),
    ),
    "bedrock/vercel-amazon-bedrock-json-with-tools.1.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "Multiple tools.Final JSO",
        26,
        A.EXECUTE_TOOLS,
        calls=(
            C("tool-a", {"a": "1"}),
            C("tool-b", {"b": "2"}),
            C("json", {"final": "result"}),
        ),
    ),
    "bedrock/vercel-amazon-bedrock-reasoning.json": W(
        "bedrock", F.STOP, "end_turn", "There are **3** r's in \"", 63, A.FINAL
    ),
    "bedrock/vercel-amazon-bedrock-reasoning.stream.jsonl": W(
        "bedrock", F.STOP, "end_turn", "There are **3** r's in \"", 63, A.FINAL
    ),
    "bedrock/vercel-amazon-bedrock-text.stream.jsonl": W(
        "bedrock", F.STOP, "end_turn", 'Let me count the "r"s in', 109, A.FINAL
    ),
    "bedrock/vercel-amazon-bedrock-tool-no-args.stream.jsonl": W(
        "bedrock",
        F.TOOL_CALLS,
        "tool_use",
        "I'll update the issue li",
        35,
        A.EXECUTE_TOOLS,
        calls=(C("updateIssueList", {}),),
    ),
    "cohere/pydantic-ai-tcm-auto-cohere.0.json": W(
        "cohere",
        F.TOOL_CALLS,
        "TOOL_CALL",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "cohere/pydantic-ai-tcm-auto-cohere.1.json": W(
        "cohere", F.STOP, "COMPLETE", "The weather in Paris is ", 48, A.FINAL
    ),
    "cohere/pydantic-ai-tcm-required-cohere.0.json": W(
        "cohere",
        F.TOOL_CALLS,
        "TOOL_CALL",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "cohere/vercel-cohere-citations.json": W(
        "cohere", F.STOP, "COMPLETE", "The key benefits mention", 115, A.FINAL
    ),
    "cohere/vercel-cohere-empty-tool-call.stream.jsonl": W(
        "cohere", F.TOOL_CALLS, "TOOL_CALL", "", 0, A.EXECUTE_TOOLS, calls=(C("currentTime", {}),)
    ),
    "cohere/vercel-cohere-reasoning.json": W("cohere", F.STOP, "COMPLETE", "2 + 2 = 4", 9, A.FINAL),
    "cohere/vercel-cohere-reasoning.stream.jsonl": W(
        "cohere", F.STOP, "COMPLETE", "The answer to 2 + 2 is 4", 25, A.FINAL
    ),
    "cohere/vercel-cohere-text.json": W(
        "cohere", F.STOP, "COMPLETE", "The capital of France is", 31, A.FINAL
    ),
    "cohere/vercel-cohere-text.stream.jsonl": W(
        "cohere", F.STOP, "COMPLETE", "The capital of France is", 31, A.FINAL
    ),
    "cohere/vercel-cohere-tool-call.json": W(
        "cohere",
        F.TOOL_CALLS,
        "TOOL_CALL",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("weather", {"location": "San Francisco"}),
            C("cityAttractions", {"city": "San Francisco"}),
        ),
    ),
    "cohere/vercel-cohere-tool-call.stream.jsonl": W(
        "cohere",
        F.TOOL_CALLS,
        "TOOL_CALL",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("weather", {"location": "San Francisco"}),
            C("cityAttractions", {"city": "San Francisco"}),
        ),
    ),
    "gemini/pydantic-ai-tcm-auto-google.0.json": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "gemini/pydantic-ai-tcm-auto-google.1.json": W(
        "gemini", F.STOP, "STOP", "The weather in Paris is ", 56, A.FINAL
    ),
    "gemini/pydantic-ai-tcm-required-google.0.json": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "gemini/pydantic-ai-test_google_model_empty_assistant_response.0.json": W(
        "gemini", F.STOP, "STOP", "As an AI, I don't retain", 572, A.FINAL
    ),
    "gemini/pydantic-ai-test_google_model_retrying_after_empty_response.0.json": W(
        "gemini", F.STOP, "STOP", "Hello! How can I help yo", 32, A.FINAL
    ),
    "gemini/pydantic-ai-test_google_model_stream.0.sse": W(
        "gemini", F.STOP, "STOP", "The capital of France is", 32, A.FINAL
    ),
    "gemini/pydantic-ai-test_google_model_thinking_part_iter.0.sse": W(
        "gemini", F.STOP, "STOP", "This is a great question", 1938, A.FINAL
    ),
    "gemini/pydantic-ai-test_google_model_web_search_tool_stream.0.sse": W(
        "gemini", F.STOP, "STOP", "### Weather in San Franc", 926, A.FINAL
    ),
    "gemini/pydantic-ai-test_google_model_web_search_tool_stream.1.json": W(
        "gemini", F.STOP, "STOP", "### Scattered Thundersto", 873, A.FINAL
    ),
    "gemini/vercel-google-reasoning-gemini3.json": W(
        "gemini", F.STOP, "STOP", 'There are **3** "r"s in ', 79, A.FINAL
    ),
    "gemini/vercel-google-reasoning-gemini3.stream.jsonl": W(
        "gemini", F.STOP, "STOP", 'There are **3** "r"s in ', 55, A.FINAL
    ),
    "gemini/vercel-google-reasoning.json": W(
        "gemini", F.STOP, "STOP", 'There are **3** "r"s in ', 79, A.FINAL
    ),
    "gemini/vercel-google-reasoning.stream.jsonl": W(
        "gemini", F.STOP, "STOP", 'There are **3** "r"s in ', 79, A.FINAL
    ),
    "gemini/vercel-google-stream-no-args-tool-call.stream.jsonl": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("read_theme", {}),
            C("read_screen", {"id": "A"}),
            C("read_screen", {"id": "B"}),
            C("read_screen", {"id": "C"}),
        ),
    ),
    "gemini/vercel-google-stream-tool-call-arguments.stream.jsonl": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("getWeather", {"location": "Boston"}),
            C("getWeather", {"location": "San Francisco"}),
        ),
    ),
    "gemini/vercel-google-text.stream.jsonl": W(
        "gemini", F.STOP, "STOP", 'There are **3** "r"s in ', 55, A.FINAL
    ),
    "gemini/vercel-google-tool-call-gemini3.json": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "gemini/vercel-google-tool-call-gemini3.stream.jsonl": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "gemini/vercel-google-vertex-stream-tool-call-arguments-nested.1.stream.jsonl": W(
        "gemini",
        F.STOP,
        "STOP",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "cookRecipe",
                Sub({"recipe.name": "Lasagna", "recipe.ingredients.0.name": "Lasagna noodles"}),
            ),
        ),
    ),
    "litellm/litellm-translation-gemini-3.5-flash-basic.json": W(
        "litellm", F.STOP, "STOP", "Hello.", 6, A.FINAL
    ),
    "litellm/litellm-translation-vertex-claude-haiku-4-5-basic.json": W(
        "litellm", F.STOP, "stop", "Hello.", 6, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-no-streaming.json": W(
        "ollama", F.UNKNOWN, None, "Hello! How are you today", 25, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-reproducible-outputs.json": W(
        "ollama", F.UNKNOWN, None, "Hello! How are you today", 25, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-streaming.stream.jsonl": W(
        "ollama", F.UNKNOWN, None, "The", 3, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-structured-outputs.json": W(
        "ollama", F.STOP, "stop", '{"age": 22, "available":', 31, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-with-history-with-tools.json": W(
        "ollama", F.STOP, "stop", "The current temperature ", 43, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-with-history.stream.jsonl": W(
        "ollama", F.UNKNOWN, None, "The", 3, A.FINAL
    ),
    "ollama/ollama-docs-api-chat-request-with-images.json": W(
        "ollama", F.UNKNOWN, None, " The image features a cu", 196, A.FINAL
    ),
    "ollama/ollama-docs-api-load-a-model.json": W(
        "ollama", F.ERROR, "load", "", 0, A.STOP, exit=X.PROVIDER_ERROR
    ),
    "ollama/ollama-docs-api-unload-a-model.json": W(
        "ollama", F.ERROR, "unload", "", 0, A.STOP, exit=X.PROVIDER_ERROR
    ),
    "openai_chat/openai-python-2018feb66ae1.sse": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "New York City"}),),
    ),
    "openai_chat/openai-python-569c877e6942.sse": W(
        "openai", F.STOP, "stop", "", 0, A.STOP, refusal="I'm very sorry, but I ca", exit=X.REFUSAL
    ),
    "openai_chat/openai-python-7e5ea4d12e7c.sse": W(
        "openai", F.STOP, "stop", '{"city":"San Francisco",', 53, A.FINAL
    ),
    "openai_chat/openai-python-83b060bae42e.sse": W("openai", F.STOP, "stop", "Foo!", 4, A.FINAL),
    "openai_chat/openai-python-a247c49c5fcd.sse": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "San Francisco", "state": "CA"}),),
    ),
    "openai_chat/openai-python-a491adda08c3.sse": W(
        "openai", F.STOP, "stop", '{"city":"San Francisco",', 53, A.FINAL
    ),
    "openai_chat/openai-python-c6aa7e397b71.sse": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("GetWeatherArgs", {"city": "Edinburgh", "country": "UK", "units": "c"}),),
    ),
    "openai_chat/openai-python-e2aad469b71d.sse": W(
        "openai", F.STOP, "stop", "I'm unable to provide re", 159, A.FINAL
    ),
    "openai_chat/pydantic-ai-tcm-auto-groq.0.json": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "openai_chat/pydantic-ai-tcm-auto-groq.1.json": W(
        "openai", F.STOP, "stop", "The weather in Paris is ", 56, A.FINAL
    ),
    "openai_chat/pydantic-ai-tcm-auto-mistral.0.json": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "openai_chat/pydantic-ai-tcm-auto-mistral.1.json": W(
        "openai", F.STOP, "stop", "The current weather in *", 95, A.FINAL
    ),
    "openai_chat/pydantic-ai-tcm-required-groq.0.json": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "openai_chat/pydantic-ai-tcm-required-mistral.0.json": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "openai_chat/pydantic-ai-test_groq_model_thinking_part_iter.0.sse": W(
        "openai", F.STOP, "stop", "<think>\nOkay, so I want ", 4045, A.FINAL
    ),
    "openai_chat/pydantic-ai-test_groq_model_thinking_part_iter.1.sse": W(
        "openai", F.STOP, "stop", "To cook Argentinian alfa", 2954, A.FINAL
    ),
    "openai_chat/pydantic-ai-test_max_completion_tokens_o3-mini.0.json": W(
        "openai", F.STOP, "stop", "Hello there! How can I h", 38, A.FINAL
    ),
    "openai_chat/pydantic-ai-test_mistral_model_thinking_part_iter.0.sse": W(
        "openai", F.STOP, "stop", "To cross the street safe", 607, A.FINAL
    ),
    "openai_chat/pydantic-ai-test_openai_moderation_stream.0.sse": W(
        "openai", F.STOP, "stop", "Paris.", 6, A.FINAL
    ),
    "openai_chat/pydantic-ai-test_tool_use_failed_error_streaming.0.sse": W(
        "openai", F.ERROR, None, "", 0, A.RETRY, truncated=True
    ),
    "openai_chat/pydantic-ai-test_tool_use_failed_error_streaming.1.sse": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_something_by_name", {"name": "example"}),),
    ),
    "openai_chat/pydantic-ai-test_tool_use_failed_error_streaming.2.sse": W(
        "openai", F.STOP, "stop", "The tool returned the ex", 57, A.FINAL
    ),
    "openai_chat/vercel-alibaba-reasoning.json": W(
        "openai", F.STOP, "stop", 'The word **"strawberry"*', 950, A.FINAL
    ),
    "openai_chat/vercel-alibaba-reasoning.stream.jsonl": W(
        "openai", F.STOP, "stop", 'The word **"strawberry"*', 816, A.FINAL
    ),
    "openai_chat/vercel-alibaba-text.json": W(
        "openai", F.STOP, "stop", "## The Festival of Forgo", 4892, A.FINAL
    ),
    "openai_chat/vercel-alibaba-text.stream.jsonl": W(
        "openai", F.STOP, "stop", "## The Festival of Share", 3771, A.FINAL
    ),
    "openai_chat/vercel-deepseek-json.json": W(
        "openai", F.STOP, "stop", '{\n  "location": "San Fra', 78, A.FINAL
    ),
    "openai_chat/vercel-deepseek-reasoning.json": W(
        "openai", F.STOP, "stop", 'The word "strawberry" co', 107, A.FINAL
    ),
    "openai_chat/vercel-deepseek-reasoning.stream.jsonl": W(
        "openai", F.STOP, "stop", 'The word "strawberry" co', 42, A.FINAL
    ),
    "openai_chat/vercel-deepseek-text.json": W(
        "openai", F.LENGTH, "length", "## **Holiday Name: Grati", 1375, A.RETRY, truncated=True
    ),
    "openai_chat/vercel-groq-reasoning.json": W(
        "openai", F.STOP, "stop", 'The word "strawberry" co', 206, A.FINAL
    ),
    "openai_chat/vercel-groq-reasoning.stream.jsonl": W(
        "openai", F.STOP, "stop", 'The word **"strawberry"*', 347, A.FINAL
    ),
    "openai_chat/vercel-groq-text.json": W(
        "openai", F.STOP, "stop", "I'd like to introduce \"L", 2953, A.FINAL
    ),
    "openai_chat/vercel-groq-text.stream.jsonl": W(
        "openai", F.STOP, "stop", 'Introducing "Luminaria" ', 3189, A.FINAL
    ),
    "openai_chat/vercel-mistral-reasoning.json": W(
        "openai", F.STOP, "stop", "2 + 2 = 4", 9, A.FINAL
    ),
    "openai_chat/vercel-mistral-reasoning.stream.jsonl": W(
        "openai", F.STOP, "stop", "2 + 2 = 4", 9, A.FINAL
    ),
    "openai_chat/vercel-mistral-text.json": W(
        "openai", F.STOP, "stop", '**Holiday Name: "World K', 1925, A.FINAL
    ),
    "openai_chat/vercel-mistral-text.stream.jsonl": W(
        "openai", F.STOP, "stop", "Hello, world! This is a ", 38, A.FINAL
    ),
    "openai_chat/vercel-mistral-tool-call.stream.jsonl": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "openai_chat/vercel-moonshotai-reasoning.json": W(
        "openai", F.STOP, "stop", "There are three.", 16, A.FINAL
    ),
    "openai_chat/vercel-moonshotai-stream.stream.jsonl": W(
        "openai", F.STOP, "stop", "Hello!", 6, A.FINAL
    ),
    "openai_chat/vercel-moonshotai-text.json": W(
        "openai", F.STOP, "stop", "Hello, world!", 13, A.FINAL
    ),
    "openai_chat/vercel-openai-azure-model-router.1.stream.jsonl": W(
        "openai", F.STOP, "stop", "Capital of Denmark.", 19, A.FINAL
    ),
    "openai_chat/vercel-openai-compatible-xai-text.json": W(
        "openai", F.STOP, "stop", "Grok", 4, A.FINAL
    ),
    "openai_chat/vercel-openai-compatible-xai-text.stream.jsonl": W(
        "openai", F.STOP, "stop", "Grok", 4, A.FINAL
    ),
    "openai_chat/vercel-perplexity-citations.json": W(
        "openai", F.STOP, "stop", "The most recent estimate", 952, A.FINAL
    ),
    "openai_chat/vercel-perplexity-citations.stream.jsonl": W(
        "openai", F.STOP, "stop", "The current population o", 34, A.FINAL
    ),
    "openai_chat/vercel-perplexity-text.json": W(
        "openai", F.STOP, "stop", "**EcoVista Day** is a ne", 1970, A.FINAL
    ),
    "openai_chat/vercel-perplexity-text.stream.jsonl": W(
        "openai", F.STOP, "stop", "**EcoVista Day**[1][5]", 22, A.FINAL
    ),
    "openai_chat/vercel-xai-text.json": W("openai", F.STOP, "stop", "Hello", 5, A.FINAL),
    "openai_chat/vercel-xai-text.stream.jsonl": W("openai", F.STOP, "stop", "Hello", 5, A.FINAL),
    "openai_chat/vercel-xai-tool-call.json": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "openai_chat/vercel-xai-tool-call.stream.jsonl": W(
        "openai",
        F.TOOL_CALLS,
        "tool_calls",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "openai_responses/pydantic-ai-tcm-auto-openai_responses.0.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "openai_responses/pydantic-ai-tcm-auto-openai_responses.1.json": W(
        "openai_responses", F.STOP, "completed", "Currently it's sunny in ", 57, A.FINAL
    ),
    "openai_responses/pydantic-ai-tcm-required-openai_responses.0.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"city": "Paris"}),),
    ),
    "openai_responses/pydantic-ai-test_background_mode_streaming_vcr.0.sse": W(
        "openai_responses", F.STOP, "completed", "2 + 2 equals 4.", 15, A.FINAL
    ),
    "openai_responses/pydantic-ai-test_background_mode_vcr.0.json": W(
        "openai_responses", F.UNKNOWN, "queued", "", 0, A.RETRY, truncated=True
    ),
    "openai_responses/pydantic-ai-test_background_mode_vcr.1.json": W(
        "openai_responses", F.UNKNOWN, "in_progress", "", 0, A.RETRY, truncated=True
    ),
    "openai_responses/pydantic-ai-test_background_mode_vcr.2.json": W(
        "openai_responses", F.STOP, "completed", "2 + 2 equals 4.", 15, A.FINAL
    ),
    "openai_responses/pydantic-ai-test_openai_responses_model_file_search_tool_stream.3.sse": W(
        "openai_responses", F.STOP, "completed", "The capital of France is", 31, A.FINAL, server=1
    ),
    "openai_responses/vercel-azure-tool-call.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "openai_responses/vercel-azure-tool-call.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "openai_responses/vercel-open-responses-lmstudio-basic.1.json": W(
        "openai_responses", F.STOP, "completed", "text content", 12, A.FINAL
    ),
    "openai_responses/vercel-open-responses-lmstudio-basic.1.stream.jsonl": W(
        "openai_responses", F.STOP, "completed", "## The Festival of Whisp", 1384, A.FINAL
    ),
    "openai_responses/vercel-open-responses-lmstudio-tool-call.2.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "I'll get the current wea",
        67,
        A.EXECUTE_TOOLS,
        calls=(C("weather", {"location": "San Francisco"}),),
    ),
    "openai_responses/vercel-open-responses-openai-pdf-input-file.1.json": W(
        "openai_responses", F.STOP, "completed", "Dummy PDF file", 14, A.FINAL
    ),
    "openai_responses/vercel-openai-apply-patch-tool.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "apply_patch",
                Sub({"type": "create_file", "path": "shopping-checklist.md"}),
                "apply_patch_call",
            ),
        ),
    ),
    "openai_responses/vercel-openai-apply-patch-tool.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "apply_patch",
                Sub({"type": "create_file", "path": "shopping-checklist.md"}),
                "apply_patch_call",
            ),
        ),
    ),
    "openai_responses/vercel-openai-client-tool-search.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "tool_search",
                {"goal": "Find a tool to get current weather for San Francisco"},
                "tool_search_call",
            ),
        ),
    ),
    "openai_responses/vercel-openai-client-tool-search.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "tool_search",
                Sub(
                    {
                        "goal": "Find a tool that can provide current weather information"
                        " for San Francisco."
                    }
                ),
                "tool_search_call",
            ),
        ),
    ),
    "openai_responses/vercel-openai-code-interpreter-tool.1.json": W(
        "openai_responses", F.STOP, "completed", "I ran 10,000 trials of r", 461, A.FINAL, server=3
    ),
    "openai_responses/vercel-openai-custom-tool.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("write_sql", {"input": "SELECT * FROM users WHERE age > 25"}, "custom_tool_call"),
        ),
    ),
    "openai_responses/vercel-openai-custom-tool.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("write_sql", {"input": "SELECT * FROM users WHERE age > 25"}, "custom_tool_call"),
        ),
    ),
    "openai_responses/vercel-openai-error.1.stream.jsonl": W(
        "openai_responses", F.ERROR, "failed", "", 0, A.STOP, exit=X.PROVIDER_ERROR
    ),
    "openai_responses/vercel-openai-file-search-tool.1.json": W(
        "openai_responses", F.STOP, "completed", "According to the documen", 439, A.FINAL, server=1
    ),
    "openai_responses/vercel-openai-github-copilot-id-rotation.1.stream.jsonl": W(
        "openai_responses", F.STOP, "completed", "There are **3** letter *", 138, A.FINAL
    ),
    "openai_responses/vercel-openai-image-generation-tool.1.json": W(
        "openai_responses", F.STOP, "completed", "", 0, A.CONTINUE, server=1
    ),
    "openai_responses/vercel-openai-local-shell-tool.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "local_shell",
                Sub({"type": "exec", "command": ["ls"], "working_directory": "/root"}),
                "local_shell_call",
            ),
        ),
    ),
    "openai_responses/vercel-openai-local-shell-tool.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "local_shell",
                Sub({"type": "exec", "command": ["ls", "-a", "~"]}),
                "local_shell_call",
            ),
        ),
    ),
    "openai_responses/vercel-openai-mcp-tool-approval.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "create_short_url",
                Sub({"url": "https://ai-sdk.dev/", "max_clicks": 100}),
                "mcp_approval_request",
            ),
        ),
    ),
    "openai_responses/vercel-openai-mcp-tool-approval.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C(
                "create_short_url",
                Sub({"url": "https://ai-sdk.dev/", "max_clicks": 100}),
                "mcp_approval_request",
            ),
        ),
    ),
    "openai_responses/vercel-openai-phase.1.json": W(
        "openai_responses", F.STOP, "completed", "I’ll quickly check relia", 1366, A.FINAL
    ),
    "openai_responses/vercel-openai-phase.1.stream.jsonl": W(
        "openai_responses", F.STOP, "completed", "Got it — I’ll quickly ch", 1638, A.FINAL
    ),
    "openai_responses/vercel-openai-programmatic-tool-calling.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("getInventory", {"sku": "sku_123"}),),
        server=1,
    ),
    "openai_responses/vercel-openai-programmatic-tool-calling.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("getInventory", {"sku": "sku_123"}),),
        server=1,
    ),
    "openai_responses/vercel-openai-reasoning-encrypted-content.1.json": W(
        "openai_responses", F.STOP, "completed", "12 + 7 = 19\n19 × 3 = 57\n", 56, A.FINAL
    ),
    "openai_responses/vercel-openai-reasoning-encrypted-content.1.stream.jsonl": W(
        "openai_responses", F.STOP, "completed", "The final result is **57", 28, A.FINAL
    ),
    "openai_responses/vercel-openai-shell-tool.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(
            C("shell", Sub({"commands.0": "cd ~ && pwd", "max_output_length": 9907}), "shell_call"),
        ),
    ),
    "openai_responses/vercel-openai-shell-tool.1.stream.jsonl": W(
        "openai_responses", F.STOP, "completed", "Here are the files and f", 426, A.FINAL
    ),
    "openai_responses/vercel-openai-tool-search.1.json": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"}),),
        server=1,
    ),
    "openai_responses/vercel-openai-tool-search.1.stream.jsonl": W(
        "openai_responses",
        F.TOOL_CALLS,
        "completed",
        "",
        0,
        A.EXECUTE_TOOLS,
        calls=(C("get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"}),),
        server=1,
    ),
    "openai_responses/vercel-openai-web-search-tool.1.json": W(
        "openai_responses", F.STOP, "completed", "Short answer first — yes", 3042, A.FINAL, server=3
    ),
    "openai_responses/vercel-openai-web-search-tool.1.stream.jsonl": W(
        "openai_responses", F.STOP, "completed", "I checked today’s tech h", 3645, A.FINAL, server=6
    ),
    "openai_responses/vercel-xai-code-execution-tool.1.json": W(
        "openai_responses", F.STOP, "completed", "55", 2, A.FINAL, server=1
    ),
    "openai_responses/vercel-xai-web-search-tool.1.json": W(
        "openai_responses", F.STOP, "completed", "xAI is an American artif", 799, A.FINAL, server=1
    ),
}

FILES = sorted(TABLE)


def wire_dir() -> Path:
    """The wire corpus folder; the run fails (never skips) when it is missing."""
    if not (WIRE / "SOURCES.md").is_file():
        pytest.fail(f"wire corpus missing: expected it at {WIRE.resolve()} (../shared/corpus/wire)")
    return WIRE


def load(name: str) -> Any:
    """A file's payload as recorded: a JSON body, or the raw text of an SSE/JSONL stream."""
    path = wire_dir() / name
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else text


def turn_of(name: str) -> ModelTurn:
    """The turn agentfsm reads from a file."""
    return af.normalize(load(name))


def fact(arguments: Any, path: str) -> Any:
    """The value at a dotted path (`a.0.b`) of parsed arguments."""
    value = arguments
    for step in path.split("."):
        value = value[int(step)] if isinstance(value, list) else value[step]
    return value


class TestWireCoverage:
    """The table covers the folder exactly."""

    def test_every_file_has_an_entry(self) -> None:
        """A file added to the folder fails here until its expectations are written."""
        found = {
            path.relative_to(wire_dir()).as_posix()
            for path in wire_dir().rglob("*")
            if path.is_file() and path.name != "SOURCES.md"
        }
        assert sorted(found - set(TABLE)) == []

    def test_every_entry_has_a_file(self) -> None:
        """Every entry names a file that is in the folder."""
        assert [name for name in TABLE if not (wire_dir() / name).is_file()] == []

    def test_sources_name_every_file(self) -> None:
        """SOURCES.md gives the origin of every file the table covers."""
        sources = (wire_dir() / "SOURCES.md").read_text(encoding="utf-8")
        assert [name for name in TABLE if f"`{name}`" not in sources] == []


class TestWireRead:
    """Each file reads as its provider meant it."""

    @pytest.mark.parametrize("name", FILES)
    def test_provider_and_finish(self, name: str) -> None:
        """The format is detected, and the provider's finish claim is kept and mapped."""
        turn, want = turn_of(name), TABLE[name]
        assert (turn.provider, turn.raw_finish_reason) == (want.provider, want.raw_finish)
        assert turn.finish_reason is want.finish

    @pytest.mark.parametrize("name", FILES)
    def test_text(self, name: str) -> None:
        """The answer text starts as expected and has the expected length."""
        turn, want = turn_of(name), TABLE[name]
        assert (turn.text[:24], len(turn.text)) == (want.text, want.length)

    @pytest.mark.parametrize("name", FILES)
    def test_tool_calls(self, name: str) -> None:
        """Every call the host must run is there, complete, with its arguments and kind."""
        turn, want = turn_of(name), TABLE[name]
        assert [(c.name, c.kind) for c in turn.tool_calls] == [(c.name, c.kind) for c in want.calls]
        for call, expected in zip(turn.tool_calls, want.calls, strict=True):
            assert call.complete, call.error
            if isinstance(expected.arguments, Sub):
                facts = expected.arguments.facts
                assert {path: fact(call.arguments, path) for path in facts} == facts
            else:
                assert call.arguments == expected.arguments

    @pytest.mark.parametrize("name", FILES)
    def test_cut_refused_and_server_side(self, name: str) -> None:
        """A cut is flagged, a refusal is kept, and calls the provider ran are counted."""
        turn, want = turn_of(name), TABLE[name]
        refusal = turn.refusal[:24] if turn.refusal else None
        assert (turn.truncated, refusal, turn.server_tool_calls) == (
            want.truncated,
            want.refusal,
            want.server,
        )

    @pytest.mark.parametrize("name", [n for n in FILES if n.endswith(".sse")])
    def test_sse_bytes_in_pieces(self, name: str) -> None:
        """A raw SSE stream fed as bytes cut every 97 bytes reads as the whole text does."""
        data = (wire_dir() / name).read_bytes()
        accumulator = af.StreamAccumulator()
        accumulator.extend(data[start : start + 97] for start in range(0, len(data), 97))
        accumulator.end()
        assert accumulator.turn() == turn_of(name)


class TestWireDecide:
    """The default controller decides each file as its provider meant it."""

    @pytest.mark.parametrize("name", FILES)
    def test_decision(self, name: str) -> None:
        """The action, and for an end the exit reason, are the expected ones."""
        want = TABLE[name]
        decision = af.Controller().on_model_output(load(name))
        exit_reason = want.exit or (X.COMPLETED if want.action is A.FINAL else None)
        assert (decision.action, decision.exit_reason) == (want.action, exit_reason)

    @pytest.mark.parametrize("name", FILES)
    def test_executes_exactly_the_calls(self, name: str) -> None:
        """EXECUTE_TOOLS hands over every call the file holds, by name, and nothing else."""
        want = TABLE[name]
        decision = af.Controller().on_model_output(load(name))
        if want.action is A.EXECUTE_TOOLS:
            assert [c.name for c in decision.tool_calls] == [c.name for c in want.calls]
        else:
            assert decision.tool_calls == []

    def test_no_recorded_output_is_continued(self) -> None:
        """No real output is answered with CONTINUE except an empty answer after server tools."""
        continued = sorted(name for name, want in TABLE.items() if want.action is A.CONTINUE)
        assert all(TABLE[name].length == 0 and TABLE[name].server for name in continued)

    def test_unreadable_payload_raises(self) -> None:
        """A payload of no known format raises PayloadError, never reads as an empty turn."""
        with pytest.raises(PayloadError):
            af.normalize({"type": "not-a-provider-event"})
