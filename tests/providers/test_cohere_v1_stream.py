"""Cohere v1 chat streams (`cohere.Client().chat_stream`, `StreamedChatResponse`).

The corpus (../shared/corpus) holds no recorded v1 stream, so the events below follow
the v1 Chat API reference and the SDK's `StreamedChatResponse` variants: JSON lines with
`event_type` and `is_finished`; `stream-start` (the `generation_id`), `text-generation`
(`text`), `tool-calls-chunk` (a plan `text` delta, or a `tool_call_delta` of `index`,
`name` and a `parameters` text piece), `tool-calls-generation` (the plan `text` and the
whole `tool_calls`), `citation-generation`, and `stream-end` (`finish_reason` and the whole
v1 body as `response`). The recorded corpus is read here to check that no other
provider's stream is taken for a v1 one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import Action, ExitReason, FinishReason
from agentfsm.exceptions import PayloadError
from agentfsm.providers import StreamAccumulator, detect_provider, normalize
from tests.providers.test_cohere_v1 import REPORT, v1

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
PLAN = "I will use the query_daily_sales_report tool to find the sales."
TSLA = {"name": "get_price", "parameters": {"ticker": "TSLA"}}


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"is_finished": kind == "stream-end", "event_type": kind, **fields}


def text_stream(pieces: list[str], reason: str = "COMPLETE") -> list[dict[str, Any]]:
    """A streamed text answer, ended by `stream-end` with the whole v1 body."""
    return [
        event("stream-start", generation_id="f0a4b3f2-7c16-43c8-9a9e-4a1c2c1b6d1e"),
        *(event("text-generation", text=piece) for piece in pieces),
        event("stream-end", finish_reason=reason, response=v1("".join(pieces), reason)),
    ]


def chunks(call: dict[str, Any], index: int, size: int = 4) -> list[dict[str, Any]]:
    """A call as `tool-calls-chunk` events: its name, then its parameters text in pieces."""
    text = json.dumps(call["parameters"], indent=4)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    named = event("tool-calls-chunk", tool_call_delta={"index": index, "name": call["name"]})
    return [
        named,
        *(
            event("tool-calls-chunk", tool_call_delta={"index": index, "parameters": p})
            for p in pieces
        ),
    ]


def tool_stream(calls: list[dict[str, Any]], body: bool = True) -> list[dict[str, Any]]:
    """A plan in deltas, each call in chunks, the whole calls, then `stream-end`."""
    plan = [event("tool-calls-chunk", text=word) for word in PLAN.split(" ")]
    for word in plan[1:]:
        word["text"] = " " + word["text"]
    pieces = [e for i, c in enumerate(calls) for e in chunks(c, i)]
    response = v1(PLAN, tool_calls=calls) if body else {"meta": {"tokens": {"input_tokens": 9}}}
    return [
        event("stream-start", generation_id="g"),
        *plan,
        *pieces,
        event("tool-calls-generation", text=PLAN, tool_calls=calls),
        event("stream-end", finish_reason="COMPLETE", response=response),
    ]


def ndjson(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def decide(turn: af.ModelTurn, tools: list[str] | None = None) -> af.Decision:
    return af.Controller(af.Policy(), tools=tools).on_model_output(turn)


class TestV1Streams:
    """A v1 stream reads as the v1 body its `stream-end` carries."""

    def test_text_deltas_read_as_the_body(self) -> None:
        """Text deltas, then stream-end: the turn equals the body's, a final answer."""
        stream = text_stream(["Sales", " were", " $10,000."])
        turn = normalize(stream)
        assert turn == normalize(stream[-1]["response"])
        assert (turn.provider, turn.text, turn.finish_reason) == (
            "cohere",
            "Sales were $10,000.",
            FinishReason.STOP,
        )
        assert detect_provider(stream) == "cohere"
        decision = decide(turn)
        assert (decision.action, decision.exit_reason) == (Action.FINAL, ExitReason.COMPLETED)

    @pytest.mark.parametrize("form", ["events", "ndjson", "sse", "bytes"])
    def test_every_wire_form_reads_the_same(self, form: str) -> None:
        """Dicts, NDJSON text, SSE (`event:` + `data:`) and bytes cut anywhere read alike."""
        stream = tool_stream([REPORT, TSLA])
        expected = normalize(stream)
        if form == "events":
            assert normalize(list(stream)) == expected
        elif form == "ndjson":
            assert normalize(ndjson(stream)) == expected
        elif form == "sse":
            sse = "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in stream)
            assert normalize(sse) == expected
        else:
            data = ndjson(stream).encode()
            accumulator = StreamAccumulator()
            accumulator.extend(data[i : i + 7] for i in range(0, len(data), 7))
            accumulator.end()
            assert accumulator.turn() == expected

    def test_tool_calls_stream_runs_the_generated_calls(self) -> None:
        """Plan deltas, two calls in chunks, tool-calls-generation, stream-end: both run."""
        turn = normalize(tool_stream([REPORT, TSLA]))
        assert [(c.name, c.arguments) for c in turn.tool_calls] == [
            ("query_daily_sales_report", {"day": "2023-09-29"}),
            ("get_price", {"ticker": "TSLA"}),
        ]
        assert (turn.text, turn.reasoning) == ("", PLAN)
        decision = decide(turn, ["query_daily_sales_report", "get_price"])
        assert decision.action is Action.EXECUTE_TOOLS
        assert len({c.id for c in decision.tool_calls}) == 2

    def test_without_a_body_the_events_make_the_turn(self) -> None:
        """A stream-end whose response is only `meta`: calls from tool-calls-generation,
        usage from `meta.tokens`, the reason from the event."""
        turn = normalize(tool_stream([REPORT], body=False))
        assert [(c.name, c.arguments) for c in turn.tool_calls] == [
            ("query_daily_sales_report", {"day": "2023-09-29"})
        ]
        assert turn.reasoning == PLAN
        assert (turn.finish_reason, turn.truncated) == (FinishReason.STOP, False)
        assert turn.usage is not None
        assert turn.usage.input_tokens == 9

    @pytest.mark.parametrize(
        ("reason", "finish"),
        [("MAX_TOKENS", FinishReason.LENGTH), ("ERROR", FinishReason.ERROR)],
    )
    def test_a_cut_or_failed_end_is_never_a_completed_answer(
        self, reason: str, finish: FinishReason
    ) -> None:
        """stream-end with MAX_TOKENS or ERROR: the body's reason, never COMPLETED."""
        turn = normalize(text_stream(["Sales", " were"], reason))
        assert turn.finish_reason is finish
        assert decide(turn).exit_reason is not ExitReason.COMPLETED


