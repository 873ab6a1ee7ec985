"""What a model turn cost: the payload's own figure, or its usage priced by `genai-prices`.

Most providers report tokens, not dollars (OpenRouter and litellm objects are
the exceptions), so a cost budget would never fire on them. A run with a cost
budget prices each turn from its usage and model with `genai-prices`
(pydantic/genai-prices), a maintained price table; it is imported the first
time a turn is priced, so a run without a cost budget never loads it. When the
model is not in the table (a local model, a new one, no model name, no usage),
the cost is unknown and the policy's `on_unknown_price` says what happens.
"""

from __future__ import annotations

from functools import lru_cache

from agentfsm._model.types import ModelTurn

__all__ = ["PROVIDER_IDS", "turn_cost", "unknown_price"]

PROVIDER_IDS: dict[str, str] = {
    "openai": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "bedrock": "aws",
    "cohere": "cohere",
}
"""genai-prices' provider id for each wire format; others match by model name alone.
The OpenAI format is spoken by many servers, so a miss under "openai" is retried
by model name (DeepSeek, Groq, ... models are found under their own provider)."""


def turn_cost(turn: ModelTurn) -> float | None:
    """The turn's cost in US dollars: reported by the payload, else priced; None if unknown."""
    usage = turn.usage
    if usage is None:
        return None
    if usage.cost is not None:
        return usage.cost
    if not turn.model:
        return None
    provider = PROVIDER_IDS.get(turn.provider or "")
    return _price(provider, turn.model, usage.input_tokens, usage.output_tokens)


def unknown_price(turn: ModelTurn) -> str:
    """Why `turn_cost` could not price the turn, in words for a decision's reason."""
    if turn.usage is None:
        return "the output reports no token usage, so its cost is unknown"
    if not turn.model:
        return "the output names no model, so its cost is unknown"
    return f"the price of model {turn.model!r} ({turn.provider}) is unknown"


@lru_cache(maxsize=4096)
def _price(provider: str | None, model: str, input_tokens: int, output_tokens: int) -> float | None:
    """Price one usage; cached, since genai-prices takes about 0.7 ms per call."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a core dependency; only a broken install lacks it
        return None
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    for provider_id in (provider, None) if provider else (None,):
        try:
            return float(calc_price(usage, model_ref=model, provider_id=provider_id).total_price)
        except LookupError:
            continue
        except Exception:  # any failure inside the price table is an unknown price
            return None
    return None
