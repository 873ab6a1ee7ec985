"""Reading every recorded trajectory format into steps, checked against SOURCES.md's counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm._model.types import ToolCall, ToolResult
from agentfsm._replay.trajectories import (
    FORMATS,
    ModelOutput,
    RecordedRun,
    ToolResults,
    UserMessage,
    expand_paths,
    read_runs,
)
from agentfsm._replay.trajectories._openai import (
    Conventions,
    message_steps,
    result_of,
)
from agentfsm._replay.trajectories._pairing import pair_results, paired_by_rules
from agentfsm.exceptions import TraceError


def _tally(runs: list[RecordedRun]) -> Counter[str]:
    counts: Counter[str] = Counter(runs=len(runs))
    for run in runs:
        for step in run.steps:
            if isinstance(step, ModelOutput):
                counts["turns"] += 1
                counts["calls"] += len(step.turn.tool_calls)
            elif isinstance(step, ToolResults):
                counts["results"] += len(step.results)
                counts["errors"] += sum(r.is_error for r in step.results)
            elif isinstance(step, UserMessage):
                counts["users"] += 1
    return counts


def _read_dir(directory: Path) -> list[RecordedRun]:
    runs: list[RecordedRun] = []
    for path, _ in expand_paths([str(directory)]):
        if Path(path).name != "preds.json":
            runs.extend(read_runs(path))
    return runs


class TestCorpus:
    """Every file of the shared corpus reads, with the statistics of SOURCES.md."""

    def test_tau_bench(self, corpus: Path) -> None:
        """200 runs, 2,454 turns, 1,164 calls and results, 73 `Error` results."""
        runs = list(read_runs(corpus / "tau-bench" / "gpt-4o-airline.json"))
        assert {r.format for r in runs} == {"tau-bench"}
        counts = _tally(runs)
        assert (counts["runs"], counts["turns"], counts["calls"]) == (200, 2454, 1164)
        assert (counts["results"], counts["errors"]) == (1164, 73)

    def test_tau_bench_recorded_ends(self, corpus: Path) -> None:
        """147 runs end with ###STOP###, 48 on a transfer to a human, 2 on a user message."""
        ends = Counter(r.end for r in read_runs(corpus / "tau-bench" / "gpt-4o-airline.json"))
        assert ends["###STOP###"] == 147
        assert ends["tool result: transfer_to_human_agents"] == 48
        assert ends["last message: user"] == 2
        assert sum(n for e, n in ends.items() if str(e).startswith("tool result:")) == 51

    def test_mini_swe_agent(self, corpus: Path) -> None:
        """38 runs, 2,498 turns and calls, 2,470 results of which 224 failed."""
        runs = _read_dir(corpus / "mini-swe-agent-deepseek")
        counts = _tally(runs)
        assert (counts["runs"], counts["turns"], counts["calls"]) == (38, 2498, 2498)
        assert (counts["results"], counts["errors"]) == (2470, 224)
        assert Counter(r.end for r in runs) == {
            "Submitted": 28,
            "InternalServerError": 6,
            "Timeout": 4,
        }

    def test_toolbench(self, corpus: Path) -> None:
        """15 runs: final chains plus two tree walks make 119 turns, 117 calls, 104 results."""
        runs = _read_dir(corpus / "toolbench")
        counts = _tally(runs)
        assert (counts["runs"], counts["turns"], counts["calls"]) == (15, 119, 117)
        assert (counts["results"], counts["errors"]) == (104, 34)
        assert Counter(r.end for r in runs) == {"give_answer": 11, "give_up": 4}
        assert sum(r.info["walked"] == "tree" for r in runs) == 2

    def test_openhands(self, corpus: Path) -> None:
        """4 runs, 14 turns (one per model response id), 11 calls."""
        counts = _tally(_read_dir(corpus / "openhands"))
        assert (counts["runs"], counts["turns"], counts["calls"]) == (4, 14, 11)

    def test_every_trajectory_file_is_read(self, corpus: Path) -> None:
        """Every JSON file but the two preds.json summaries is a trajectory of a known format."""
        files = [p for p, _ in expand_paths([str(corpus)])]
        unknown = []
        for path in files:
            try:
                list(read_runs(path))
            except TraceError:
                unknown.append(Path(path).name)
        assert len(files) == 60
        assert unknown == ["preds.json", "preds.json"]


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _write_lines(path: Path, items: list[Any]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


OPENAI_CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"c": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "w", "arguments": '{"c": 2}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": "rain"},
    {"role": "assistant", "content": "Sunny and rain."},
]

ANTHROPIC_CHAT = [
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "tu1", "name": "w", "input": {"c": 1}},
        ],
        "stop_reason": "tool_use",
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu1", "content": "x", "is_error": True}
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Failed."}]},
]


def _kinds(run: RecordedRun) -> list[str]:
    return [type(step).__name__ for step in run.steps]