class TestCutV1Streams:
    """A v1 stream without stream-end is truncated, as a chat stream without its finish."""

    def test_text_cut_before_stream_end_is_truncated_like_a_chat_stream(self) -> None:
        """No stream-end: truncated, finish UNKNOWN, as an OpenAI stream with no finish."""
        turn = normalize(text_stream(["Sales", " were"])[:-1])
        chat = normalize(
            [
                {"choices": [{"index": 0, "delta": {"content": "Sales"}}]},
                {"choices": [{"index": 0, "delta": {"content": " were"}}]},
            ]
        )
        assert (turn.text, turn.truncated, turn.finish_reason) == (
            "Sales were",
            True,
            FinishReason.UNKNOWN,
        )
        assert (chat.truncated, chat.finish_reason) == (turn.truncated, turn.finish_reason)
        assert decide(turn).action is Action.RETRY

    def test_a_call_known_only_from_its_chunks_never_runs(self) -> None:
        """Cut after the last parameters piece (the text parses): still incomplete."""
        stream = tool_stream([REPORT])
        cut = stream[
            : stream.index(next(e for e in stream if e["event_type"] == "tool-calls-generation"))
        ]
        turn = normalize(cut)
        (call,) = turn.tool_calls
        assert call.name == "query_daily_sales_report"
        assert not call.complete
        assert "tool-calls-generation" in str(call.error)
        assert decide(turn, ["query_daily_sales_report"]).action is Action.RETRY

    def test_v1_and_v2_events_mixed_are_damaged(self) -> None:
        """A v2 event inside a v1 stream is a gap, never read as part of it."""
        stream = text_stream(["ok"])
        v2 = {"type": "content-delta", "delta": {"message": {"content": {"text": "!"}}}}
        turn = normalize([*stream[:2], v2, *stream[2:]])
        assert turn.truncated
        assert "v2 event" in str(turn.error)


STREAM_CALLS = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["query_daily_sales_report", "get_price"]),
            "parameters": st.dictionaries(
                st.sampled_from(["day", "ticker", "q"]), st.text(max_size=6), max_size=2
            ),
        }
    ),
    max_size=3,
)


class TestPrefixes:
    """The property: any prefix of a valid stream reads, and never runs a cut call."""

    @given(calls=STREAM_CALLS, text=st.lists(st.text(max_size=5), max_size=3), data=st.data())
    def test_any_prefix_reads_and_gives_no_whole_call_from_a_cut_one(
        self, calls: list[dict[str, Any]], text: list[str], data: st.DataObject
    ) -> None:
        """Cut by events or by bytes: no exception; a complete call only once
        tool-calls-generation arrived, with the generated parameters; no end, truncated."""
        stream = tool_stream(calls) if calls else text_stream(text)
        by_events = data.draw(st.booleans())
        if by_events:
            prefix = stream[: data.draw(st.integers(1, len(stream)))]
            turn = normalize(prefix)
        else:
            lines = [(json.dumps(e) + "\n").encode() for e in stream]
            raw = b"".join(lines)
            size = data.draw(st.integers(1, len(raw)))
            accumulator = StreamAccumulator()
            accumulator.add(raw[:size])
            accumulator.end()
            ends = [sum(len(line) for line in lines[: i + 1]) for i in range(len(lines))]
            # A line cut before its newline still ends where its JSON closes.
            prefix = [e for e, end in zip(stream, ends, strict=True) if end - 1 <= size]
            if not prefix:
                with pytest.raises(PayloadError):
                    accumulator.turn()
                return
            turn = accumulator.turn()
        kinds = {e["event_type"] for e in prefix}
        generated = "tool-calls-generation" in kinds
        for call in turn.tool_calls:
            if call.complete:
                assert generated
                assert {"name": call.name, "parameters": call.arguments} in calls
        if "stream-end" not in kinds:
            assert turn.truncated


def _streams() -> list[Path]:
    return sorted(
        path
        for folder in ("providers", "wire")
        for suffix in ("*.jsonl", "*.sse")
        for path in (CORPUS / folder).glob(f"*/{suffix}")
        if path.parent.name != "cohere"
    )


class TestNoStreamConfusion:
    """Reading v1 streams takes no other provider's recorded stream."""

    @pytest.mark.parametrize("path", _streams(), ids=lambda p: f"{p.parent.name}/{p.name}")
    def test_other_streams_are_not_cohere(self, path: Path) -> None:
        """No recorded stream of another provider is detected as Cohere."""
        try:
            name = detect_provider(path.read_text(encoding="utf-8"))
        except PayloadError:
            return
        assert name != "cohere"
