"""Run every implementation in its own subprocess and write bench/RESULTS.md.

    python bench/run.py                 # everything, about 10 minutes on 2 cores
    python bench/run.py --quick         # shorter budgets, for a smoke run
    python bench/run.py --only bare agentfsm-turn

Run it with the interpreter of `.venv-bench` (`make bench`), where the peers are
installed; with another interpreter the missing peers are reported as such.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from bench_import import REPO, TARGET_MS, child_env, import_times

BENCH = Path(__file__).resolve().parent
NS = (10, 100, 500)
MEMORY_N = 500
TARGET_US, FLAT_RATIO, LANGGRAPH_FACTOR = 30.0, 1.3, 30.0
DECLARED = "agentfsm-declared"
PACKAGES = (
    "agentfsm",
    "litellm",
    "pydantic",
    "transitions",
    "structlog",
    "langgraph",
    "langchain-core",
    "openai-agents",
    "openai",
    "pydantic-ai-slim",
)


@dataclass(frozen=True)
class Impl:
    key: str
    label: str
    script: str
    variant: str | None = None


IMPLS = (
    Impl("bare", "bare loop (floor)", "impl_bare.py"),
    Impl(
        "agentfsm-turn", "agentfsm Controller, ModelTurn in", "impl_agentfsm_controller.py", "turn"
    ),
    Impl(
        "agentfsm-openai",
        "agentfsm Controller, OpenAI dict in",
        "impl_agentfsm_controller.py",
        "openai",
    ),
    Impl(
        "agentfsm-declared",
        "agentfsm Controller, OpenAI dict in, tool declared by a JSON schema",
        "impl_agentfsm_controller.py",
        "declared",
    ),
    Impl(
        "agentfsm-observed",
        "agentfsm Controller, ModelTurn in, one observer",
        "impl_agentfsm_controller.py",
        "observed",
    ),
    Impl(
        "agentfsm-transitions",
        "agentfsm Controller, ModelTurn in, `transitions` engine",
        "impl_agentfsm_controller.py",
        "transitions",
    ),
    Impl(
        "agentfsm-runner",
        "agentfsm runner (litellm, in-process provider)",
        "impl_agentfsm_runner.py",
    ),
    Impl("langgraph", "LangGraph", "impl_langgraph.py"),
    Impl("openai-agents", "OpenAI Agents SDK", "impl_openai_agents.py"),
    Impl("pydantic-ai", "pydantic-ai", "impl_pydantic_ai.py"),
)
CONTROLLER = "agentfsm-turn"
WORKLOAD = (
    "Workload, identical for all: a fake model whose turns 1..N-1 each return one tool call"
    ' `echo({"i": k})` and whose turn N returns text, and a no-op tool `echo` that returns'
    " its argument. Per-step cost = wall time of one whole run / N; each implementation runs"
    " in its own subprocess; timed runs follow warm-up runs and one `gc.collect()`."
)

IMPORTS = (
    ("agentfsm", "import agentfsm"),
    ("agentfsm runner (with litellm)", "import agentfsm, litellm"),
    ("LangGraph", "import langgraph.graph, langgraph.prebuilt"),
    ("OpenAI Agents SDK", "import agents"),
    ("pydantic-ai", "import pydantic_ai, pydantic_ai.models.function"),
)


def run_impl(impl: Impl, n: int, extra: list[str]) -> dict:
    """Run one implementation script at one N and return its JSON record."""
    cmd = [sys.executable, str(BENCH / impl.script), "--n", str(n), *extra]
    if impl.variant:
        cmd += ["--variant", impl.variant]
    done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"available": False, "reason": f"failed: {tail}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def timing_args(n: int, quick: bool) -> list[str]:
    """Warm-up and repetitions: long runs of the slow peers get fewer of each."""
    if quick:
        return ["--warmup", "1", "--budget", "0.3", "--min-reps", "3"]
    if n >= MEMORY_N:
        return ["--warmup", "1", "--budget", "3", "--min-reps", "5"]
    return ["--warmup", "3", "--budget", "2", "--min-reps", "7"]


def collect(impls: list[Impl], quick: bool) -> tuple[dict, dict, dict]:
    timings: dict[str, dict[int, dict]] = {}
    memory: dict[str, dict] = {}
    for impl in impls:
        timings[impl.key] = {}
        for n in NS:
            print(f"{impl.key} N={n} ...", file=sys.stderr, flush=True)
            timings[impl.key][n] = run_impl(impl, n, timing_args(n, quick))
        memory[impl.key] = run_impl(impl, MEMORY_N, ["--memory"])
    imports = {}
    for label, statement in IMPORTS:
        print(f"import {label} ...", file=sys.stderr, flush=True)
        imports[label] = import_times(statement, runs=3 if quick else 7)
    return timings, memory, imports


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "from the working tree" if name == "agentfsm" else "not installed"


def header(load_before: tuple[float, ...]) -> list[str]:
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
        or "unknown"
    )
    versions = ", ".join(f"{name} {version(name)}" for name in PACKAGES)
    now = dt.datetime.now().astimezone()
    load_after = os.getloadavg()[0]
    return [
        "# Benchmark results",
        "",
        f"Written by `python bench/run.py` on {now:%Y-%m-%d %H:%M %Z} at commit `{commit}`.",
        "",
        f"- Machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- Load average (1 min) before / after: {load_before[0]:.2f} / {load_after:.2f}",
        f"- Packages: {versions}",
        "",
        WORKLOAD,
        "",
    ]


def fmt(value: float) -> str:
    if value < 1:
        return f"{value:.2g}"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def per_step_table(impls: list[Impl], timings: dict) -> list[str]:
    cols = " | ".join(f"N={n}" for n in NS)
    lines = [
        "## Per-step cost (µs/step: median [min–max], timed runs)",
        "",
        f"| implementation | {cols} | N={NS[-1]} / N={NS[0]} |",
        "|---" * (len(NS) + 2) + "|",
    ]
    for impl in impls:
        cells = []
        for n in NS:
            r = timings[impl.key][n]
            cells.append(
                f"{fmt(r['median'])} [{fmt(r['min'])}–{fmt(r['max'])}] ×{r['reps']}"
                if r["available"]
                else "n/a"
            )
        lines.append(f"| {impl.label} | {' | '.join(cells)} | {flatness(timings[impl.key])} |")
    unavailable = [
        (impl, timings[impl.key][NS[0]])
        for impl in impls
        if not timings[impl.key][NS[0]]["available"]
    ]
    lines.append("")
    lines += [f"- {impl.label}: not available ({r['reason']})" for impl, r in unavailable]
    return [*lines, ""] if unavailable else lines


def flatness(by_n: dict[int, dict]) -> str:
    first, last = by_n[NS[0]], by_n[NS[-1]]
    if not (first["available"] and last["available"]):
        return "n/a"
    return f"{last['median'] / first['median']:.2f}x"


def cpu_table(impls: list[Impl], timings: dict) -> list[str]:
    cols = " | ".join(f"N={n}" for n in NS)
    lines = [
        "## CPU time per step (µs/step, median of `time.process_time`, all threads)",
        "",
        "Other work on the machine inflates it less than wall time; where the two differ much,",
        "the process was waiting for a core.",
        "",
        f"| implementation | {cols} |",
        "|---" * (len(NS) + 1) + "|",
    ]
    for impl in impls:
        runs = [timings[impl.key][n] for n in NS]
        cells = [fmt(r["cpu_median"]) if r["available"] else "n/a" for r in runs]
        lines.append(f"| {impl.label} | {' | '.join(cells)} |")
    return [*lines, ""]


def ratio_table(impls: list[Impl], timings: dict) -> list[str]:
    heads = [f"× bare N={n}" for n in NS] + [f"× Controller N={n}" for n in NS]
    lines = [
        "## Ratios of medians",
        "",
        f"| implementation | {' | '.join(heads)} |",
        "|---" * (len(heads) + 1) + "|",
    ]
    for impl in impls:
        cells = [ratio(timings, impl.key, base, n) for base in ("bare", CONTROLLER) for n in NS]
        lines.append(f"| {impl.label} | {' | '.join(cells)} |")
    return [*lines, ""]


def ratio(timings: dict, key: str, base: str, n: int) -> str:
    top, bottom = timings[key][n], timings.get(base, {}).get(n)
    if not (top["available"] and bottom and bottom["available"]):
        return "n/a"
    return fmt(top["median"] / bottom["median"])


def memory_table(impls: list[Impl], memory: dict) -> list[str]:
    lines = [
        f"## Memory at N={MEMORY_N} (fresh process)",
        "",
        (
            "RSS after import and setup, peak RSS (`ru_maxrss`) after one run, and the peak of"
            " memory allocated during a second run (`tracemalloc`)."
        ),
        "",
        "| implementation | RSS after setup (MiB) | peak RSS (MiB) | run peak traced (KiB) |",
        "|---|---|---|---|",
    ]
    for impl in impls:
        m = memory[impl.key]
        if m["available"]:
            cells = [fmt(m["rss_setup_mib"]), fmt(m["rss_peak_mib"]), fmt(m["traced_peak_kib"])]
        else:
            cells = ["n/a"] * 3
        lines.append(f"| {impl.label} | {' | '.join(cells)} |")
    return [*lines, ""]


def import_table(imports: dict) -> list[str]:
    lines = [
        "## Import time (ms, fresh interpreter, `time.perf_counter` around the import)",
        "",
        "| framework | statement | median | min | max | runs |",
        "|---|---|---|---|---|---|",
    ]
    for label, statement in IMPORTS:
        times = imports[label]
        cells = (
            [fmt(statistics.median(times)), fmt(min(times)), fmt(max(times)), str(len(times))]
            if times
            else ["n/a"] * 4
        )
        lines.append(f"| {label} | `{statement}` | {' | '.join(cells)} |")
    return [*lines, ""]


def targets(timings: dict, imports: dict) -> list[str]:
    ctl = timings.get(CONTROLLER)
    if not ctl or not ctl[NS[0]]["available"]:
        return ["## Targets", "", "Not checked: the Controller did not run.", ""]
    medians = {n: ctl[n]["median"] for n in NS}
    worst = max(medians.values())
    flat = medians[NS[-1]] / medians[NS[0]]
    worst_cpu = max(ctl[n]["cpu_median"] for n in NS)
    checks = [
        (f"Controller <= {TARGET_US:.0f} µs/step at every N", worst <= TARGET_US, f"{worst:.1f}"),
        ("the same in CPU time", worst_cpu <= TARGET_US, f"{worst_cpu:.1f}"),
        (
            f"flat in N (N={NS[-1]} within {FLAT_RATIO}x of N={NS[0]})",
            flat <= FLAT_RATIO,
            f"{flat:.2f}x",
        ),
    ]
    checks += peer_checks(timings, medians)
    declared = timings.get(DECLARED)
    if declared and declared[NS[0]]["available"]:
        with_tools = {n: declared[n]["median"] for n in NS if declared[n]["available"]}
        checks += [
            (f"{what} (tool declared by a JSON schema)", ok, got)
            for what, ok, got in peer_checks(timings, with_tools)
            if "LangGraph" in what
        ]
    agentfsm_import = imports.get("agentfsm")
    if agentfsm_import:
        median = statistics.median(agentfsm_import)
        checks.append(
            (f"`import agentfsm` <= {TARGET_MS:.0f} ms", median <= TARGET_MS, f"{median:.0f} ms")
        )
    lines = ["## Targets", "", "| target | met | measured |", "|---|---|---|"]
    lines += [f"| {what} | {'yes' if ok else '**no**'} | {got} |" for what, ok, got in checks]
    return [*lines, ""]


def peer_checks(timings: dict, medians: dict[int, float]) -> list[tuple[str, bool, str]]:
    checks = []
    for key, label in (
        ("langgraph", "LangGraph"),
        ("openai-agents", "OpenAI Agents SDK"),
        ("pydantic-ai", "pydantic-ai"),
    ):
        peer = timings.get(key)
        if not peer or not peer[NS[0]]["available"]:
            continue
        factors = [peer[n]["median"] / medians[n] for n in NS if peer[n]["available"]]
        need = LANGGRAPH_FACTOR if key == "langgraph" else 1.0
        what = f">= {need:.0f}x cheaper than {label}" if need > 1 else f"cheaper than {label}"
        checks.append(
            (what + " at every N", min(factors) >= need, f"{min(factors):,.0f}x at worst")
        )
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short budgets (smoke run)")
    parser.add_argument("--only", nargs="+", metavar="KEY", choices=[i.key for i in IMPLS])
    parser.add_argument("--out", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args()
    impls = [impl for impl in IMPLS if not args.only or impl.key in args.only]
    load_before = os.getloadavg()
    timings, memory, imports = collect(impls, args.quick)
    text = [
        *header(load_before),
        *per_step_table(impls, timings),
        *cpu_table(impls, timings),
        *ratio_table(impls, timings),
        *memory_table(impls, memory),
        *import_table(imports),
        *targets(timings, imports),
    ]
    args.out.write_text("\n".join(text) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
