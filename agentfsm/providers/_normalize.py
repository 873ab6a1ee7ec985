"""`normalize`: any provider payload in, one `ModelTurn` out.

A payload is a JSON object (a body, or a lone stream event), a list of stream
events (dicts, JSON strings or bytes, SSE `data:` lines), JSON text, or an
object with `model_dump()` (openai/anthropic SDK types, litellm responses), or an agent
framework's model output (LangChain `AIMessage`, an Agents SDK or pydantic-ai `ModelResponse`).
"""

from __future__ import annotations

import codecs
import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

from agentfsm._model._errors import at_call
from agentfsm._model.types import ModelTurn
from agentfsm.exceptions import PayloadError
from agentfsm.providers import _openai_chat
from agentfsm.providers._common import json_loads
from agentfsm.providers._frameworks import read_object, unknown_object
from agentfsm.providers._litellm import is_litellm_object
from agentfsm.providers._registry import FORMATS, Provider, Reader, detect_body, detect_event

__all__ = ["StreamAccumulator", "detect_provider", "normalize"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""SSE and NDJSON line ends; `str.splitlines` would also split inside JSON strings (U+2028)."""
_SSE_IGNORED = frozenset({"event", "id", "retry"})
_FIELDS = ("data:", "event:", "id:", "retry:")
_NOT_UTF8 = "agentfsm.not-utf8"
"""Bytes that are not UTF-8 decode to NUL, which no JSON text may hold raw: the event
they sit in is then damaged, and only that event."""


def _nul(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\x00", exc.end


codecs.register_error(_NOT_UTF8, _nul)


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


class Damaged:
    """A stream event that arrived but cannot be read: it marks a gap in the stream."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Lines:
    """SSE or NDJSON text to JSON values, one event at a time, carried across chunks.

    SSE as the specification reads it: consecutive `data:` lines form one event,
    joined with "\n", and a blank line ends it; `:` starts a comment; `event:`,
    `id:` and `retry:` carry nothing agentfsm reads. A line that is no SSE field
    is one NDJSON value. A `data:` line that is a whole JSON value on its own is
    one event at once (lists that hold one event per item send no blank lines).
    A text chunk holds whole lines; a bytes chunk may be cut anywhere, as read
    from a socket, so its last line waits for the next chunk. An event whose
    text is not JSON, or holds bytes that are not UTF-8, becomes a `Damaged`
    marker, never a silent skip.
    """

    __slots__ = ("_bytes", "_cr", "_data", "_failed", "_held", "_tried")

    def __init__(self) -> None:
        self._data: list[str] = []
        self._bytes = codecs.getincrementaldecoder("utf-8")(_NOT_UTF8)
        self._held = ""
        """The last line of a bytes chunk, until the next chunk says where it ends."""
        self._tried = False
        self._cr = False
        self._failed: _Unparsed | None = None

    def copy(self) -> _Lines:
        """An independent copy (the UTF-8 decoder's state is shared, not copied)."""
        other = _Lines()
        other._data, other._held, other._tried = list(self._data), self._held, self._tried
        other._failed = self._failed
        return other

    def feed(self, chunk: str | bytes) -> list[Any]:
        """The events that `chunk` completes, in order."""
        out: list[Any] = []
        if isinstance(chunk, str):
            if self._held:
                self._held_line(out)
            line = self._line
            for text in _LINE_BREAK.split(chunk):
                line(text, out)
            return out
        text = self._bytes.decode(chunk)
        if self._cr and text.startswith("\n"):
            text = text[1:]  # the second half of a CRLF cut between chunks
        if text:
            self._cr = text.endswith("\r")
            if self._ends_held(text):
                self._held_line(out)
            *lines, last = _LINE_BREAK.split(self._held + text)
            for whole in lines:
                self._line(whole, out)
            if last != self._held:
                self._held, self._tried = last, False
        return out

    def _ends_held(self, text: str) -> bool:
        """Whether the held line is whole: `text` starts a new line (chunks of whole lines)."""
        held = self._held.lstrip()
        if not held:
            return False
        if text.startswith(_FIELDS) and held.startswith((*_FIELDS, ":")):
            return True
        if text[:1] in "{[" and not self._tried:
            self._tried = True  # one try per line keeps a line cut into many chunks linear
            return not isinstance(_loads(held), _Unparsed)
        return False

    def _held_line(self, out: list[Any]) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._line(held, out)

    def _line(self, line: str, out: list[Any]) -> None:
        stripped = line.strip()
        if not stripped:
            if self._data:
                self._dispatch(out)
            return
        if stripped[0] == ":":
            return
        field, colon, value = stripped.partition(":")
        if colon and field == "data":
            value = value[1:] if value[:1] == " " else value
            if not self._data:
                parsed = _loads(value)
                if type(parsed) is not _Unparsed:
                    out.append(parsed)
                    return
                self._failed = parsed  # an event of this one line needs no second parse
            self._data.append(value)
        elif not (colon and field in _SSE_IGNORED):
            if self._data:
                self._dispatch(out)
            event = _one(stripped)
            if event is not _NOTHING:
                out.append(event)

    def _dispatch(self, out: list[Any]) -> None:
        # `data: [DONE]`, OpenAI's end-of-stream sentinel, fails the one-line JSON parse
        # too; it ends the stream and carries nothing, so it goes to `_one`, never damages.
        failed = self._failed if len(self._data) == 1 else None
        if failed is not None and not _carries_nothing(self._data[0]):
            self._data = []
            out.append(Damaged(f"a stream event is not valid JSON ({failed.error})"))
            return
        data, self._data = "\n".join(self._data), []
        event = _one(data)
        if event is not _NOTHING:
            out.append(event)

    def flush(self) -> list[Any]:
        """The event being read, if any: the end of the text ends it."""
        out: list[Any] = []
        self._held_line(out)
        if self._data:
            self._dispatch(out)
        return out

    @property
    def pending(self) -> bool:
        """Whether an event (or a UTF-8 character) has begun but not ended."""
        return bool(self._data) or bool(self._held.strip()) or bool(self._bytes.getstate()[0])


class _Unparsed:
    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


def _loads(text: str) -> Any:
    try:
        return json_loads(text)
    except ValueError as exc:
        return _Unparsed(str(exc))
    except RecursionError:
        return _Unparsed("it nests too deeply for Python's JSON parser")


_NOTHING = object()
"""What an event that carries nothing (an empty `data:`) reads as."""


class _Done:
    """`data: [DONE]`: the server says the stream is over (OpenAI and the servers like it)."""

    __slots__ = ()


DONE = _Done()


def _carries_nothing(text: str) -> bool:
    return not text or text.isspace() or text.strip() == "[DONE]"


def _one(text: str) -> Any:
    if _carries_nothing(text):
        return DONE if text.strip() == "[DONE]" else _NOTHING
    value = _loads(text)
    if type(value) is _Unparsed:
        return Damaged(f"a stream event is not valid JSON ({value.error})")
    return value


def _text_payload(raw: str | bytes) -> Any:
    """JSON text as its value; anything else as a one-item stream of SSE/NDJSON text."""
    text = raw.decode("utf-8", _NOT_UTF8) if isinstance(raw, bytes) else raw
    value = _loads(text)
    return [text] if isinstance(value, _Unparsed) else value


def _dump(value: object) -> tuple[Any, str | None]:
    """A plain-JSON view of `value` and the provider it implies (litellm), if any."""
    hint = "litellm" if is_litellm_object(value) else None
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            dumped = dump()
        except RecursionError as exc:
            raise PayloadError(f"this {type(value).__name__} nests too deeply to be read") from exc
        if hint is not None:
            _litellm_cost(value, dumped)
        return dumped, hint
    return value, hint


def _litellm_cost(response: object, dumped: object) -> None:
    """Carry litellm's own cost of a response (`_hidden_params["response_cost"]`) into usage."""
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    usage = dumped.get("usage") if type(dumped) is dict else None
    if type(usage) is dict and usage.get("cost") is None and type(cost) in (int, float):
        usage["cost"] = cost


class StreamAccumulator:
    """Fold stream chunks, one at a time, into a `ModelTurn`; `turn()` may be read at any point.

    The format is detected from the first chunk that any format recognises
    (unless `provider` names it); earlier unrecognised chunks are ignored.
    Chunks may be dicts, JSON strings or bytes, SSE text (an event may span
    chunks), or SDK/litellm objects. An event that arrives damaged (not JSON,
    not UTF-8) is never skipped silently: the turn is marked truncated and
    every call whose arguments could have been in the gap is marked broken.

    Args:
        provider: The format's name, or None to detect it.
    """

    def __init__(self, provider: str | None = None) -> None:
        _check_provider(provider)
        self._provider = provider
        self._reader: Reader | None = None
        self._first: object = None
        self._lines = _Lines()
        self._events = 0
        self._early: list[str] = []

    @property
    def provider(self) -> str | None:
        """The format being read, once known."""
        return self._provider if self._reader is not None else None

    def add(self, chunk: object) -> None:
        """Fold one chunk (or one text blob of SSE/NDJSON lines) into the turn."""
        self._chunk(chunk)

    def extend(self, chunks: Iterable[object]) -> None:
        """Fold several chunks into the turn, in order."""
        if isinstance(chunks, str | bytes) or not isinstance(chunks, Iterable):
            raise PayloadError(
                f"extend takes an iterable of chunks, not {type(chunks).__name__} "
                "(add one chunk, or one text blob, with add)"
            )
        for chunk in chunks:
            self._chunk(chunk)

    def _chunk(self, chunk: object) -> None:
        if isinstance(chunk, str | bytes):
            for event in self._lines.feed(chunk):
                self._add(event, None)
            return
        for event in self._lines.flush():  # a non-text chunk ends any event being read
            self._add(event, None)
        value, hint = _dump(chunk)
        self._add(value, hint)

    def _add(self, event: object, hint: str | None) -> None:
        if event is DONE:
            self._done()
            return
        self._events += 1
        if isinstance(event, Damaged):
            self._damage(f"event #{self._events}: {event.why}")
            return
        if type(event) is not dict:
            self._first = self._first if self._first is not None else event
            return
        if self._reader is None:
            name = self._provider or hint or detect_event(event)
            if name is None:
                self._first = self._first if self._first is not None else event
                return
            self._provider, self._reader = name, FORMATS[name].stream(name)
            for why in self._early:
                self._reader.damage(why)
        self._reader.add(event)

    def _done(self) -> None:
        """The server ended the stream on purpose: a chat reader may then judge it whole."""
        if isinstance(self._reader, _openai_chat.ChatStream):
            self._reader.ended()

    def _damage(self, why: str) -> None:
        if self._reader is None:
            if len(self._early) < 8:  # the first few are enough to say what happened
                self._early.append(why)
        else:
            self._reader.damage(why)

    def end(self) -> None:
        """Say that no chunk follows: an event still being read ends here."""
        ended = list(self._lines.flush())
        if self._lines.pending:  # a UTF-8 character begun and never finished
            ended.append(Damaged("the stream ended inside a UTF-8 character"))
            self._lines = _Lines()
        for event in ended:
            self._add(event, None)

    def turn(self) -> ModelTurn:
        """The turn the chunks so far make; an event begun but not ended counts as damaged.

        Raises:
            PayloadError: No chunk was recognised as any format's event.
        """
        if self._reader is None:
            if self._early:
                raise PayloadError(
                    f"no normalizer recognises this stream; {self._early[0]}",
                    tried=list(FORMATS),
                )
            raise _unknown(self._first, "stream")
        if not self._lines.pending:
            return self._reader.turn()
        reader = copy.deepcopy(self._reader)  # reading mid-event must not change the stream
        ended = list(self._lines.copy().flush())
        for event in ended or [Damaged("the stream ended inside an event")]:
            if event is DONE and isinstance(reader, _openai_chat.ChatStream):
                reader.ended()
            elif isinstance(event, Damaged) or type(event) is not dict:
                reader.damage(f"event #{self._events + 1}: {getattr(event, 'why', 'not JSON')}")
            else:
                reader.add(event)
        return reader.turn()


def _read_dict(payload: dict[str, Any], provider: str | None) -> ModelTurn:
    """A JSON object read as its format's body, or as a one-event stream: the one path of every
    dict `normalize` is given, the most common payload of all (a chat completion) included."""
    if provider is None:
        name = detect_body(payload)
        if name is None:
            raise _unknown(payload)
    else:
        _check_provider(provider)
        name = provider
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


@at_call
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
        return _read_dict(payload, provider)
    _check_provider(provider)
    if isinstance(payload, str | bytes):
        return normalize(_text_payload(payload), provider)
    if isinstance(payload, list | tuple | Iterator):
        accumulator = StreamAccumulator(provider)
        accumulator.extend(payload)
        accumulator.end()
        return accumulator.turn()
    turn = read_object(payload, provider)
    if turn is not None:
        return turn
    value, hint = _dump(payload)
    if value is payload:
        raise unknown_object(payload)
    return normalize(value, provider or hint)


def _check_provider(provider: object) -> None:
    """Raise PayloadError unless `provider` is None or the name of a format (a `Provider` too)."""
    if provider is not None and (
        (type(provider) is not str and type(provider) is not Provider) or provider not in FORMATS
    ):
        raise PayloadError(
            f"unknown provider {provider!r}; expected None or one of {', '.join(FORMATS)}"
        )


def _detect_stream(items: Iterable[Any]) -> str:
    first: object = None
    lines = _Lines()
    for item in items:
        if isinstance(item, str | bytes):
            events: Iterable[tuple[Any, str | None]] = ((e, None) for e in lines.feed(item))
        else:
            events = [_dump(item)]
        for event, hint in events:
            name = hint or (detect_event(event) if type(event) is dict else None)
            if name is not None:
                return name
            if event is not DONE:
                first = event if first is None else first
    for event in lines.flush():
        if type(event) is dict and (name := detect_event(event)) is not None:
            return name
    if isinstance(first, Damaged):
        raise PayloadError(
            f"no normalizer recognises this stream; {first.why}", tried=list(FORMATS)
        )
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
