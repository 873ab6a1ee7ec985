"""The trace writer: a header first, one flushed JSON line per event, secrets redacted."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from agentfsm._replay.trace import (
    REDACTED,
    TRACE_SCHEMA,
    TraceWriter,
    is_secret_key,
    read_trace,
    redact,
)
from agentfsm.exceptions import TraceError


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class TestTraceWriter:
    """TraceWriter as a controller observer."""

    def test_header_comes_first_with_the_schema(self, tmp_path: Path) -> None:
        """The first line names the trace format and its schema version."""
        path = tmp_path / "t.jsonl"
        TraceWriter(path).close()
        assert _lines(path) == [{"event": "trace", "schema": TRACE_SCHEMA, "producer": "agentfsm"}]

    def test_each_event_is_on_disk_before_the_next(self, tmp_path: Path) -> None:
        """Every event is flushed when written, so a crash loses nothing already decided."""
        path = tmp_path / "t.jsonl"
        writer = TraceWriter(path)
        writer({"event": "run_started", "run_id": "r"})
        assert _lines(path)[-1] == {"event": "run_started", "run_id": "r"}
        writer({"event": "decision", "run_id": "r", "action": "final"})
        assert len(_lines(path)) == 3
        writer.close()

    def test_secrets_are_redacted_at_any_depth(self, tmp_path: Path) -> None:
        """Keys named like keys, tokens, secrets or passwords lose their values, nested too."""
        path = tmp_path / "t.jsonl"
        event = {
            "event": "model_output",
            "headers": {"Authorization": "Bearer sk-1", "X-Api-Key": "k"},
            "output": {"tool_calls": [{"arguments": {"password": "p", "query": "q"}}]},
        }
        with TraceWriter(path) as writer:
            writer(event)
        written = _lines(path)[1]
        assert written["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED}
        assert written["output"]["tool_calls"][0]["arguments"] == {
            "password": REDACTED,
            "query": "q",
        }

    def test_raw_argument_strings_are_redacted_inside(self) -> None:
        """A JSON string of arguments is redacted like the parsed arguments it duplicates."""
        cleaned = redact({"raw_arguments": '{"api_key": "sk-1", "city": "Oslo"}'})
        assert json.loads(cleaned["raw_arguments"]) == {"api_key": REDACTED, "city": "Oslo"}

    def test_the_callers_event_is_not_changed(self, tmp_path: Path) -> None:
        """Redaction copies: other observers still see the event as emitted."""
        event = {"event": "x", "token": "t"}
        with TraceWriter(tmp_path / "t.jsonl") as writer:
            writer(event)
        assert event["token"] == "t"

    def test_an_open_file_is_left_open(self) -> None:
        """A writer given a file it did not open leaves closing to its owner."""
        buffer = io.StringIO()
        writer = TraceWriter(buffer)
        writer({"event": "x"})
        writer.close()
        assert not buffer.closed
        assert buffer.getvalue().count("\n") == 2


class TestValuesJSONCannotHold:
    """An event holding NaN, Infinity or itself is refused whole, naming the event."""

    @pytest.mark.parametrize(
        "value", [math.nan, math.inf, -math.inf, [1.0, {"deep": math.nan}]], ids=repr
    )
    def test_a_non_finite_float_is_refused_and_nothing_is_written(
        self, tmp_path: Path, value: object
    ) -> None:
        path = tmp_path / "t.jsonl"
        with TraceWriter(path) as writer:
            writer({"event": "run_started", "run_id": "r"})
            with pytest.raises(TraceError, match=r"'tool_results' event to the trace .*t\.jsonl"):
                writer({"event": "tool_results", "run_id": "r", "results": value})
            assert writer.events == 1
            writer({"event": "decision", "run_id": "r"})
        # every line on disk is strict JSON: the refused event left no part of itself
        lines = path.read_text(encoding="utf-8").splitlines()
        assert [json.loads(line, parse_constant=_refuse)["event"] for line in lines] == [
            "trace",
            "run_started",
            "decision",
        ]

    def test_a_value_that_holds_itself_is_refused(self) -> None:
        loop: dict[str, Any] = {}
        loop["self"] = loop
        out = io.StringIO()
        writer = TraceWriter(out)
        with pytest.raises(TraceError, match="'x' event to the trace: a value in it holds itself"):
            writer({"event": "x", "value": loop})
        assert len(out.getvalue().splitlines()) == 1  # the header only


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} in a trace line")


class TestIsSecretKey:
    """Which key names count as secrets."""

    def test_credential_names_are_secret(self) -> None:
        """api_key, Authorization, access tokens, client secrets and passwords are secret."""
        names = ["api_key", "apiKey", "X-Api-Key", "Authorization", "accessToken", "token"]
        names += ["client_secret", "PASSWORD", "db.password", "private_key", "cookie"]
        assert all(is_secret_key(n) for n in names)

    def test_token_counts_are_not_secret(self) -> None:
        """Plural token counts and ordinary keys are kept: usage must stay readable."""
        names = ["max_tokens", "input_tokens", "total_tokens", "keyword", "monkey", "author"]
        assert not any(is_secret_key(n) for n in names)


HOSTILE_TEXT = {"event": "model_output", "text": "half \ud83d emoji", "file": "r\udcff.txt"}
"""Half an emoji, and a non-UTF-8 file name as os.fsdecode gives it."""


class TestLoneSurrogates:
    """Text with no UTF-8 form (a lone surrogate) is written as JSON's own escape and read back."""

    def test_a_path_writer_writes_and_reads_back(self, tmp_path: Path) -> None:
        """The writer used to raise UnicodeEncodeError; the line is escaped, the reader returns
        the same text."""
        path = tmp_path / "t.jsonl"
        with TraceWriter(path) as writer:
            writer(HOSTILE_TEXT)
        path.read_bytes().decode("utf-8")
        assert list(read_trace(path)) == [HOSTILE_TEXT]

    def test_an_open_utf8_file_gets_the_same_line(self, tmp_path: Path) -> None:
        """A writer given an open UTF-8 text file (strict errors) writes the escaped line too."""
        path = tmp_path / "t.jsonl"
        with path.open("w", encoding="utf-8") as file:
            TraceWriter(file)(HOSTILE_TEXT)
        assert list(read_trace(path)) == [HOSTILE_TEXT]
