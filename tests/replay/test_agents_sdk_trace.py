"""The OpenAI Agents SDK's own trace export, read from real recordings of its exporter."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfsm._replay.trajectories import FORMATS, ModelOutput, ToolResults, read_runs
from agentfsm._replay.trajectories._otel import NOT_RECORDED
from agentfsm.exceptions import TraceError
from tests.replay.spans import JSON, json_lines, one_run, read_all, steps

pytestmark = pytest.mark.xdist_group("span-recordings")  # one worker records them once


class TestAgentsSdkExport:
    def test_generation_and_function_spans_make_the_steps(self, span_recordings: Path) -> None:
        """Chat Completions: calls with their ids and arguments from the generation span, the
        results from the function spans, the answer, usage, model and workflow."""
        run = one_run(span_recordings / "agents_chat.jsonl")
        assert run.format == "openai-agents-trace"
        assert run.format in FORMATS
        assert run.id.startswith("trace_")
        first, results, last = list(run.steps)
        assert isinstance(first, ModelOutput)
        assert [(c.id, c.name, c.arguments) for c in first.turn.tool_calls] == [
            ("call_del", "delete_file", {"path": "/etc/x"}),
            ("call_read", "read_file", {"path": "/tmp/a"}),
        ]
        assert isinstance(results, ToolResults)
        assert [(r.call_id, r.content) for r in results.results] == [
            ("call_del", "deleted /etc/x"),
            ("call_read", "text of /tmp/a"),
        ]
        assert isinstance(last, ModelOutput)
        assert last.turn.text == "Cleaned up."
        assert first.turn.usage is not None
        assert (first.turn.usage.input_tokens, first.turn.usage.output_tokens) == (20, 10)
        assert run.info["model"] == "gpt-4o"
        assert run.info["workflow"] == "Agent workflow"
        assert run.info["calls_without_arguments"] == 0

    def test_response_spans_take_their_calls_from_the_functions_that_ran(
        self, span_recordings: Path
    ) -> None:
        """Responses API: a response span holds only its id and usage; its calls are the
        function spans after it, with their arguments; the answer's text is not recorded."""
        first, results, last = steps(one_run(span_recordings / "agents_responses.jsonl"))
        assert [(c.name, c.arguments) for c in first.turn.tool_calls] == [
            ("delete_file", {"path": "/etc/x"}),
            ("read_file", {"path": "/tmp/a"}),
        ]
        assert [r.content for r in results.results] == ["deleted /etc/x", "text of /tmp/a"]
        assert not last.turn.tool_calls
        assert last.turn.text == NOT_RECORDED

    def test_without_sensitive_data_calls_have_no_arguments(self, span_recordings: Path) -> None:
        """`trace_include_sensitive_data=False`: names only, arguments counted as not recorded."""
        run = one_run(span_recordings / "agents_chat_no_content.jsonl")
        first, results, _ = steps(run)
        assert [(c.name, c.arguments) for c in first.turn.tool_calls] == [
            ("delete_file", {}),
            ("read_file", {}),
        ]
        assert run.info["calls_without_arguments"] == 2
        assert [r.content for r in results.results] == [NOT_RECORDED, NOT_RECORDED]

    def test_a_failed_model_call_is_no_output(self, span_recordings: Path) -> None:
        """The server refused the second model call: its generation span gives no step, and
        the agent span's error is how the recording ended."""
        run = one_run(span_recordings / "agents_chat_model_fails.jsonl")
        assert [type(s).__name__ for s in steps(run)] == ["ModelOutput", "ToolResults"]
        assert run.end == "error: Error in agent run: Error code: 400 - the model is down"

    def test_one_post_as_a_document_and_one_item_per_line(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """The same post indented as one document, or split one item per line, reads the same."""
        source = span_recordings / "agents_chat.jsonl"
        (post,) = json_lines(source)
        document = tmp_path / "post.json"
        document.write_text(json.dumps(post, indent=2))
        items = tmp_path / "items.jsonl"
        items.write_text("".join(json.dumps(i) + "\n" for i in post["data"]))
        expected = list(one_run(source).steps)
        assert list(one_run(document).steps) == expected
        assert list(one_run(items).steps) == expected


class TestBadItems:
    def test_a_bad_span_names_file_line_and_span(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """One item per line, a start time that is not a time: file, line and span id."""
        (post,) = json_lines(span_recordings / "agents_chat.jsonl")
        span = next(i for i in post["data"] if i.get("span_data", {}).get("type") == "function")
        span["started_at"] = "yesterday"
        path = tmp_path / "items.jsonl"
        path.write_text("".join(json.dumps(i) + "\n" for i in post["data"]))
        number = post["data"].index(span) + 1
        with pytest.raises(TraceError) as caught:
            list(read_runs(path))
        assert str(caught.value) == (
            f"{path}:{number}: {span['id']}: 'started_at' 'yesterday' is not an ISO 8601 time"
        )

    def test_a_bad_span_in_a_document_is_named_by_its_line_index_and_id(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """In one indented post, the error names the line the span's id stands on, the item's
        index and its id."""
        (post,) = json_lines(span_recordings / "agents_chat.jsonl")
        index, span = next(
            (n, i)
            for n, i in enumerate(post["data"])
            if i.get("span_data", {}).get("type") == "generation"
        )
        span["span_data"]["output"] = "not messages"
        path = tmp_path / "post.json"
        path.write_text(json.dumps(post, indent=2))
        number = next(
            n
            for n, text in enumerate(path.read_text().splitlines(), 1)
            if f'"id": "{span["id"]}"' in text
        )
        with pytest.raises(TraceError) as caught:
            list(read_runs(path))
        assert str(caught.value) == (
            f"{path}:{number}: data[{index}]: {span['id']}: "
            "a generation span's 'output' must be a list of messages"
        )

    def test_a_line_that_is_not_an_item(self, span_recordings: Path, tmp_path: Path) -> None:
        """A line of other JSON after the posts is named by its line."""
        path = tmp_path / "mixed.jsonl"
        path.write_text((span_recordings / "agents_chat.jsonl").read_text() + '{"data": 1}\n')
        with pytest.raises(TraceError, match=rf"^{re.escape(str(path))}:2: expected an Agents SDK"):
            list(read_runs(path))


KEYS = st.sampled_from(
    [
        *("object", "trace_id", "started_at", "span_data", "error", "type"),
        *("output", "input", "name", "usage", "model", "data"),
    ]
)


class TestAnyDamage:
    @given(where=st.integers(min_value=0), key=KEYS, value=JSON, top=st.booleans())
    def test_a_damaged_export_reads_or_fails_naming_the_file(
        self,
        span_recordings: Path,
        tmp_path_factory: pytest.TempPathFactory,
        where: int,
        key: str,
        value: Any,
        top: bool,
    ) -> None:
        """Any JSON put in place of an item's field or its span data's: the runs read, or a
        TraceError names the file; nothing else escapes."""
        (post,) = json_lines(span_recordings / "agents_chat.jsonl")
        item = post["data"][where % len(post["data"])]
        target = item if top or "span_data" not in item else item["span_data"]
        target[key] = value
        path = tmp_path_factory.mktemp("damaged") / "export.jsonl"
        path.write_text(json.dumps(post) + "\n")
        failure = read_all(path)
        assert failure is None or failure.startswith(str(path))
