"""Issue 36's wall-clock figures, each taken in one run with the two sides interleaved.

    python bench/pair_issue36.py step [--ns 10 100 500] [--rounds 30] [--chunk 0.3]
    python bench/pair_issue36.py replay --base /path/to/other/checkout [--rounds 5]
    python bench/pair_issue36.py replay-instructions --base /path/to/other/checkout
    python bench/pair_issue36.py import [--rounds 15]

The machine this was written on has 2 cores shared with other work, so no figure here
is taken in one block and compared with another block taken minutes later: the two
sides alternate (A B, then B A, ...) and every ratio is taken pair by pair, within a
round, so that a change of load between rounds moves both sides of a pair alike. The
median of the per-round ratios is the figure to quote; min and max show the spread.

`step`: per-step µs of the Controller's variants (bench/impl_agentfsm_controller.py)
and of LangGraph (bench/impl_langgraph.py) at each N. Each side is built and warmed once
in a worker process of its own; a round asks each worker in turn (the order rotated every
round) for `--chunk` seconds of whole runs and takes their median wall and CPU µs per
step; ratio = LangGraph / variant, per round. Only one worker runs at a time.

`replay`: the shared trajectories copied 20 times, replayed by `agentfsm replay DIR
--policy FILE --json` as one whole process (bench/bench_controller_replay.py's
workload), with this tree's package and with `--base`'s; steps/s = model outputs /
wall seconds; ratio = this tree's throughput / the base's.

`import`: `import agentfsm` and `import pydantic`, each in a fresh interpreter (bytecode
cached by an untimed first run); ratio = agentfsm / pydantic.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PYTHON = sys.executable
sys.path.insert(0, str(BENCH))

from _harness import cachegrind  # noqa: E402  # bench/ is put on the path just above


def _env(tree: Path) -> dict[str, str]:
    """The child's environment: `tree`'s package first on the path, litellm offline."""
    return {
        **os.environ,
        "PYTHONPATH": str(tree),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONHASHSEED": "0",
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


class _Worker:
    """One implementation at one N, built and warmed once in its own process, timed on request.

    Workers wait on their stdin, so only the one being asked runs; the sides of a pair
    are timed a fraction of a second apart instead of a whole subprocess start apart.
    """

    def __init__(self, script: str, variant: str | None, n: int) -> None:
        cmd = [PYTHON, str(Path(__file__).resolve()), "_worker", script, variant or "", str(n)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(REPO), cwd=BENCH
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.proc.args} ended: {self.proc.wait()}")
        return json.loads(line)

    def time(self, seconds: float) -> dict[str, Any]:
        """Median wall and CPU µs per step of the runs done in about `seconds`."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{seconds}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _worker(script: str, variant: str, n: int) -> None:
    """The worker's side: build, warm up, then one timed chunk per line read."""
    import gc
    import importlib

    sys.path[:0] = [str(BENCH)]
    module = importlib.import_module(Path(script).stem)
    built = module.builders()
    run = built[variant or next(iter(built))](n)
    for _ in range(3 if n < 500 else 1):
        run()
    gc.collect()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        budget = float(line)
        walls: list[float] = []
        cpus: list[float] = []
        deadline = time.perf_counter() + budget
        while not walls or time.perf_counter() < deadline:
            cpu, start = time.process_time(), time.perf_counter()
            outcome = run()
            walls.append((time.perf_counter() - start) / n * 1e6)
            cpus.append((time.process_time() - cpu) / n * 1e6)
            if outcome[1] != n - 1:
                raise SystemExit(f"wrong outcome {outcome!r}")
        wall, used = statistics.median(walls), statistics.median(cpus)
        print(json.dumps({"wall": wall, "cpu": used, "runs": len(walls)}), flush=True)


def step(ns: list[int], rounds: int, variants: list[str], chunk: float) -> dict[str, Any]:
    """Per N: a worker per side; per round each side timed for `chunk` s, order rotated."""
    sides = [("langgraph", "impl_langgraph.py", None)]
    sides += [(v, "impl_agentfsm_controller.py", v) for v in variants]
    out: dict[str, Any] = {}
    for n in ns:
        workers = {name: _Worker(script, variant, n) for name, script, variant in sides}
        wall: dict[str, list[float]] = {name: [] for name in workers}
        cpu: dict[str, list[float]] = {name: [] for name in workers}
        ratios: dict[str, list[float]] = {f"{v} wall": [] for v in variants}
        ratios |= {f"{v} cpu": [] for v in variants}
        names = list(workers)
        for index in range(rounds):
            shift = index % len(names)
            order = names[shift:] + names[:shift]
            got = {name: workers[name].time(chunk) for name in order}
            for name, value in got.items():
                wall[name].append(value["wall"])
                cpu[name].append(value["cpu"])
            for v in variants:
                ratios[f"{v} wall"].append(got["langgraph"]["wall"] / got[v]["wall"])
                ratios[f"{v} cpu"].append(got["langgraph"]["cpu"] / got[v]["cpu"])
            print(f"N={n} round {index + 1}: {json.dumps(got)}", file=sys.stderr)
        for worker in workers.values():
            worker.close()
        out[str(n)] = {
            "rounds": rounds,
            "wall_us_per_step": {k: _spread(v) for k, v in wall.items()},
            "cpu_us_per_step": {k: _spread(v) for k, v in cpu.items()},
            "langgraph_over": {k: _spread(v) for k, v in ratios.items()},
        }
    return out


