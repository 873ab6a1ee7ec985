"""Reading a trace back: streaming, with errors that name the file, the line and the fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm._replay.trace import TraceWriter, read_trace
from agentfsm.exceptions import TraceError

HEADER = json.dumps({"event": "trace", "schema": 1})


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class TestReadTrace:
    """read_trace over good and bad files."""

    def test_reads_back_what_the_writer_wrote(self, tmp_path: Path) -> None:
        """Events come back in order, without the header."""
        path = tmp_path / "t.jsonl"
        with TraceWriter(path) as writer:
            writer({"event": "a", "n": 1})
            writer({"event": "b", "n": 2})
        assert [e["event"] for e in read_trace(path)] == ["a", "b"]

    def test_malformed_line_names_file_line_and_fault(self, tmp_path: Path) -> None:
        """A line that is not JSON raises TraceError with the path and line number."""
        path = _write(tmp_path, HEADER, '{"event": "a"}', "{not json")
        with pytest.raises(TraceError, match=r"t\.jsonl:3: not valid JSON") as caught:
            list(read_trace(path))
        assert caught.value.details == {"path": str(path), "line": 3}

    def test_a_line_without_an_event_is_rejected(self, tmp_path: Path) -> None:
        """An object without a string `event` key is named as such."""
        path = _write(tmp_path, HEADER, '{"run_id": "r"}')
        with pytest.raises(TraceError, match=r":2: the object has no string 'event' key"):
            list(read_trace(path))

    def test_a_line_that_is_not_an_object_is_rejected(self, tmp_path: Path) -> None:
        """A JSON array line says what it got instead of an object."""
        path = _write(tmp_path, HEADER, "[1, 2]")
        with pytest.raises(TraceError, match=r":2: expected a JSON object, got list"):
            list(read_trace(path))

    def test_missing_header_is_rejected(self, tmp_path: Path) -> None:
        """A file whose first line is not the header is not read as a trace."""
        path = _write(tmp_path, '{"event": "a"}')
        with pytest.raises(TraceError, match=r":1: expected the header"):
            list(read_trace(path))

    def test_unknown_schema_is_rejected(self, tmp_path: Path) -> None:
        """A header with another schema version names the version it found."""
        path = _write(tmp_path, json.dumps({"event": "trace", "schema": 99}))
        with pytest.raises(TraceError, match="schema 99 is not supported"):
            list(read_trace(path))

    def test_errors_are_collected_when_asked(self, tmp_path: Path) -> None:
        """With an error list, bad lines are recorded and the good ones still read."""
        path = _write(tmp_path, HEADER, "oops", '{"event": "a"}', "[]", '{"event": "b"}')
        errors: list[TraceError] = []
        assert [e["event"] for e in read_trace(path, errors=errors)] == ["a", "b"]
        assert [e.details["line"] for e in errors] == [2, 4]

    def test_reading_is_lazy(self, tmp_path: Path) -> None:
        """The first event is available before a bad line further down is reached."""
        path = _write(tmp_path, HEADER, '{"event": "a"}', "broken")
        events = read_trace(path)
        assert next(events)["event"] == "a"
        with pytest.raises(TraceError):
            next(events)
