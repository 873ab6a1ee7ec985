"""The replay's JSON decoder gives exactly `json.loads`'s values and errors, msgspec or not.

`agentfsm._replay._json.loads` tries msgspec first and hands every text it
refuses to `json.loads`. These properties compare the two on generated JSON
texts, on the edge cases where the decoders differ (NaN and Infinity, big
integers, lone surrogates, byte-order marks, UTF-16, duplicate keys, deep
nesting) and on bad texts, whose error must be `json`'s own.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm._replay._json import loads
from agentfsm._replay.trajectories import read_runs
from agentfsm._replay.trajectories._io import iter_jsonl, load_json
from agentfsm.exceptions import TraceError


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equals NaN, -0.0 is not 0.0, 1 not 1.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def outcome(decode: Any, text: str | bytes) -> tuple[str, Any]:
    """What a decoder makes of a text: ("value", v) or ("error", (type, message))."""
    try:
        return "value", decode(text)
    except (ValueError, RecursionError) as exc:
        return "error", (type(exc), str(exc))


def agree(text: str | bytes) -> None:
    """Assert that `loads` and `json.loads` give the same value or the same error."""
    mine, theirs = outcome(loads, text), outcome(json.loads, text)
    assert mine[0] == theirs[0], (text, mine, theirs)
    if mine[0] == "value":
        assert same(mine[1], theirs[1]), (text, mine, theirs)
    else:
        assert mine[1] == theirs[1], (text, mine, theirs)


SPECIAL_FLOATS = st.sampled_from(
    [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1e22, 1e23]
)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | SPECIAL_FLOATS
INTEGERS = st.integers() | st.integers(min_value=2**63 - 2, max_value=2**200) | st.just(-(2**64))
# Any code point, lone surrogates included: json.dumps writes them as \ud800 escapes.
STRINGS = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()))
SCALARS = st.none() | st.booleans() | INTEGERS | FLOATS | STRINGS
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(STRINGS, inner, max_size=5),
    max_leaves=30,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str | bytes:
    """A JSON text of a generated value, written in one of the ways a file may hold it."""
    value = draw(VALUES)
    text = json.dumps(
        value,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.none() | st.integers(0, 2)),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])),
    )
    form = draw(st.sampled_from(["str", "utf-8", "utf-8-sig", "utf-16", "utf-32", "newline"]))
    if form == "str":
        return text
    if form == "newline":
        return (text + "\n").encode("utf-8", "surrogatepass")
    return text.encode(form, "surrogatepass")


def duplicate_keys(pairs: list[tuple[str, int]]) -> str:
    """An object text that may name a key twice (json keeps the last value, at the first place)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


class TestFastDecoderEqualsJson:
    """`loads` agrees with `json.loads` on every text, good or bad."""

    @settings(deadline=None)
    @given(json_texts())
    def test_generated_json_texts_decode_to_json_loads_values(self, text: str | bytes) -> None:
        """Every generated JSON text (NaN, huge ints, surrogates, UTF-16) gives json's value."""
        agree(text)

    @settings(deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "é"]), st.integers()), max_size=8))
    def test_duplicate_keys_keep_jsons_last_value_and_first_place(
        self, pairs: list[tuple[str, int]]
    ) -> None:
        """An object naming a key twice decodes with json's value and json's key order."""
        agree(duplicate_keys(pairs))

    @settings(deadline=None)
    @given(json_texts(), st.data())
    def test_damaged_texts_fail_with_jsons_own_error(
        self, text: str | bytes, data: st.DataObject
    ) -> None:
        """A JSON text with bytes cut, inserted or changed gives json's value or json's error."""
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        at = data.draw(st.integers(0, len(raw)))
        kind = data.draw(st.sampled_from(["cut", "insert", "replace", "truncate"]))
        junk = data.draw(
            st.binary(min_size=1, max_size=3)
            | st.sampled_from(
                [b",", b"]", b"}", b'"', b"\\", b"\t", b"\x00", b"\xed\xa0\x80", b"\xef\xbb\xbf"]
            )
        )
        if kind == "cut":
            raw = raw[:at] + raw[at + 1 :]
        elif kind == "insert":
            raw = raw[:at] + junk + raw[at:]
        elif kind == "replace":
            raw = raw[:at] + junk + raw[at + len(junk) :]
        else:
            raw = raw[:at]
        agree(raw)

    @settings(deadline=None)
    @given(st.binary(max_size=40) | st.text(max_size=40))
    def test_arbitrary_bytes_and_text_give_jsons_outcome(self, text: str | bytes) -> None:
        """Random bytes and text give json's value, or json's exception with its message."""
        agree(text)

    @pytest.mark.parametrize(
        "text",
        [
            "NaN",
            "[Infinity, -Infinity]",
            "1e400",
            "-1e400",
            "123456789012345678901234567890",
            "-9223372036854775809",
            '"\\ud800"',
            '"\\udc00\\ud800x"',
            b'"\xed\xa0\x80"',
            b"\xef\xbb\xbf{}",
            '{"a": 1}'.encode("utf-16"),
            "\ufeff{}",
            '{"a":[1,2,]}',
            "01",
            "[.5]",
            '"\t"',
            "{}x",
            "",
            " ",
            b"\xff",
        ],
    )
    def test_edge_cases_where_msgspec_differs_read_as_json_reads_them(
        self, text: str | bytes
    ) -> None:
        """Texts msgspec refuses (or json refuses) come out exactly as json.loads makes them."""
        agree(text)


