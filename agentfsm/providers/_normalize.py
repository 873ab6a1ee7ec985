"""`normalize`: any provider payload in, one `ModelTurn` out.

A payload is a JSON object (a body, or a lone stream event), a list of stream
events (dicts, JSON strings or bytes, SSE `data:` lines), JSON text, or an
object with `model_dump()` (openai/anthropic SDK types, litellm responses), or an agent
framework's model output (LangChain `AIMessage`, an Agents SDK or pydantic-ai `ModelResponse`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from agentfsm.core.types import ModelTurn
from agentfsm.exceptions import PayloadError
from agentfsm.providers._frameworks import read_object, unknown_object
from agentfsm.providers._litellm import is_litellm_object
from agentfsm.providers._registry import FORMATS, Reader, detect_body, detect_event

__all__ = ["StreamAccumulator", "detect_provider", "normalize"]

_SSE_SKIP = ("event:", "id:", "retry:", ":")


def _keys(value: object) -> str:
    if type(value) is dict:
        return repr(sorted(str(key) for key in value)[:20])
    return f"none (a {type(value).__name__}, not a JSON object)"


def _unknown(value: object, what: str = "payload") -> PayloadError:
    tried = ", ".join(FORMATS)
    return PayloadError(
        f"no normalizer recognises this {what}; tried {tried}; top-level keys seen: {_keys(value)}",
        tried=list(FORMATS),
    )


def _lines(text: str) -> Iterator[Any]:
    """The JSON values of NDJSON or SSE text, one per line; blanks and `[DONE]` skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(_SSE_SKIP):
            continue
        if line.startswith("data:"):
            line = line[5:].strip()
        if line == "[DONE]":
            continue
        try:
            yield json.loads(line)
        except ValueError:
            yield line


def _text_payload(raw: str | bytes) -> Any:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except ValueError:
        return list(_lines(text))


def _dump(value: object) -> tuple[Any, str | None]:
    """A plain-JSON view of `value` and the provider it implies (litellm), if any."""
    hint = "litellm" if is_litellm_object(value) else None
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(), hint
    return value, hint


def _events(items: Iterable[Any]) -> Iterator[tuple[Any, str | None]]:
    for item in items:
        if isinstance(item, str | bytes):
            for value in _lines(
                item.decode("utf-8", "replace") if isinstance(item, bytes) else item
            ):
                yield value, None
        else:
            yield _dump(item)


class StreamAccumulator:
    """Fold stream chunks, one at a time, into a `ModelTurn`; `turn()` may be read at any point.

    The format is detected from the first chunk that any format recognises
    (unless `provider` names it); earlier unrecognised chunks are ignored.
    Chunks may be dicts, JSON strings or bytes, SSE lines, or SDK/litellm objects.

    Args:
        provider: The format's name, or None to detect it.
    """

    def __init__(self, provider: str | None = None) -> None:
        if provider is not None and provider not in FORMATS:
            raise PayloadError(
                f"unknown provider {provider!r}; expected one of {', '.join(FORMATS)}"
            )
        self._provider = provider
        self._reader: Reader | None = None
        self._first: object = None

    @property
    def provider(self) -> str | None:
        """The format being read, once known."""
        return self._provider if self._reader is not None else None

    def add(self, chunk: object) -> None:
        """Fold one chunk (or one text blob of SSE/NDJSON lines) into the turn."""
        for event, hint in _events([chunk]):
            self._add(event, hint)

    def extend(self, chunks: Iterable[object]) -> None:
        """Fold several chunks into the turn, in order."""
        for event, hint in _events(chunks):
            self._add(event, hint)

    def _add(self, event: object, hint: str | None) -> None:
        if type(event) is not dict:
            self._first = self._first if self._first is not None else event
            return
        if self._reader is None:
            name = self._provider or hint or detect_event(event)
            if name is None:
                self._first = self._first if self._first is not None else event
                return
            self._provider, self._reader = name, FORMATS[name].stream(name)
        self._reader.add(event)

    def turn(self) -> ModelTurn:
        """The turn the chunks so far make.

        Raises:
            PayloadError: No chunk was recognised as any format's event.
        """
        if self._reader is None:
            raise _unknown(self._first, "stream")
        return self._reader.turn()


def _read_dict(payload: dict[str, Any], provider: str | None) -> ModelTurn:
    name = provider or detect_body(payload)
    if name is None:
        raise _unknown(payload)
    fmt = FORMATS[name]
    if fmt.is_body(payload):
        return fmt.read_body(payload, name).build()
    if fmt.is_event(payload):
        reader = fmt.stream(name)
        reader.add(payload)
        return reader.turn()
    raise PayloadError(
        f"this payload is not a {name} body or event; top-level keys seen: {_keys(payload)}"
    )


def normalize(payload: object, provider: str | None = None) -> ModelTurn:
    """Read one model output from any supported wire format into a `ModelTurn`.

    The finish reason is the provider's own claim, mapped; a broken tool call is
    kept with `error` set rather than dropped; nothing here decides what to do next.

    Args:
        payload: A response body, a list of stream events, JSON text, or an SDK object.
        provider: The format's name (see `Provider`), or None to detect it.

    Raises:
        PayloadError: No format recognises the payload, or it does not fit `provider`.
    """
    if type(payload) is dict:
        if provider is not None and provider not in FORMATS:
            raise PayloadError(
                f"unknown provider {provider!r}; expected one of {', '.join(FORMATS)}"
            )
        return _read_dict(payload, provider)
    if isinstance(payload, str | bytes):
        return normalize(_text_payload(payload), provider)
    if isinstance(payload, list | tuple | Iterator):
        accumulator = StreamAccumulator(provider)
        accumulator.extend(payload)
        return accumulator.turn()
    turn = read_object(payload, provider)
    if turn is not None:
        return turn
    value, hint = _dump(payload)
    if value is payload:
        raise unknown_object(payload)
    return normalize(value, provider or hint)


def _detect_stream(items: Iterable[Any]) -> str:
    first: object = None
    for event, hint in _events(items):
        name = hint or (detect_event(event) if type(event) is dict else None)
        if name is not None:
            return name
        first = event if first is None else first
    raise _unknown(first, "stream")


def detect_provider(payload: object) -> str:
    """Name the wire format of a payload (a body, a stream, JSON text or an SDK object).

    Raises:
        PayloadError: No format recognises the payload.
    """
    if type(payload) is dict:
        name = detect_body(payload)
        if name is None:
            raise _unknown(payload)
        return name
    if isinstance(payload, str | bytes):
        return detect_provider(_text_payload(payload))
    if isinstance(payload, list | tuple | Iterator):
        return _detect_stream(payload)
    turn = read_object(payload)
    if turn is not None and turn.provider is not None:
        return turn.provider
    value, hint = _dump(payload)
    if value is payload:
        raise unknown_object(payload)
    return hint or detect_provider(value)
