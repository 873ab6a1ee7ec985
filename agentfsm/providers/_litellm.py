"""litellm `ModelResponse` / `ModelResponseStream` objects and their dicts.

litellm reshapes every provider into chat completions and maps finish reasons
onto OpenAI's few: Gemini `MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL` and
any unrecognised reason become `"stop"`, Anthropic `pause_turn` becomes
`"length"` and `refusal` `"content_filter"`. When the mapped value differs,
litellm (1.110) keeps the provider's own string in
`choices[i].provider_specific_fields["native_finish_reason"]`; that string is
the provider's real claim, so it wins here. For Anthropic, litellm instead keeps
`refusal` and `pause_turn` in `choices[i].message.provider_specific_fields
["stop_reason"]` (and the refusal explanation in `message.refusal`). litellm is
never imported: objects are recognised by their class's module and read through
`model_dump()`.
"""

from __future__ import annotations

from typing import Any

from agentfsm._model.types import FinishReason
from agentfsm.providers import _anthropic, _bedrock, _cohere, _gemini, _ollama, _openai_chat
from agentfsm.providers._common import Draft, as_dict, as_list

__all__ = ["NATIVE", "LitellmStream", "is_litellm_dict", "is_litellm_object", "read_body"]

NATIVE: dict[str, FinishReason] = {
    **_ollama.TABLE,
    **_cohere.TABLE,
    **_bedrock.TABLE,
    **_gemini.TABLE,
    **_anthropic.TABLE,
    **_openai_chat.TABLE,
}
"""Every provider's own finish reasons; the tables do not disagree on any string."""

_MARKERS = ("_hidden_params", "vertex_ai_grounding_metadata", "vertex_ai_safety_results")
"""Keys only litellm's dicts have (its hidden parameters and Vertex AI's metadata)."""


def is_litellm_object(payload: object) -> bool:
    """Whether an object is one of litellm's response types (by its class's module)."""
    return type(payload).__module__.startswith("litellm.")


def is_litellm_dict(payload: dict[str, Any]) -> bool:
    """Whether a chat completion dict came from litellm (it carries litellm-only keys)."""
    hidden, grounding, safety = _MARKERS
    if hidden in payload or grounding in payload or safety in payload:
        return True
    choices = payload.get("choices")
    for choice in choices if type(choices) is list else ():
        if type(choice) is not dict:
            continue
        message = choice.get("message")
        if "provider_specific_fields" in choice or (
            type(message) is dict and "provider_specific_fields" in message
        ):
            return True
    return False


def _native(payload: dict[str, Any], inner: str) -> object:
    """The provider's own finish claim that litellm keeps beside its mapped one.

    The first choice's `provider_specific_fields["native_finish_reason"]`, else Anthropic's
    `stop_reason` in the `provider_specific_fields` of its `inner` object: the `message` of
    a body, the `delta` of a stream chunk.
    """
    choices = as_list(payload.get("choices"))
    choice = as_dict(choices[0]) if choices else as_dict(None)
    native = as_dict(choice.get("provider_specific_fields")).get("native_finish_reason")
    if native is None:
        fields = as_dict(as_dict(choice.get(inner)).get("provider_specific_fields"))
        native = fields.get("stop_reason")
    return native


def read_body(payload: dict[str, Any], provider: str = "litellm") -> Draft:
    """Read a litellm response dict, restoring the provider's own finish reason."""
    return _restored(_openai_chat.read_body(payload, provider), _native(payload, "message"))


class LitellmStream(_openai_chat.ChatStream):
    """Accumulate litellm's stream chunks, restoring the provider's own finish reason.

    litellm streams the provider's claim beside its mapped one: Anthropic's `pause_turn`
    and `refusal` in a chunk's `delta.provider_specific_fields["stop_reason"]` (before the
    chunk that says `"length"` or `"content_filter"`), others in
    `choices[i].provider_specific_fields["native_finish_reason"]`.
    """

    def __init__(self, provider: str = "litellm") -> None:
        super().__init__(provider)
        self._native: str | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        """Fold one chunk into the turn, keeping the provider's own finish reason."""
        super().add(chunk)
        native = _native(chunk, "delta")
        if type(native) is str and native:
            self._native = native

    def draft(self) -> Draft:
        """The turn so far, with the provider's own finish reason."""
        return _restored(super().draft(), self._native)


def _restored(draft: Draft, native: object) -> Draft:
    """The draft with the provider's own finish reason in place of litellm's mapped one."""
    if type(native) is not str or native == draft.raw_finish:
        return draft
    if draft.raw_finish is not None and draft.error is None:
        # litellm's own "length" (e.g. for pause_turn) no longer applies; a cut or damaged
        # stream (no finish claim, an error noted) stays truncated.
        draft.truncated = False
    draft.set_finish(native, NATIVE)
    if draft.finish is FinishReason.ERROR and draft.error is None:
        draft.error = f"the provider stopped with {native}"
    if draft.finish is FinishReason.REFUSAL and not draft.refusal:
        draft.refusal = draft.text or f"the model refused ({native})"
    if native in _gemini.BROKEN or native in _bedrock.BROKEN:
        draft.truncated = True
        draft.break_calls(f"the provider reported {native}")
    return draft
