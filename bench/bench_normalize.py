"""Median cost of `normalize` on typical payloads and on every corpus file.

Run: `python bench/bench_normalize.py` from the repo root. Targets: a one-call
OpenAI chat body <= 10 µs, a 20-chunk OpenAI stream <= 50 µs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentfsm.providers import normalize  # noqa: E402  (needs the repo on sys.path)

CORPUS = ROOT / ".." / "shared" / "corpus" / "providers"

ONE_CALL: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_capital", "arguments": '{"country":"England"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 104, "completion_tokens": 16, "total_tokens": 120},
}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def twenty_chunks() -> list[dict[str, Any]]:
    """A 20-chunk stream: role, 17 argument fragments of one call, finish, usage."""
    fragments = ['{"', "country", '":"', "Eng", "land", '",', '"', "units", '":"', *'metric"}']
    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}
    chunks = [_chunk({"role": "assistant", "tool_calls": [start]})]
    for piece in fragments[:17]:
        chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    chunks.append(_chunk({}, "tool_calls"))
    chunks.append({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}})
    return chunks


def median_us(work: Callable[[], object], runs: int = 7, min_time: float = 0.05) -> float:
    """Median microseconds per call over `runs` timed batches."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            work()
        if time.perf_counter() - start >= min_time / 5:
            break
        number *= 2
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(number):
            work()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def corpus_payload(path: Path) -> Any:
    """A corpus file as a body dict or a list of event dicts."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def main() -> None:
    """Print the headline figures, then one line per corpus file."""
    stream = twenty_chunks()
    assert len(stream) == 20
    assert normalize(ONE_CALL).tool_calls[0].complete
    assert normalize(stream).tool_calls[0].complete
    body = median_us(lambda: normalize(ONE_CALL))
    chunks = median_us(lambda: normalize(stream))
    print(f"openai chat body, 1 tool call : {body:8.2f} µs  (target <= 10)")
    print(f"openai stream, 20 chunks      : {chunks:8.2f} µs  (target <= 50)")
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS.resolve()}; per-file figures skipped")
        return
    print("\nper corpus file (median µs; streams as lists of event dicts):")
    for path in sorted(CORPUS.rglob("*.json*")):
        payload = corpus_payload(path)
        cost = median_us(lambda payload=payload: normalize(payload), runs=5, min_time=0.02)
        print(f"{cost:10.2f}  {path.relative_to(CORPUS).as_posix()}")


if __name__ == "__main__":
    main()