class TestNesting:
    """Deep texts hit `json.loads`'s recursion limit; readers turn it into a TraceError."""

    @pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ('{"a":', "}"), ('[{"k":', "}]")])
    def test_near_the_limit_a_text_decodes_as_json_or_fails_for_depth(
        self, opener: str, closer: str
    ) -> None:
        """Near the recursion limit, `loads` gives a value or a RecursionError, nothing else."""
        limit = sys.getrecursionlimit()
        for depth in [*range(limit // 2 - 20, limit // 2 + 5), *range(limit - 60, limit + 10)]:
            text = opener * depth + "1" + closer * depth
            kind, what = outcome(loads, text)
            assert kind == "value" or what[0] is RecursionError, (depth, what)

    def test_a_line_nested_far_too_deep_is_a_trace_error(self, tmp_path: Path) -> None:
        """A JSON-lines trajectory line nested 100,000 deep is a TraceError naming its line."""
        path = tmp_path / "deep.jsonl"
        path.write_text(
            '{"role": "user", "content": "hi"}\n' + "[" * 100_000 + "]" * 100_000 + "\n"
        )
        with pytest.raises(TraceError, match=r"deep\.jsonl:2: the JSON nests too deeply"):
            list(iter_jsonl(str(path)))

    def test_a_document_nested_far_too_deep_is_a_trace_error(self, tmp_path: Path) -> None:
        """A whole JSON document nested 100,000 deep is a TraceError, not a RecursionError."""
        path = tmp_path / "deep.json"
        path.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
        with pytest.raises(TraceError, match="nests too deeply"):
            load_json(str(path))


class TestReaders:
    """The trajectory readers read through `loads` and report json's own errors."""

    def test_a_bad_line_reports_jsons_message_and_line(self, tmp_path: Path) -> None:
        """A malformed JSON line is reported with json's message, at its line number."""
        path = tmp_path / "chat.jsonl"
        bad = '{"role": "user" "content": "hi"}'
        path.write_text('{"role": "user", "content": "hi"}\n' + bad + "\n")
        with pytest.raises(json.JSONDecodeError) as expected:
            json.loads(bad)
        with pytest.raises(TraceError) as got:
            list(iter_jsonl(str(path)))
        assert str(got.value) == f"{path}:2: not valid JSON ({expected.value})"

    def test_a_bad_document_reports_jsons_message_and_line(self, tmp_path: Path) -> None:
        """A malformed JSON document names json's line number and message."""
        path = tmp_path / "chat.json"
        text = '[\n{"role": "user", "content": "hi"},\n{"role": "assistant", "content": NaNa}\n]'
        path.write_text(text)
        with pytest.raises(json.JSONDecodeError) as expected:
            json.loads(text)
        with pytest.raises(TraceError) as got:
            load_json(str(path))
        assert (
            str(got.value) == f"{path}:{expected.value.lineno}: not valid JSON ({expected.value})"
        )

    def test_values_only_json_reads_survive_a_replay_read(self, tmp_path: Path) -> None:
        """Lines holding NaN, a lone surrogate and a huge integer read as json reads them."""
        path = tmp_path / "chat.jsonl"
        lines = [
            '{"role": "user", "content": "\\ud800 hello", "n": 123456789012345678901234567890}',
            '{"role": "assistant", "content": "ok", "score": NaN}',
        ]
        path.write_text("\n".join(lines) + "\n")
        read = [obj for _, obj in iter_jsonl(str(path))]
        assert all(same(a, json.loads(b)) for a, b in zip(read, lines, strict=True))
        [run] = list(read_runs(str(path)))
        steps = list(run.steps)
        assert steps[0].text == "\ud800 hello"  # type: ignore[union-attr]


class TestImports:
    """The fast decoder stays off the per-step path."""

    def test_the_controller_and_the_trace_writer_never_import_msgspec(self, tmp_path: Path) -> None:
        """A Controller step and a trace written by TraceWriter leave msgspec unimported."""
        code = (
            "import sys, agentfsm as af\n"
            "from agentfsm._replay.trace import TraceWriter\n"
            "from agentfsm.testing import turn\n"
            f"w = TraceWriter({str(tmp_path / 't.jsonl')!r})\n"
            "c = af.Controller(af.Policy(), observers=[w])\n"
            "c.on_model_output(turn('done'))\n"
            "w.close()\n"
            "print('msgspec' in sys.modules)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == "False"
