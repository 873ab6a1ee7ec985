"""OpenTelemetry GenAI spans (OTLP JSON), read from real pydantic-ai recordings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._replay.engine import replay_run
from agentfsm._replay.trajectories import (
    FORMATS,
    ModelOutput,
    ToolResults,
    read_runs,
)
from agentfsm.exceptions import TraceError
from tests.replay.spans import JSON, assert_read_blind, json_lines, one_run, read_all, steps

pytestmark = pytest.mark.xdist_group("span-recordings")  # one worker records them once

GUARDED = af.Policy(permission_rules=["deny delete_file(path^=/etc/*)"])


def spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for r in doc["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]


class TestPydanticAiSpans:
    def test_calls_results_and_answer_are_read_from_the_spans(self, span_recordings: Path) -> None:
        """Format 5 with content: the calls with their arguments, the results the tools gave,
        the final answer, usage and model, in one run per trace."""
        run = one_run(span_recordings / "pydantic_ai_v5.jsonl")
        assert run.format == "otel-genai"
        assert "otel-genai" in FORMATS
        assert re.fullmatch(r"[0-9a-f]{32}", run.id)
        first, results, last = steps(run)
        assert isinstance(first, ModelOutput)
        assert isinstance(last, ModelOutput)
        calls = [(c.id, c.name, c.arguments) for c in first.turn.tool_calls]
        assert calls == [
            ("call_del", "delete_file", {"path": "/etc/x"}),
            ("call_read", "read_file", {"path": "/tmp/a"}),
        ]
        assert isinstance(results, ToolResults)
        assert [(r.call_id, r.content, r.is_error) for r in results.results] == [
            ("call_del", "deleted /etc/x", False),
            ("call_read", "text of /tmp/a", False),
        ]
        assert last.turn.text == "Cleaned up."
        assert not last.turn.tool_calls
        assert first.turn.usage is not None
        assert first.turn.usage.input_tokens > 0
        assert first.turn.model == "function:model:"
        assert run.info["calls_without_arguments"] == 0
        assert run.info["agent"] == "agent"

    def test_the_older_format_reads_the_same(self, span_recordings: Path) -> None:
        """Format 2 (`tool_arguments`, `tool_response` on the tool spans) gives the same steps."""
        new = steps(one_run(span_recordings / "pydantic_ai_v5.jsonl"))
        old = steps(one_run(span_recordings / "pydantic_ai_v2.jsonl"))
        assert [type(s) for s in old] == [type(s) for s in new]
        assert old[0].turn.tool_calls == new[0].turn.tool_calls
        assert [r.content for r in old[1].results] == [r.content for r in new[1].results]

    def test_base64_ids_read_as_hex(self, span_recordings: Path) -> None:
        """protobuf's JSON mapping writes ids in base64; they are read as the hex OTLP JSON uses."""
        path = span_recordings / "pydantic_ai_base64_ids.jsonl"
        raw = spans(json_lines(path)[0])[0]["traceId"]
        assert not re.fullmatch(r"[0-9a-f]{32}", raw)
        run = one_run(path)
        assert re.fullmatch(r"[0-9a-f]{32}", run.id)
        assert len(steps(run)) == 3

    def test_a_whole_document_reads_as_its_lines(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """All requests merged into one indented document: the same run, the same steps."""
        docs = json_lines(span_recordings / "pydantic_ai_v5.jsonl")
        merged = {"resourceSpans": [r for d in docs for r in d["resourceSpans"]]}
        path = tmp_path / "export.json"
        path.write_text(json.dumps(merged, indent=2))
        assert steps(one_run(path)) == steps(one_run(span_recordings / "pydantic_ai_v5.jsonl"))

    def test_without_content_calls_have_no_arguments_and_are_counted(
        self, span_recordings: Path
    ) -> None:
        """Content capture off: the calls are read with no arguments (never invented ones),
        counted in the run's info; results and answer read as not recorded."""
        run = one_run(span_recordings / "pydantic_ai_v5_no_content.jsonl")
        assert_read_blind(run)

    def test_a_rule_on_an_unrecorded_argument_asks(self, span_recordings: Path) -> None:
        """With content the deny rule removes the delete; without it the rule cannot be
        evaluated, so the call is asked, never allowed."""
        full = replay_run(one_run(span_recordings / "pydantic_ai_v5.jsonl"), GUARDED)
        assert full.decisions[0].action == "execute_tools"
        assert "1 valid tool call: read_file" in full.decisions[0].reason
        blind = replay_run(one_run(span_recordings / "pydantic_ai_v5_no_content.jsonl"), GUARDED)
        assert blind.decisions[0].action == "ask_human"
        assert "names argument 'path', which this call does not have" in blind.decisions[0].reason


class TestFailures:
    def test_a_failed_tool_and_run_carry_the_exception(self, span_recordings: Path) -> None:
        """A tool that raised: its span's error status and exception event make a failed
        result saying what was raised; the agent run's error is how the recording ended."""
        run = one_run(span_recordings / "pydantic_ai_tool_fails.jsonl")
        first, results = steps(run)
        assert [c.arguments for c in first.turn.tool_calls] == [
            {"path": "/etc/missing"},
            {"path": "/tmp/a"},
        ]
        failed, read = results.results
        assert failed.is_error
        assert failed.content.startswith("FileNotFoundError: [Errno 2] No such file or directory")
        assert not read.is_error
        assert run.end is not None
        assert run.end.startswith("error: FileNotFoundError")

    def test_a_failed_model_call_is_no_output(self, span_recordings: Path) -> None:
        """The second model call raised: its span gives no step (it is not an empty answer);
        the run's error is how the recording ended, and replay is still waiting at the end."""
        run = one_run(span_recordings / "pydantic_ai_model_fails.jsonl")
        assert [type(s).__name__ for s in steps(run)] == ["ModelOutput", "ToolResults"]
        assert run.end == "error: ConnectionError: the model is down"
        replayed = replay_run(one_run(span_recordings / "pydantic_ai_model_fails.jsonl"), None)
        assert replayed.exit_reason is None
        assert replayed.recorded_end == "error: ConnectionError: the model is down"

    def test_spans_without_genai_ones_are_an_error(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """Only the agent-run spans kept: the file is refused, not read as no runs at all."""
        docs = json_lines(span_recordings / "pydantic_ai_v5.jsonl")
        for doc in docs:
            for resource in doc["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    scope["spans"] = [s for s in scope["spans"] if "parentSpanId" not in s]
        path = tmp_path / "agent-runs.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
        with pytest.raises(TraceError) as caught:
            list(read_runs(path))
        assert str(caught.value) == (
            f"{path}: the file: 1 trace(s) and not one GenAI model or tool span "
            "(gen_ai.operation.name chat, generate_content, text_completion or execute_tool)"
        )


class TestAgentsSdkOtelSpans:
    """Spans from OpenTelemetry's own Agents SDK instrumentation, which writes the model's
    calls into `gen_ai.output.messages` as text and gives its tool spans no call id."""

    @pytest.mark.parametrize("name", ["agents_otel_chat.jsonl", "agents_otel_responses.jsonl"])
    def test_the_calls_are_the_tool_spans_that_follow(
        self, name: str, span_recordings: Path
    ) -> None:
        """An output naming no call, followed by tool spans: those spans are its calls, with
        their arguments; their results follow; the last output is the answer."""
        run = one_run(span_recordings / name)
        first, results, last = steps(run)
        assert [(c.name, c.arguments) for c in first.turn.tool_calls] == [
            ("delete_file", {"path": "/etc/x"}),
            ("read_file", {"path": "/tmp/a"}),
        ]
        assert [r.content for r in results.results] == ["deleted /etc/x", "text of /tmp/a"]
        assert last.turn.text == "Cleaned up."
        assert not last.turn.tool_calls
        assert run.info["calls_without_arguments"] == 0

    def test_without_content_the_tool_spans_give_names_only(self, span_recordings: Path) -> None:
        """Content capture off: no output messages; the tool spans give the calls' names, the
        arguments are counted as not recorded, and the answer's text is not recorded."""
        run = one_run(span_recordings / "agents_otel_no_content.jsonl")
        assert_read_blind(run)


def broken(path: Path, tmp_path: Path, change: Any, *, line: int = 0) -> Path:
    """A copy of a real recording with one request changed by `change(request)`."""
    docs = json_lines(path)
    change(docs[line])
    out = tmp_path / "broken.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return out


def model_span(doc: dict[str, Any]) -> dict[str, Any]:
    return next(
        s
        for s in spans(doc)
        if any(a["value"].get("stringValue") == "chat" for a in s.get("attributes", []))
    )


def set_attribute(span: dict[str, Any], key: str, value: dict[str, Any]) -> None:
    for attribute in span["attributes"]:
        if attribute["key"] == key:
            attribute["value"] = value


class TestBadSpans:
    def test_a_broken_attribute_names_file_line_and_span(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """A token count that is not a number: the error names the file, the line and the span."""
        source = span_recordings / "pydantic_ai_v5.jsonl"
        number = next(i for i, d in enumerate(json_lines(source)) if "chat" in json.dumps(d))

        def change(doc: dict[str, Any]) -> None:
            set_attribute(model_span(doc), "gen_ai.usage.input_tokens", {"intValue": "many"})

        path = broken(source, tmp_path, change, line=number)
        with pytest.raises(TraceError) as caught:
            list(read_runs(path))
        message = str(caught.value)
        assert message.startswith(f"{path}:{number + 1}: resourceSpans[0].scopeSpans[0].spans[0]")
        assert "'gen_ai.usage.input_tokens'" in message
        assert "'many'" in message
        assert caught.value.details["line"] == number + 1

    def test_output_messages_that_are_not_json(self, span_recordings: Path, tmp_path: Path) -> None:
        """`gen_ai.output.messages` cut short: named, with its line; --keep-going reads on."""
        source = span_recordings / "pydantic_ai_v5.jsonl"
        number = next(i for i, d in enumerate(json_lines(source)) if "chat" in json.dumps(d))

        def change(doc: dict[str, Any]) -> None:
            set_attribute(model_span(doc), "gen_ai.output.messages", {"stringValue": '[{"ro'})

        path = broken(source, tmp_path, change, line=number)
        with pytest.raises(
            TraceError,
            match=rf"^{re.escape(str(path))}:{number + 1}: .*"
            r"'gen_ai.output.messages' is not valid JSON",
        ):
            list(read_runs(path))
        errors: list[TraceError] = []
        (run,) = list(read_runs(path, errors))
        assert len(errors) == 1
        assert len(list(run.steps)) == 2

    def test_a_line_that_is_not_otlp(self, span_recordings: Path, tmp_path: Path) -> None:
        """A line of other JSON among the requests is named by its line."""
        path = tmp_path / "mixed.jsonl"
        text = (span_recordings / "pydantic_ai_v5.jsonl").read_text()
        path.write_text(text + '{"resource": "not a request"}\n')
        count = len(text.splitlines())
        with pytest.raises(
            TraceError, match=rf"^{re.escape(str(path))}:{count + 1}: expected an OTLP"
        ):
            list(read_runs(path))

    def test_a_bad_span_in_a_document_is_named_by_its_line_place_and_id(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """In one indented document, the error names the line the span's id stands on, the
        span's place and its id."""
        doc = json_lines(span_recordings / "pydantic_ai_v5.jsonl")[0]
        span = spans(doc)[0]
        span["startTimeUnixNano"] = "soon"
        path = tmp_path / "export.json"
        path.write_text(json.dumps(doc, indent=2))
        number = next(
            n
            for n, text in enumerate(path.read_text().splitlines(), 1)
            if f'"spanId": "{span["spanId"]}"' in text
        )
        with pytest.raises(TraceError) as caught:
            list(read_runs(path))
        assert str(caught.value) == (
            f"{path}:{number}: resourceSpans[0].scopeSpans[0].spans[0] (span {span['spanId']}): "
            "'startTimeUnixNano' 'soon' is not a whole number"
        )

    def test_a_bad_output_in_a_document_is_named_by_its_line(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """A model span's output found bad while its steps are built: its line too."""
        docs = json_lines(span_recordings / "pydantic_ai_v5.jsonl")
        merged = {"resourceSpans": [r for d in docs for r in d["resourceSpans"]]}
        model = model_span(merged)
        set_attribute(model, "gen_ai.output.messages", {"stringValue": '[{"parts": 3}]'})
        path = tmp_path / "export.json"
        path.write_text(json.dumps(merged, indent=2))
        number = next(
            n
            for n, text in enumerate(path.read_text().splitlines(), 1)
            if f'"spanId": "{model["spanId"]}"' in text
        )
        with pytest.raises(TraceError) as caught:
            list(read_runs(path))
        assert str(caught.value).startswith(f"{path}:{number}: resourceSpans[")
        assert caught.value.details["line"] == number


KEYS = st.sampled_from(
    ["value", "stringValue", "intValue", "arrayValue", "kvlistValue", "key", "attributes"]
)


class TestAnyDamage:
    @given(
        name=st.sampled_from(["pydantic_ai_v5.jsonl", "pydantic_ai_v5_no_content.jsonl"]),
        where=st.integers(min_value=0),
        key=KEYS,
        value=JSON,
        whole=st.booleans(),
        as_text=st.booleans(),
    )
    def test_a_damaged_recording_reads_or_fails_naming_the_file(
        self,
        span_recordings: Path,
        tmp_path_factory: pytest.TempPathFactory,
        name: str,
        where: int,
        key: str,
        value: Any,
        whole: bool,
        as_text: bool,
    ) -> None:
        """Any JSON (or JSON text, as the message attributes hold) put in place of a span, an
        attribute or one of its parts: the runs read, or a TraceError names the file; nothing
        else escapes."""
        value = json.dumps(value) if as_text else value
        docs = json_lines(span_recordings / name)
        every = [s for d in docs for s in spans(d)]
        span = every[where % len(every)]
        if whole:
            span.clear()
            span.update({key: value})
        else:
            attribute = span["attributes"][where % len(span["attributes"])]
            target = attribute if key in ("value", "key") else attribute["value"]
            target[key] = value
        path = tmp_path_factory.mktemp("damaged") / "spans.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
        failure = read_all(path)
        assert failure is None or failure.startswith(str(path))

    @given(value=JSON, depth=st.integers(min_value=0, max_value=3))
    def test_any_output_messages_read_or_fail_naming_the_file(
        self,
        span_recordings: Path,
        tmp_path_factory: pytest.TempPathFactory,
        value: Any,
        depth: int,
    ) -> None:
        """Any JSON at any depth of `gen_ai.output.messages` (the list, a message, its parts, a
        part): the runs read, or a TraceError names the file."""
        shaped = [
            value,
            [value],
            [{"role": "assistant", "parts": value}],
            [{"role": "assistant", "parts": [value]}],
        ][depth]
        docs = json_lines(span_recordings / "pydantic_ai_v5.jsonl")
        merged = {"resourceSpans": [r for d in docs for r in d["resourceSpans"]]}
        set_attribute(
            model_span(merged), "gen_ai.output.messages", {"stringValue": json.dumps(shaped)}
        )
        path = tmp_path_factory.mktemp("damaged") / "export.json"
        path.write_text(json.dumps(merged))
        failure = read_all(path)
        assert failure is None or failure.startswith(str(path))
