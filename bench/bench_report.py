"""How fast a run report is built and opened: a 500-turn run, and the whole trajectory corpus.

Run: `python bench/bench_report.py` from the repo root (needs Graphviz, Debian's Chromium
and the dev extra's Playwright). Target of issue 12: a run of 500 turns opens in under a
second. "Opens" is measured in the browser: from navigation start until the page's script
has selected the first step (the page is usable), as the median of 5 loads.
Writes bench/RESULTS-report.md.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentfsm import Action, Controller, Policy, ToolResult  # noqa: E402
from agentfsm._replay.trace import TraceWriter  # noqa: E402
from agentfsm._report import build  # noqa: E402
from agentfsm.testing import call, turn  # noqa: E402

CORPUS = ROOT / ".." / "shared" / "corpus" / "trajectories"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def long_run(path: Path, turns: int) -> Path:
    """A traced run of `turns` tool rounds with 3 KB of tool output each, then an answer."""
    with TraceWriter(path) as writer:
        ctl = Controller(Policy(max_turns=turns + 1), observers=[writer])
        for i in range(turns):
            ctl.on_model_output(turn("", [call("read", {"page": i}, id=f"c{i}")]))
            ctl.on_tool_results([ToolResult(call_id=f"c{i}", content=f"line {i}\n" * 400)])
        assert ctl.on_model_output(turn("done")).action is Action.FINAL
    return path


def open_times(html: Path, loads: int = 5) -> list[float]:
    """Milliseconds from navigation start until the first step is selected, per load."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        for _ in range(loads):
            page = browser.new_page()
            page.goto(html.as_uri())
            page.wait_for_function("document.body.dataset.step !== undefined")
            times.append(page.evaluate("performance.now()"))
            page.close()
        browser.close()
    return times


def measure(label: str, paths: list[str], out: Path) -> str:
    started = time.perf_counter()
    report = build(paths, Policy(max_turns=1000))
    built = time.perf_counter() - started
    out.write_text(report.html, encoding="utf-8")
    steps = sum(len(v.steps) for v in report.runs)
    opened = open_times(out)
    return (
        f"| {label} | {len(report.runs)} | {steps:,} | {len(report.html) / 1e6:.1f} MB | "
        f"{built:.2f} s | {statistics.median(opened):.0f} ms (max {max(opened):.0f}) |"
    )


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trace = long_run(folder / "long.jsonl", 500)
        rows.append(measure("one run, 500 turns, 3 KB per result", [str(trace)], folder / "a.html"))
        rows.append(
            measure("tau-bench corpus (200 runs)", [str(CORPUS / "tau-bench")], folder / "b.html")
        )
        rows.append(measure("whole trajectory corpus", [str(CORPUS)], folder / "c.html"))
    text = "\n".join(
        [
            "# Report: build and open times",
            "",
            "`python bench/bench_report.py`; Chromium (Debian) headless, Playwright.",
            "Open = navigation start until the page's script has selected the first step.",
            "Policy: the defaults with max_turns=1000, so every recorded turn is replayed.",
            "",
            "| input | runs | steps | page | build | open (median of 5) |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    (ROOT / "bench" / "RESULTS-report.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
