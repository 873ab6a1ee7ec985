"""What the runner reads off a litellm stream beyond its chunks.

litellm's stream wrapper hides two things a turn needs. Whether the server ended
the stream on purpose: litellm raises the same error for an OpenAI-style stream
that ended with `data: [DONE]` but without a finish reason (OpenRouter-style
servers) as for one cut short, so the response's own bytes are watched for the
sentinel. And the provider's own blocks of a paused turn (server tool uses, their
results, signed thinking): they must go back to the provider as they came, so the
chunks are kept and built into litellm's own assistant message when the turn paused.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from agentfsm._model.types import FinishReason
from agentfsm._runner.session import Answer

__all__ = ["EndWatch", "StreamReading", "answer_of", "watch_end"]

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_DONE = re.compile(rb"data:\s?\[DONE\]\s*")
_LONGEST = 32
"""A line longer than this is not the sentinel; only whether it is one is kept."""


class EndWatch:
    """Whether a `data: [DONE]` line went by in the bytes seen (lines may span chunks)."""

    def __init__(self) -> None:
        self.done = False
        self._tail = b""

    def see(self, chunk: bytes) -> None:
        """Read one chunk of the response body."""
        *lines, tail = _LINE_BREAK.split(self._tail + chunk)
        for line in lines:
            # The sentinel counts only as the last event: data after it is no end.
            self.done = _DONE.fullmatch(line.strip()) is not None or (self.done and not line)
        self._tail = tail if len(tail) <= _LONGEST else b"-"


class _SyncWatched(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, watch: EndWatch) -> None:
        self._stream, self._watch = stream, watch

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            self._watch.see(chunk)
            yield chunk

    def close(self) -> None:
        self._stream.close()


class _AsyncWatched(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, watch: EndWatch) -> None:
        self._stream, self._watch = stream, watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._watch.see(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def watch_end(response: Any) -> EndWatch | None:
    """Watch the body of a litellm stream read by the OpenAI SDK for `data: [DONE]`.

    None when the stream is not one (other providers end their streams with events
    of their own, which the chunks carry): such a stream is judged by its chunks alone.
    """
    http = getattr(getattr(response, "completion_stream", None), "response", None)
    if not isinstance(http, httpx.Response):
        return None
    watch = EndWatch()
    if isinstance(http.stream, httpx.SyncByteStream):
        http.stream = _SyncWatched(http.stream, watch)
    elif isinstance(http.stream, httpx.AsyncByteStream):
        http.stream = _AsyncWatched(http.stream, watch)
    else:
        return None
    return watch


class StreamReading:
    """One litellm stream being read: its turn so far, its chunks, how it ended."""

    def __init__(self, response: Any, messages: Any) -> None:
        from agentfsm.providers import StreamAccumulator

        self.accumulator = StreamAccumulator("litellm")
        self._chunks: list[Any] = []
        self._messages = messages
        self._watch = watch_end(response)

    def add(self, chunk: Any) -> None:
        """Fold one chunk into the turn, and keep it."""
        self.accumulator.add(chunk)
        self._chunks.append(chunk)

    def answer(self) -> Answer:
        """The turn the stream made (read once, at its end), with a paused turn's message."""
        if self._watch is not None and self._watch.done:
            self.accumulator.add("data: [DONE]\n\n")  # the wire's own word that it ended
        turn = self.accumulator.turn()
        if turn.finish_reason is not FinishReason.PAUSE:
            return Answer(turn)
        return Answer(turn, _built_message(self._chunks, self._messages))

    def cut(self, exc: Exception) -> Answer:
        """Hand a stream cut after its first chunk to the Controller; before it, it is a failure.

        litellm raises `MidStreamFallbackError` when an OpenAI-style stream ends
        without a finish reason. What arrived is a real output: the Controller, not
        the retry loop, decides whether to retry it (a cut one) or use it (one the
        server ended with `[DONE]` whose answer or calls are whole).
        """
        if self.accumulator.provider is None:
            raise exc
        return self.answer()


def answer_of(response: Any) -> Answer:
    """The turn of a response that was not streamed, with a paused turn's message."""
    from agentfsm.providers import normalize

    turn = normalize(response, provider="litellm")
    if turn.finish_reason is not FinishReason.PAUSE:
        return Answer(turn)
    return Answer(turn, _dumped(_first_message(response)))


def _first_message(response: Any) -> Any:
    choices = getattr(response, "choices", None)
    return getattr(choices[0], "message", None) if choices else None


def _built_message(chunks: list[Any], messages: Any) -> dict[str, Any] | None:
    """litellm's own assistant message for the chunks (its blocks kept for the way back)."""
    import litellm

    try:
        built = litellm.stream_chunk_builder(chunks, messages=messages)
    except Exception:  # without it only the text goes back, as for any turn
        return None
    return _dumped(_first_message(built))


def _dumped(message: Any) -> dict[str, Any] | None:
    dump = getattr(message, "model_dump", None)
    value = dump() if callable(dump) else None
    return value if isinstance(value, dict) else None