def _copy_corpus(folder: Path, copies: int) -> int:
    """The corpus copied `copies` times (bench_controller_replay's copy); model outputs."""
    sys.path[:0] = [str(BENCH), str(REPO)]
    from bench_controller_replay import copy_corpus

    outputs, _ = copy_corpus(folder, copies)
    return outputs


def _replay_once(tree: Path, folder: Path, policy: Path, engine: str) -> float:
    cmd = [PYTHON, "-m", "agentfsm", "replay", str(folder), "--policy", str(policy), "--json"]
    cmd += ["--engine", engine]
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=_env(tree), cwd=tree, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"replay with {tree} exited {done.returncode}")
    return seconds


def replay(base: Path, rounds: int, engines: list[str], copies: int) -> dict[str, Any]:
    """Per round and engine: this tree and the base, alternating which goes first."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        outputs = _copy_corpus(folder, copies)
        policy = Path(tmp) / "policy.json"
        policy.write_text(json.dumps({"max_turns": 250}))
        sides = [("now", REPO), ("base", base)]
        for engine in engines:
            _replay_once(REPO, folder, policy, engine)  # page cache and bytecode, untimed
            _replay_once(base, folder, policy, engine)
            rate: dict[str, list[float]] = {"now": [], "base": []}
            ratios: list[float] = []
            for index in range(rounds):
                order = sides if index % 2 == 0 else sides[::-1]
                got = {
                    name: outputs / _replay_once(tree, folder, policy, engine)
                    for name, tree in order
                }
                rate["now"].append(got["now"])
                rate["base"].append(got["base"])
                ratios.append(got["now"] / got["base"])
                print(f"{engine} round {index + 1}: {json.dumps(got)}", file=sys.stderr)
            out[engine] = {
                "model_outputs": outputs,
                "steps_per_s": {k: _spread(v) for k, v in rate.items()},
                "now_over_base": _spread(ratios),
            }
    return out


def replay_instructions(base: Path) -> dict[str, Any]:
    """Instructions per model output of a serial replay, this tree and the base, by cachegrind.

    Each tree replays 1 and 2 copies of the corpus; (I(2) - I(1)) / model outputs of a copy,
    so start-up cancels. The load does not move the count.
    """
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.json"
        policy.write_text(json.dumps({"max_turns": 250}))
        folders = {}
        for copies in (1, 2):
            folders[copies] = Path(tmp) / f"corpus{copies}"
            folders[copies].mkdir()
            per_copy = _copy_corpus(folders[copies], copies) // copies
        for name, tree in (("now", REPO), ("base", base)):
            counts = {}
            for copies, folder in folders.items():
                cmd = [PYTHON, "-m", "agentfsm", "replay", str(folder)]
                cmd += ["--policy", str(policy), "--json", "--engine", "serial"]
                counts[copies] = cachegrind(cmd, env=_env(tree), cwd=tree)
            out[name] = round((counts[2] - counts[1]) / per_copy)
            print(f"{name}: {counts}", file=sys.stderr)
    out["now_over_base"] = round(out["now"] / out["base"], 3)
    return out


_PROBE = (
    "import time\nt = time.perf_counter()\nimport {module}\n"
    "print((time.perf_counter() - t) * 1000)\n"
)


def _import_ms(module: str) -> float:
    done = subprocess.run(
        [PYTHON, "-c", _PROBE.format(module=module)],
        capture_output=True,
        text=True,
        env=_env(REPO),
        cwd=tempfile.gettempdir(),
        check=True,
    )
    return float(done.stdout.strip())


def imports(rounds: int) -> dict[str, Any]:
    """Per round: agentfsm and pydantic in fresh interpreters, alternating which goes first."""
    sides = ["agentfsm", "pydantic"]
    for module in sides:
        _import_ms(module)  # bytecode caches written, untimed
    times: dict[str, list[float]] = {m: [] for m in sides}
    ratios: list[float] = []
    for index in range(rounds):
        order = sides if index % 2 == 0 else sides[::-1]
        got = {m: _import_ms(m) for m in order}
        for m, value in got.items():
            times[m].append(value)
        ratios.append(got["agentfsm"] / got["pydantic"])
    return {
        "ms": {k: _spread(v) for k, v in times.items()},
        "agentfsm_over_pydantic": _spread(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p_step = sub.add_parser("step")
    p_step.add_argument("--ns", type=int, nargs="+", default=[10, 100, 500])
    p_step.add_argument("--rounds", type=int, default=30)
    p_step.add_argument("--variants", default="turn,turn_declared,openai,declared")
    p_step.add_argument("--chunk", type=float, default=0.25, help="timed seconds a side a round")
    p_replay = sub.add_parser("replay")
    p_replay.add_argument("--base", type=Path, required=True, help="a checkout of the base commit")
    p_replay.add_argument("--rounds", type=int, default=5)
    p_replay.add_argument("--engines", default="serial,process")
    p_replay.add_argument("--copies", type=int, default=20)
    p_count = sub.add_parser("replay-instructions")
    p_count.add_argument("--base", type=Path, required=True, help="a checkout of the base commit")
    p_import = sub.add_parser("import")
    p_import.add_argument("--rounds", type=int, default=15)
    if sys.argv[1:2] == ["_worker"]:
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    args = parser.parse_args()
    if args.what == "step":
        figures = step(args.ns, args.rounds, args.variants.split(","), args.chunk)
    elif args.what == "replay":
        figures = replay(args.base.resolve(), args.rounds, args.engines.split(","), args.copies)
    elif args.what == "replay-instructions":
        figures = replay_instructions(args.base.resolve())
    else:
        figures = imports(args.rounds)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
