"""Transient provider failures are retried with backoff that honours Retry-After."""

from __future__ import annotations

import asyncio
import email.utils
import time
from types import SimpleNamespace

import pytest
from tenacity import wait_fixed, wait_none

from agentfsm._runner.retry import ProviderRetry, is_transient, retry_after_seconds
from agentfsm.exceptions import ProviderError


class HTTPStatusError(Exception):
    """A provider error as litellm raises it: a status code and the response's headers."""

    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.response = SimpleNamespace(headers=headers or {})


class Flaky:
    """Fail with the given errors, in order, then answer "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class TestIsTransient:
    """Which failures are worth another attempt."""

    @pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
    def test_rate_limits_and_server_errors_are_transient(self, status: int) -> None:
        """Timeouts, conflicts, rate limits and 5xx (Anthropic's 529 too) are retried."""
        assert is_transient(HTTPStatusError(status))

    @pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
    def test_client_errors_are_not(self, status: int) -> None:
        """A bad request, bad key or unknown model fails at once."""
        assert not is_transient(HTTPStatusError(status))

    def test_network_errors_without_status_are_transient(self) -> None:
        """A timeout or dropped connection with no HTTP status is retried."""
        assert is_transient(TimeoutError())
        assert is_transient(ConnectionResetError())

    def test_other_exceptions_are_not(self) -> None:
        """A plain programming error is never retried."""
        assert not is_transient(ValueError("bug"))


class TestRetryAfterSeconds:
    """Reading the provider's requested wait from the error's response headers."""

    def test_seconds(self) -> None:
        """`Retry-After: 7` is seven seconds."""
        assert retry_after_seconds(HTTPStatusError(429, {"retry-after": "7"})) == 7.0

    def test_milliseconds_win(self) -> None:
        """`retry-after-ms` is more precise than `retry-after` and is preferred."""
        headers = {"retry-after-ms": "1500", "retry-after": "2"}
        assert retry_after_seconds(HTTPStatusError(429, headers)) == 1.5

    def test_http_date(self) -> None:
        """An HTTP date is the time left until then."""
        when = email.utils.formatdate(time.time() + 30, usegmt=True)
        seconds = retry_after_seconds(HTTPStatusError(503, {"retry-after": when}))
        assert seconds is not None
        assert 25 <= seconds <= 31

    def test_missing_or_garbage_is_none(self) -> None:
        """No header, an unreadable one, or no response at all gives None."""
        assert retry_after_seconds(HTTPStatusError(429)) is None
        assert retry_after_seconds(HTTPStatusError(429, {"retry-after": "soon"})) is None
        assert retry_after_seconds(ValueError()) is None


class TestProviderRetry:
    """The tenacity loop built from a `ProviderRetry`."""

    def test_waits_as_long_as_retry_after_asks(self) -> None:
        """Two 429s with Retry-After: 2 wait 2 s each, then the call succeeds."""
        slept: list[float] = []
        retry = ProviderRetry(attempts=3, wait=wait_none(), sleep=slept.append)
        flaky = Flaky(*[HTTPStatusError(429, {"retry-after": "2"})] * 2)
        assert retry.retrying()(flaky) == "ok"
        assert slept == [2.0, 2.0]

    def test_backoff_is_the_floor(self) -> None:
        """When the backoff is longer than Retry-After, the backoff wins."""
        slept: list[float] = []
        retry = ProviderRetry(attempts=2, wait=wait_fixed(3), sleep=slept.append)
        assert retry.retrying()(Flaky(HTTPStatusError(429, {"retry-after": "1"}))) == "ok"
        assert slept == [3.0]

    def test_every_wait_is_capped(self) -> None:
        """A Retry-After beyond `max_wait` is cut to `max_wait`."""
        slept: list[float] = []
        retry = ProviderRetry(attempts=2, wait=wait_none(), max_wait=5, sleep=slept.append)
        retry.retrying()(Flaky(HTTPStatusError(429, {"retry-after": "120"})))
        assert slept == [5.0]

    def test_default_backoff_is_jittered_and_bounded(self) -> None:
        """The default backoff stays within its 20 s ceiling and varies between runs."""
        waits: list[float] = []
        for _ in range(20):
            slept: list[float] = []
            retry = ProviderRetry(attempts=4, sleep=slept.append)
            retry.retrying()(Flaky(*[HTTPStatusError(500)] * 3))
            waits.extend(slept)
        assert all(0 <= w <= 20 for w in waits)
        assert len(set(waits)) > 1

    def test_exhausted_attempts_raise_provider_error(self) -> None:
        """When every attempt fails, ProviderError says so and chains the last failure."""
        flaky = Flaky(*[HTTPStatusError(500)] * 5)
        retry = ProviderRetry(attempts=3, wait=wait_none(), sleep=lambda _: None)
        with pytest.raises(ProviderError, match="gave up after 3 attempts") as caught:
            retry.retrying()(flaky)
        assert flaky.calls == 3
        assert isinstance(caught.value.__cause__, HTTPStatusError)
        assert caught.value.details["status_code"] == 500

    def test_permanent_failures_are_not_retried(self) -> None:
        """A 400 propagates after one attempt."""
        flaky = Flaky(HTTPStatusError(400))
        with pytest.raises(HTTPStatusError):
            ProviderRetry(sleep=lambda _: None).retrying()(flaky)
        assert flaky.calls == 1

    def test_async_loop_honours_retry_after(self) -> None:
        """The async loop awaits its sleep with the provider's Retry-After."""
        slept: list[float] = []

        async def record(seconds: float) -> None:
            slept.append(seconds)

        flaky = Flaky(HTTPStatusError(429, {"retry-after": "4"}))

        async def call() -> str:
            return flaky()

        retry = ProviderRetry(attempts=2, wait=wait_none(), async_sleep=record)
        assert asyncio.run(retry.async_retrying()(call)) == "ok"
        assert slept == [4.0]
