"""Replay throughput against the number of workers: the process pool and a Ray cluster side by side.

    python bench/bench_replay_ray.py    # prints the table of bench/RESULTS-replay-ray.md
    python bench/bench_replay_ray.py --copies 5 --small 1000 --json-out /tmp/r.json

Each figure is one `agentfsm replay DIR --json` run in a fresh process, as a user runs it, timed
from start to exit (interpreter start, and Ray's connection, included). Two inputs: the shared
trajectory corpus linked `--copies` times (large files), and `--small` links to one small trace
(many tiny files, where one task per file used to drown Ray). Ray runs on a cluster of two nodes
started here with `ray start` (one CPU each, `tests/replay/ray_cluster.py`), reached through
RAY_ADDRESS. The driver's memory is its peak resident set (VmHWM), sampled every 20 ms; every
run's output is compared byte for byte with the serial engine's.

A "step" is one recorded step fed to the controller (model output, tool results, user message),
as in bench_replay.py; the `--json` lines' `steps` (model outputs) are reported beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agentfsm._replay.trajectories import expand_paths, read_runs  # noqa: E402
from tests.replay.ray_cluster import ray_cluster  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "trajectories"


def corpus_files() -> list[Path]:
    """Every trajectory file of the corpus (the two preds.json summaries left out)."""
    return [Path(p) for p, _ in expand_paths([str(CORPUS)]) if Path(p).name != "preds.json"]


def recorded_steps(files: list[Path]) -> int:
    return sum(len(list(run.steps)) for path in files for run in read_runs(str(path)))


def build_inputs(root: Path, copies: int, small: int) -> dict[str, tuple[Path, int, int]]:
    """The two input directories: (directory, files, recorded steps)."""
    files = corpus_files()
    large = root / "large"
    for copy in range(copies):
        for index, path in enumerate(files):
            link = large / f"c{copy:03d}" / f"{index:02d}{''.join(path.suffixes)}"
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path.resolve())
    tiny = min(files, key=lambda p: p.stat().st_size if recorded_steps([p]) else 1 << 40)
    many = root / "small"
    for index in range(small):
        link = many / f"d{index // 1000:03d}" / f"{index:06d}{''.join(tiny.suffixes)}"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(tiny.resolve())
    return {
        "large": (large, copies * len(files), copies * recorded_steps(files)),
        "small": (many, small, small * recorded_steps([tiny])),
    }


def run(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One replay in a fresh process: wall seconds, the driver's peak RSS, a hash of its output."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "replay", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
        )
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _hwm_kb(proc.pid))
            time.sleep(0.02)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"replay {args} exited {proc.returncode}:\n{err[-3000:]}")
        out.seek(0)
        digest = hashlib.sha256()
        model_outputs = 0
        for line in out:
            digest.update(line)
            model_outputs += json.loads(line)["steps"]
    return {
        "wall": wall,
        "rss_mb": peak / 1024,
        "sha": digest.hexdigest(),
        "outputs": model_outputs,
    }


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(options: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_USAGE_STATS_ENABLED": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="afr-bench-") as tmp:
        inputs = build_inputs(Path(tmp), options.copies, options.small)
        with ray_cluster((1, 1)) as cluster:
            ray_env = {**env, "RAY_ADDRESS": cluster.address, "RAY_AUTH_MODE": "disabled"}
            for name, (directory, files, steps) in inputs.items():
                target = [str(directory), "--json"]
                serial = run([*target, "--engine", "serial"], env)
                rows.append(_row(name, files, steps, "serial", 1, serial, serial))
                for workers in options.workers:
                    pool = run([*target, "--engine", "process", "--workers", str(workers)], env)
                    rows.append(_row(name, files, steps, "process", workers, pool, serial))
                    on_ray = run([*target, "--engine", "ray", "--workers", str(workers)], ray_env)
                    rows.append(_row(name, files, steps, "ray (2 nodes)", workers, on_ray, serial))
            connect = run(
                [str(inputs["small"][0] / "d000"), "--json", "--engine", "ray", "--workers", "1"],
                ray_env,
            )
    return {
        "rows": rows,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "ray": _ray_version(),
        "ray_floor_s": connect["wall"],
        "options": vars(options),
    }


def _ray_version() -> str:
    import ray

    return str(ray.__version__)


def _row(
    name: str, files: int, steps: int, engine: str, workers: int, got: dict[str, Any], serial: Any
) -> dict[str, Any]:
    row = {
        "input": name,
        "files": files,
        "steps": steps,
        "model_outputs": got["outputs"],
        "engine": engine,
        "workers": workers,
        "wall_s": round(got["wall"], 2),
        "steps_per_s": round(steps / got["wall"]),
        "driver_rss_mb": round(got["rss_mb"], 1),
        "same_as_serial": got["sha"] == serial["sha"],
    }
    print(json.dumps(row), flush=True)
    return row


def markdown(result: dict[str, Any]) -> str:
    header = "input | files | recorded steps | engine | workers | wall s | steps/s | driver RSS MB"
    lines = [f"| {header} | output = serial |", "|---|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in result["rows"]:
        lines.append(
            f"| {r['input']} | {r['files']:,} | {r['steps']:,} | {r['engine']} | {r['workers']} "
            f"| {r['wall_s']} | {r['steps_per_s']:,} | {r['driver_rss_mb']} "
            f"| {'yes' if r['same_as_serial'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20, help="times the corpus is linked")
    parser.add_argument("--small", type=int, default=5000, help="links to one small trace")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json-out", help="also write the figures as JSON here")
    options = parser.parse_args()
    result = measure(options)
    if options.json_out:
        Path(options.json_out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(markdown(result))
    print(
        f"load average before {result['load_before']}, after {result['load_after']}; "
        f"{result['cpus']} CPUs; Ray {result['ray']}; Python {result['python']}; "
        f"a Ray replay of 1,000 tiny files takes {result['ray_floor_s']:.1f} s end to end"
    )


if __name__ == "__main__":
    main()
