"""The Controller and replay targets: replay throughput as a user runs it, and step cost.

    python bench/bench_controller_replay.py                 # both parts
    python bench/bench_controller_replay.py --only replay   # or: --only step
    python bench/bench_controller_replay.py --instructions  # also count instructions (valgrind)

`replay`: the shared trajectories copied 20 times into a temporary folder
(101,700 model outputs, the `steps` replay counts; 207,740 recorded steps
with the tool results and user messages), replayed by `agentfsm replay DIR
--policy FILE --json` (policy `{"max_turns": 250}`) in a fresh process,
timed as a whole, output to /dev/null; peak RSS of the process tree.
Target: >= 20,000 steps (model outputs) per second.

`step`: one full step of the host loop of `impl_agentfsm_controller.py` (a
model output through `on_model_output`, then its results through
`on_tool_results`) at N = 100, fed prebuilt `ModelTurn`s (`turn`) or raw
OpenAI chat bodies (`openai`): min and median µs per step over many runs.
Target: <= 45 µs median for `openai`. `openai-between` is the same step with
unrelated work between turns (a JSON document decoded, 8 MB of memory
touched), timing only the Controller's two calls: its cost as it runs inside
a framework, with the caches cold. On a shared machine wall time varies
with the load; `--instructions` also counts user-space instructions per
step with valgrind, which the load does not change (and, with `replay`, per
model output of a serial replay: one copy's count taken from two copies').
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import cachegrind
from bench_replay import corpus_files
from impl_agentfsm_controller import _openai_bodies, builders

from agentfsm._replay.trajectories import ModelOutput, read_runs

COPIES = 20
TARGET_STEPS_PER_S = 20_000
TARGET_STEP_US = 45.0
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def copy_corpus(folder: Path, copies: int) -> tuple[int, int]:
    """Copy the corpus files `copies` times under `folder`; return (model outputs, all steps)."""
    files = corpus_files()
    outputs = steps = 0
    for path in files:
        for run in read_runs(path):
            listed = list(run.steps)
            steps += len(listed)
            outputs += sum(isinstance(s, ModelOutput) for s in listed)
    for index in range(copies):
        target = folder / f"copy{index:02d}"
        target.mkdir()
        for number, path in enumerate(files):
            shutil.copy(path, target / f"{number:03d}-{Path(path).name}")
    return outputs * copies, steps * copies


def replay(copies: int, engine: str | None) -> dict[str, Any]:
    """Time `agentfsm replay` over the copied corpus as one whole process."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        outputs, steps = copy_corpus(folder, copies)
        policy = Path(tmp) / "policy.json"
        policy.write_text(json.dumps({"max_turns": 250}))
        command = [sys.executable, "-m", "agentfsm", "replay", str(folder), "--policy", str(policy)]
        command += ["--json"] + (["--engine", engine] if engine else [])
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, env=ENV, check=False)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "engine": engine or "process (default)",
        "exit_status": done.returncode,
        "model_outputs": outputs,
        "recorded_steps": steps,
        "seconds": round(seconds, 2),
        "steps_per_s": round(outputs / seconds),
        "recorded_steps_per_s": round(steps / seconds),
        "peak_rss_mb": round(max(peak, before) / 1024, 1),
        "target_steps_per_s": TARGET_STEPS_PER_S,
    }


def step(variant: str, runs: int) -> dict[str, Any]:
    """Min and median µs per full step at N = 100 over `runs` timed runs."""
    n = 100
    run = builders()[variant](n)
    for _ in range(5):
        run()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return {
        "variant": variant,
        "n": n,
        "runs": runs,
        "min_us": round(min(samples), 2),
        "median_us": round(statistics.median(samples), 2),
        "target_median_us": TARGET_STEP_US,
    }


def step_between(runs: int) -> dict[str, Any]:
    """The `openai` step with unrelated work between turns; only the Controller's calls timed."""
    import agentfsm as af

    n = 100
    bodies = _openai_bodies(n)
    document = json.dumps([{"key": k, "value": "x" * 40} for k in range(4000)])
    scratch = bytearray(8 * 2**20)
    lines = len(scratch[::64])

    def unrelated() -> None:  # what a framework does between two model turns, roughly
        json.loads(document)
        scratch[::64] = bytes(lines)

    samples = []
    for repetition in range(runs + 5):
        ctl = af.Controller(af.Policy(max_turns=n + 5), tools=["echo"])
        spent = 0.0
        for body in bodies:
            unrelated()
            start = time.perf_counter()
            decision = ctl.on_model_output(body)
            spent += time.perf_counter() - start
            if decision.action is af.Action.EXECUTE_TOOLS:
                results = [af.ToolResult(call_id=c.id, content="ok") for c in decision.tool_calls]
                unrelated()
                start = time.perf_counter()
                ctl.on_tool_results(results)
                spent += time.perf_counter() - start
        if repetition >= 5:  # the first runs warm the interpreter's own caches
            samples.append(spent / n * 1e6)
    return {
        "variant": "openai-between",
        "n": n,
        "runs": runs,
        "min_us": round(min(samples), 2),
        "median_us": round(statistics.median(samples), 2),
    }


def instructions(variant: str) -> int | None:
    """User-space instructions per full step: valgrind's count of 8 runs minus 2 runs, / 600."""
    if shutil.which("valgrind") is None:
        return None
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from impl_agentfsm_controller import builders; "
        "run = builders()[sys.argv[2]](100); [run() for _ in range(int(sys.argv[3]))]"
    )
    here = str(Path(__file__).resolve().parent)
    counts = [
        cachegrind([sys.executable, "-c", code, here, variant, str(reps)], env=ENV)
        for reps in (2, 8)
    ]
    return (counts[1] - counts[0]) // 600


def replay_instructions() -> int | None:
    """User-space instructions per model output of a serial replay: 2 copies minus 1 copy."""
    if shutil.which("valgrind") is None:
        return None
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.json"
        policy.write_text(json.dumps({"max_turns": 250}))
        for copies in (1, 2):
            folder = Path(tmp) / f"corpus{copies}"
            folder.mkdir()
            outputs, _ = copy_corpus(folder, copies)
            command = [
                *(sys.executable, "-m", "agentfsm", "replay", str(folder), "--policy", str(policy)),
                *("--json", "--engine", "serial"),
            ]
            counts.append((cachegrind(command, env={**ENV, "PYTHONHASHSEED": "0"}), outputs))
    (one, per_copy), (two, _) = counts
    return (two - one) // per_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["replay", "step"])
    parser.add_argument("--copies", type=int, default=COPIES)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--instructions", action="store_true")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if args.only in (None, "step"):
        figures["step"] = [step(v, args.runs) for v in ("turn", "openai", "declared")]
        if args.instructions:
            for entry in figures["step"]:
                entry["instructions"] = instructions(entry["variant"])
        figures["step"].append(step_between(max(args.runs // 4, 20)))
    if args.only in (None, "replay"):
        figures["replay"] = [replay(args.copies, None), replay(args.copies, "serial")]
        if args.instructions:
            figures["replay_instructions_per_model_output"] = replay_instructions()
    figures["load_average"] = os.getloadavg()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
