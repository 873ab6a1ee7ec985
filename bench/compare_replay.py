"""Check that replay decides exactly as another commit's code does, over the whole corpus.

    python bench/compare_replay.py               # this working tree against `main`
    python bench/compare_replay.py --base HEAD~3

The other commit's package is exported with `git archive` into a temporary
folder and run with the same interpreter. Both replay the shared trajectories
(and an agentfsm trace recorded here, so self-replay is covered) in several
ways: `--json` under a policy file, with the recorded or default policy, with
`--against`, the text output, `--keep-going`, and the serial and process-pool
engines. Every output (stdout, stderr, exit status) must be byte for byte the
same; the first difference is printed and the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "trajectories"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONHASHSEED": "0"}


def export(ref: str, folder: Path) -> Path:
    """Unpack the `agentfsm` package of commit `ref` under `folder`."""
    archive = folder / "base.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", ref, "agentfsm"], cwd=REPO, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "base", filter="data")
    return folder / "base"


def run(package_root: Path, args: list[str]) -> tuple[int, str, str]:
    """Run `agentfsm replay ARGS` with the package found under `package_root`."""
    env = {**ENV, "PYTHONPATH": str(package_root)}
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "replay", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=package_root,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def record_trace(folder: Path) -> Path:
    """Record an agentfsm trace of the demo here, so self-replay is compared too."""
    path = folder / "trace.jsonl"
    code = (
        "import sys; from agentfsm import Controller, ModelTurn, ToolCall, ToolResult; "
        "from agentfsm._replay.trace import TraceWriter\n"
        "w = TraceWriter(sys.argv[1])\n"
        "for n in range(3):\n"
        "    c = Controller({'max_turns': 4}, ['get_time'], run_id=f'r{n}', observers=[w])\n"
        "    for t in range(5):\n"
        "        if c.done: break\n"
        "        d = c.on_model_output(ModelTurn(tool_calls=[ToolCall(id=f'c{t}', "
        "name='get_time' if t % 2 else 'other', arguments={'n': t})]))\n"
        "        if d.tool_calls: c.on_tool_results([ToolResult(call_id=x.id, content='ok') "
        "for x in d.tool_calls])\n"
        "w.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], env=ENV, check=True, cwd=REPO)
    return path


def cases(folder: Path, trace: Path) -> list[list[str]]:
    """The command lines both versions run."""
    policy = folder / "policy.json"
    policy.write_text(json.dumps({"max_turns": 250}))
    strict = folder / "strict.json"
    strict.write_text(json.dumps({"max_turns": 6, "max_tool_calls": 9}))
    bad = folder / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": \n')
    corpus = str(CORPUS)
    return [
        [corpus, "--policy", str(policy), "--json", "--engine", "serial"],
        [corpus, "--policy", str(policy), "--json", "--engine", "process"],
        [corpus, "--json", "--engine", "process", "--workers", "2"],
        [corpus, "--policy", str(policy), "--engine", "serial"],
        [corpus, "--policy", str(policy), "--against", str(strict), "--json"],
        [corpus, str(trace), "--json", "--engine", "serial"],
        [str(trace), "--engine", "serial"],
        [str(trace), "--against", str(strict)],
        [corpus, str(bad), "--keep-going", "--json"],
        [str(bad), corpus, "--json"],
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the commit to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = export(args.base, folder)
        trace = record_trace(folder)
        for case in cases(folder, trace):
            theirs = run(base, case)
            ours = run(REPO, case)
            shown = " ".join(a.replace(tmp, "$TMP").replace(str(CORPUS), "$CORPUS") for a in case)
            if theirs != ours:
                print(f"DIFFERS: agentfsm replay {shown}")
                for name, a, b in zip(("exit", "stdout", "stderr"), theirs, ours, strict=True):
                    if a != b:
                        print(f"  {name}: {args.base}={str(a)[:300]!r}")
                        print(f"  {name}: here={str(b)[:300]!r}")
                return 1
            size = len(ours[1])
            print(f"same: agentfsm replay {shown}  (exit {ours[0]}, {size:,} bytes of output)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