class TestMessageLists:
    """Plain OpenAI and Anthropic message lists, as JSON, JSON lines or {"messages": [...]}."""

    @pytest.mark.parametrize("wrap", [lambda m: m, lambda m: {"messages": m}])
    def test_openai_json(self, tmp_path: Path, wrap: Any) -> None:
        """A JSON list, bare or under `messages`, is one OpenAI run; results group per turn."""
        (run,) = read_runs(_write(tmp_path / "c.json", wrap(OPENAI_CHAT)))
        assert run.format == "openai-messages"
        assert _kinds(run) == ["UserMessage", "ModelOutput", "ToolResults", "ModelOutput"]

    def test_openai_jsonl_streams_and_knows_its_end(self, tmp_path: Path) -> None:
        """One message per line reads as one run whose end is known once its steps are read."""
        (run,) = read_runs(_write_lines(tmp_path / "c.jsonl", OPENAI_CHAT))
        assert run.end is None
        steps = list(run.steps)
        assert isinstance(steps[2], ToolResults)
        assert [r.content for r in steps[2].results] == ["sunny", "rain"]
        assert run.end == "last message: assistant"

    def test_jsonl_of_chats(self, tmp_path: Path) -> None:
        """A JSON-lines file of {"messages": [...]} objects is one run per line."""
        path = _write_lines(tmp_path / "c.jsonl", [{"messages": OPENAI_CHAT}] * 3)
        runs = list(read_runs(path))
        assert [r.id for r in runs] == ["0", "1", "2"]

    @pytest.mark.parametrize("jsonl", [False, True])
    def test_anthropic(self, tmp_path: Path, jsonl: bool) -> None:
        """tool_use and tool_result blocks become a call and an error result paired with it."""
        if jsonl:
            path = _write_lines(tmp_path / "a.jsonl", ANTHROPIC_CHAT)
        else:
            path = _write(tmp_path / "a.json", ANTHROPIC_CHAT)
        (run,) = read_runs(path)
        assert run.format == "anthropic-messages"
        steps = list(run.steps)
        assert isinstance(steps[1], ModelOutput)
        assert steps[1].turn.tool_calls[0].arguments == {"c": 1}
        assert isinstance(steps[2], ToolResults)
        assert steps[2].results[0].is_error


class TestBadInput:
    """Unknown formats and malformed lines are named precisely."""

    def test_unknown_format_names_every_format_tried(self, tmp_path: Path) -> None:
        """A JSON document of no known shape lists the formats that were tried."""
        path = _write(tmp_path / "x.json", {"hello": "world"})
        with pytest.raises(TraceError, match="unknown trajectory format") as caught:
            read_runs(path)
        assert all(name in str(caught.value) for name in FORMATS)

    def test_malformed_message_line(self, tmp_path: Path) -> None:
        """A broken line in a JSON-lines chat names the file and line."""
        path = tmp_path / "c.jsonl"
        path.write_text('{"role": "user", "content": "hi"}\n{"role": \n', encoding="utf-8")
        (run,) = read_runs(path)
        with pytest.raises(TraceError, match=r"c\.jsonl:2: not valid JSON"):
            list(run.steps)

    def test_malformed_document(self, tmp_path: Path) -> None:
        """A broken JSON document names the line where parsing failed."""
        path = tmp_path / "d.json"
        path.write_text('[\n {"role": "user",\n oops}\n]', encoding="utf-8")
        with pytest.raises(TraceError, match=r"d\.json:3: not valid JSON"):
            read_runs(path)


def _call(call_id: str, name: str = "f") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={})


def _result(call_id: str, content: str) -> ToolResult:
    return ToolResult(call_id=call_id, content=content)


class TestPairResults:
    """Recorded results meet the calls the controller executes."""

    def test_reused_ids_pair_by_position(self) -> None:
        """When two calls share an id (tau-bench), results pair by position."""
        calls = [_call("same"), _call("same")]
        executed = [_call("same"), _call("same#2")]
        paired, missing = pair_results(
            calls, executed, (_result("same", "a"), _result("same", "b"))
        )
        assert [(r.call_id, r.content) for r in paired] == [("same", "a"), ("same#2", "b")]
        assert missing == 0

    def test_unique_ids_pair_by_id(self) -> None:
        """Results recorded out of order still reach the call whose id they name."""
        calls = [_call("a"), _call("b")]
        paired, _ = pair_results(calls, calls, (_result("b", "B"), _result("a", "A")))
        assert {r.call_id: r.content for r in paired} == {"a": "A", "b": "B"}

    def test_missing_results_are_counted(self) -> None:
        """An executed call with no recorded result is counted, not invented."""
        calls = [_call("a"), _call("b")]
        paired, missing = pair_results(calls, calls, (_result("a", "A"),))
        assert len(paired) == 1
        assert missing == 1

    def test_a_result_naming_its_call_is_passed_on_as_it_is(self) -> None:
        """A result whose id is the executed call's is not copied; another is re-addressed whole."""
        calls = [_call("a"), _call("b")]
        executed = [_call("a"), _call("b#2")]
        first = ToolResult(call_id="a", content=["x"], is_error=True, name="f")
        second = ToolResult(call_id="b", content={"k": 1}, name="g")
        paired, _ = pair_results(calls, executed, (first, second))
        assert paired[0] is first
        assert paired[1] == ToolResult(call_id="b#2", content={"k": 1}, name="g")

    def test_calls_not_executed_take_no_result(self) -> None:
        """A call the controller answered itself gets no recorded result."""
        calls = [_call("a", "bad"), _call("b", "good")]
        paired, missing = pair_results(calls, [calls[1]], (_result("a", "A"), _result("b", "B")))
        assert [(r.call_id, r.content) for r in paired] == [("b", "B")]
        assert missing == 0


