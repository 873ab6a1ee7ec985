"""Replay throughput, process-pool scaling and peak memory on a large synthetic trace.

    python bench/bench_replay.py                  # corpus throughput, 1 vs 2 workers, 200 MB trace
    python bench/bench_replay.py --trace-mb 1024  # the 1 GB-class memory check
    python bench/bench_replay.py --skip-rss

Prints one JSON object of figures. Targets (issue 4): >= 30,000 steps/s on one
core over the trajectory corpus; < 200 MB peak RSS replaying a 1 GB trace.
A "step" is one recorded step fed to the controller (a model output, a tool
results batch, a user message); model outputs alone are reported beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from agentfsm._cli._replay_jobs import Job, replay_file
from agentfsm._replay.engine import replay_run
from agentfsm._replay.trace import TraceWriter
from agentfsm._replay.trajectories import ModelOutput, RecordedRun, expand_paths, read_runs

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "trajectories"
TARGET_STEPS_PER_S = 30_000
TARGET_RSS_MB = 200


def corpus_files() -> list[str]:
    """Every trajectory file of the shared corpus (the two preds.json summaries left out)."""
    files = [p for p, _ in expand_paths([str(CORPUS)])]
    return [p for p in files if Path(p).name != "preds.json"]


def _runs_in_memory(files: list[str]) -> tuple[list[RecordedRun], int]:
    runs, steps = [], 0
    for path in files:
        for run in read_runs(path):
            listed = list(run.steps)
            run.steps, steps = listed, steps + len(listed)
            runs.append(run)
    return runs, steps


def throughput(files: list[str], repeat: int = 3) -> dict[str, Any]:
    """Time replay alone (steps read beforehand) and end to end (reading included); best of n."""
    runs, steps = _runs_in_memory(files)
    outputs = sum(isinstance(s, ModelOutput) for run in runs for s in run.steps)
    replay_only = min(_timed(lambda: [replay_run(run) for run in runs]) for _ in range(repeat))
    end_to_end = min(_timed(lambda: _read_and_replay(files)) for _ in range(repeat))
    return {
        "recorded_steps": steps,
        "model_outputs": outputs,
        "replay_only_s": round(replay_only, 4),
        "replay_only_steps_per_s": round(steps / replay_only),
        "replay_only_model_outputs_per_s": round(outputs / replay_only),
        "end_to_end_s": round(end_to_end, 4),
        "end_to_end_steps_per_s": round(steps / end_to_end),
        "target_steps_per_s": TARGET_STEPS_PER_S,
    }


def _read_and_replay(files: list[str]) -> None:
    for path in files:
        for run in read_runs(path):
            replay_run(run)


def _timed(work: Any) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def pool_scaling(
    files: list[str], workers: tuple[int, ...] = (1, 2), copies: int = 4
) -> dict[str, Any]:
    """Wall time of the process pool over the corpus (each file `copies` times) per worker count."""
    jobs = [Job(p, True, None, None, True, False) for p in files] * copies
    figures: dict[str, Any] = {"files": len(jobs), "cpus": os.cpu_count()}
    for count in workers:
        with ProcessPoolExecutor(max_workers=count) as pool:
            list(pool.map(replay_file, jobs[:count]))  # start the workers before timing
            start = time.perf_counter()
            list(pool.map(replay_file, jobs))
            figures[f"workers_{count}_s"] = round(time.perf_counter() - start, 3)
    base = figures[f"workers_{workers[0]}_s"]
    for count in workers[1:]:
        figures[f"speedup_{count}"] = round(base / figures[f"workers_{count}_s"], 2)
    return figures


def write_synthetic_trace(path: Path, megabytes: int, result_bytes: int = 4000) -> dict[str, int]:
    """Write an agentfsm trace of about `megabytes` MB: many 20-turn runs with bulky results."""
    payload = "x" * result_bytes
    written = runs = outputs = 0
    target = megabytes * 1_000_000
    with path.open("w", encoding="utf-8") as file:
        writer = TraceWriter(file)
        while written < target:
            for event in _synthetic_run(f"r{runs}", payload):
                writer(event)
            outputs += 21
            runs += 1
            written = file.tell()
    return {"bytes": written, "runs": runs, "model_outputs": outputs}


def _synthetic_run(run_id: str, payload: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"event": "run_started", "run_id": run_id, "schema": 1, "policy": {}},
        {"event": "user_message", "run_id": run_id, "turn": 0, "text": "fix the bug"},
    ]
    for turn in range(1, 21):
        call = {"id": f"c{turn}", "name": "bash", "arguments": {"command": f"step {turn}"}}
        output = {"text": "", "tool_calls": [call], "finish_reason": "tool_calls"}
        result = {"call_id": f"c{turn}", "content": f"{turn} {payload}", "is_error": False}
        events.append({"event": "model_output", "run_id": run_id, "turn": turn, "output": output})
        events.append(
            {"event": "tool_results", "run_id": run_id, "turn": turn, "results": [result]}
        )
    final = {"text": "done", "tool_calls": [], "finish_reason": "stop"}
    events.append({"event": "model_output", "run_id": run_id, "turn": 21, "output": final})
    return events


def peak_rss(path: Path) -> dict[str, Any]:
    """Replay a trace with the CLI in a child process (JSON to /dev/null); report its peak RSS."""
    code = "import sys; from agentfsm._cli.replay import cli; sys.exit(cli())"
    start = time.perf_counter()
    with open(os.devnull, "w") as sink:
        status = subprocess.run(
            [sys.executable, "-c", code, str(path), "--json"],
            stdout=sink,
            cwd=REPO,
            check=False,
        ).returncode
    seconds = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"exit_status": status, "seconds": round(seconds, 1), "peak_rss_mb": round(rss_mb, 1)}


def main() -> None:
    """Run the benchmarks and print their figures as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace-mb", type=int, default=200)
    parser.add_argument("--skip-rss", action="store_true")
    args = parser.parse_args()
    files = corpus_files()
    figures: dict[str, Any] = {"throughput": throughput(files), "pool": pool_scaling(files)}
    if not args.skip_rss:
        trace = Path("/tmp") / f"agentfsm-synthetic-{args.trace_mb}mb.jsonl"
        figures["synthetic_trace"] = write_synthetic_trace(trace, args.trace_mb)
        figures["rss"] = peak_rss(trace) | {"target_mb": TARGET_RSS_MB}
        trace.unlink()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
