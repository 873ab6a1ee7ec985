"""A damaged stream never yields an executable call built around the gap.

Every real stream of the provider corpus is sent again with one event damaged
(cut short, padded with junk, or with bytes that are not UTF-8), as a list of
lines, as SSE text and as SSE bytes cut at arbitrary points. Whatever the damage,
every call the turn offers for execution has exactly the arguments of the
undamaged stream, and the controller answers RETRY (P0). Events that are merely
split differently (one event over two `data:` lines, bytes cut mid-character)
give exactly the undamaged turn.

A stream that silently loses a whole event is a different matter: Chat
Completions and Anthropic Messages events carry no sequence number, so a lost
argument fragment cannot be told from one never sent. Where the format says
what is missing (Responses `sequence_number`, a delta for a block that never
started), the loss is caught; `TestDroppedEvents` checks those.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import Action, ModelTurn, Priority
from agentfsm.providers import StreamAccumulator, normalize

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"
STREAMS = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.jsonl"))


@cache
def lines_of(name: str) -> tuple[str, ...]:
    """The events of one corpus stream, one JSON text per line."""
    text = (CORPUS / name).read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if line.strip())


@cache
def reference(name: str) -> ModelTurn:
    """The turn the undamaged stream makes."""
    return normalize(list(lines_of(name)))


def calls_of(turn: ModelTurn) -> set[tuple[str, str]]:
    """The executable calls of a turn as (name, canonical arguments)."""
    return {
        (call.name, json.dumps(call.arguments, sort_keys=True))
        for call in turn.tool_calls
        if call.complete
    }


def sse(lines: list[str]) -> str:
    """The events as SSE text, one `data:` event each."""
    return "".join(f"event: message\ndata: {line}\n\n" for line in lines)


def cut(text: bytes, points: list[int]) -> list[bytes]:
    """`text` cut at the given points (any byte, mid-character included)."""
    edges = sorted({min(p, len(text)) for p in points})
    pieces, start = [], 0
    for edge in edges:
        pieces.append(text[start:edge])
        start = edge
    pieces.append(text[start:])
    return pieces


def damage(line: str, kind: str, at: float) -> str | bytes:
    """One event, damaged so that it no longer reads as JSON."""
    position = max(1, min(len(line) - 1, int(len(line) * at)))
    if kind == "cut":
        return line[:position]
    if kind == "junk":
        return line[:position] + "\x00}{" + line[position:]
    return line.encode()[:position] + b"\xff\xfe" + line.encode()[position:]


def is_json(value: str | bytes) -> bool:
    """Whether the damaged event still happens to read as a JSON value."""
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def route(turn_or_payload: object) -> af.Decision:
    """The default controller's decision on one output."""
    return af.Controller().on_model_output(turn_or_payload)


DAMAGE = st.tuples(
    st.sampled_from(STREAMS),
    st.integers(min_value=0),
    st.sampled_from(["cut", "junk", "bytes"]),
    st.floats(min_value=0.05, max_value=0.95),
)


class TestDamagedEvents:
    """One damaged event anywhere in a real stream."""

    def test_corpus_has_streams_with_calls(self) -> None:
        """The corpus holds streamed calls, so the properties below test something."""
        with_calls = [name for name in STREAMS if calls_of(reference(name))]
        assert len(with_calls) >= 10

    @settings(deadline=None)
    @given(DAMAGE, st.sampled_from(["lines", "sse", "sse-bytes"]))
    def test_a_damaged_event_never_yields_a_call_with_other_arguments(
        self, case: tuple[str, int, str, float], transport: str
    ) -> None:
        """Every executable call of a damaged stream is one the model made, exactly."""
        name, index, kind, at = case
        lines: list[str | bytes] = list(lines_of(name))
        index %= len(lines)
        bad = damage(str(lines[index]), kind, at)
        if transport == "sse" and isinstance(bad, bytes):
            bad = bad.decode(errors="replace")  # text: the bad bytes became U+FFFD
        if is_json(bad):
            return
        lines[index] = bad
        if transport == "lines":
            turn = normalize(lines)
        else:
            text = b"".join(
                (b"data: " + (x if isinstance(x, bytes) else x.encode()) + b"\n\n") for x in lines
            )
            turn = normalize(text if transport == "sse-bytes" else [text.decode()])
        assert calls_of(turn) <= calls_of(reference(name))
        # Only a terminal event that repeats the whole output (Responses) makes a gap harmless.
        assert turn == reference(name) or (turn.truncated and "damaged" in (turn.error or ""))

    @settings(deadline=None)
    @given(DAMAGE)
    def test_a_damaged_event_is_retried_at_p0(self, case: tuple[str, int, str, float]) -> None:
        """The controller answers a damaged stream with RETRY at P0, never by running calls."""
        name, index, kind, at = case
        lines: list[str | bytes] = list(lines_of(name))
        index %= len(lines)
        bad = damage(str(lines[index]), kind, at)
        if is_json(bad):
            return
        lines[index] = bad
        decision = route(lines)
        if normalize(lines) == reference(name):  # a terminal event repeated the whole output
            return
        assert decision.action is Action.RETRY
        assert decision.priority is Priority.P0

    def test_a_lost_argument_fragment_breaks_the_call(self) -> None:
        """The `dry_run` case: a cut chunk inside a call's arguments breaks that call."""
        head = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}

        def chunk(fragment: str, **start: str) -> str:
            call: dict[str, object] = {"index": 0, "function": {"arguments": fragment}}
            if start:
                call.update(id=start["id"], type="function")
                call["function"] = {"name": start["name"], "arguments": fragment}
            return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})

        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        events = [
            json.dumps(head),
            chunk('{"paths": ["/tmp/x"]', id="c1", name="delete_files"),
            chunk(', "dry_run": true')[:-7],  # the damaged event
            chunk("}"),
            json.dumps(finish),
        ]
        turn = normalize(sse(events))
        (call,) = turn.tool_calls
        assert call.arguments is None
        assert call.error is not None
        assert "hole" in call.error
        assert call.raw_arguments == '{"paths": ["/tmp/x"]}'