IDS = st.sampled_from(["a", "b", "c", ""])


@st.composite
def pairings(draw: st.DrawFn) -> tuple[list[ToolCall], list[ToolCall], tuple[ToolResult, ...]]:
    """A turn's calls, the calls executed, and recorded results: often all in order."""
    calls = [_call(i, draw(st.sampled_from(["f", "g"]))) for i in draw(st.lists(IDS, max_size=4))]
    if draw(st.booleans()):
        executed = list(calls)
        results = tuple(_result(c.id, f"r{n}") for n, c in enumerate(calls))
    else:
        kept: list[bool] = [draw(st.booleans()) for _ in calls]
        executed = [c for c, keep in zip(calls, kept, strict=True) if keep]
        readdress: bool = draw(st.booleans())
        if executed and readdress:
            executed[0] = _call(executed[0].id + "#2", executed[0].name)
        results = tuple(_result(i, "r") for i in draw(st.lists(IDS, max_size=4)))
    return calls, executed, results


class TestPairResultsShortcut:
    """Results in call order skip the pairing rules, and get what the rules would give."""

    @settings(deadline=None)
    @given(pairings())
    def test_the_shortcut_pairs_as_the_rules_do(
        self, case: tuple[list[ToolCall], list[ToolCall], tuple[ToolResult, ...]]
    ) -> None:
        """For any calls, executed calls and results, `pair_results` equals the full rules."""
        calls, executed, results = case
        assert pair_results(calls, executed, results) == paired_by_rules(calls, executed, results)

    def test_results_in_order_are_passed_on_as_they_are(self) -> None:
        """Result i naming call i, executed as recorded, is passed on itself, none missing."""
        calls = [_call("a"), _call("a")]
        results = (_result("a", "1"), _result("a", "2"))
        paired, missing = pair_results(calls, list(calls), results)
        assert paired[0] is results[0]
        assert paired[1] is results[1]
        assert missing == 0


class TestExpandPaths:
    """Files, directories and globs."""

    def test_directories_recurse_and_globs_expand(self, tmp_path: Path) -> None:
        """A directory yields its JSON files recursively; a glob yields its matches as named."""
        (tmp_path / "d" / "e").mkdir(parents=True)
        for name in ["d/a.json", "d/e/b.jsonl", "d/e/c.txt"]:
            (tmp_path / name).write_text("[]")
        found = expand_paths([str(tmp_path / "d"), str(tmp_path / "d" / "*.json")])
        assert [(Path(p).name, explicit) for p, explicit in found] == [
            ("a.json", False),
            ("b.jsonl", False),
            ("a.json", True),
        ]


class TestReadingShortcuts:
    """What the readers build unvalidated equals what validation builds."""

    @pytest.mark.parametrize(
        ("content", "is_error", "name"),
        [
            ("", False, None),
            ("out", True, "f"),
            (["a", {"b": 1}], False, None),
            ({"k": []}, True, ""),
        ],
    )
    def test_results_built_unvalidated_equal_validated_ones(
        self, content: Any, is_error: bool, name: str | None
    ) -> None:
        """`result_of` builds the same ToolResult that validation builds from checked values."""
        built = result_of("c1", content, is_error, name)
        checked = ToolResult(call_id="c1", content=content, is_error=is_error, name=name)
        assert built == checked
        assert built.model_dump() == checked.model_dump()

    def test_an_unreadable_message_is_named_by_its_index(self) -> None:
        """A message no normalizer reads names its run and index in a document."""
        unreadable = Conventions(body=lambda message: {"neither": "body nor event"})
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]
        steps = message_steps("t.json", enumerate(messages), unreadable, prefix="run 3 ")
        with pytest.raises(TraceError, match=r"^t\.json: run 3 message 1: PayloadError"):
            list(steps)

    def test_an_unreadable_message_line_is_named_by_its_line(self) -> None:
        """The same message read from JSON lines names the file and line number."""
        unreadable = Conventions(body=lambda message: {"neither": "body nor event"})
        steps = message_steps("t.jsonl", [(7, {"role": "assistant", "content": "x"})], unreadable)
        with pytest.raises(TraceError, match=r"^t\.jsonl:7: PayloadError"):
            list(steps)
