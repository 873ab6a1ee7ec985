"""Retries of transient provider failures: which errors, how long to wait, when to give up.

Rate limits (429), server errors (5xx), timeouts and dropped connections are
retried with jittered exponential backoff; a `Retry-After` header sent with the
error is honoured, up to a cap. Everything else (bad request, authentication,
not found, context window) fails at once: retrying cannot fix it. When the
attempts run out, the last failure is raised as `ProviderError` (from it).
`is_context_exhausted` tells the input that does not fit the model's context apart.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.wait import wait_base

from agentfsm.exceptions import ProviderError

__all__ = [
    "ProviderRetry",
    "WaitRetryAfter",
    "is_context_exhausted",
    "is_transient",
    "retry_after_seconds",
]

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
"""HTTP statuses worth another attempt (529 is Anthropic's `overloaded_error`)."""


def is_transient(exc: BaseException) -> bool:
    """Retry rate limits, server errors, timeouts and connection failures; nothing else.

    litellm's `Timeout`, `APIConnectionError`, `RateLimitError`,
    `InternalServerError`, `ServiceUnavailableError` and `BadGatewayError` all
    carry one of these statuses in `status_code`; a bare network error without a
    status is transient when its class says so.
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status in TRANSIENT_STATUS or status >= 500
    name = type(exc).__name__
    return isinstance(exc, TimeoutError | ConnectionError) or name.endswith(
        ("Timeout", "TimeoutError", "ConnectionError", "ConnectError")
    )


CONTEXT_PHRASES = (
    "context_length_exceeded",  # OpenAI's error code
    "maximum context length",  # OpenAI chat, vLLM and most compatible servers
    "exceeds the context window",  # OpenAI Responses
    "prompt is too long",  # Anthropic
    "exceeds the maximum number of tokens allowed",  # Gemini: "The input token count (n) ..."
    "input is too long",  # Bedrock
    "too many input tokens",  # Bedrock
)
"""Words of the providers' "the input does not fit the context" errors, lower-cased."""


def is_context_exhausted(exc: BaseException) -> bool:
    """Whether a provider refused the call because the input does not fit the model's context.

    litellm's `ContextWindowExceededError` says so; so does a non-transient error whose
    message carries a provider's own words for it (litellm does not map every provider's,
    nor every OpenAI-compatible server's). A rate limit on input tokens is transient, not this.
    """
    if any(cls.__name__ == "ContextWindowExceededError" for cls in type(exc).__mro__):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status in TRANSIENT_STATUS or status >= 500):
        return False
    text = str(exc).lower()
    return any(phrase in text for phrase in CONTEXT_PHRASES)


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """Return the wait the provider asked for (`retry-after-ms`, `retry-after`), if any.

    `Retry-After` may be seconds or an HTTP date; litellm keeps the provider's
    headers on `exc.response.headers`.
    """
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        return _positive(millis, scale=0.001)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _positive(value)
    if seconds is not None:
        return seconds
    return _from_http_date(str(value))


def _positive(value: Any, scale: float = 1.0) -> float | None:
    try:
        seconds = float(value) * scale
    except (TypeError, ValueError):
        return None
    return max(seconds, 0.0)


def _from_http_date(value: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


class WaitRetryAfter(wait_base):
    """Wait at least as long as the provider's `Retry-After`, never longer than `cap`.

    Args:
        fallback: The strategy used when the error carries no `Retry-After`
            (and the floor when it does).
        cap: The longest single wait, in seconds, whatever the provider asked.
    """

    def __init__(self, fallback: wait_base, cap: float) -> None:
        self.fallback = fallback
        self.cap = cap

    def __call__(self, retry_state: RetryCallState) -> float:
        """Return the seconds to sleep before the next attempt."""
        backoff = self.fallback(retry_state)
        outcome = retry_state.outcome
        hinted = retry_after_seconds(outcome.exception() if outcome is not None else None)
        wait = backoff if hinted is None else max(backoff, hinted)
        return min(wait, self.cap)


def _default_wait() -> wait_base:
    return wait_random_exponential(multiplier=0.5, max=20)


@dataclass(frozen=True)
class ProviderRetry:
    """Retry a transient provider failure up to `attempts` calls in all, with jittered backoff.

    Tests inject `wait` (e.g. `tenacity.wait_none()`) and `sleep` / `async_sleep`
    (a recorder) so that no real time passes.
    """

    attempts: int = 5
    """Model calls in all for one step, the first included."""
    wait: wait_base = field(default_factory=_default_wait)
    """Backoff between attempts: full-jitter exponential, 0.5 s doubling up to 20 s."""
    max_wait: float = 60.0
    """The cap on any single wait, a provider's `Retry-After` included."""
    sleep: Callable[[float], None] = time.sleep
    """How `run` sleeps between attempts."""
    async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """How `arun` sleeps between attempts."""

    def retrying(self) -> Retrying:
        """Return a tenacity `Retrying` for one synchronous model call."""
        return Retrying(sleep=self.sleep, **self._strategy())

    def async_retrying(self) -> AsyncRetrying:
        """Return a tenacity `AsyncRetrying` for one asynchronous model call."""
        return AsyncRetrying(sleep=self.async_sleep, **self._strategy())

    def _strategy(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.attempts),
            "wait": WaitRetryAfter(self.wait, self.max_wait),
            "retry": retry_if_exception(is_transient),
            "retry_error_callback": _give_up,
        }


def _give_up(retry_state: RetryCallState) -> Any:
    """Turn the last transient failure into `ProviderError` once the attempts are used up."""
    outcome = retry_state.outcome
    exc = outcome.exception() if outcome is not None else None
    message = f"gave up after {retry_state.attempt_number} attempts: {type(exc).__name__}: {exc}"
    raise ProviderError(
        message,
        attempts=retry_state.attempt_number,
        status_code=getattr(exc, "status_code", None),
        error_type=type(exc).__name__,
    ) from exc