class TestSplitEvents:
    """Events split in ways SSE allows are read whole."""

    @settings(deadline=None)
    @given(st.sampled_from(STREAMS), st.integers(min_value=0), st.floats(0.05, 0.95))
    def test_an_event_over_two_data_lines_is_one_event(
        self, name: str, index: int, at: float
    ) -> None:
        """An event whose JSON is spread over two `data:` lines reads as the whole event."""
        lines = list(lines_of(name))
        index %= len(lines)
        line = lines[index]
        # Split between two JSON tokens: after a comma or a colon outside strings is
        # not needed, since the data lines are joined with "\n", which JSON reads as space.
        splits = [i for i, ch in enumerate(line) if ch in ",:" and i > len(line) * at]
        if not splits:
            return
        head, tail = line[: splits[0] + 1], line[splits[0] + 1 :]
        if is_json(head):
            return
        text = "".join(
            f"data: {head}\ndata: {tail}\n\n" if i == index else f"data: {x}\n\n"
            for i, x in enumerate(lines)
        )
        if not is_json(head + "\n" + tail):  # the comma was inside a string
            return
        assert normalize(text) == reference(name)

    @settings(deadline=None)
    @given(st.sampled_from(STREAMS), st.lists(st.integers(min_value=0, max_value=1 << 16)))
    def test_bytes_cut_anywhere_read_as_the_whole_stream(
        self, name: str, points: list[int]
    ) -> None:
        """SSE bytes cut at any points, mid-character included, make the undamaged turn."""
        text = sse([*lines_of(name)]).encode()
        accumulator = StreamAccumulator()
        accumulator.extend(cut(text, points))
        accumulator.end()
        assert accumulator.turn() == reference(name)

    def test_comments_and_fields_are_not_events(self) -> None:
        """SSE comments and `event:`/`id:`/`retry:` lines are read as the specification says."""
        lines = lines_of("openai_chat/chat-stream-single-tool_call.jsonl")
        text = ": keep-alive\nretry: 100\n" + "".join(
            f"id: {i}\nevent: chunk\ndata:{line}\n\n" for i, line in enumerate(lines)
        )
        assert normalize(text) == reference("openai_chat/chat-stream-single-tool_call.jsonl")

    def test_a_line_separator_inside_a_string_is_not_a_line_end(self) -> None:
        """U+2028 inside a JSON string stays inside the event (str.splitlines would split it)."""
        chunk = {
            "choices": [{"index": 0, "delta": {"content": "a\u2028b"}, "finish_reason": "stop"}]
        }
        text = "data: " + json.dumps(chunk, ensure_ascii=False) + "\n\n"
        assert normalize(text).text == "a\u2028b"


class TestDroppedEvents:
    """A whole event lost, where the format can tell."""

    @settings(deadline=None)
    @given(
        st.sampled_from([n for n in STREAMS if n.startswith("openai_responses/")]),
        st.integers(min_value=0),
    )
    def test_a_responses_gap_in_sequence_numbers_breaks_unfinished_calls(
        self, name: str, index: int
    ) -> None:
        """A Responses stream missing an event never yields a call with other arguments."""
        lines = list(lines_of(name))
        index %= len(lines)
        turn = normalize(lines[:index] + lines[index + 1 :])
        assert calls_of(turn) <= calls_of(reference(name))

    def test_an_anthropic_delta_for_a_block_never_started_is_damage(self) -> None:
        """Losing a content_block_start is seen: the delta names a block that never started."""
        lines = list(lines_of("anthropic/messages-stream-text-then-tool_use.jsonl"))
        starts = [
            i for i, x in enumerate(lines) if '"content_block_start"' in x and "tool_use" in x
        ]
        turn = normalize(lines[: starts[0]] + lines[starts[0] + 1 :])
        assert turn.truncated
        assert not calls_of(turn)
