"""Issue 36's wall-clock figures, each taken in one run with the two sides interleaved.

    python bench/pair_issue36.py step [--ns 10 100 500] [--rounds 5]
    python bench/pair_issue36.py replay --base /path/to/other/checkout [--rounds 5]
    python bench/pair_issue36.py import [--rounds 15]

The machine this was written on has 2 cores shared with other work, so no figure here
is taken in one block and compared with another block taken minutes later: the two
sides alternate (A B, then B A, ...) and every ratio is taken pair by pair, within a
round, so that a change of load between rounds moves both sides of a pair alike. The
median of the per-round ratios is the figure to quote; min and max show the spread.

`step`: per-step µs of the Controller's variants (bench/impl_agentfsm_controller.py)
and of LangGraph (bench/impl_langgraph.py), each in its own subprocess as bench/run.py
runs them, at each N; ratio = LangGraph / variant.

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


def _impl(script: str, variant: str | None, n: int, budget: float) -> float:
    """Median µs per step of one implementation at N, from its own subprocess."""
    warmup, min_reps = ("1", "3") if n >= 500 else ("3", "5")
    cmd = [PYTHON, str(BENCH / script), "--n", str(n), "--warmup", warmup]
    cmd += ["--budget", str(budget), "--min-reps", min_reps]
    if variant:
        cmd += ["--variant", variant]
    done = subprocess.run(
        cmd, capture_output=True, text=True, env=_env(REPO), cwd=BENCH, check=False
    )
    record = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    if not record.get("available"):
        raise SystemExit(f"{script} {variant} N={n} failed: {done.stderr[-2000:] or record}")
    return float(record["median"])


def step(ns: list[int], rounds: int, variants: list[str], budget: float) -> dict[str, Any]:
    """Per round and N: LangGraph, then each variant (order reversed every other round)."""
    sides = [("langgraph", "impl_langgraph.py", None)]
    sides += [(v, "impl_agentfsm_controller.py", v) for v in variants]
    out: dict[str, Any] = {}
    for n in ns:
        times: dict[str, list[float]] = {name: [] for name, _, _ in sides}
        ratios: dict[str, list[float]] = {v: [] for v in variants}
        for index in range(rounds):
            order = sides if index % 2 == 0 else sides[::-1]
            got = {name: _impl(script, variant, n, budget) for name, script, variant in order}
            for name, value in got.items():
                times[name].append(value)
            for v in variants:
                ratios[v].append(got["langgraph"] / got[v])
            print(f"N={n} round {index + 1}: {json.dumps(got)}", file=sys.stderr)
        out[str(n)] = {
            "us_per_step": {k: _spread(v) for k, v in times.items()},
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
    p_step.add_argument("--rounds", type=int, default=5)
    p_step.add_argument("--variants", default="turn,turn_declared,openai,declared")
    p_step.add_argument("--budget", type=float, default=0.5, help="timed seconds per side")
    p_replay = sub.add_parser("replay")
    p_replay.add_argument("--base", type=Path, required=True, help="a checkout of the base commit")
    p_replay.add_argument("--rounds", type=int, default=5)
    p_replay.add_argument("--engines", default="serial,process")
    p_replay.add_argument("--copies", type=int, default=20)
    p_import = sub.add_parser("import")
    p_import.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if args.what == "step":
        figures = step(args.ns, args.rounds, args.variants.split(","), args.budget)
    elif args.what == "replay":
        figures = replay(args.base.resolve(), args.rounds, args.engines.split(","), args.copies)
    else:
        figures = imports(args.rounds)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
