"""Fuzzed payloads and streams: only agentfsm's own errors ever escape.

10,000 examples in all (the issue's target), drawn from arbitrary JSON,
provider-shaped bodies, mutations of the real corpus, SSE/NDJSON text with
junk and bytes cut anywhere, and hostile sizes and depths. Each goes through
`normalize`, `detect_provider`, a `StreamAccumulator` and a Controller; the
only exception allowed out is an `AgentFSMError` subclass, and every turn that
comes back is a valid `ModelTurn`. `bench/bench_fuzz_worst.py` measures the
cost of the worst inputs found here.
"""

from __future__ import annotations

import contextlib
import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import ModelTurn
from agentfsm.exceptions import AgentFSMError
from agentfsm.providers import StreamAccumulator, detect_provider, normalize
from tests.providers.test_fuzz import FIELDS, JSON, SHAPED

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"
FILES = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.json*"))
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@cache
def corpus(name: str) -> Any:
    """A corpus payload: a body, or a stream as a list of events."""
    text = (CORPUS / name).read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def survive(payload: object) -> None:
    """Feed `payload` everywhere it may go; only AgentFSMError subclasses may escape."""
    try:
        turn = normalize(payload)
    except AgentFSMError:
        turn = None
    if turn is not None:
        assert isinstance(turn, ModelTurn)
        ModelTurn.model_validate(turn.model_dump())
    with contextlib.suppress(AgentFSMError):
        detect_provider(payload)
    with contextlib.suppress(AgentFSMError):
        af.Controller().on_model_output(payload)


def feed(chunks: list[Any]) -> None:
    """Feed chunks one at a time, reading the turn mid-stream and at the end."""
    accumulator = StreamAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
        with contextlib.suppress(AgentFSMError):
            accumulator.turn()
    accumulator.end()
    with contextlib.suppress(AgentFSMError):
        accumulator.turn()


def _mutate(value: Any, path: list[int], replacement: Any) -> Any:
    """Replace the node that `path` picks (indexes taken modulo each container's size)."""
    root = copy.deepcopy(value)
    node = root
    for step in path:
        children = list(node) if isinstance(node, dict) else node
        if not isinstance(node, dict | list) or not children:
            break
        key = children[step % len(children)] if isinstance(node, dict) else step % len(node)
        child = node[key]
        if not isinstance(child, dict | list):
            node[key] = replacement
            return root
        node = child
    if isinstance(node, dict):
        node[f"k{len(path)}"] = replacement
    elif isinstance(node, list):
        node.append(replacement)
    return root


def _deep(depth: int, leaf: str) -> str:
    return "[" * depth + leaf + "]" * depth


HOSTILE = st.one_of(
    st.integers(1, 3_000).map(lambda n: _deep(n, "1")),
    st.integers(1, 3_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(0, 400_000_000).map(
        lambda i: {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {
                                    "name": "f",
                                    "partialArgs": [{"jsonPath": f"$.a[{i}]", "stringValue": "x"}],
                                    "willContinue": True,
                                }
                            }
                        ]
                    }
                }
            ]
        }
    ),
    st.integers(1, 5_000).map(
        lambda n: {
            "choices": [
                {
                    "message": {
                        "tool_calls": [
                            {"id": "c", "function": {"name": "f", "arguments": _deep(n, "")}}
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    ),
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: "data: " + t + "\n\n"),
)


class TestFuzzedInputs:
    """Arbitrary, shaped, mutated and hostile payloads and streams."""

    @SETTINGS
    @given(st.one_of(JSON, SHAPED, st.lists(SHAPED | JSON, max_size=5)))
    def test_shaped_payloads_raise_only_agentfsm_errors(self, payload: object) -> None:
        """Arbitrary and provider-shaped JSON: a valid turn or an AgentFSMError."""
        survive(payload)

    @SETTINGS
    @given(
        st.sampled_from(FILES),
        st.lists(st.integers(min_value=0, max_value=50), max_size=8),
        JSON | st.sampled_from(["", "null", "{", "[]", None, -1, 1e308, True]),
    )
    def test_corpus_mutations_raise_only_agentfsm_errors(
        self, name: str, path: list[int], replacement: Any
    ) -> None:
        """A real payload with one field replaced: a valid turn or an AgentFSMError."""
        survive(_mutate(corpus(name), path, replacement))

    @SETTINGS
    @given(
        st.sampled_from([f for f in FILES if f.endswith(".jsonl")]),
        st.lists(st.integers(min_value=0, max_value=1 << 14), max_size=6),
        st.lists(st.binary(max_size=8), max_size=3),
        st.booleans(),
    )
    def test_streams_cut_and_spiked_raise_only_agentfsm_errors(
        self, name: str, points: list[int], junk: list[bytes], as_text: bool
    ) -> None:
        """SSE bytes of a real stream, cut anywhere with junk spliced in, fed chunk by chunk."""
        text = "".join(f"data: {json.dumps(event)}\n\n" for event in corpus(name)).encode()
        cuts = sorted({min(p, len(text)) for p in points})
        chunks: list[Any] = []
        start = 0
        for number, edge in enumerate(cuts):
            chunks.append(text[start:edge])
            if number < len(junk):
                chunks.append(junk[number])
            start = edge
        chunks.append(text[start:])
        if as_text:
            chunks = [c.decode("utf-8", "replace") for c in chunks]
        feed(chunks)
        survive(chunks)

    @SETTINGS
    @given(HOSTILE | st.lists(HOSTILE, max_size=3) | st.dictionaries(FIELDS, HOSTILE, max_size=3))
    def test_hostile_sizes_and_depths_raise_only_agentfsm_errors(self, payload: object) -> None:
        """Deep nesting, huge jsonPath indexes, binary and junk SSE: bounded, clear errors."""
        survive(payload)

    @SETTINGS
    @given(st.lists(st.text(max_size=40) | st.binary(max_size=40), max_size=8))
    def test_raw_text_chunks_raise_only_agentfsm_errors(self, chunks: list[str | bytes]) -> None:
        """Any sequence of text or bytes chunks: a valid turn or an AgentFSMError."""
        feed(list(chunks))
        survive(list(chunks))
