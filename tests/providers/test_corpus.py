"""Every payload in the shared provider corpus, normalized and routed by the default policy.

The table below was written by reading each payload; it is the specification of
what `normalize` must make of real provider output, and of what the controller
must then decide.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import agentfsm as af
from agentfsm._model.types import Action, FinishReason, ModelTurn
from agentfsm.providers import detect_provider, normalize

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"

F = FinishReason
A = Action


class Row(NamedTuple):
    """What one corpus file must normalize to, and the controller's default decision."""

    provider: str
    calls: int
    complete: int
    finish: FinishReason
    truncated: bool
    action: Action


TABLE: dict[str, Row] = {
    # anthropic
    "anthropic/messages-end_turn-after-tools.json": Row("anthropic", 0, 0, F.STOP, False, A.FINAL),
    "anthropic/messages-pause_turn-server-web_search.json": Row(
        "anthropic", 0, 0, F.PAUSE, False, A.CONTINUE
    ),
    "anthropic/messages-refusal-no-details.json": Row("anthropic", 0, 0, F.REFUSAL, False, A.STOP),
    "anthropic/messages-refusal-with-stop_details.json": Row(
        "anthropic", 0, 0, F.REFUSAL, False, A.STOP
    ),
    "anthropic/messages-refusal.stream.jsonl": Row("anthropic", 0, 0, F.REFUSAL, False, A.STOP),
    "anthropic/messages-stop_sequence.json": Row("anthropic", 0, 0, F.STOP, False, A.FINAL),
    "anthropic/messages-stream-max_tokens-truncated-tool_use-input_json.jsonl": Row(
        "anthropic", 1, 0, F.LENGTH, True, A.RETRY
    ),
    "anthropic/messages-stream-text-then-tool_use.jsonl": Row(
        "anthropic", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "anthropic/messages-text-end_turn.json": Row("anthropic", 0, 0, F.STOP, False, A.FINAL),
    "anthropic/messages-text-plus-4-parallel-tool_use.json": Row(
        "anthropic", 4, 4, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "anthropic/messages-text-plus-tool_use-empty-input.json": Row(
        "anthropic", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "anthropic/messages-text-plus-tool_use-empty-input.stream.jsonl": Row(
        "anthropic", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "anthropic/messages-tool_use-input_json_delta.stream.jsonl": Row(
        "anthropic", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    # bedrock
    "bedrock/converse-end_turn-with-guardrail-trace.json": Row(
        "bedrock", 0, 0, F.STOP, False, A.FINAL
    ),
    "bedrock/converse-max_tokens.json": Row("bedrock", 0, 0, F.LENGTH, True, A.RETRY),
    "bedrock/converse-stream-tool_use.jsonl": Row(
        "bedrock", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "bedrock/converse-text-end_turn.json": Row("bedrock", 0, 0, F.STOP, False, A.FINAL),
    "bedrock/converse-tool_use-no-args.json": Row(
        "bedrock", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "bedrock/converse-tool_use.json": Row("bedrock", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS),
    # cohere
    "cohere/chat-v2-MAX_TOKENS.json": Row("cohere", 0, 0, F.LENGTH, True, A.RETRY),
    "cohere/chat-v2-tool-call-null-args.json": Row(
        "cohere", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    # gemini
    "gemini/generateContent-3-parallel-functionCalls-STOP.json": Row(
        "gemini", 3, 3, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "gemini/generateContent-MAX_TOKENS-no-parts-thinking.json": Row(
        "gemini", 0, 0, F.LENGTH, True, A.RETRY
    ),
    "gemini/generateContent-MAX_TOKENS-truncated-text.json": Row(
        "gemini", 0, 0, F.LENGTH, True, A.RETRY
    ),
    "gemini/generateContent-SAFETY-empty-content.json": Row(
        "gemini", 0, 0, F.CONTENT_FILTER, False, A.STOP
    ),
    "gemini/generateContent-functionCall-STOP-gemini2.json": Row(
        "gemini", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "gemini/generateContent-functionCall-STOP-gemini3.json": Row(
        "gemini", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "gemini/generateContent-text-STOP.json": Row("gemini", 0, 0, F.STOP, False, A.FINAL),
    "gemini/streamGenerateContent-functionCall.jsonl": Row(
        "gemini", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "gemini/streamGenerateContent-partialArgs-missing-terminal-functionCall.jsonl": Row(
        "gemini", 1, 0, F.STOP, True, A.RETRY
    ),
    "gemini/vertex-generateContent-MODEL_ARMOR-no-content.json": Row(
        "gemini", 0, 0, F.CONTENT_FILTER, False, A.STOP
    ),
    "gemini/vertex-generateContent-UNEXPECTED_TOOL_CALL-with-functionCall.json": Row(
        "gemini", 1, 0, F.ERROR, True, A.RETRY
    ),
    "gemini/vertex-generateContent-functionCall-empty-args-STOP.json": Row(
        "gemini", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "gemini/vertex-generateContent-promptFeedback-blockReason-no-candidates.json": Row(
        "gemini", 0, 0, F.CONTENT_FILTER, False, A.STOP
    ),
    # mistral
    "mistral/mistral-chat-tool-call.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    # ollama
    "ollama/api-chat-stream-tool_calls-then-done.jsonl": Row(
        "ollama", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "ollama/api-chat-tool_calls-done_reason-stop-2.json": Row(
        "ollama", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    "ollama/api-chat-tool_calls-done_reason-stop.json": Row(
        "ollama", 1, 1, F.STOP, False, A.EXECUTE_TOOLS
    ),
    # openai_chat
    "openai_chat/chat-length-truncated-json-content.json": Row(
        "openai", 0, 0, F.LENGTH, True, A.RETRY
    ),
    "openai_chat/chat-refusal-field-finish_reason-stop.json": Row(
        "openai", 0, 0, F.STOP, False, A.STOP
    ),
    "openai_chat/chat-stop-via-stop-sequence.json": Row("openai", 0, 0, F.STOP, False, A.FINAL),
    "openai_chat/chat-stream-length-truncated.jsonl": Row("openai", 0, 0, F.LENGTH, True, A.RETRY),
    "openai_chat/chat-stream-parallel-tool_calls-two-functions.jsonl": Row(
        "openai", 2, 2, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_chat/chat-stream-parallel-tool_calls.jsonl": Row(
        "openai", 2, 2, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_chat/chat-stream-refusal.jsonl": Row("openai", 0, 0, F.STOP, False, A.STOP),
    "openai_chat/chat-stream-single-tool_call.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_chat/chat-text-stop-after-tool.json": Row("openai", 0, 0, F.STOP, False, A.FINAL),
    "openai_chat/chat-text-stop.json": Row("openai", 0, 0, F.STOP, False, A.FINAL),
    "openai_chat/chat-text-stop.stream.jsonl": Row("openai", 0, 0, F.STOP, False, A.FINAL),
    "openai_chat/chat-tool_calls-parallel-2-same-function.json": Row(
        "openai", 2, 2, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_chat/chat-tool_calls-parallel-2.json": Row(
        "openai", 2, 2, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_chat/chat-tool_calls-single.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_chat/chat-tool_calls-strict-single.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    # openai_compatible
    "openai_compatible/anthropic-openai-compat-stream-tool-call-index-starts-at-1.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/cerebras-qwen3-coder-tool-call-no-content.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/deepseek-reasoner-tool-call.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/deepseek-reasoner-tool-call.stream.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/gemini-openai-compat-tool-call-empty-id.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/groq-llama33-tool-call-empty-args.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/groq-llama33-tool-call.stream.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/hf-router-together-deepseek-r1-length-empty-tool_calls.json": Row(
        "openai", 0, 0, F.LENGTH, True, A.RETRY
    ),
    "openai_compatible/mistral-api-glm-incremental-tool-call.stream.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/moonshot-kimi-tool-call.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/openrouter-claude-via-bedrock-stop-native_finish_reason.json": Row(
        "openai", 0, 0, F.STOP, False, A.FINAL
    ),
    "openai_compatible/openrouter-minimax-stream-length-then-error-chunk.jsonl": Row(
        "openai", 0, 0, F.LENGTH, True, A.RETRY
    ),
    "openai_compatible/qwen3-max-dashscope-tool-call.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/qwen3-max-dashscope-tool-call.stream.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/snowflake-cortex-claude-finish_reason-empty-string-text.json": Row(
        "openai", 0, 0, F.UNKNOWN, False, A.FINAL
    ),
    (
        "openai_compatible/snowflake-cortex-claude-finish_reason-empty-string-with-tool_calls.json"
    ): Row("openai", 1, 1, F.UNKNOWN, False, A.EXECUTE_TOOLS),
    "openai_compatible/xai-grok3mini-chat-tool-call-with-reasoning_content.json": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_compatible/xai-grok3mini-chat-tool-call.stream.jsonl": Row(
        "openai", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    # openai_responses
    "openai_responses/lmstudio-responses-function_call.json": Row(
        "openai_responses", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_responses/lmstudio-responses-function_call.stream.jsonl": Row(
        "openai_responses", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_responses/responses-function_call-multi_tool_use-parallel-wrapper.json": Row(
        "openai_responses", 2, 2, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_responses/responses-function_call.json": Row(
        "openai_responses", 1, 1, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
    "openai_responses/responses-message-after-function_call.json": Row(
        "openai_responses", 0, 0, F.STOP, False, A.FINAL
    ),
    "openai_responses/responses-parallel-function_calls.json": Row(
        "openai_responses", 2, 2, F.TOOL_CALLS, False, A.EXECUTE_TOOLS
    ),
}

FILES = sorted(TABLE)


def corpus_dir() -> Path:
    """The corpus folder; fails (never skips) when it is missing."""
    if not CORPUS.is_dir():
        pytest.fail(f"provider corpus not found: expected it at {CORPUS.resolve()}")
    return CORPUS


def load(name: str) -> Any:
    """A corpus file's payload: a JSON body, or the list of stream lines."""
    path = corpus_dir() / name
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else text.splitlines()


def turn_of(name: str) -> ModelTurn:
    """The normalized turn of a corpus file."""
    return normalize(load(name))


class TestCorpusCoverage:
    """The table covers the corpus folder exactly."""

    def test_folder_exists(self) -> None:
        """The corpus folder is where the tests expect it, or the run fails saying where."""
        assert corpus_dir().is_dir()

    def test_every_file_has_a_row(self) -> None:
        """Every payload file in the folder has a row in the table."""
        found = {
            path.relative_to(corpus_dir()).as_posix()
            for path in corpus_dir().rglob("*")
            if path.is_file() and path.suffix in (".json", ".jsonl")
        }
        assert sorted(found - set(TABLE)) == []

    def test_every_row_has_a_file(self) -> None:
        """Every row of the table names a file that exists."""
        assert [name for name in TABLE if not (corpus_dir() / name).is_file()] == []

    def test_only_payloads_besides_sources(self) -> None:
        """The folder holds only payloads and SOURCES.md, so nothing escapes the table."""
        others = [
            path.name
            for path in corpus_dir().rglob("*")
            if path.is_file() and path.suffix not in (".json", ".jsonl")
        ]
        assert others == ["SOURCES.md"]


class TestCorpusNormalize:
    """Each corpus payload normalizes to what its table row says."""

    @pytest.mark.parametrize("name", FILES)
    def test_provider_detected(self, name: str) -> None:
        """The format is detected from the payload alone."""
        assert detect_provider(load(name)) == TABLE[name].provider
        assert turn_of(name).provider == TABLE[name].provider

    @pytest.mark.parametrize("name", FILES)
    def test_tool_calls(self, name: str) -> None:
        """The number of calls, and of complete calls, matches the payload."""
        turn = turn_of(name)
        assert len(turn.tool_calls) == TABLE[name].calls
        assert sum(call.complete for call in turn.tool_calls) == TABLE[name].complete

    @pytest.mark.parametrize("name", FILES)
    def test_finish_reason(self, name: str) -> None:
        """The provider's finish claim maps to the expected FinishReason."""
        assert turn_of(name).finish_reason is TABLE[name].finish

    @pytest.mark.parametrize("name", FILES)
    def test_truncated(self, name: str) -> None:
        """A cut output is flagged truncated, and only a cut one."""
        assert turn_of(name).truncated is TABLE[name].truncated

    @pytest.mark.parametrize("name", FILES)
    def test_broken_calls_say_why(self, name: str) -> None:
        """Every incomplete call carries an error and no parsed arguments."""
        for call in turn_of(name).tool_calls:
            assert call.complete or (call.error and call.arguments is None)

    @pytest.mark.parametrize("name", FILES)
    def test_provider_given_explicitly(self, name: str) -> None:
        """Naming the provider gives the same turn as detecting it."""
        assert normalize(load(name), provider=TABLE[name].provider) == turn_of(name)


class TestCorpusController:
    """The default policy routes each corpus turn as the table says."""

    @pytest.mark.parametrize("name", FILES)
    def test_action(self, name: str) -> None:
        """`Controller(Policy()).on_model_output(turn).action` matches the table."""
        controller = af.Controller(af.Policy())
        decision = controller.on_model_output(turn_of(name))
        assert decision.action is TABLE[name].action
